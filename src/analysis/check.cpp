// The lockstep check: reference, emulated and local runs node by node (two executor
// sessions side by side; the local run evaluates each node on the reference session's
// values), the per-tensor comparisons and their aggregation over samples, and the
// output verdicts. Origins and rules are in origins.cpp and rules.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "analysis.hpp"
#include "compare.hpp"
#include "core/parallel.hpp"
#include "exec/counting.hpp"
#include "fpguard/error.hpp"
#include "fpguard/round.hpp"
#include "fpguard/stats.hpp"
#include "round/fast.hpp"
#include "stats/kernels.hpp"

namespace fpguard::analysis {

// ---- comparisons ----------------------------------------------------------------------

double Comparison::cosine() const {
  if (count > 0 && finite == 0) return std::numeric_limits<double>::quiet_NaN();
  if (vv == 0 && rr == 0) return 1;
  if (vv == 0 || rr == 0) return 0;
  return std::clamp(dot / std::sqrt(vv * rr), -1.0, 1.0);
}

double Comparison::snr_db() const {
  if (dd == 0) return std::numeric_limits<double>::infinity();
  if (rr == 0) return -std::numeric_limits<double>::infinity();
  return 10 * std::log10(rr / dd);
}

double Comparison::nrmse() const {
  if (dd == 0) return 0;
  if (rr == 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(dd / rr);
}

void add_double_double(double& hi, double& lo, double b_hi, double b_lo) {
  // TwoSum of the leading parts, the compensations added to its error, renormalised.
  const double s = hi + b_hi, bb = s - hi, err = (hi - (s - bb)) + (b_hi - bb);
  const double e = err + (lo + b_lo);
  hi = s + e;
  lo = e - (hi - s);
  if (!std::isfinite(hi)) lo = 0;  // inf/NaN sums carry no compensation
}

void Comparison::merge(const Comparison& o) {
  count += o.count;
  overflow += o.overflow;
  nan += o.nan;
  underflow += o.underflow;
  subnormal += o.subnormal;
  max_abs = std::max(max_abs, o.max_abs);
  max_rel = std::max(max_rel, o.max_rel);
  max_scaled = std::max(max_scaled, o.max_scaled);
  add_double_double(sum_rel, lo.rel, o.sum_rel, o.lo.rel);
  add_double_double(dot, lo.dot, o.dot, o.lo.dot);
  add_double_double(vv, lo.vv, o.vv, o.lo.vv);
  add_double_double(rr, lo.rr, o.rr, o.lo.rr);
  add_double_double(dd, lo.dd, o.dd, o.lo.dd);
  finite += o.finite;
}

namespace {

// compare(r, vs[k], f) for every k in one pass over r: block by block, two runs at a time
// in one kernel pass (which does the reference's share of the work once), and with `ref`
// r's own summary (stats() without the moments) added to *ref in the same pass. Blocks of 2^15
// elements, compared on the threads and merged in order: the same sums whatever the
// thread count.
std::vector<Comparison> compare_blocks(std::span<const float> r,
                                       const std::vector<std::span<const float>>& vs,
                                       const Format& f, detail::BaseAcc* ref = nullptr,
                                       double floor = 0) {
  std::vector<CompareParams> ps;
  for (std::size_t k = 0; k < vs.size(); ++k) {
    FPG_CHECK(r.size() == vs[k].size());
    ps.push_back({f.max(), f.smallest_normal(), f.has_subnormals, floor});
  }
  constexpr std::size_t kBlock = std::size_t{1} << 15;
  const std::size_t n = r.size(), blocks = std::max<std::size_t>(1, (n + kBlock - 1) / kBlock);
  std::vector<std::vector<Comparison>> part(vs.size(), std::vector<Comparison>(blocks));
  std::mutex ref_mutex;
  const int threads = detail::resolve_threads(0, n * vs.size());
  detail::parallel_for(
      blocks, threads,
      [&](std::size_t b0, std::size_t b1) {
        std::vector<const float*> v(vs.size());
        std::vector<Comparison> c(vs.size());
        // This range's summary of r: on one thread, straight into *ref.
        std::unique_ptr<detail::BaseAcc> mine;
        if (ref && threads > 1) mine = std::make_unique<detail::BaseAcc>();
        detail::BaseAcc* const into = mine ? mine.get() : ref;
        for (std::size_t b = b0; b < b1; ++b) {
          const std::size_t lo = b * kBlock, len = std::min(kBlock, n - lo);
          for (std::size_t k = 0; k < vs.size(); ++k) v[k] = vs[k].data() + lo, c[k] = {};
          // Two runs at once where the kernel takes them (one pass over the block); the
          // first pass summarises r too.
          std::size_t summarised = 0;
          for (std::size_t k = 0, m = 0; k < vs.size(); k += m) {
            m = std::min<std::size_t>(2, vs.size() - k);
            detail::BaseAcc* sum = k == 0 ? into : nullptr;
            std::size_t done = compare_simd(r.data() + lo, &v[k], m, len, &ps[k], &c[k], sum);
            if (done == 0 && m == 2)
              m = 1, done = compare_simd(r.data() + lo, &v[k], 1, len, &ps[k], &c[k], sum);
            if (sum) summarised = done;
            for (std::size_t j = k; j < k + m; ++j)
              for (std::size_t i = done; i < len; ++i) compare_one(r[lo + i], v[j][i], ps[j], c[j]);
          }
          if (into) detail::chunk_base(r.subspan(lo + summarised, len - summarised), *into);
          for (std::size_t k = 0; k < vs.size(); ++k) part[k][b] = c[k];
        }
        if (mine) {
          const std::lock_guard<std::mutex> lock(ref_mutex);
          detail::merge_into(*ref, *mine);  // exact, in any order
        }
      },
      1);
  std::vector<Comparison> out;
  for (auto& p : part) {
    Comparison c = p[0];
    for (std::size_t b = 1; b < blocks; ++b) c.merge(p[b]);
    out.push_back(c);
  }
  return out;
}

// The scale-relative error's floor over r: max(2^-10 absmax, tiny).
template <class T>
double scale_floor(std::span<const T> r, const Format& f) {
  return std::max(std::ldexp(detail::finite_absmax(r), -kScaleFloorBits), f.smallest_normal());
}

}  // namespace

Comparison compare(std::span<const float> r, std::span<const float> v, const Format& f,
                   bool scaled) {
  return compare_blocks(r, {v}, f, nullptr, scaled ? scale_floor(r, f) : 0)[0];
}

std::vector<Comparison> compare(std::span<const float> r,
                                const std::vector<std::span<const float>>& vs, const Format& f,
                                TensorStats* r_stats) {
  if (!r_stats) return compare_blocks(r, vs, f);
  auto acc = std::make_unique<detail::BaseAcc>();
  auto out = compare_blocks(r, vs, f, acc.get());
  *r_stats = detail::summarize(*acc, r.size(), true);
  return out;
}

Comparison compare(std::span<const double> r, std::span<const float> v, const Format& f,
                   bool scaled) {
  FPG_CHECK(r.size() == v.size());
  Comparison c;
  const CompareParams p{f.max(), f.smallest_normal(), f.has_subnormals,
                        scaled ? scale_floor(r, f) : 0};
  for (std::size_t i = 0; i < r.size(); ++i) compare_one(r[i], v[i], p, c);
  return c;
}

std::string_view to_string(OriginKind k) {
  switch (k) {
    case OriginKind::overflow:
      return "overflow";
    case OriginKind::nan:
      return "nan";
    case OriginKind::underflow:
      return "underflow";
    case OriginKind::accuracy:
      return "accuracy";
    case OriginKind::block_underflow:
      return "block_underflow";
    case OriginKind::block_saturation:
      return "block_saturation";
    case OriginKind::scale_underflow:
      return "scale_underflow";
  }
  return "?";
}

std::string_view to_string(Cause c) {
  switch (c) {
    case Cause::constant:
      return "constant";
    case Cause::input:
      return "input";
    case Cause::boundary:
      return "boundary";
    case Cause::square:
      return "square";
    case Cause::exponential:
      return "exponential";
    case Cause::computes:
      return "computes";
    case Cause::rounding:
      return "rounding";
    case Cause::zero_divisor:
      return "zero_divisor";
    case Cause::invalid:
      return "invalid";
    case Cause::flush:
      return "flush";
    case Cause::local_error:
      return "local_error";
    case Cause::outlier_scale:
      return "outlier_scale";
    case Cause::clipped:
      return "clipped";
  }
  return "?";
}

std::string_view to_string(FixKind k) {
  switch (k) {
    case FixKind::scale:
      return "scale";
    case FixKind::keep_fp32:
      return "keep_fp32";
    case FixKind::format:
      return "format";
    case FixKind::replace_value:
      return "replace_value";
    case FixKind::guard:
      return "guard";
    case FixKind::scaled_format:
      return "scaled_format";
    case FixKind::keep_unscaled:
      return "keep_unscaled";
  }
  return "?";
}

std::string_view to_string(KeepReason r) {
  switch (r) {
    case KeepReason::forced:
      return "forced";
    case KeepReason::origin:
      return "origin";
    case KeepReason::reads_origin:
      return "reads_origin";
    case KeepReason::accuracy:
      return "accuracy";
    case KeepReason::largest_error:
      return "largest_error";
  }
  return "?";
}

std::string_view to_string(NoteKind k) {
  switch (k) {
    case NoteKind::mixed_storage:
      return "mixed_storage";
    case NoteKind::no_float_node:
      return "no_float_node";
    case NoteKind::generated:
      return "generated";
  }
  return "?";
}

std::string_view to_string(RefusalKind k) {
  switch (k) {
    case RefusalKind::no_rewrite:
      return "no_rewrite";
    case RefusalKind::changes_function:
      return "changes_function";
    case RefusalKind::still_overflows:
      return "still_overflows";
  }
  return "?";
}

void name_nodes(model::Model& m) {
  const auto names = display_names(m);
  for (std::size_t i = 0; i < names.size(); ++i) m.graph.nodes[i].name = names[i];
}

namespace {

// display_names() for a given topological order (an executor's).
std::vector<std::string> names_in_order(const model::Model& m,
                                        const std::vector<std::size_t>& order) {
  const auto& g = m.graph;
  std::vector<std::string> names(g.nodes.size());
  for (std::size_t pos = 0; pos < order.size(); ++pos)
    names[order[pos]] = exec::display_name(g.nodes[order[pos]], pos);
  return names;
}

}  // namespace

std::vector<std::string> display_names(const model::Model& m) {
  return names_in_order(m, model::topological_order(m.graph, m.path.string()));
}

namespace {

std::span<const float> floats(const Tensor& t) {
  return std::span<const float>(t.data<float>().data(), t.size());
}

std::span<const double> doubles(const Tensor& t) {
  return std::span<const double>(t.data<double>().data(), t.size());
}

// Calls f(span) with the values of a float32 or float64 carrier (the reference run holds
// float64 ones with --reference fp64).
template <class F>
auto with_values(const Tensor& t, F&& f) {
  return t.dtype() == DType::float64 ? f(doubles(t)) : f(floats(t));
}

// The largest finite |x| of a carrier (finite_absmax).
double absmax_of(const Tensor& t) {
  return with_values(t, [](auto xs) { return detail::finite_absmax(xs); });
}

// Whether any value is inf or NaN, in the carrier's own type without early exits: a loop
// the compiler vectorises.
bool any_nonfinite(const Tensor& t) {
  return with_values(t, [](auto xs) {
    using T = typename decltype(xs)::value_type;
    constexpr T big = std::numeric_limits<T>::max();
    std::size_t bad = 0;
    for (const T x : xs) bad += !(std::fabs(x) <= big);
    return bad != 0;
  });
}

// A float32 run's carrier `v` against a reference carrier `r` (float32 or float64).
Comparison compare_to(const Tensor& r, const Tensor& v, const Format& f, bool scaled = false) {
  return with_values(r, [&](auto rs) { return compare(rs, floats(v), f, scaled); });
}

// The reference value r's statistics (no moments) and each run of `vs` against it: one
// pass over r where it is float32 (the float64 truth run's are a stats() pass and a
// scalar comparison each).
std::pair<TensorStats, std::vector<Comparison>> measure_runs(const Tensor& r,
                                                             const std::vector<const Tensor*>& vs,
                                                             const Format& f) {
  std::vector<Comparison> cmp;
  if (r.dtype() != DType::float32) {
    StatsOptions so;
    so.threads = 0;
    for (const Tensor* v : vs) cmp.push_back(compare_to(r, *v, f));
    return {stats(doubles(r), {}, so).tensor, cmp};
  }
  std::vector<std::span<const float>> runs;
  for (const Tensor* v : vs) runs.push_back(floats(*v));
  TensorStats st;
  cmp = compare(floats(r), runs, f, &st);
  return {std::move(st), cmp};
}

// Which values of a constant round to zero or past the range of a format (to nearest-even,
// as the statistics count them): 0 < |x| <= zero_max and |x| >= overflow_min (round.hpp's
// thresholds as values of the carrier T); and for an unsigned format (E8M0), every value
// <= 0 too, which it rounds to NaN.
template <class T>
struct RoundingBounds {
  T zero_max, overflow_min;
  bool unsigned_format;
  explicit RoundingBounds(const Format& f)
      : zero_max(zero_up_to<T>(f)),
        overflow_min(overflow_from<T>(f)),
        unsigned_format(!f.is_signed) {}
};

// One block of a constant's scan: float32 in SIMD (compare_simd.cpp), the rest value by
// value. The sums' bits depend on the block and the vector width only, not on the threads.
template <class T>
ScanCounts scan_block(std::span<const T> in, const RoundingBounds<T>& bounds) {
  ScanCounts c;
  std::size_t i = 0;
  if constexpr (std::is_same_v<T, float>)
    if (!bounds.unsigned_format)
      i = constant_scan_simd(in.data(), in.size(), bounds.zero_max, bounds.overflow_min, c);
  for (; i < in.size(); ++i) {
    const T x = in[i], a = std::fabs(x);
    if (!std::isfinite(x)) {
      ++(std::isnan(x) ? c.nan : x > 0 ? c.posinf : c.neginf);
      continue;
    }
    const double sq = static_cast<double>(x) * static_cast<double>(x);
    c.min = std::min<double>(c.min, x);
    c.max = std::max<double>(c.max, x);
    if (a != 0) c.min_abs_nonzero = std::min<double>(c.min_abs_nonzero, a);
    c.sums[0] += sq;
    if (a != 0 && a <= bounds.zero_max) ++c.underflow, c.sums[1] += sq;
    if (a >= bounds.overflow_min || (bounds.unsigned_format && x <= 0))
      ++c.overflow, c.sums[2] += sq;
  }
  return c;
}

// A constant's scan (ConstantScan's numbers in the check's format) without rounding it: the
// bounds decide. In blocks on the threads; the blocks' sums are added in order.
template <class T>
void scan_values(std::span<const T> xs, const Format& f, int threads, ConstantScan& c) {
  constexpr std::size_t kBlock = 4096;
  std::vector<ScanCounts> blocks((xs.size() + kBlock - 1) / kBlock);
  const RoundingBounds<T> bounds(f);
  detail::parallel_for(
      xs.size(), threads,
      [&](std::size_t b0, std::size_t b1) {
        for (std::size_t lo = b0; lo < b1; lo += kBlock)
          blocks[lo / kBlock] = scan_block(xs.subspan(lo, std::min(kBlock, b1 - lo)), bounds);
      },
      kBlock);
  constexpr double inf = std::numeric_limits<double>::infinity();
  double lo = inf, hi = -inf, nz = inf, sums[3] = {0, 0, 0};
  std::uint64_t nonfinite = 0;
  for (const ScanCounts& b : blocks) {
    nonfinite += b.nan + b.posinf + b.neginf;
    c.overflow += b.overflow;
    c.underflow += b.underflow;
    lo = std::min(lo, b.min), hi = std::max(hi, b.max), nz = std::min(nz, b.min_abs_nonzero);
    for (int k = 0; k < 3; ++k) sums[k] += b.sums[k];
  }
  c.size = xs.size();
  const bool any_finite = lo <= hi;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  c.min = any_finite ? lo : nan;
  c.max = any_finite ? hi : nan;
  c.absmax = any_finite ? std::max(std::fabs(lo), std::fabs(hi)) : nan;
  c.min_abs_nonzero = nz < inf ? nz : nan;
  c.nonfinite = nonfinite > 0;
  // Their share of the L2 norm, for the constant rules' severity, where some flush or
  // overflow.
  if (c.overflow || c.underflow)
    c.sumsq = sums[0], c.sumsq_underflow = sums[1], c.sumsq_overflow = sums[2];
}

void scan_values(const Tensor& t, const Format& f, int threads, ConstantScan& c) {
  if (t.dtype() == DType::float64) return scan_values(doubles(t), f, threads, c);
  if (t.dtype() == DType::float32) return scan_values(floats(t), f, threads, c);
  const Tensor widened = exec::convert(t, DType::float32);  // exact for 16-bit formats
  scan_values(floats(widened), f, threads, c);
}

// Whether the local run's kernel inputs hold inf/NaN after rounding to the node's
// format. Rounding is monotonic, so a tensor breaks exactly when its reference holds
// inf/NaN or its largest |value| rounds past the format: activations are decided from
// the statistics recorded when they were produced and constants from their scan before
// the run (no extra pass over any tensor).
struct InputProbe : exec::Observer {
  Context& ctx;
  // This sample's values: reference absmax and whether any is inf/NaN.
  const std::map<std::string, std::pair<float, bool>>& range;
  const Format& fmt;
  std::vector<bool> nonfinite;
  InputProbe(Context& c, const std::map<std::string, std::pair<float, bool>>& r, const Format& f)
      : ctx(c), range(r), fmt(f) {}
  bool reads_weights(bool) const override { return false; }  // constants: from their scan
  void on_node(const model::Node& node, std::size_t, const std::vector<const Tensor*>& inputs,
               const std::vector<NamedTensor>&) override {
    nonfinite.assign(inputs.size(), false);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Tensor* t = inputs[i];
      if (!t || t->dtype() != DType::float32) continue;
      const std::string& name = i < node.inputs.size() ? node.inputs[i] : std::string();
      const auto breaks = [&](float absmax, bool had_nonfinite) {
        if (std::isnan(absmax)) return had_nonfinite;  // no finite value (or none at all)
        float rounded = 0;
        round(std::span<const float>(&absmax, 1), std::span<float>(&rounded, 1), fmt,
              ctx.o.round_options);
        return had_nonfinite || !std::isfinite(rounded);
      };
      if (auto w = ctx.constant_nonfinite.find(name); w != ctx.constant_nonfinite.end()) {
        // A constant: decided from its scan before the run (absmax, inf/NaN present).
        nonfinite[i] = breaks(static_cast<float>(ctx.absmax.at(name)), w->second);
      } else if (auto r = range.find(name); r != range.end()) {
        nonfinite[i] = breaks(r->second.first, r->second.second);
      } else {
        nonfinite[i] = any_nonfinite(*t);
      }
    }
  }
};

// One value of one sample: its reference statistics and the emulated run against it.
struct Measured {
  TensorStats stats;
  Comparison propagated;
};

// Data movement that keeps every value, only rearranged (no subset, no repeats).
bool rearranges(const model::Node& n) {
  const exec::OpTraits* t = exec::Registry::traits(n);
  return t && t->rearranges;
}

// What checking shares between samples.
struct Lockstep {
  const model::Model& m;
  const CheckOptions& o;
  Context& ctx;
  const exec::Executor& ref_ex;
  const exec::Executor& emu_ex;
  // The local runs: the emulated run's carrier (float32) on the reference's values.
  const exec::Executor& local_ex;
  std::vector<OutputVerdict>& verdicts;
  std::size_t steps_done = 0, steps_total = 0;
  // The progress hook (the cancellation point): after each main-graph node, and between
  // the body-node runs of a control-flow node (a Loop of 100k iterations is one step).
  void poll() const {
    if (o.progress) o.progress(steps_done, steps_total);
  }
  // This sample's: propagated relative RMS error, reference absmax and whether any value is
  // inf/NaN, and numbers per value.
  std::map<std::string, double> error{};
  std::map<std::string, std::pair<float, bool>> range{};
  std::map<std::string, Measured> measured{};
  // This sample's reference absmax per value, over every run of its body (constants: their
  // scan's, in ctx.absmax).
  std::map<std::string, double> sample_absmax{};
  std::size_t set = 0;  // the global index of the sample being run
  // Keep set 0's emulated outputs (Context::first_emulated): a model without 16-bit storage.
  bool keep_first_emulated = false;
  // With a reference model: its executor (float32), this sample's values of the original's
  // tensors matched to ours (ours -> theirs) and its graph outputs by name.
  const exec::Executor* orig_ex = nullptr;
  std::map<std::string, std::string> matched{};
  std::map<std::string, Tensor> original{};
  std::map<std::string, Value> original_outputs{};
  // The original's node value keys (exec::value_keys), and this sample's values of its
  // matched body tensors by (key, iterations of the enclosing bodies).
  std::map<std::string, exec::NodeKeys> orig_keys{};
  std::map<std::pair<std::string, std::vector<std::size_t>>, Tensor> original_body{};

  void run_sample(const std::vector<NamedValue>& inputs);
  // The reference absmax of value `key` in this sample (constants: theirs); nullopt when
  // neither was recorded.
  std::optional<double> absmax_now(const std::string& key) const {
    if (auto s = sample_absmax.find(key); s != sample_absmax.end()) return s->second;
    if (ctx.constant_nonfinite.count(key)) return ctx.absmax.at(key);
    return std::nullopt;
  }
  // Runs the next main-graph node in both sessions (bodies observed) and records it.
  void step(exec::Session& ref, exec::Session& emu, exec::Observer& ref_bodies,
            exec::Observer& emu_bodies);
  // The inputs of the node at `pos` about to run (`nonfinite`: those its format breaks,
  // InputProbe's): their range, error and boundaries; true when its trouble is inherited.
  bool record_inputs(const model::Node& node, std::size_t pos, const exec::Session& ref,
                     const std::vector<bool>& nonfinite);
  // Its outputs after both runs: the reference's statistics, the emulated run against it,
  // the local run (`local`, when it ran in a format) and the original (a reference model).
  void record_outputs(const model::Node& node, std::size_t pos, const exec::Session& ref,
                      const exec::Session& emu, const std::vector<NamedTensor>* local,
                      bool inherited);
  // What a scaled precision's scales do to a node's operands in its local run (`inputs`:
  // the reference values of node.inputs, by key: a body node's view). Counts its local run
  // took while quantizing (`counted`, main-graph nodes) are taken as they are; a weight's
  // counts, the same in every run, are measured once (by node record and input), and an
  // activation's once per sample and scaled_key (`sample_scaled`, main-graph values: one
  // value, one name).
  std::map<std::pair<const NodeRecord*, std::size_t>, ScaledOperandRecord> weight_scaled{};
  std::map<std::pair<std::string, std::string>, ScaledOperandRecord> sample_scaled{};
  void record_scaled(const model::Node& node, NodeRecord& rec,
                     const std::vector<const Tensor*>& inputs,
                     const exec::OperandCounting* counted = nullptr);
  ScaledOperandRecord measure_scaled(const model::Node& node, const NodeRecord& rec,
                                     std::size_t input, const Tensor& r, bool weight,
                                     const exec::OperandCounting* counted);
  // Adds one reference statistics of value `key` (output record `t`) to the aggregate.
  void record_reference(TensorRecord& t, const std::string& key, const TensorStats& st);
  void judge_outputs(const exec::Session& ref, const exec::Session& emu);
  // Runs the original on `inputs` and keeps the values matched to ours and its outputs.
  void run_original(const std::vector<NamedValue>& inputs);
};

void Lockstep::record_scaled(const model::Node& node, NodeRecord& rec,
                             const std::vector<const Tensor*>& inputs,
                             const exec::OperandCounting* counted) {
  if (local_ex.options().policy.unscaled_names.count(rec.name)) return;  // runs unscaled
  for (std::size_t i = 0; i < node.inputs.size() && i < inputs.size(); ++i) {
    if (!exec::is_scaled_operand(node, i) || node.inputs[i].empty()) continue;
    const Tensor* r = inputs[i];
    if (!r || !exec::is_float(r->dtype())) continue;
    const bool weight = ctx.initializers.count(node.inputs[i]) > 0;
    const auto cached = weight_scaled.find({&rec, i});
    const ScaledOperandRecord add = cached != weight_scaled.end()
                                        ? cached->second
                                        : measure_scaled(node, rec, i, *r, weight, counted);
    if (weight) weight_scaled.emplace(std::make_pair(&rec, i), add);
    if (add.format.empty()) continue;  // the shape does not fit the op
    auto it = std::find_if(rec.scaled_operands.begin(), rec.scaled_operands.end(),
                           [&](const ScaledOperandRecord& x) { return x.input == i; });
    if (it == rec.scaled_operands.end())
      rec.scaled_operands.push_back(add);
    else
      it->merge(add);
  }
}

ScaledOperandRecord Lockstep::measure_scaled(const model::Node& node, const NodeRecord& rec,
                                             std::size_t i, const Tensor& r, bool weight,
                                             const exec::OperandCounting* counted) {
  const exec::PrecisionPolicy& policy = local_ex.options().policy;
  const auto op =
      exec::scaled_operand(node, rec.name, i, r.shape(), weight, *policy.scaled, policy);
  if (!op) return {};
  // The same values quantized the same way: the local run's copy (which quantized r itself
  // where r is float32), or an earlier reader's of this sample.
  const std::string key = exec::scaled_key(*op, DType::float32);
  const exec::OperandCounting::Counted* taken =
      counted && r.dtype() == DType::float32 ? counted->find(node, i) : nullptr;
  if (taken && taken->key != key) taken = nullptr;
  const auto seen =
      counted && !weight ? sample_scaled.find({node.inputs[i], key}) : sample_scaled.end();
  if (!taken && seen != sample_scaled.end()) {
    ScaledOperandRecord again = seen->second;
    again.input = i;
    return again;
  }
  StatsOptions so;
  so.threads = o.threads;
  so.distribution = false;  // the counts alone (taken while quantizing, on the fast path)
  const ScaledFormatStats st = taken ? taken->stats : with_values(r, [&](auto xs) {
    return scaled_stats(xs, op->layout, op->format, so, op->options.amax);
  });
  const ScaledOperandRecord measured{.input = i,
                                     .value = node.inputs[i],
                                     .format = op->format.name,
                                     .weight = weight,
                                     .nonzero = st.nonzero,
                                     .blocks = st.blocks,
                                     .flushed = st.flushed,
                                     .flushed_blocks = st.flushed_blocks,
                                     .swamped = st.swamped,
                                     .swamped_blocks = st.swamped_blocks,
                                     .underflow = st.underflow,
                                     .subnormal = st.subnormal,
                                     .saturated = st.saturated,
                                     .saturated_blocks = st.saturated_blocks,
                                     .clipped = st.clipped,
                                     .clipped_blocks = st.clipped_blocks};
  if (counted && !weight) sample_scaled[{node.inputs[i], key}] = measured;
  return measured;
}

void Lockstep::record_reference(TensorRecord& t, const std::string& key, const TensorStats& st) {
  const bool has_finite = st.count > st.nan + st.posinf + st.neginf;
  // Over this sample's runs (a body value is recorded once per run of its body).
  double& now = sample_absmax[key];
  now = std::max(now, has_finite ? st.absmax : 0.0);
  if (has_finite) {
    const bool first = ctx.seen.insert(key).second;
    t.ref_min = first ? st.min : std::min(t.ref_min, st.min);
    t.ref_max = first ? st.max : std::max(t.ref_max, st.max);
    t.ref_absmax = std::max(t.ref_absmax, st.absmax);
  }
  t.ref_nonfinite += st.nan + st.posinf + st.neginf;
  range[key] = {std::isnan(st.absmax) ? 0.0f : static_cast<float>(st.absmax),
                st.nan + st.posinf + st.neginf > 0};
  for (const auto& [k, n] : st.exponent_histogram) t.exponent_histogram[k] += n;
  ctx.absmax[key] = t.ref_absmax;
  if (!std::isnan(st.min_abs_nonzero)) {
    auto [it, fresh] = ctx.min_abs_nonzero.try_emplace(key, st.min_abs_nonzero);
    if (!fresh) it->second = std::min(it->second, st.min_abs_nonzero);
  }
}

// Body nodes (If/Loop/Scan bodies) run inside the node that holds them, so the two runs
// cannot advance through them side by side: a body node's lockstep is "at the time it is
// observed". The reference run records each body node's statistics and keeps copies of its
// floating outputs (per run of the body, while kKeptBytes last); the emulated run compares
// its outputs with them (propagated) and evaluates the node again in float32 on its own,
// emulated, inputs, through the local runs' executor (a converted model's 16-bit storage
// held in float32, as for main-graph nodes): that against its output in the format is its
// local comparison, so an overflow it makes on its own makes it an origin, and inputs
// already inf/NaN (in the format) make its trouble inherited.
constexpr std::size_t kKeptBytes = std::size_t{256} << 20;

// A body run's place: the iteration of each enclosing Loop, Scan or SequenceMap,
// outermost first (an If runs its branch once per run of its own).
std::vector<std::size_t> iterations(const exec::BodyNode& b) {
  std::vector<std::size_t> out;
  for (const auto& e : b.enclosing)
    if (e.node->op_type != "If") out.push_back(e.iteration);
  return out;
}

// The index of output `name` among the node's outputs.
std::size_t output_index(const model::Node& n, const std::string& name) {
  return static_cast<std::size_t>(std::find(n.outputs.begin(), n.outputs.end(), name) -
                                  n.outputs.begin());
}

struct BodyReference : exec::Observer {
  Lockstep& ls;
  std::map<std::pair<std::string, std::vector<std::size_t>>, Tensor> kept{};
  std::size_t kept_bytes = 0;
  explicit BodyReference(Lockstep& l) : ls(l) {}
  void on_node(const model::Node&, std::size_t, const std::vector<const Tensor*>&,
               const std::vector<NamedTensor>&) override {}
  bool reads_weights(bool body) const override { return body; }
  void on_body_node(const exec::BodyNode& b, const std::vector<const Tensor*>& inputs,
                    const std::vector<NamedTensor>& outputs) override {
    ls.poll();
    const auto p = ls.ctx.path_pos.find(b.path);
    if (p == ls.ctx.path_pos.end()) return;
    NodeRecord& rec = ls.ctx.diag.nodes[p->second];
    const model::Node& view = *ls.ctx.nodes[p->second];
    // The scales' counts from the reference inputs, as for main-graph nodes.
    if (ls.ctx.formats[p->second] && ls.local_ex.options().policy.scaled)
      ls.record_scaled(view, rec, inputs);
    for (const auto& out : outputs) {
      const std::size_t i = output_index(b.node, out.name);
      if (i >= view.outputs.size() || !exec::is_float(out.tensor.dtype())) continue;
      const std::string& key = view.outputs[i];
      ls.record_reference(rec.outputs[i], key, measure_runs(out.tensor, {}, ls.o.precision).first);
      if (kept_bytes + out.tensor.nbytes() > kKeptBytes) continue;
      kept_bytes += out.tensor.nbytes();
      kept[{key, iterations(b)}] = out.tensor;
    }
  }
};

struct BodyEmulated : exec::Observer {
  Lockstep& ls;
  BodyReference& ref;
  BodyEmulated(Lockstep& l, BodyReference& r) : ls(l), ref(r) {}
  void on_node(const model::Node&, std::size_t, const std::vector<const Tensor*>&,
               const std::vector<NamedTensor>&) override {}
  bool reads_weights(bool body) const override { return body; }
  void on_body_node(const exec::BodyNode& b, const std::vector<const Tensor*>& inputs,
                    const std::vector<NamedTensor>& outputs) override;
  // Whether the node's kernel inputs were already inf/NaN in the format (trouble inherited);
  // inputs that broke only when rounded to it, from values that were finite, are boundaries.
  bool inherited(const exec::BodyNode& b, const std::vector<const Tensor*>& inputs, NodeRecord& rec,
                 const model::Node& view);
};

bool BodyEmulated::inherited(const exec::BodyNode& b, const std::vector<const Tensor*>& inputs,
                             NodeRecord& rec, const model::Node& view) {
  Context& ctx = ls.ctx;
  bool broken = false;
  for (std::size_t i = 0; i < inputs.size() && i < view.inputs.size(); ++i) {
    if (!inputs[i] || !exec::is_float(inputs[i]->dtype())) continue;
    const std::string& key = view.inputs[i];
    if (const auto a = ls.absmax_now(key)) rec.input_absmax = std::max(rec.input_absmax, *a);
    if (auto e = ls.error.find(key); e != ls.error.end())
      rec.input_error = std::max(rec.input_error, e->second);
    if (!b.format || !any_nonfinite(*inputs[i])) continue;
    const Tensor* held = b.value(b.node.inputs[i]);
    if (!held || any_nonfinite(*held) || ctx.initializers.count(key) || !ctx.producer.count(key))
      broken = true;
    else if (std::find(rec.boundary_inputs.begin(), rec.boundary_inputs.end(), key) ==
             rec.boundary_inputs.end()) {
      rec.boundary_inputs.push_back(key);
      ctx.firsts[&rec - ctx.diag.nodes.data()].boundary.push_back(ls.set);
    }
  }
  if (broken) rec.inputs_nonfinite = true;
  return broken;
}

void BodyEmulated::on_body_node(const exec::BodyNode& b, const std::vector<const Tensor*>& inputs,
                                const std::vector<NamedTensor>& outputs) {
  ls.poll();
  Context& ctx = ls.ctx;
  const auto p = ctx.path_pos.find(b.path);
  if (p == ctx.path_pos.end()) return;
  NodeRecord& rec = ctx.diag.nodes[p->second];
  const model::Node& view = *ctx.nodes[p->second];
  ++rec.runs;
  if (rec.input_shapes.empty()) {
    for (const Tensor* t : inputs)
      rec.input_shapes.push_back(t ? t->shape() : std::vector<std::int64_t>{});
    ctx.firsts[p->second].shapes = ls.set;
  }
  const auto its = iterations(b);
  const bool local_run = b.format && !inherited(b, inputs, rec, view);
  const std::vector<NamedTensor> local =
      local_run ? b.evaluate(std::nullopt, &ls.local_ex) : std::vector<NamedTensor>{};
  const Format fp32 = parse_format("float32");
  for (const auto& out : outputs) {
    const std::size_t i = output_index(b.node, out.name);
    if (i >= view.outputs.size() || out.tensor.dtype() != DType::float32) continue;
    TensorRecord& t = rec.outputs[i];
    t.floating = true;
    const std::string& key = view.outputs[i];
    if (auto k = ref.kept.find({key, its}); k != ref.kept.end()) {
      const Comparison c = compare_to(k->second, out.tensor, b.format ? *b.format : fp32);
      t.propagated.merge(c);
      ls.error[key] = c.nrmse();
      ref.kept.erase(k);
    }
    if (auto mt = ls.matched.find(key); mt != ls.matched.end())
      if (auto ov = ls.original_body.find({mt->second, its});
          ov != ls.original_body.end() && ov->second.size() == out.tensor.size()) {
        t.original = mt->second;
        t.against_original.merge(compare_to(ov->second, out.tensor, b.format ? *b.format : fp32));
      }
    for (const auto& l : local)
      if (l.name == out.name && l.tensor.dtype() == DType::float32) {
        const Comparison c = compare_to(l.tensor, out.tensor, *b.format);
        t.local.merge(c);
        if (c.overflow + c.nan > 0 && rec.first_overflow_iteration.empty()) {
          rec.first_overflow_iteration = its;
          ctx.firsts[p->second].overflow = ls.set;
        }
      }
  }
}

void Lockstep::run_original(const std::vector<NamedValue>& inputs) {
  original.clear();
  original_outputs.clear();
  const auto& og = orig_ex->model().graph;
  std::vector<NamedValue> fed;
  for (const auto& in : inputs) {
    const auto v = std::find_if(og.inputs.begin(), og.inputs.end(),
                                [&](const model::ValueInfo& x) { return x.name == in.name; });
    fed.push_back(in);
    if (!in.value.is_tensor()) continue;  // (sequences hold float32 in both)
    const DType have = in.value.tensor.dtype();
    if (v != og.inputs.end() && exec::is_float(have))
      if (const auto dt = model::dtype_of(v->elem_type); dt && *dt != have)
        fed.back().value = exec::convert(in.value.tensor, *dt);
  }
  std::set<std::string> wanted;
  for (const auto& [ours, theirs] : matched) wanted.insert(theirs);
  // Its matched body values, per run of their body (while kKeptBytes last).
  struct Bodies : exec::Observer {
    Lockstep& ls;
    const std::set<std::string>& wanted;
    std::size_t bytes = 0;
    Bodies(Lockstep& l, const std::set<std::string>& w) : ls(l), wanted(w) {}
    bool reads_weights(bool) const override { return false; }
    void on_node(const model::Node&, std::size_t, const std::vector<const Tensor*>&,
                 const std::vector<NamedTensor>&) override {}
    void on_body_node(const exec::BodyNode& b, const std::vector<const Tensor*>&,
                      const std::vector<NamedTensor>& outputs) override {
      ls.poll();
      const auto k = ls.orig_keys.find(b.path);
      if (k == ls.orig_keys.end()) return;
      for (const auto& out : outputs) {
        const std::size_t i = output_index(b.node, out.name);
        if (i >= k->second.outputs.size() || !wanted.count(k->second.outputs[i]) ||
            !exec::is_float(out.tensor.dtype()) || bytes + out.tensor.nbytes() > kKeptBytes)
          continue;
        bytes += out.tensor.nbytes();
        ls.original_body[{k->second.outputs[i], iterations(b)}] = out.tensor;
      }
    }
  } bodies(*this, wanted);
  original_body.clear();
  exec::Session os(*orig_ex, fed);
  while (!os.done()) {
    const model::Node& n = os.next();
    os.step(&bodies);
    for (const auto& out : n.outputs)
      if (const Tensor* t = out.empty() || !wanted.count(out) ? nullptr : os.value(out);
          t && exec::is_float(t->dtype()))
        original[out] = *t;
  }
  for (auto& o : os.output_values()) {
    if (o.value.is_tensor() && exec::is_float(o.value.tensor.dtype()))
      o.value.tensor = exec::convert(o.value.tensor, DType::float32);
    if (o.value.is_tensor()) original[o.name] = o.value.tensor;
    original_outputs[o.name] = std::move(o.value);
  }
}

void Lockstep::run_sample(const std::vector<NamedValue>& inputs) {
  const auto& g = m.graph;
  exec::Session ref(ref_ex, inputs), emu(emu_ex, inputs);
  error.clear();
  range.clear();
  measured.clear();
  sample_absmax.clear();
  sample_scaled.clear();
  for (const auto* vi : g.runtime_inputs())
    if (const Tensor* t = ref.value(vi->name); t && exec::is_float(t->dtype())) {
      const double a = absmax_of(*t);
      ctx.absmax[vi->name] = std::max(ctx.absmax[vi->name], a);
      sample_absmax[vi->name] = a;
      range[vi->name] = {static_cast<float>(a), any_nonfinite(*t)};
    }
  if (orig_ex) run_original(inputs);
  BodyReference ref_bodies(*this);
  BodyEmulated emu_bodies(*this, ref_bodies);
  while (!ref.done()) {
    step(ref, emu, ref_bodies, emu_bodies);
    ref_bodies.kept.clear();
    ref_bodies.kept_bytes = 0;
    ++steps_done;
    poll();
  }
  judge_outputs(ref, emu);
}

void Lockstep::step(exec::Session& ref, exec::Session& emu, exec::Observer& ref_bodies,
                    exec::Observer& emu_bodies) {
  const Format fp32 = parse_format("float32");
  const std::size_t pos = ctx.main_pos[ref.position()];
  const model::Node& node = ref.next();
  NodeRecord& rec = ctx.diag.nodes[pos];
  const std::optional<Format> fmt = ctx.formats[pos];
  ++rec.runs;

  std::vector<NamedTensor> local;
  InputProbe probe(ctx, range, fmt ? *fmt : fp32);
  const bool scaled = fmt && local_ex.options().policy.scaled;
  std::optional<exec::OperandCounting> counted;  // the counts of the local run's quantizing
  if (scaled) counted.emplace();
  if (fmt) local = ref.evaluate_next(fmt, &probe, &local_ex);
  const bool inherited = record_inputs(node, pos, ref, probe.nonfinite);
  if (scaled) {
    std::vector<const Tensor*> in;
    for (const auto& name : node.inputs) in.push_back(name.empty() ? nullptr : ref.value(name));
    record_scaled(node, rec, in, &*counted);
    counted.reset();  // the runs below count nothing
  }

  ref.step(&ref_bodies);
  emu.step(&emu_bodies);
  record_outputs(node, pos, ref, emu, fmt ? &local : nullptr, inherited);
}

bool Lockstep::record_inputs(const model::Node& node, std::size_t pos, const exec::Session& ref,
                             const std::vector<bool>& nonfinite) {
  NodeRecord& rec = ctx.diag.nodes[pos];
  bool inherited = false;
  for (std::size_t i = 0; i < node.inputs.size(); ++i) {
    const std::string& name = node.inputs[i];
    if (name.empty()) continue;
    const Tensor* r = ref.value(name);
    if (!r || !exec::is_float(r->dtype())) continue;
    // This sample's (or the constant's); a value recorded nowhere else is measured here.
    std::optional<double> a = absmax_now(name);
    if (!a) {
      a = sample_absmax[name] = absmax_of(*r);
      ctx.absmax[name] = std::max(ctx.absmax[name], *a);
    }
    rec.input_absmax = std::max(rec.input_absmax, *a);
    if (auto e = error.find(name); e != error.end())
      rec.input_error = std::max(rec.input_error, e->second);
    if (i < nonfinite.size() && nonfinite[i]) {
      // Rounding the reference input to the node's format broke it. Trouble started
      // upstream (at an emulated producer, a constant or a graph input) unless the
      // value comes from a float32 node: then the precision boundary is here.
      const Source s = ctx.source_of(name);
      if (any_nonfinite(*r) || s.kind != Source::float32_node)
        inherited = true;
      else if (std::find(rec.boundary_inputs.begin(), rec.boundary_inputs.end(), name) ==
               rec.boundary_inputs.end()) {
        rec.boundary_inputs.push_back(name);
        ctx.firsts[pos].boundary.push_back(set);
      }
    }
  }
  if (inherited) rec.inputs_nonfinite = true;
  if (rec.input_shapes.empty()) {
    for (const auto& name : node.inputs) {
      const Tensor* r = name.empty() ? nullptr : ref.value(name);
      rec.input_shapes.push_back(r ? r->shape() : std::vector<std::int64_t>{});
    }
    ctx.firsts[pos].shapes = set;
  }
  return inherited;
}

void Lockstep::record_outputs(const model::Node& node, std::size_t pos, const exec::Session& ref,
                              const exec::Session& emu, const std::vector<NamedTensor>* local,
                              bool inherited) {
  const Format fp32 = parse_format("float32");
  const std::optional<Format> fmt = ctx.formats[pos];
  NodeRecord& rec = ctx.diag.nodes[pos];
  std::size_t li = 0;  // local holds the non-empty outputs in order
  for (std::size_t i = 0; i < node.outputs.size(); ++i) {
    const std::string& name = node.outputs[i];
    if (name.empty()) continue;
    const Tensor* local_out = local && li < local->size() ? &(*local)[li++].tensor : nullptr;
    TensorRecord& t = rec.outputs[i];
    const Tensor* r = ref.value(name);
    const Tensor* e = emu.value(name);
    if (!r || !e || !exec::is_float(r->dtype()) || e->dtype() != DType::float32) continue;
    t.floating = true;
    // Ops that only rearrange their input hold the same values: its numbers are theirs.
    const Measured* same = nullptr;
    if (rearranges(node) && node.has_input(0))
      if (auto it = measured.find(node.inputs[0]); it != measured.end()) same = &it->second;
    // The reference's range and histogram, and the emulated run against it; the local
    // run against the reference too (where it ran and its inputs were sound): all in one
    // pass over the reference.
    const bool want_local = local_out && local_out->dtype() == DType::float32 && !inherited;
    std::optional<Comparison> local_cmp;
    auto measure = [&] {
      std::vector<const Tensor*> runs{e};
      if (want_local) runs.push_back(local_out);
      auto [st, cmp] = measure_runs(*r, runs, fmt ? *fmt : fp32);
      if (want_local) local_cmp = cmp[1];
      return Measured{std::move(st), cmp[0]};
    };
    const Measured& mm = measured[name] = same ? *same : measure();
    record_reference(t, name, mm.stats);
    t.propagated.merge(mm.propagated);
    error[name] = mm.propagated.nrmse();
    if (want_local) t.local.merge(local_cmp ? *local_cmp : compare_to(*r, *local_out, *fmt));
    if (auto mt = matched.find(name); mt != matched.end())
      if (auto ov = original.find(mt->second);
          ov != original.end() && ov->second.size() == e->size()) {
        t.original = mt->second;
        t.against_original.merge(compare_to(ov->second, *e, fmt ? *fmt : fp32));
      }
  }
}

// `v`'s tensors as views of their own storage (Tensor::shared): its copies share them.
void share(Value& v) {
  v.tensor = Tensor::shared(std::move(v.tensor));
  for (Tensor& t : v.items) t = Tensor::shared(std::move(t));
}

void Lockstep::judge_outputs(const exec::Session& ref, const exec::Session& emu) {
  // The verdict inputs: the emulated graph outputs in their storage dtypes, against the
  // reference's (its float64 carriers with --reference fp64).
  auto ro = reference_outputs(ref);
  auto eo = emu.output_values();
  if (set == 0) {
    // Kept for the origins as shared views: a copy of a large output (GPT-2's logits at
    // sequence 512: 103 MB) each, besides the two compared here, made check's peak.
    for (Value& v : ro) share(v);
    for (NamedValue& v : eo) share(v.value);
    ctx.first_reference = ro;
    if (keep_first_emulated) ctx.first_emulated = eo;
  }
  if (orig_ex)  // the original's outputs (same names, checked before)
    for (std::size_t i = 0; i < ro.size(); ++i)
      if (auto ov = original_outputs.find(eo[i].name); ov != original_outputs.end()) {
        const Value& e = eo[i].value;
        if (ov->second.is_tensor() && e.is_tensor() && ov->second.tensor.size() != e.tensor.size())
          throw Error::in_option("reference_model", orig_ex->model().path.string(),
                                 "its output '" + eo[i].name + "' has " +
                                     std::to_string(ov->second.tensor.size()) +
                                     " values, the model's " + std::to_string(e.tensor.size()));
        ro[i] = ov->second;
      }
  for (std::size_t i = 0; i < ro.size(); ++i)
    record_output(ro[i], eo[i].value, set, o, verdicts[i], ctx.output_cmp[i], ctx.element_cmp[i]);
}

}  // namespace

std::vector<Value> reference_outputs(const exec::Session& ref) {
  std::vector<Value> out;
  for (auto& o : ref.output_values()) {
    const Tensor* carrier = ref.value(o.name);
    if (carrier && carrier->dtype() == DType::float64)
      out.emplace_back(*carrier);  // the truth, not narrowed to the declared dtype
    else if (o.value.is_tensor() && exec::is_float(o.value.tensor.dtype()) &&
             o.value.tensor.dtype() != DType::float32)
      out.emplace_back(exec::convert(o.value.tensor, DType::float32));
    else
      out.push_back(std::move(o.value));  // (float32 already: moved, not copied)
  }
  return out;
}

void scale_policy(exec::PrecisionPolicy& p, const CheckOptions& o, const ActivationAmax& amax) {
  if (!o.scaled) return;
  p.scaled = o.scaled;
  p.unscaled_names = o.keep_unscaled;
  p.amax_margin = o.amax_margin;
  p.activation_amax = amax;
}

void Context::scale(exec::PrecisionPolicy& p) const {
  scale_policy(p, o, activation_amax);
}

Source Context::source_of(const std::string& name) const {
  std::string cur = name;
  for (int guard = 0; guard < 10000; ++guard) {
    auto p = producer.find(cur);
    if (p == producer.end()) {
      if (initializers.count(cur)) return {Source::constant, cur, std::nullopt};
      return {Source::graph_input, cur, std::nullopt};
    }
    const std::size_t pos = p->second;
    const auto& node = *nodes[pos];
    if (node.op_type == "Constant") return {Source::constant, diag.nodes[pos].name, pos};
    if (formats[pos]) return {Source::emulated_node, diag.nodes[pos].name, pos};
    if (!data_movement[pos]) return {Source::float32_node, diag.nodes[pos].name, pos};
    // Data movement passes values on: follow its first floating input.
    std::string next;
    for (const auto& in : node.inputs)
      if (!in.empty() && absmax.count(in)) {
        next = in;
        break;
      }
    if (next.empty()) return {Source::float32_node, diag.nodes[pos].name, pos};
    cur = next;
  }
  return {Source::graph_input, name, std::nullopt};
}

namespace {

// Whether an output differs from the reference at all.
bool outputs_changed(const Diagnosis& d) {
  return std::any_of(d.outputs.begin(), d.outputs.end(), [](const OutputVerdict& v) {
    return !v.pass || v.nonfinite > 0 || v.outside_tolerance > 0 || v.max_abs_error > 0;
  });
}

// Where a failure without an origin shows first: the first tensor, in topological order
// (subgraphs included), that went non-finite where the reference is finite; else the
// first whose cosine fell below the criterion; else the first failing graph output.
// `which`: the comparison judged (against_original with a reference model).
FirstTrouble first_trouble(const Context& ctx, Comparison TensorRecord::*which) {
  for (const bool nonfinite : {true, false})
    for (std::size_t pos = 0; pos < ctx.diag.nodes.size(); ++pos) {
      const NodeRecord& rec = ctx.diag.nodes[pos];
      for (const auto& t : rec.outputs) {
        const Comparison& c = t.*which;
        if (!t.floating || !c.count) continue;
        const double cos = c.cosine();
        const bool bad = nonfinite ? c.overflow + c.nan > 0 : !c.meets(ctx.o.min_cosine);
        if (!bad) continue;
        return {.tensor = t.name,
                .node = rec.name,
                .op_type = rec.op_type,
                .nonfinite = nonfinite,
                .cosine = cos,
                .producer_emulated = rec.emulated};
      }
    }
  FirstTrouble ft;
  for (const auto& v : ctx.diag.outputs)
    if (!v.pass) {
      // A sequence's first failing element, when it is one that fails.
      const auto e = std::find_if(v.elements.begin(), v.elements.end(),
                                  [](const OutputVerdict& x) { return !x.pass; });
      const OutputVerdict& w = e != v.elements.end() && !v.mismatched_sets ? *e : v;
      ft.tensor = w.name;
      ft.nonfinite = w.nonfinite > 0;
      ft.cosine = w.cosine;
      if (auto p = ctx.producer.find(v.name); p != ctx.producer.end()) {
        ft.node = ctx.diag.nodes[p->second].name;
        ft.op_type = ctx.diag.nodes[p->second].op_type;
        ft.producer_emulated = ctx.diag.nodes[p->second].emulated;
      }
      break;
    }
  return ft;
}

// When every output passes, the origins' trouble was absorbed; fail_on turns the kinds
// it names into a failure.
void absorb(Diagnosis& d) {
  if (!d.pass) return;
  for (const auto& o : d.origins) {
    if (o.kind == OriginKind::accuracy) continue;  // (only found when an output fails)
    d.absorbed.push_back(o.node);
    if (d.fail_on.count(o.kind)) d.pass = false;
  }
}

}  // namespace

std::set<OriginKind> parse_fail_on(const std::vector<std::string>& words) {
  constexpr OriginKind absorbable[] = {OriginKind::overflow,         OriginKind::nan,
                                       OriginKind::underflow,        OriginKind::block_underflow,
                                       OriginKind::block_saturation, OriginKind::scale_underflow};
  std::vector<std::string> names;
  for (const OriginKind k : absorbable) names.emplace_back(to_string(k));
  std::set<OriginKind> out;
  for (const auto& w : words) {
    const auto it = std::find(names.begin(), names.end(), w);
    if (it != names.end()) {
      out.insert(absorbable[it - names.begin()]);
      continue;
    }
    std::string msg = "expected " + names.front();
    for (std::size_t k = 1; k < names.size(); ++k)
      msg += (k + 1 < names.size() ? ", " : " or ") + names[k];
    if (w == to_string(OriginKind::accuracy))
      msg = "accuracy origins are only found when an output fails; " + msg;
    else if (auto hint = did_you_mean(w, names); !hint.empty())
      msg += "; did you mean '" + hint + "'?";
    throw Error::in_option("fail_on", w, msg);
  }
  return out;
}

namespace {

// A floating constant to scan: an initializer or a Constant node's value.
struct ConstantJob {
  std::string key, label, kind;
  const Tensor* tensor = nullptr;
};

// Lays every node out by position, subgraphs included (see Context::nodes): fills the
// per-position tables of the context and its node records, and lists the constants.
struct Flattener {
  Context& ctx;
  const exec::PrecisionPolicy& policy;
  std::string where;
  std::vector<ConstantJob> constants;

