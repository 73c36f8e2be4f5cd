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
#include "fpguard/error.hpp"
#include "fpguard/round.hpp"
#include "fpguard/stats.hpp"
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

void Comparison::merge(const Comparison& o) {
  count += o.count;
  overflow += o.overflow;
  nan += o.nan;
  underflow += o.underflow;
  subnormal += o.subnormal;
  max_abs = std::max(max_abs, o.max_abs);
  max_rel = std::max(max_rel, o.max_rel);
  max_scaled = std::max(max_scaled, o.max_scaled);
  sum_rel += o.sum_rel;
  dot += o.dot;
  vv += o.vv;
  rr += o.rr;
  dd += o.dd;
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

// The largest finite |x| (0 when none), in the values' own type, without early exits: a
// loop the compiler vectorises.
template <class T>
double finite_absmax(std::span<const T> xs) {
  constexpr T big = std::numeric_limits<T>::max();
  T m = 0;
  for (const T x : xs) {
    const T a = std::fabs(x);
    m = std::max(m, a <= big ? a : T(0));  // inf and NaN count as 0
  }
  return static_cast<double>(m);
}

// The scale-relative error's floor over r: max(2^-10 absmax, tiny).
template <class T>
double scale_floor(std::span<const T> r, const Format& f) {
  return std::max(std::ldexp(finite_absmax(r), -kScaleFloorBits), f.smallest_normal());
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
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const auto& n = g.nodes[order[pos]];
    names[order[pos]] = n.name.empty() ? n.op_type + "_" + std::to_string(pos) : n.name;
  }
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

// Both in the carrier's own type, without early exits: loops the compiler vectorises.
double absmax_of(const Tensor& t) {
  return with_values(t, [](auto xs) { return finite_absmax(xs); });
}

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

// A constant's sums of squares (ConstantScan): over its finite values, and over those
// that round to zero (non-zero) or past the range in `f`, rounded in blocks.
template <class T>
void constant_sums(std::span<const T> xs, const Format& f, ConstantScan& c) {
  constexpr std::size_t kBlock = 4096;
  std::vector<T> rounded(std::min(kBlock, xs.size()));
  for (std::size_t lo = 0; lo < xs.size(); lo += kBlock) {
    const auto in = xs.subspan(lo, std::min(kBlock, xs.size() - lo));
    const std::span<T> out(rounded.data(), in.size());
    round(in, out, f);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const double x = in[i], sq = x * x;
      if (!std::isfinite(x)) continue;
      c.sumsq += sq;
      if (x != 0 && out[i] == 0) c.sumsq_underflow += sq;
      if (!std::isfinite(out[i])) c.sumsq_overflow += sq;
    }
  }
}

void constant_sums(const Tensor& t, const Format& f, ConstantScan& c) {
  if (t.dtype() == DType::float64) return constant_sums(doubles(t), f, c);
  if (t.dtype() == DType::float32) return constant_sums(floats(t), f, c);
  const Tensor widened = exec::convert(t, DType::float32);  // exact for 16-bit formats
  constant_sums(floats(widened), f, c);
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

  void run_sample(const std::vector<NamedTensor>& inputs);
};

