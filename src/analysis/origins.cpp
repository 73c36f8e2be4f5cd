// Origins, not symptoms: the nodes (and constants, and graph inputs) where trouble
// starts. A node is an overflow/NaN origin when its own local run (reference inputs
// rounded to its format) goes non-finite while its rounded inputs were finite, or when
// the inputs broke at a precision boundary from a float32 node. An out-of-range constant
// or graph input is an origin in its own right. Accuracy origins are nodes whose local
// error is large while their inputs were accurate, ranked by what they alone do to the
// graph outputs.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis.hpp"
#include "fpguard/round.hpp"
#include "fpguard/stats.hpp"

namespace fpguard::analysis {

namespace {

std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::fabs(v) >= 1e6 || (v != 0 && std::fabs(v) < 1e-3)) return fmt::format("{:.4g}", v);
  std::string s = fmt::format("{:.4f}", v);
  while (s.find('.') != std::string::npos && (s.back() == '0' || s.back() == '.')) {
    const bool dot = s.back() == '.';
    s.pop_back();
    if (dot) break;
  }
  return s;
}

std::string count(std::uint64_t n) {  // 659831 -> 659,831
  std::string s = std::to_string(n), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string quoted(const std::string& name) {
  return "`" + name + "`";
}

struct Graphs {
  const Context& ctx;
  std::map<std::string, std::vector<std::size_t>> readers;  // value -> positions

  explicit Graphs(const Context& c) : ctx(c) {
    for (std::size_t pos = 0; pos < c.order.size(); ++pos)
      for (const auto& in : c.m.graph.nodes[c.order[pos]].inputs)
        if (!in.empty()) readers[in].push_back(pos);
  }
  const model::Node& node(std::size_t pos) const { return ctx.m.graph.nodes[ctx.order[pos]]; }
  const NodeRecord& rec(std::size_t pos) const { return ctx.diag.nodes[pos]; }

  std::vector<std::size_t> consumers(std::size_t pos) const {
    std::vector<std::size_t> out;
    for (const auto& o : node(pos).outputs)
      if (auto it = readers.find(o); it != readers.end())
        for (auto p : it->second)
          if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    std::sort(out.begin(), out.end());
    return out;
  }
  // Emulated compute nodes that read `value`, looking through data movement.
  bool read_by_emulated(const std::string& value, int depth = 0) const {
    auto it = readers.find(value);
    if (it == readers.end() || depth > 64) return false;
    for (auto p : it->second) {
      if (ctx.formats[p]) return true;
      if (ctx.data_movement[p])
        for (const auto& o : node(p).outputs)
          if (read_by_emulated(o, depth + 1)) return true;
    }
    return false;
  }
  // The emulated compute nodes that read `value`, through data movement.
  std::vector<std::string> emulated_readers(const std::string& value, int depth = 0) const {
    std::vector<std::string> out;
    auto it = readers.find(value);
    if (it == readers.end() || depth > 64) return out;
    for (auto p : it->second) {
      if (ctx.formats[p]) out.push_back(rec(p).name);
      if (ctx.data_movement[p])
        for (const auto& o : node(p).outputs)
          for (auto& r : emulated_readers(o, depth + 1)) out.push_back(std::move(r));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  // "ReduceMean `/ReduceMean` -> Add `/Add` -> Sqrt `/Sqrt`": the first consumers.
  std::string chain(std::size_t pos, int hops = 3) const {
    std::string out;
    std::size_t cur = pos;
    for (int h = 0; h < hops; ++h) {
      const auto c = consumers(cur);
      if (c.empty()) break;
      cur = c.front();
      out += (out.empty() ? "" : " -> ") + rec(cur).op_type + " " + quoted(rec(cur).name);
    }
    return out;
  }
  // What must stay in float32 for values beyond `max` never to meet the format: the
  // origin, every node that reads an out-of-range value (it would round it on the way
  // in), and so on while their outputs are out of range too. Data movement passes values
  // on without a precision of its own: looked through, not listed.
  std::vector<std::string> out_of_range_region(std::size_t pos, double max) const {
    std::vector<std::string> keep;
    std::vector<std::size_t> stack{pos};
    std::set<std::size_t> seen{pos};
    while (!stack.empty()) {
      const std::size_t p = stack.back();
      stack.pop_back();
      if (!ctx.data_movement[p]) keep.push_back(rec(p).name);
      for (const auto& t : rec(p).outputs) {
        if (!t.floating || !(t.ref_absmax > max)) continue;
        if (auto it = readers.find(t.name); it != readers.end())
          for (auto c : it->second)
            if (seen.insert(c).second) stack.push_back(c);
      }
    }
    std::sort(keep.begin(), keep.end(), [&](const std::string& a, const std::string& b) {
      return position(a) < position(b);
    });
    return keep;
  }
  std::size_t position(const std::string& name) const {
    for (std::size_t p = 0; p < ctx.diag.nodes.size(); ++p)
      if (ctx.diag.nodes[p].name == name) return p;
    return ctx.diag.nodes.size();
  }
  // A scalar constant input (initializer or Constant node), if it is one.
  std::optional<double> constant_scalar(const std::string& value) const {
    const Tensor* t = nullptr;
    if (const auto* init = ctx.m.graph.find_initializer(value)) t = &init->tensor;
    if (auto p = ctx.producer.find(value); !t && p != ctx.producer.end()) {
      const auto& n = node(p->second);
      if (n.op_type == "Constant") t = n.attr_tensor("value");
    }
    if (!t || t->size() != 1 || t->dtype() == DType::string) return std::nullopt;
    std::vector<double> v(1);
    to_double(*t, v);
    return v[0];
  }
  // Pow(x, 2) -> ReduceMean -> [Add eps] -> Sqrt: x * rsqrt(mean(x^2) + eps) or a
  // LayerNorm's variance, both invariant under scaling x (up to eps).
  bool feeds_norm(std::size_t pos) const {
    std::size_t cur = pos;
    bool reduce = false;
    for (int h = 0; h < 4; ++h) {
      const auto c = consumers(cur);
      if (c.size() != 1) return false;
      cur = c.front();
      const auto& op = rec(cur).op_type;
      if (op == "ReduceMean" || op == "ReduceSum") reduce = true;
      if (op == "Sqrt" || op == "Reciprocal") return reduce;
      if (op != "ReduceMean" && op != "ReduceSum" && op != "Add" && !ctx.data_movement[cur])
        return false;
    }
    return false;
  }
};

// How many powers of two the output's largest value must drop to fit half the format's
// max, and the degree of the op in its first input (0: scaling does not commute).
int degree(const Graphs& g, std::size_t pos) {
  const auto& n = g.node(pos);
  const auto& op = n.op_type;
  if (op == "Pow" && n.has_input(1))
    if (auto e = g.constant_scalar(n.inputs[1]); e && *e > 0 && *e == std::floor(*e))
      return static_cast<int>(*e);
  if (op == "ReduceSumSquare") return 2;
  static const std::set<std::string> linear = {
      "Mul",       "MatMul",     "Gemm",        "Conv",      "ConvTranspose", "Div",
      "ReduceSum", "ReduceMean", "Add",         "Sub",       "Sum",           "Relu",
      "LeakyRelu", "MaxPool",    "AveragePool", "ReduceMax", "ReduceMin",     "GlobalAveragePool",
      "ReduceL2",  "ReduceL1",   "Neg",         "Abs"};
  return linear.count(op) ? 1 : 0;
}

std::string scaling_suggestion(const Graphs& g, std::size_t pos, double out_absmax,
                               const Format& f) {
  const int deg = degree(g, pos);
  if (deg == 0 || !(out_absmax > 0) || !std::isfinite(out_absmax)) return "";
  const int k = static_cast<int>(std::ceil(std::log2(out_absmax / (0.5 * f.max()))));
  if (k <= 0) return "";
  const int a = (k + deg - 1) / deg;
  const auto& n = g.node(pos);
  std::string s = fmt::format(
      "scale the input {} of {} by 2^-{} = {} (exact in any binary format): its largest "
      "result drops to {}, at most half of {} max",
      n.inputs.empty() ? std::string("?") : quoted(n.inputs[0]), quoted(g.rec(pos).name), a,
      num(std::ldexp(1.0, -a)), num(std::ldexp(out_absmax, -a * deg)), f.name);
  if (g.feeds_norm(pos))
    s += fmt::format(
        "; the normalisation it feeds (x * rsqrt(mean(x^2) + eps)) is unchanged by scaling x, "
        "so nothing needs undoing (eps becomes eps * 2^-{})",
        2 * a);
  else
    s += fmt::format("; multiply by 2^{} where the values are back in float32", a * deg);
  return s;
}

std::string keep_suggestion(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ",") + n;
  return fmt::format(
      "keep {} in float32 (--keep-fp32 {})",
      names.size() == 1 ? "this node" : "these " + std::to_string(names.size()) + " nodes", list);
}

std::string bf16_suggestion(const Format& f, double absmax) {
  const Format bf = parse_format("bfloat16");
  if (f.name == "bfloat16" || !(absmax < bf.max())) return "";
  return fmt::format("run it in bfloat16 instead (max {}, 8 significant bits)", num(bf.max()));
}

void push(std::vector<std::string>& v, const std::string& s) {
  if (!s.empty()) v.push_back(s);
}

std::vector<std::string> output_names(const model::Node& n) {
  std::vector<std::string> out;
  for (const auto& o : n.outputs)
    if (!o.empty()) out.push_back(o);
  return out;
}

// An out-of-range constant or graph input: an overflow origin of its own.
void value_origins(Context& ctx, const Graphs& g) {
  const Format& f = ctx.o.precision;
  const bool outputs_finite = std::all_of(ctx.diag.outputs.begin(), ctx.diag.outputs.end(),
                                          [](const OutputVerdict& v) { return v.nonfinite == 0; });
  for (const auto& c : ctx.constants) {
    if (!c.overflow || !g.read_by_emulated(c.name)) continue;
    const double worst = std::fabs(c.min) > std::fabs(c.max) ? c.min : c.max;
    const std::string becomes =
        f.has_inf() && !ctx.o.round_options.saturate
            ? (worst < 0 ? "-inf" : "inf")
            : (f.has_nan() && !ctx.o.round_options.saturate ? "NaN"
                                                            : "+-" + num(f.max()) + " (saturated)");
    Origin o;
    o.node = c.label;
    o.op_type = c.kind;
    o.kind = OriginKind::overflow;
    o.outputs = {c.name};
    o.message = fmt::format(
        "{} {} holds {} value{} beyond {} max {} (worst {}), which become{} {}; {}", c.kind,
        quoted(c.label), count(c.overflow), c.overflow > 1 ? "s" : "", f.name, num(f.max()),
        num(worst), c.overflow > 1 ? "" : "s", becomes,
        outputs_finite ? "the outputs stay finite: its consumers absorb it (harmless here)"
                       : "the outputs are not finite where the reference is");
    o.keep_fp32 = g.emulated_readers(c.name);
    push(o.suggestions,
         fmt::format("use a value inside the range, e.g. {} instead of {} (a mask needs only "
                     "to be very negative)",
                     num(std::copysign(std::ldexp(1.0, f.emax() - 1), worst)), num(worst)));
    push(o.suggestions, bf16_suggestion(f, std::fabs(worst)));
    ctx.diag.origins.push_back(std::move(o));
  }
  for (const auto* vi : ctx.m.graph.runtime_inputs()) {
    auto a = ctx.absmax.find(vi->name);
    if (a == ctx.absmax.end() || !(a->second > f.max()) || !g.read_by_emulated(vi->name)) continue;
    Origin o;
    o.node = vi->name;
    o.op_type = "input";
    o.kind = OriginKind::overflow;
    o.outputs = {vi->name};
    o.message = fmt::format("graph input {} has values up to {}, beyond {} max {}",
                            quoted(vi->name), num(a->second), f.name, num(f.max()));
    const int k = static_cast<int>(std::ceil(std::log2(a->second / (0.5 * f.max()))));
    o.keep_fp32 = g.emulated_readers(vi->name);
    push(o.suggestions, fmt::format("scale the input by 2^-{} = {} (exact) before the model", k,
                                    num(std::ldexp(1.0, -k))));
    push(o.suggestions, bf16_suggestion(f, a->second));
    ctx.diag.origins.push_back(std::move(o));
  }
}

std::string nan_cause(const Context& ctx, const Graphs& g, std::size_t pos) {
  const auto& n = g.node(pos);
  const Format& f = *ctx.formats[pos];
  auto rounds_to_zero = [&](const std::string& v) {
    auto it = ctx.min_abs_nonzero.find(v);
    return it != ctx.min_abs_nonzero.end() && it->second < f.smallest_subnormal() / 2;
  };
  if ((n.op_type == "Div" || n.op_type == "Reciprocal") && n.has_input(n.op_type == "Div"))
    if (const auto& d = n.inputs[n.op_type == "Div"]; rounds_to_zero(d))
      return fmt::format("its divisor {} has values down to {}, which round to 0 in {}: 0/0",
                         quoted(d), num(ctx.min_abs_nonzero.at(d)), f.name);
  return fmt::format("inf - inf, 0 * inf, 0/0 or a root/log of a negative value in {}", f.name);
}

void node_origins(Context& ctx, const Graphs& g) {
  const Format& P = ctx.o.precision;
  const double u = std::ldexp(1.0, -P.precision_bits());
  for (std::size_t pos = 0; pos < ctx.order.size(); ++pos) {
    const NodeRecord& rec = ctx.diag.nodes[pos];
    if (!ctx.formats[pos]) continue;
    const Format& f = *ctx.formats[pos];
    // Inherited trouble (inputs already non-finite when rounded) was not merged into
    // the local comparison; what remains is this node's own.
    Comparison local;
    double out_absmax = 0;
    for (const auto& t : rec.outputs)
      if (t.floating) {
        local.merge(t.local);
        out_absmax = std::max(out_absmax, t.ref_absmax);
      }
    Origin o;
    o.node = rec.name;
    o.op_type = rec.op_type;
    o.outputs = output_names(g.node(pos));
    const std::string consumers = g.chain(pos);
    const std::string feeds =
        consumers.empty() ? "" : fmt::format("; its consumers: {}", consumers);
    if (local.overflow > 0) {
      o.kind = OriginKind::overflow;
      std::string what;
      const int deg = degree(g, pos);
      if (!rec.boundary_inputs.empty())
        what = fmt::format(
            "reads {} from float32 nodes with values up to {}: rounding them to {} "
            "overflows",
            quoted(rec.boundary_inputs.front()), num(rec.input_absmax), f.name);
      else if (rec.op_type == "Pow" && deg == 2)
        what = fmt::format("squares values up to {}: {} > {} max {}", num(rec.input_absmax),
                           num(out_absmax), f.name, num(f.max()));
      else if (rec.op_type == "Exp")
        what = fmt::format("exponentiates values up to {}: {} > {} max {}", num(rec.input_absmax),
                           num(out_absmax), f.name, num(f.max()));
      else if (out_absmax > f.max())
        what = fmt::format("computes values up to {} from inputs up to {}: {} > {} max {}",
                           num(out_absmax), num(rec.input_absmax), num(out_absmax), f.name,
                           num(f.max()));
      else
        what = fmt::format("rounds its results past {} max {} (reference values up to {})", f.name,
                           num(f.max()), num(out_absmax));
      o.message = fmt::format("{} ({}) {} (overflow in {} of {} values){}", quoted(rec.name),
                              rec.op_type, what, count(local.overflow), count(local.count), feeds);
      push(o.suggestions, scaling_suggestion(g, pos, out_absmax, f));
      o.keep_fp32 = g.out_of_range_region(pos, f.max());
      push(o.suggestions, keep_suggestion(o.keep_fp32));
      push(o.suggestions, bf16_suggestion(f, out_absmax));
    } else if (local.nan > 0) {
      o.kind = OriginKind::nan;
      o.message = fmt::format(
          "{} ({}) produces NaN in {} of {} values where the reference is "
          "finite: {}{}",
          quoted(rec.name), rec.op_type, count(local.nan), count(local.count),
          nan_cause(ctx, g, pos), feeds);
      static const std::set<std::string> guarded = {"Div", "Reciprocal", "Sqrt", "Log", "Pow"};
      if (guarded.count(rec.op_type))
        push(o.suggestions,
             fmt::format("make the divisor/argument safe in {}: an epsilon of at least {} (its "
                         "smallest normal), or clamp",
                         f.name, num(f.smallest_normal())));
      o.keep_fp32 = {rec.name};
      push(o.suggestions, keep_suggestion(o.keep_fp32));
      push(o.suggestions, bf16_suggestion(f, out_absmax));
    } else if (local.count && local.underflow >= kVerdictFraction * local.count &&
               local.nrmse() > 4 * u && !rec.inputs_nonfinite) {
      o.kind = OriginKind::underflow;
      double min_nz = std::numeric_limits<double>::infinity();
      for (const auto& name : o.outputs)
        if (auto it = ctx.min_abs_nonzero.find(name); it != ctx.min_abs_nonzero.end())
          min_nz = std::min(min_nz, it->second);
      o.message = fmt::format(
          "{} ({}) flushes {} of {} non-zero values to zero in {} (reference values down to {}, "
          "{} smallest subnormal {}): relative RMS error {}{}",
          quoted(rec.name), rec.op_type, count(local.underflow), count(local.count), f.name,
          num(min_nz), f.name, num(f.smallest_subnormal()), num(local.nrmse()), feeds);
      if (std::isfinite(min_nz) && min_nz > 0) {
        const int k = static_cast<int>(std::ceil(std::log2(f.smallest_normal() / min_nz)));
        if (k > 0 && std::ldexp(out_absmax, k) < 0.5 * f.max())
          push(o.suggestions,
               fmt::format("scale up by 2^{} = {} (exact) before this node: the "
                           "largest value becomes {}",
                           k, num(std::ldexp(1.0, k)), num(std::ldexp(out_absmax, k))));
      }
      o.keep_fp32 = {rec.name};
      push(o.suggestions, keep_suggestion(o.keep_fp32));
      push(o.suggestions, bf16_suggestion(f, out_absmax));
    } else {
      continue;
    }
    ctx.diag.origins.push_back(std::move(o));
  }
}

// Accuracy origins: large local error with accurate inputs, ranked by what the node
// alone (everything else in float32) does to the graph outputs.
void accuracy_origins(Context& ctx, const Graphs& g, const exec::Executor& ref_ex,
                      const std::vector<NamedTensor>& sample) {
  const bool accuracy_failure =
      std::any_of(ctx.diag.outputs.begin(), ctx.diag.outputs.end(),
                  [](const OutputVerdict& v) { return !v.pass && v.nonfinite == 0; });
  if (!accuracy_failure) return;
  std::set<std::string> already;
  for (const auto& o : ctx.diag.origins) already.insert(o.node);
  const double u = std::ldexp(1.0, -ctx.o.precision.precision_bits());
  std::vector<std::pair<double, std::size_t>> candidates;  // (local nrmse, position)
  for (std::size_t pos = 0; pos < ctx.order.size(); ++pos) {
    const NodeRecord& rec = ctx.diag.nodes[pos];
    if (!rec.emulated || already.count(rec.name) || rec.inputs_nonfinite) continue;
    double err = 0;
    for (const auto& t : rec.outputs)
      if (t.floating && t.local.finite) err = std::max(err, t.local.nrmse());
    if (std::isfinite(err) && err > 4 * u && err > 2 * rec.input_error)
      candidates.push_back({err, pos});
  }
  std::sort(candidates.rbegin(), candidates.rend());
  if (candidates.size() > 8) candidates.resize(8);
  if (candidates.empty()) return;

  std::vector<Tensor> reference;
  {
    exec::Session ref(ref_ex, sample);
    while (!ref.done()) ref.step();
    reference = reference_outputs(ref);
  }
  auto output_error = [&](const std::vector<NamedTensor>& out) {
    double e = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (!exec::is_float(out[i].tensor.dtype())) continue;
      const Tensor v = exec::convert(out[i].tensor, DType::float32);
      const std::span<const float> vs(v.data<float>().data(), v.size());
      const Format fp32 = parse_format("float32");
      const Tensor& r = reference[i];
      const Comparison c =
          r.dtype() == DType::float64
              ? compare(std::span<const double>(r.data<double>().data(), r.size()), vs, fp32)
              : compare(std::span<const float>(r.data<float>().data(), r.size()), vs, fp32);
      e = std::max(e, c.nrmse());
    }
    return e;
  };
  exec::RunOptions all;
  all.threads = ctx.o.threads;
  all.policy.default_format = ctx.o.precision;
  all.policy.exclude_names = ctx.o.keep_fp32;
  all.policy.exclude_op_types = ctx.o.keep_fp32_ops;
  all.policy.round_options = ctx.o.round_options;
  all.policy.accumulate = ctx.o.accumulate;
  all.policy.accumulation = ctx.o.accumulation;
  const double total = output_error(exec::Executor(ref_ex, all).run(sample));
  std::vector<Origin> found;
  for (const auto& [err, pos] : candidates) {
    const NodeRecord& rec = ctx.diag.nodes[pos];
    if (g.node(pos).name.empty()) continue;  // a policy cannot name it (see name_nodes)
    exec::RunOptions one;
    one.threads = ctx.o.threads;
    one.policy.node_formats.emplace(g.node(pos).name, *ctx.formats[pos]);
    one.policy.round_options = ctx.o.round_options;
    one.policy.accumulate = ctx.o.accumulate;
    one.policy.accumulation = ctx.o.accumulation;
    const double contribution = output_error(exec::Executor(ref_ex, one).run(sample));
    if (!(contribution >= 0.1 * total) || contribution == 0) continue;
    Origin o;
    o.node = rec.name;
    o.op_type = rec.op_type;
    o.kind = OriginKind::accuracy;
    o.outputs = output_names(g.node(pos));
    o.contribution = contribution;
    o.message = fmt::format(
        "{} ({}) adds a relative RMS error of {} on its own (its inputs carry {}; {} unit "
        "roundoff {}); alone in {}, it gives the outputs a relative RMS error of {} ({}% of "
        "the whole {} run's {})",
        quoted(rec.name), rec.op_type, num(err), num(rec.input_error), ctx.o.precision.name, num(u),
        ctx.o.precision.name, num(contribution), num(std::round(100 * contribution / total)),
        ctx.o.precision.name, num(total));
    o.keep_fp32 = {rec.name};
    push(o.suggestions, keep_suggestion(o.keep_fp32));
    if (ctx.o.precision.precision_bits() < 11)
      push(o.suggestions, "run it in float16 (11 significant bits) instead");
    found.push_back(std::move(o));
  }
  std::stable_sort(found.begin(), found.end(), [](const Origin& a, const Origin& b) {
    return a.contribution > b.contribution;
  });
  for (auto& o : found) ctx.diag.origins.push_back(std::move(o));
}

}  // namespace

void find_origins(Context& ctx, const exec::Executor& ref_ex,
                  const std::vector<NamedTensor>& sample) {
  const Graphs g(ctx);
  value_origins(ctx, g);
  node_origins(ctx, g);
  accuracy_origins(ctx, g, ref_ex, sample);
}

}  // namespace fpguard::analysis