  void run(const std::vector<std::string>& main_names) {
    const auto& g = ctx.m.graph;
    for (const auto& t : g.initializers) {
      ctx.initializers.insert(t.name);
      constants.push_back({t.name, t.name, "initializer", &t.tensor});
    }
    const exec::ValueScope scope = exec::ValueScope{}.inner(g, "");
    for (const std::size_t idx : ctx.order) {
      const auto& n = g.nodes[idx];
      ctx.main_pos.push_back(add(n, n, main_names[idx], "", scope));
    }
    // Constant nodes after the initializers, in topological order.
    for (std::size_t pos = 0; pos < ctx.nodes.size(); ++pos) {
      const auto& n = *ctx.nodes[pos];
      if (n.op_type == "Constant" && !n.outputs.empty() && !n.outputs[0].empty())
        if (const Tensor* t = n.attr_tensor("value"))
          constants.push_back({n.outputs[0], ctx.diag.nodes[pos].name, "Constant", t});
    }
  }

  // Adds `node` (its copy `view`, named `path`) after the nodes of its bodies, and returns
  // its position. `scope`: its graph's (the keys of the names it reads).
  std::size_t add(const model::Node& node, const model::Node& view, const std::string& path,
                  const std::string& parent, const exec::ValueScope& scope) {
    std::vector<std::string> body_outputs;
    for (const auto& a : node.attributes)
      for (const auto* sg : model::subgraphs(a))
        add_body(*sg, path + "/" + a.name + "/", path, scope, body_outputs);
    const std::size_t pos = ctx.nodes.size();
    ctx.nodes.push_back(&view);
    std::vector<std::string> reads;
    for (const auto& in : model::node_reads(node))
      if (!in.empty()) reads.push_back(scope.key(in));
    reads.insert(reads.end(), body_outputs.begin(), body_outputs.end());
    ctx.reads.push_back(std::move(reads));
    const bool moves =
        exec::Registry::global().find(node.op_type)->kind == exec::OpKind::data_movement;
    const std::optional<Format> f = moves ? std::nullopt : policy.format_for(node, path);
    ctx.formats.push_back(f);
    ctx.data_movement.push_back(moves);
    NodeRecord rec;
    rec.name = path;
    rec.op_type = node.op_type;
    rec.index = pos;
    rec.parent = parent;
    rec.emulated = f.has_value();
    const bool scaled =
        policy.scaled && exec::is_scaled_operand(node, 0) && !policy.unscaled_names.count(path);
    rec.precision = !f ? "float32" : scaled ? policy.scaled->name : f->name;
    for (const auto& out : view.outputs) {
      rec.outputs.push_back({});
      rec.outputs.back().name = out;
      if (!out.empty()) ctx.producer[out] = pos;
    }
    ctx.diag.nodes.push_back(std::move(rec));
    ctx.firsts.emplace_back();
    return pos;
  }