void Lockstep::run_sample(const std::vector<NamedTensor>& inputs) {
  const auto& g = m.graph;
  exec::Session ref(ref_ex, inputs), emu(emu_ex, inputs);
  std::map<std::string, double> error;  // propagated relative RMS error, this sample
  std::map<std::string, std::pair<float, bool>> range;  // absmax, any inf/NaN: this sample
  std::map<std::string, Measured> measured;             // this sample's numbers per value
  for (const auto* vi : g.runtime_inputs())
    if (const Tensor* t = ref.value(vi->name); t && exec::is_float(t->dtype())) {
      const double a = absmax_of(*t);
      ctx.absmax[vi->name] = std::max(ctx.absmax[vi->name], a);
      range[vi->name] = {static_cast<float>(a), any_nonfinite(*t)};
    }
  const Format fp32 = parse_format("float32");
  while (!ref.done()) {
    const std::size_t pos = ref.position();
    const model::Node& node = ref.next();
    NodeRecord& rec = ctx.diag.nodes[pos];
    const std::optional<Format> fmt = ctx.formats[pos];

    std::vector<NamedTensor> local;
    InputProbe probe(ctx, range, fmt ? *fmt : fp32);
    if (fmt) local = ref.evaluate_next(fmt, &probe, &local_ex);
    // Inputs: where they come from, how accurate and how large they are.
    bool inherited = false;
    std::vector<std::string> boundary;
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      const std::string& name = node.inputs[i];
      if (name.empty()) continue;
      const Tensor* r = ref.value(name);
      if (!r || !exec::is_float(r->dtype())) continue;
      if (!ctx.absmax.count(name)) ctx.absmax[name] = absmax_of(*r);  // weights, constants
      rec.input_absmax = std::max(rec.input_absmax, ctx.absmax[name]);
      if (auto e = error.find(name); e != error.end())
        rec.input_error = std::max(rec.input_error, e->second);
      if (i < probe.nonfinite.size() && probe.nonfinite[i]) {
        // Rounding the reference input to the node's format broke it. Trouble started
        // upstream (at an emulated producer, a constant or a graph input) unless the
        // value comes from a float32 node: then the precision boundary is here.
        const Source s = ctx.source_of(name);
        if (any_nonfinite(*r) || s.kind != Source::float32_node)
          inherited = true;
        else
          boundary.push_back(name);
      }
    }
    if (inherited) rec.inputs_nonfinite = true;
    for (const auto& b : boundary)
      if (std::find(rec.boundary_inputs.begin(), rec.boundary_inputs.end(), b) ==
          rec.boundary_inputs.end())
        rec.boundary_inputs.push_back(b);
    if (rec.input_shapes.empty())
      for (const auto& name : node.inputs) {
        const Tensor* r = name.empty() ? nullptr : ref.value(name);
        rec.input_shapes.push_back(r ? r->shape() : std::vector<std::int64_t>{});
      }

    ref.step();
    emu.step();

    std::size_t li = 0;  // local holds the non-empty outputs in order
    for (std::size_t i = 0; i < node.outputs.size(); ++i) {
      const std::string& name = node.outputs[i];
      if (name.empty()) continue;
      const Tensor* local_out = fmt && li < local.size() ? &local[li++].tensor : nullptr;
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
      const TensorStats& st = mm.stats;
      const bool first = ctx.seen.insert(name).second;
      if (st.count > st.nan + st.posinf + st.neginf) {
        t.ref_min = first ? st.min : std::min(t.ref_min, st.min);
        t.ref_max = first ? st.max : std::max(t.ref_max, st.max);
        t.ref_absmax = std::max(t.ref_absmax, st.absmax);
      }
      t.ref_nonfinite += st.nan + st.posinf + st.neginf;
      range[name] = {std::isnan(st.absmax) ? 0.0f : static_cast<float>(st.absmax),
                     st.nan + st.posinf + st.neginf > 0};
      for (const auto& [k, n] : st.exponent_histogram) t.exponent_histogram[k] += n;
      ctx.absmax[name] = t.ref_absmax;
      if (!std::isnan(st.min_abs_nonzero)) {
        auto [it, fresh] = ctx.min_abs_nonzero.try_emplace(name, st.min_abs_nonzero);
        if (!fresh) it->second = std::min(it->second, st.min_abs_nonzero);
      }
      const Comparison& p = mm.propagated;
      t.propagated.merge(p);
      error[name] = p.nrmse();
      if (want_local) t.local.merge(local_cmp ? *local_cmp : compare_to(*r, *local_out, *fmt));
    }
    ++steps_done;
    if (o.progress) o.progress(steps_done, steps_total);
  }

  // The verdict inputs: the emulated graph outputs in their storage dtypes, against the
  // reference's (its float64 carriers with --reference fp64).
  const auto ro = reference_outputs(ref);
  const auto eo = emu.outputs();
  for (std::size_t i = 0; i < ro.size(); ++i) {
    OutputVerdict& v = verdicts[i];
    if (!exec::is_float(ro[i].dtype())) continue;
    const Tensor e = exec::convert(eo[i].tensor, DType::float32);
    const Comparison c = compare_to(ro[i], e, fp32, true);
    ctx.output_cmp[i].merge(c);
    v.nonfinite += c.overflow + c.nan;
    if (o.atol || o.rtol) {
      const double atol = o.atol.value_or(0), rtol = o.rtol.value_or(0);
      const auto es = floats(e);
      with_values(ro[i], [&](auto rs) {
        for (std::size_t k = 0; k < rs.size(); ++k) {
          const double x = rs[k], y = es[k];
          if (std::isnan(x) && std::isnan(y)) continue;
          if (x == y) continue;  // also equal infinities
          if (!(std::fabs(y - x) <= atol + rtol * std::fabs(x))) ++v.outside_tolerance;
        }
      });
    }
  }
}

}  // namespace