  // The nodes of body `g` (of the node `owner`, in `outer`), their names prefixed by
  // `prefix`; the keys of its outputs are appended to `outputs`.
  void add_body(const model::Graph& g, const std::string& prefix, const std::string& owner,
                const exec::ValueScope& outer, std::vector<std::string>& outputs) {
    const exec::ValueScope scope = outer.inner(g, prefix);
    for (const auto& t : g.initializers) {
      const std::string key = scope.key(t.name);
      ctx.initializers.insert(key);
      constants.push_back({key, key, "initializer", &t.tensor});
    }
    const auto order = model::topological_order(g, where, outer.names());
    for (std::size_t pos = 0; pos < order.size(); ++pos) {
      const auto& n = g.nodes[order[pos]];
      model::Node copy = n;
      copy.name = prefix + exec::display_name(n, pos);
      for (auto* names : {&copy.inputs, &copy.outputs})
        for (auto& v : *names)
          if (!v.empty()) v = scope.key(v);
      const auto& view = ctx.body_nodes.emplace_back(std::move(copy));
      ctx.path_pos[view.name] = add(n, view, view.name, owner, scope);
    }
    for (const auto& o : g.outputs) outputs.push_back(scope.key(o.name));
  }
};

// A constant's scan, into the context.
void take_scan(Context& ctx, ConstantScan c) {
  ctx.absmax[c.name] = c.absmax;
  ctx.constant_nonfinite[c.name] = c.nonfinite;
  ctx.constants.push_back(std::move(c));
}

// Constants, before running: one pass each, without rounding (scan_values).
void scan_constants(Context& ctx, const std::vector<ConstantJob>& jobs) {
  for (const auto& job : jobs) {
    ctx.constant_values[job.key] = job.tensor;
    const Tensor& t = *job.tensor;
    if (!exec::is_float(t.dtype())) continue;
    ConstantScan c{.name = job.key, .label = job.label, .kind = job.kind};
    scan_values(t, ctx.o.precision, ctx.o.threads, c);
    take_scan(ctx, std::move(c));
  }
}

// The constants as `scans` recorded them (CheckState::constants) instead of scanning their
// values, which a model's graph alone does not hold; they must be the floating ones of
// `jobs`, in order.
void use_scans(Context& ctx, const std::vector<ConstantJob>& jobs,
               const std::vector<ConstantScan>& scans) {
  std::size_t k = 0;
  for (const auto& job : jobs) {
    ctx.constant_values[job.key] = job.tensor;
    if (!exec::is_float(job.tensor->dtype())) continue;
    if (k == scans.size() || scans[k].name != job.key)
      throw Error(ctx.m.path.string(), "the partial results' constants are of another graph ('" +
                                           job.key + "' is not scanned)");
    take_scan(ctx, scans[k++]);
  }
  if (k != scans.size())
    throw Error(ctx.m.path.string(), "the partial results' constants are of another graph ('" +
                                         scans[k].name + "' is not one)");
}

}  // namespace

namespace {

// The element type of every value of every graph of `m` ONNX shape inference types, by
// key (Context::elem_types): a main-graph value by its name, a body's by "<prefix><name>".
std::map<std::string, int> keyed_types(const model::Model& m) {
  const auto per_graph = model::infer_graph_elem_types(m);
  std::map<const model::Graph*, std::string> prefix{{&m.graph, ""}};
  exec::for_each_node(m.graph, m.path.string(),
                      [&](const model::Node& n, const std::string& path, const model::Graph&) {
                        for (const auto& a : n.attributes)
                          for (const auto* sg : model::subgraphs(a))
                            prefix[sg] = path + "/" + a.name + "/";
                      });
  std::map<std::string, int> out;
  for (const auto& [g, types] : per_graph)
    if (const auto p = prefix.find(g); p != prefix.end())
      for (const auto& [name, t] : types) out[p->second + name] = t;
  return out;
}

// keyed_types, or where the declared value_info contradicts what ONNX infers (a converter's
// mistake the cast-type rule reports), the same without the main graph's value_info.
std::map<std::string, int> elem_types(const model::Model& m) {
  try {
    return keyed_types(m);
  } catch (const Error&) {
    if (m.graph.value_info.empty()) throw;
  }
  model::Model bare = m;
  bare.graph.value_info.clear();
  return keyed_types(bare);
}

bool is_16bit(int elem_type) {
  return elem_type == 10 || elem_type == 16;
}

// 16-bit activations: 16-bit graph inputs or Casts to 16 bits (16-bit weights cast to
// float32 are a float32 model).
bool stores_16bit(const model::Model& m) {
  for (const auto* v : m.graph.runtime_inputs())
    if (is_16bit(v->elem_type)) return true;
  return std::any_of(m.graph.nodes.begin(), m.graph.nodes.end(), [](const model::Node& n) {
    return n.op_type == "Cast" && is_16bit(static_cast<int>(n.attr_int("to", 0)));
  });
}

// Any 16-bit value in any graph (inputs, initializers, Constants, Casts), declared or not:
// the values the schema-type rule needs typed.
bool holds_16bit(const model::Model& m) {
  auto graph = [](const model::Graph& g) {
    return std::any_of(g.inputs.begin(), g.inputs.end(),
                       [](const model::ValueInfo& v) { return is_16bit(v.elem_type); }) ||
           std::any_of(g.initializers.begin(), g.initializers.end(), [](const NamedTensor& t) {
             return t.tensor.dtype() == DType::float16 || t.tensor.dtype() == DType::bfloat16;
           });
  };
  bool found = graph(m.graph);
  exec::for_each_node(
      m.graph, m.path.string(),
      [&](const model::Node& n, const std::string&, const model::Graph& g) {
        const Tensor* t = n.op_type == "Constant" ? n.attr_tensor("value") : nullptr;
        found = found || graph(g) ||
                (n.op_type == "Cast" && is_16bit(static_cast<int>(n.attr_int("to", 0)))) ||
                (t && (t->dtype() == DType::float16 || t->dtype() == DType::bfloat16));
      });
  return found;
}

// Whether a compute node of a mixed model runs in float32 as it is (`k`: its value keys,
// `types` by key): its output is float32, or it has no floating output (a comparison,
// IsInf) and reads float32 values and no 16-bit one.
bool runs_float32(const exec::NodeKeys& k, const std::map<std::string, int>& types) {
  auto type_of = [&](const std::string& key) {
    const auto t = types.find(key);
    return t == types.end() ? 0 : t->second;
  };
  const int t = k.outputs.empty() ? 0 : type_of(k.outputs[0]);
  if (t == 0 || t == 1 || t == 11 || is_16bit(t)) return t == 1;
  bool reads32 = false, reads16 = false;
  for (const auto& in : k.inputs) {
    reads32 = reads32 || type_of(in) == 1;
    reads16 = reads16 || is_16bit(type_of(in));
  }
  return reads32 && !reads16;
}

// The compute nodes of a mixed model that run in float32 (they stay float32), by path: body
// nodes too, as a converted model keeps them.
std::set<std::string> float32_nodes(const model::Model& m,
                                    const std::map<std::string, int>& types) {
  std::set<std::string> out;
  const auto keys = exec::value_keys(m);
  exec::for_each_node(m.graph, m.path.string(),
                      [&](const model::Node& n, const std::string& path, const model::Graph&) {
                        const auto* info = exec::Registry::global().find(n.op_type);
                        const auto k = keys.find(path);
                        if (info && info->kind != exec::OpKind::data_movement && k != keys.end() &&
                            runs_float32(k->second, types))
                          out.insert(path);
                      });
  return out;
}

// The paths of `m`'s named nodes (subgraphs included).
std::set<std::string> named_paths(const model::Model& m) {
  std::set<std::string> out;
  exec::for_each_node(m.graph, m.path.string(),
                      [&](const model::Node& n, const std::string& path, const model::Graph&) {
                        if (!n.name.empty()) out.insert(path);
                      });
  return out;
}

// The converted model's tensors, subgraphs included, matched to the original's by key
// (exec::value_keys): by the same key, else through the output at the same index of the
// named node at the same path (a converter renamed the tensor).
std::map<std::string, std::string> match_tensors(const model::Model& m, const model::Model& r) {
  const auto theirs_by_path = exec::value_keys(r);
  const auto theirs_named = named_paths(r), ours_named = named_paths(m);
  std::set<std::string> theirs;
  for (const auto& [path, k] : theirs_by_path) theirs.insert(k.outputs.begin(), k.outputs.end());
  std::map<std::string, std::string> out;
  for (const auto& [path, k] : exec::value_keys(m))
    for (std::size_t i = 0; i < k.outputs.size(); ++i) {
      const std::string& key = k.outputs[i];
      if (key.empty()) continue;
      const auto b = theirs_by_path.find(path);
      if (theirs.count(key))
        out[key] = key;
      else if (ours_named.count(path) && theirs_named.count(path) && b != theirs_by_path.end() &&
               i < b->second.outputs.size() && !b->second.outputs[i].empty())
        out[key] = b->second.outputs[i];
    }
  return out;
}

// Graph inputs (or outputs) of the model and its reference model must have the same names,
// and the same element types up to float32/float16/bfloat16 swaps.
void check_same_io(const std::vector<const model::ValueInfo*>& ours,
                   const std::vector<const model::ValueInfo*>& theirs, const std::string& what,
                   const std::string& path) {
  auto floating = [](int t) { return t == 1 || t == 10 || t == 16; };
  auto fail = [&](const std::string& msg) { throw Error::in_option("reference_model", path, msg); };
  for (const auto* v : ours) {
    const auto t = std::find_if(theirs.begin(), theirs.end(),
                                [&](const model::ValueInfo* x) { return x->name == v->name; });
    if (t == theirs.end()) fail("it has no graph " + what + " '" + v->name + "'");
    if (v->elem_type != (*t)->elem_type && !(floating(v->elem_type) && floating((*t)->elem_type)))
      fail("graph " + what + " '" + v->name + "' is " + model::onnx_type_name(v->elem_type) +
           " in the model and " + model::onnx_type_name((*t)->elem_type) + " in it");
  }
  for (const auto* t : theirs)
    if (std::none_of(ours.begin(), ours.end(),
                     [&](const model::ValueInfo* x) { return x->name == t->name; }))
      fail("its graph " + what + " '" + t->name + "' is not one of the model's");
}

void check_same_io(const model::Model& m, const model::Model& r) {
  std::vector<const model::ValueInfo*> mo, ro;
  for (const auto& v : m.graph.outputs) mo.push_back(&v);
  for (const auto& v : r.graph.outputs) ro.push_back(&v);
  check_same_io(m.graph.runtime_inputs(), r.graph.runtime_inputs(), "input", r.path.string());
  check_same_io(mo, ro, "output", r.path.string());
}

}  // namespace

namespace {

// The three runs' options of a check: the reference, the local runs (the reference's
// options on float32 carriers, fed with the reference's values) and the emulated run.
struct RunSetup {
  exec::RunOptions ref, local, emu;
  bool mixed = false;
  std::set<std::string> as_stored;  // float32 nodes of a mixed model
  std::map<std::string, int> types;
};

RunSetup run_setup(const model::Model& m, const CheckOptions& o) {
  check_rule_ids(o.disabled_rules);
  if (o.reference != DType::float32 && o.reference != DType::float64)
    throw Error(m.path.string(), "the reference runs on float32 or float64, not " +
                                     std::string(to_string(o.reference)));
  RunSetup r;
  r.ref.threads = o.threads;
  r.ref.policy.round_options = o.round_options;  // the local runs round with them
  r.ref.policy.accumulate = o.accumulate;        // and accumulate so
  r.ref.policy.accumulation = o.accumulation;
  // One rounding of each weight serves the emulated and the local runs, and a Conv's
  // weights prepared for oneDNN are held once for all three (rounded when a node runs).
  r.ref.weights = std::make_shared<exec::WeightCache>();
  r.ref.prepare_in_float32 = true;
  // A model that already stores values in 16 bits (one fpguard convert wrote, say) is
  // checked as it is: its float32 nodes stay float32, and the reference is its float32
  // twin (the same graph with every 16-bit value held in float32, no Cast rounding).
  if (o.reference_model) check_same_io(m, *o.reference_model);
  r.mixed = stores_16bit(m) || o.reference_model;  // (converted: run as it is)
  if (r.mixed || holds_16bit(m)) r.types = elem_types(m);
  if (r.mixed) {
    r.ref.float32_storage = true;
    r.as_stored = float32_nodes(m, r.types);
  }
  r.local = r.ref;
  r.ref.carrier = o.reference;
  r.emu = r.local;
  r.emu.float32_storage = false;
  r.emu.policy.default_format = o.precision;
  r.emu.policy.exclude_names = o.keep_fp32;
  r.emu.policy.exclude_names.insert(r.as_stored.begin(), r.as_stored.end());
  r.emu.policy.exclude_op_types = o.keep_fp32_ops;
  r.emu.policy.round_options = o.round_options;
  return r;
}

// exec::calibrate_activations over sets read one at a time: the maximum of each set's.
ActivationAmax calibrate_lazily(const exec::Executor& ref_ex, const SetReader& samples) {
  ActivationAmax amax;
  std::vector<std::vector<NamedValue>> one(1);
  for (std::size_t k = 0; k < samples.count; ++k) {
    one[0] = samples.read(k);
    max_amax(amax, exec::calibrate_activations(ref_ex, one));
  }
  return amax;
}

// Static activation scales of amax-rule formats (scaled FP8): those calibrated beforehand,
// or one reference pass over the calibration sets (none: each activation follows its own
// amax).
ActivationAmax calibrate(const exec::Executor& ref_ex, const CheckOptions& o,
                         const SetReader* calibration) {
  if (!o.scaled || o.scaled->rule != ScaleRule::amax) return {};
  if (o.activation_amax) return *o.activation_amax;
  if (!calibration) return {};
  return calibrate_lazily(ref_ex, *calibration);
}

// `samples` as a SetReader (they outlive it).
SetReader reader_of(const std::vector<std::vector<NamedValue>>& samples) {
  return {.count = samples.size(), .read = [&samples](std::size_t k) { return samples[k]; }};
}

exec::RunOptions scaled_run(exec::RunOptions r, const CheckOptions& o, const ActivationAmax& a) {
  scale_policy(r.policy, o, a);
  return r;
}

// One check: its runs and context, built once; accumulate() runs input sets through the
// lockstep, state()/install() move what it kept out and in, finish() derives the Diagnosis.
struct Checker {
  const model::Model& m;
  const CheckOptions& o;
  RunSetup setup;
  const exec::Executor ref_ex;
  const ActivationAmax amax;
  const exec::Executor emu_ex, local_ex;
  Context ctx;
  std::vector<OutputVerdict> verdicts{};

  // `calibration`: the input sets static activation scales come from (scaled FP8).
  // `scans`: the constants as recorded, when `model` is a graph without their values.
  Checker(const model::Model& model, const CheckOptions& opts, const SetReader* calibration,
          const std::vector<ConstantScan>* scans = nullptr)
      : m(model),
        o(opts),
        setup(run_setup(model, opts)),
        ref_ex(model, setup.ref),
        amax(calibrate(ref_ex, opts, calibration)),
        emu_ex(ref_ex, scaled_run(setup.emu, opts, amax)),
        local_ex(ref_ex, scaled_run(setup.local, opts, amax)),
        ctx{.m = model, .o = opts, .order = ref_ex.order()} {
    prepare(scans);
  }
  void prepare(const std::vector<ConstantScan>* scans);
  void accumulate(const SetReader& samples, const std::vector<std::size_t>& sets);
  CheckState state();
  void install(CheckState st);
  // `full`: the model itself, when this checker's is its graph alone (for the accuracy
  // origins' runs); nullptr: this checker's.
  Diagnosis finish(const std::function<std::vector<NamedValue>()>& first_set,
                   const std::function<const model::Model&()>& full = nullptr);
};

void Checker::prepare(const std::vector<ConstantScan>* scans) {
  ctx.elem_types = setup.types;
  ctx.activation_amax = amax;
  ctx.diag.model = m.path.string();
  ctx.diag.precision = o.scaled ? o.scaled->name : o.precision.name;
  if (o.scaled) {
    ctx.diag.other_precision = o.precision.name;
    ctx.diag.amax_margin = o.amax_margin;
  }
  ctx.diag.accumulate = o.accumulate ? o.accumulate->name : "float32";
  ctx.diag.reference = std::string(to_string(o.reference));
  ctx.diag.min_cosine = o.min_cosine;
  ctx.diag.atol = o.atol;
  ctx.diag.rtol = o.rtol;
  ctx.diag.fail_on = o.fail_on;
  ctx.diag.generated = o.generated;
  if (o.reference_model) ctx.diag.reference_model = o.reference_model->path.string();
  const exec::RunOptions emu = scaled_run(setup.emu, o, amax);  // as emu_ex runs
  Flattener flat{ctx, emu.policy, m.path.string(), {}};
  flat.run(names_in_order(m, ref_ex.order()));
  // --keep-fp32 names must exist (unnamed nodes: see name_nodes; body nodes by path), and
  // --keep-unscaled ones name GEMMs that run scaled.
  std::vector<std::string> names;
  for (const auto& rec : ctx.diag.nodes) names.push_back(rec.name);
  for (const auto& k : o.keep_fp32)
    if (std::find(names.begin(), names.end(), k) == names.end()) {
      std::string msg = "the model has no node named '" + k + "'";
      if (auto hint = did_you_mean(k, names); !hint.empty())
        msg += "; did you mean '" + hint + "'?";
      throw Error::in_option("keep_fp32", k, msg);
    }
  exec::check_unscaled_names(m, emu.policy);
  if (scans)
    use_scans(ctx, flat.constants, *scans);
  else
    scan_constants(ctx, flat.constants);
  const auto& g = m.graph;
  verdicts.resize(g.outputs.size());
  ctx.output_cmp.resize(g.outputs.size());
  ctx.element_cmp.resize(g.outputs.size());
  for (std::size_t i = 0; i < g.outputs.size(); ++i) verdicts[i].name = g.outputs[i].name;
}

void Checker::accumulate(const SetReader& samples, const std::vector<std::size_t>& sets) {
  Lockstep ls{.m = m,
              .o = o,
              .ctx = ctx,
              .ref_ex = ref_ex,
              .emu_ex = emu_ex,
              .local_ex = local_ex,
              .verdicts = verdicts,
              .keep_first_emulated = !setup.mixed};
  ls.steps_total = ctx.order.size() * samples.count;
  std::optional<exec::Executor> orig_ex;
  if (o.reference_model) {
    exec::RunOptions orig_opts;
    orig_opts.threads = o.threads;
    orig_ex.emplace(*o.reference_model, orig_opts);
    ls.orig_ex = &*orig_ex;
    ls.matched = match_tensors(m, *o.reference_model);
    ls.orig_keys = exec::value_keys(*o.reference_model);
  }
  for (std::size_t i = 0; i < samples.count; ++i) {
    ls.set = sets[i];
    ls.run_sample(samples.read(i));  // one set at a time: freed before the next is read
  }
  ctx.diag.samples += samples.count;
  ctx.sets.insert(ctx.sets.end(), sets.begin(), sets.end());
}

CheckState Checker::state() {
  return {.sets = std::move(ctx.sets),
          .nodes = std::move(ctx.diag.nodes),
          .firsts = std::move(ctx.firsts),
          .output_cmp = std::move(ctx.output_cmp),
          .verdicts = std::move(verdicts),
          .element_cmp = std::move(ctx.element_cmp),
          .absmax = std::move(ctx.absmax),
          .min_abs_nonzero = std::move(ctx.min_abs_nonzero),
          .seen = std::move(ctx.seen),
          .constants = std::move(ctx.constants)};
}

void Checker::install(CheckState st) {
  const auto& ours = ctx.diag.nodes;
  bool same = st.nodes.size() == ours.size() && st.firsts.size() == ours.size() &&
              st.verdicts.size() == verdicts.size() && st.output_cmp.size() == verdicts.size() &&
              st.element_cmp.size() == verdicts.size();
  for (std::size_t i = 0; same && i < ours.size(); ++i)
    same = st.nodes[i].name == ours[i].name && st.nodes[i].outputs.size() == ours[i].outputs.size();
  if (!same)
    throw Error(m.path.string(), "the partial results are of another graph (" +
                                     std::to_string(st.nodes.size()) + " nodes, the model has " +
                                     std::to_string(ours.size()) + ")");
  // Constants' absmax come from the model's scan (static); the rest from the state.
  for (const auto& [k, a] : st.absmax) ctx.absmax[k] = std::max(ctx.absmax[k], a);
  ctx.diag.samples = st.sets.size();
  ctx.sets = std::move(st.sets);
  // What the lockstep accumulated; names, op types, indices and precisions are the model's.
  for (std::size_t i = 0; i < ours.size(); ++i) {
    NodeRecord& to = ctx.diag.nodes[i];
    NodeRecord& from = st.nodes[i];
    to.runs = from.runs;
    to.first_overflow_iteration = std::move(from.first_overflow_iteration);
    to.inputs_nonfinite = from.inputs_nonfinite;
    to.input_error = from.input_error;
    to.input_absmax = from.input_absmax;
    to.boundary_inputs = std::move(from.boundary_inputs);
    to.input_shapes = std::move(from.input_shapes);
    to.scaled_operands = std::move(from.scaled_operands);
    for (std::size_t k = 0; k < to.outputs.size(); ++k) {
      from.outputs[k].name = to.outputs[k].name;
      to.outputs[k] = std::move(from.outputs[k]);
    }
  }
  ctx.firsts = std::move(st.firsts);
  ctx.output_cmp = std::move(st.output_cmp);
  ctx.element_cmp = std::move(st.element_cmp);
  verdicts = std::move(st.verdicts);
  ctx.min_abs_nonzero = std::move(st.min_abs_nonzero);
  ctx.seen = std::move(st.seen);
}

Diagnosis Checker::finish(const std::function<std::vector<NamedValue>()>& first_set,
                          const std::function<const model::Model&()>& full) {
  if (ctx.sets.empty()) throw Error(m.path.string(), "no input sets to check with");
  for (std::size_t i = 0; i < verdicts.size(); ++i)
    judge(ctx.output_cmp[i], ctx.element_cmp[i], o, verdicts[i]);
  ctx.diag.pass =
      std::all_of(verdicts.begin(), verdicts.end(), [](const OutputVerdict& v) { return v.pass; });
  ctx.diag.outputs = std::move(verdicts);
  bool any_float_node = false;
  for (std::size_t pos = 0; pos < ctx.diag.nodes.size(); ++pos) {
    auto& rec = ctx.diag.nodes[pos];
    // Only nodes with floating outputs have a precision at all.
    const bool floating = std::any_of(rec.outputs.begin(), rec.outputs.end(),
                                      [](const TensorRecord& t) { return t.floating; });
    if (!floating) {
      rec.emulated = false;
      rec.precision = "none";
      ctx.formats[pos].reset();
    }
    if (rec.emulated) any_float_node = true;
    for (auto& t : rec.outputs)
      t.headroom_bits = t.ref_absmax > 0 ? std::log2(o.precision.max() / t.ref_absmax)
                                         : std::numeric_limits<double>::infinity();
  }
  if (setup.mixed && !o.reference_model)
    ctx.diag.notes.push_back({.kind = NoteKind::mixed_storage, .count = setup.as_stored.size()});
  // (Never for a model whose outputs changed: then something did run in the format.)
  if (!any_float_node && !outputs_changed(ctx.diag))
    ctx.diag.notes.push_back({.kind = NoteKind::no_float_node});

  std::optional<exec::Executor> full_ref;  // the reference run of the model itself
  find_origins(
      ctx,
      [&]() -> const exec::Executor& {
        if (!full) return ref_ex;
        if (!full_ref) full_ref.emplace(full(), setup.ref);
        return *full_ref;
      },
      first_set);
  if (!ctx.diag.pass && ctx.diag.origins.empty())
    ctx.diag.first_trouble = first_trouble(
        ctx, o.reference_model ? &TensorRecord::against_original : &TensorRecord::propagated);
  assess_damage(ctx);
  absorb(ctx.diag);
  apply_rules(ctx);
  return std::move(ctx.diag);
}

// 0, 1, ... for `n` sets; else `sets`, which must be ascending and one per sample.
std::vector<std::size_t> set_indices(std::vector<std::size_t> sets, std::size_t n) {
  if (sets.empty())
    for (std::size_t i = 0; i < n; ++i) sets.push_back(i);
  if (sets.size() != n || !std::is_sorted(sets.begin(), sets.end()) ||
      std::adjacent_find(sets.begin(), sets.end()) != sets.end())
    throw Error("sets", "expected one ascending, distinct index per input set (" +
                            std::to_string(sets.size()) + " for " + std::to_string(n) + " sets)");
  return sets;
}

}  // namespace

Diagnosis check(const model::Model& m, const std::vector<std::vector<NamedValue>>& samples,
                const CheckOptions& o) {
  if (samples.empty()) throw Error(m.path.string(), "no input sets to check with");
  const SetReader reader = reader_of(samples);
  Checker c(m, o, &reader);
  c.accumulate(reader, set_indices({}, samples.size()));
  return c.finish([&] { return samples.front(); });
}

SetReader read_lazily(const inputs::SetList& sets, std::vector<inputs::Generated>* generated) {
  return {.count = sets.size(),
          .read = [&sets, generated](std::size_t k) { return sets.read(k, generated); }};
}

Diagnosis check(const model::Model& m, const SetReader& samples, const CheckOptions& o) {
  if (samples.count == 0) throw Error(m.path.string(), "no input sets to check with");
  Checker c(m, o, &samples);
  c.accumulate(samples, set_indices({}, samples.count));
  return c.finish([&] { return samples.read(0); });
}

CheckState accumulate(const model::Model& m, const std::vector<std::vector<NamedValue>>& samples,
                      const CheckOptions& o, std::vector<std::size_t> sets) {
  return accumulate(m, reader_of(samples), o, std::move(sets));
}

CheckState accumulate(const model::Model& m, const SetReader& samples, const CheckOptions& o,
                      std::vector<std::size_t> sets) {
  if (samples.count == 0) throw Error(m.path.string(), "no input sets to check with");
  Checker c(m, o, &samples);
  c.accumulate(samples, set_indices(std::move(sets), samples.count));
  return c.state();
}

ActivationAmax calibrate(const model::Model& m, const SetReader& samples, const CheckOptions& o) {
  const RunSetup setup = run_setup(m, o);
  const exec::Executor ref_ex(m, setup.ref);  // the reference, as Checker's
  return calibrate_lazily(ref_ex, samples);
}

void max_amax(ActivationAmax& into, const ActivationAmax& from) {
  for (const auto& [k, a] : from) {
    auto [it, fresh] = into.emplace(k, a);
    if (!fresh) it->second = std::max(it->second, a);
  }
}

Diagnosis finish(const model::Model& m, CheckState state, const CheckOptions& o,
                 const std::function<std::vector<NamedValue>()>& first_set) {
  Checker c(m, o, nullptr);
  c.install(std::move(state));
  return c.finish(first_set);
}

Diagnosis finish(const model::Model& graph, CheckState state, const CheckOptions& o,
                 const std::function<const model::Model&()>& model,
                 const std::function<std::vector<NamedValue>()>& first_set) {
  // (The clipping rules of a converted model compare its weights with the original's.)
  if (o.reference_model)
    throw Error::in_option("reference_model", o.reference_model->path.string(),
                           "a check against an original needs the model's weights, not its "
                           "graph alone");
  Checker c(graph, o, nullptr, &state.constants);
  c.install(std::move(state));
  return c.finish(first_set, model);
}

}  // namespace fpguard::analysis