std::vector<Tensor> reference_outputs(const exec::Session& ref) {
  std::vector<Tensor> out;
  const auto stored = ref.outputs();
  for (const auto& o : stored) {
    const Tensor* carrier = ref.value(o.name);
    if (carrier && carrier->dtype() == DType::float64)
      out.push_back(*carrier);  // the truth, not narrowed to the declared dtype
    else
      out.push_back(exec::is_float(o.tensor.dtype()) ? exec::convert(o.tensor, DType::float32)
                                                     : o.tensor);
  }
  return out;
}

Source Context::source_of(const std::string& name) const {
  std::string cur = name;
  for (int guard = 0; guard < 10000; ++guard) {
    auto p = producer.find(cur);
    if (p == producer.end()) {
      if (m.graph.find_initializer(cur)) return {Source::constant, cur, std::nullopt};
      return {Source::graph_input, cur, std::nullopt};
    }
    const std::size_t pos = p->second;
    const auto& node = m.graph.nodes[order[pos]];
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

// An output's verdict from its comparison over all input sets (nonfinite and
// outside_tolerance counted already). Errors over no finite pair are NaN: no value.
void judge(const Comparison& c, const CheckOptions& o, OutputVerdict& v) {
  constexpr double none = std::numeric_limits<double>::quiet_NaN();
  const bool measured = c.finite > 0;
  v.max_abs_error = measured ? c.max_abs : none;
  v.max_rel_error = measured ? c.max_rel : none;
  v.max_scaled_error = measured ? c.max_scaled : none;
  // Relative to an all-zero reference, a non-zero error has no finite value either.
  v.rel_rms_error = measured && (c.rr > 0 || c.dd == 0) ? c.nrmse() : none;
  v.cosine = c.cosine();
  v.pass = v.nonfinite == 0 && v.outside_tolerance == 0 && v.cosine >= o.min_cosine;  // NaN fails
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
  constexpr OriginKind absorbable[] = {OriginKind::overflow, OriginKind::nan,
                                       OriginKind::underflow};
  std::vector<std::string> names;
  for (const OriginKind k : absorbable) names.emplace_back(to_string(k));
  std::set<OriginKind> out;
  for (const auto& w : words) {
    const auto it = std::find(names.begin(), names.end(), w);
    if (it != names.end()) {
      out.insert(absorbable[it - names.begin()]);
      continue;
    }
    std::string msg = "expected overflow, nan or underflow";
    if (w == to_string(OriginKind::accuracy))
      msg = "accuracy origins are only found when an output fails; " + msg;
    else if (auto hint = did_you_mean(w, names); !hint.empty())
      msg += "; did you mean '" + hint + "'?";
    throw Error::in_option("fail_on", w, msg);
  }
  return out;
}

Diagnosis check(const model::Model& m, const std::vector<std::vector<NamedTensor>>& samples,
                const CheckOptions& o) {
  if (samples.empty()) throw Error(m.path.string(), "no input sets to check with");
  check_rule_ids(o.disabled_rules);
  if (o.reference != DType::float32 && o.reference != DType::float64)
    throw Error(m.path.string(), "the reference runs on float32 or float64, not " +
                                     std::string(to_string(o.reference)));
  exec::RunOptions ref_opts;
  ref_opts.threads = o.threads;
  ref_opts.policy.round_options = o.round_options;  // the local runs round with them
  ref_opts.policy.accumulate = o.accumulate;        // and accumulate so
  ref_opts.policy.accumulation = o.accumulation;
  // One rounding of each weight serves the emulated and the local runs.
  ref_opts.weights = std::make_shared<exec::WeightCache>();
  // A model that already stores values in 16 bits (one fpguard convert wrote, say) is
  // checked as it is: its float32 nodes stay float32, and the reference is its float32
  // twin (the same graph with every 16-bit value held in float32, no Cast rounding).
  // (16-bit activations, that is: 16-bit weights cast to float32 are a float32 model.)
  bool mixed = false;
  for (const auto* v : m.graph.runtime_inputs())
    mixed = mixed || v->elem_type == 10 || v->elem_type == 16;
  for (const auto& n : m.graph.nodes)
    mixed =
        mixed || (n.op_type == "Cast" && (n.attr_int("to", 0) == 10 || n.attr_int("to", 0) == 16));
  std::set<std::string> as_stored;  // float32 nodes of a mixed model
  if (mixed) {
    ref_opts.float32_storage = true;
    const auto types = model::infer_elem_types(m);
    for (const auto& n : m.graph.nodes) {
      const auto* info = exec::Registry::global().find(n.op_type);
      if (!info || info->kind == exec::OpKind::data_movement || n.outputs.empty()) continue;
      if (auto t = types.find(n.outputs[0]); t != types.end() && t->second == 1)
        as_stored.insert(n.name);
    }
  }
  // The local runs: the reference's options (storage, rounding, accumulation) on float32
  // carriers, fed with the reference's values.
  const exec::RunOptions local_opts = ref_opts;
  ref_opts.carrier = o.reference;
  exec::RunOptions emu_opts = local_opts;
  emu_opts.float32_storage = false;
  emu_opts.policy.default_format = o.precision;
  emu_opts.policy.exclude_names = o.keep_fp32;
  emu_opts.policy.exclude_names.insert(as_stored.begin(), as_stored.end());
  emu_opts.policy.exclude_op_types = o.keep_fp32_ops;
  emu_opts.policy.round_options = o.round_options;
  const exec::Executor ref_ex(m, ref_opts), emu_ex(ref_ex, emu_opts), local_ex(ref_ex, local_opts);

  // --keep-fp32 names must exist (unnamed nodes: see name_nodes).
  const auto names = names_in_order(m, ref_ex.order());
  for (const auto& k : o.keep_fp32)
    if (std::find(names.begin(), names.end(), k) == names.end()) {
      std::string msg = "the model has no node named '" + k + "'";
      if (auto hint = did_you_mean(k, names); !hint.empty())
        msg += "; did you mean '" + hint + "'?";
      throw Error::in_option("keep_fp32", k, msg);
    }

  Context ctx{m, o, {}, ref_ex.order(), {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  for (const auto& t : m.graph.initializers) ctx.initializers.insert(t.name);
  ctx.diag.model = m.path.string();
  ctx.diag.precision = o.precision.name;
  ctx.diag.accumulate = o.accumulate ? o.accumulate->name : "float32";
  ctx.diag.reference = std::string(to_string(o.reference));
  ctx.diag.samples = samples.size();
  ctx.diag.min_cosine = o.min_cosine;
  ctx.diag.atol = o.atol;
  ctx.diag.rtol = o.rtol;
  ctx.diag.fail_on = o.fail_on;
  ctx.diag.generated = o.generated;
  const auto& g = m.graph;
  bool any_float_node = false;
  for (std::size_t pos = 0; pos < ctx.order.size(); ++pos) {
    const auto& node = g.nodes[ctx.order[pos]];
    const bool moves =
        exec::Registry::global().find(node.op_type)->kind == exec::OpKind::data_movement;
    const std::optional<Format> f = moves ? std::nullopt : emu_opts.policy.format_for(node);
    ctx.formats.push_back(f);
    ctx.data_movement.push_back(moves);
    NodeRecord rec;
    rec.name = names[ctx.order[pos]];
    rec.op_type = node.op_type;
    rec.index = pos;
    rec.emulated = f.has_value();
    rec.precision = f ? f->name : "float32";
    for (const auto& out : node.outputs) {
      rec.outputs.push_back({});
      rec.outputs.back().name = out;
      if (!out.empty()) ctx.producer[out] = pos;
    }
    ctx.diag.nodes.push_back(std::move(rec));
  }

  // Constants, before running: one statistics pass each (the SIMD stats layer).
  auto scan = [&](const std::string& name, const std::string& label, const std::string& kind,
                  const Tensor& t) {
    if (!exec::is_float(t.dtype())) return;
    StatsOptions so;
    so.threads = o.threads;
    so.distribution = false;  // the rules need counts and extremes only
    const Stats st = stats(t, {o.precision}, so);
    ConstantScan c{.name = name,
                   .label = label,
                   .kind = kind,
                   .size = st.tensor.count,
                   .overflow = st.formats[0].overflow,
                   .underflow = st.formats[0].underflow,
                   .min = st.tensor.min,
                   .max = st.tensor.max,
                   .min_abs_nonzero = st.tensor.min_abs_nonzero};
    // Their share of the L2 norm, for the constant rules' severity.
    if (c.overflow || c.underflow) constant_sums(t, o.precision, c);
    ctx.absmax[name] = st.tensor.absmax;
    ctx.constant_nonfinite[name] = st.tensor.nan + st.tensor.posinf + st.tensor.neginf > 0;
    ctx.constants.push_back(std::move(c));
  };
  for (const auto& init : g.initializers) scan(init.name, init.name, "initializer", init.tensor);
  for (std::size_t pos = 0; pos < ctx.order.size(); ++pos) {
    const auto& n = g.nodes[ctx.order[pos]];
    if (n.op_type == "Constant" && !n.outputs.empty() && !n.outputs[0].empty())
      if (const Tensor* t = n.attr_tensor("value"))
        scan(n.outputs[0], ctx.diag.nodes[pos].name, "Constant", *t);
  }

  std::vector<OutputVerdict> verdicts(g.outputs.size());
  ctx.output_cmp.resize(g.outputs.size());
  for (std::size_t i = 0; i < g.outputs.size(); ++i) verdicts[i].name = g.outputs[i].name;
  Lockstep ls{m, o, ctx, ref_ex, emu_ex, local_ex, verdicts};
  ls.steps_total = ctx.order.size() * samples.size();
  for (const auto& s : samples) ls.run_sample(s);

  for (std::size_t i = 0; i < verdicts.size(); ++i) judge(ctx.output_cmp[i], o, verdicts[i]);
  ctx.diag.pass =
      std::all_of(verdicts.begin(), verdicts.end(), [](const OutputVerdict& v) { return v.pass; });
  ctx.diag.outputs = std::move(verdicts);
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
  if (mixed) ctx.diag.notes.push_back({.kind = NoteKind::mixed_storage, .count = as_stored.size()});
  if (!any_float_node) ctx.diag.notes.push_back({.kind = NoteKind::no_float_node});

  find_origins(ctx, ref_ex, samples.front());
  assess_damage(ctx);
  absorb(ctx.diag);
  apply_rules(ctx);
  return std::move(ctx.diag);
}

}  // namespace fpguard::analysis
