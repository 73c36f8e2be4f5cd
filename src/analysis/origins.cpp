// Origins, not symptoms: the nodes (and constants, and graph inputs) where trouble
// starts. A node is an overflow/NaN origin when its own local run (reference inputs
// rounded to its format) goes non-finite while its rounded inputs were finite, or when
// the inputs broke at a precision boundary from a float32 node. An out-of-range constant
// or graph input is an origin in its own right. Accuracy origins are nodes whose local
// error is large while their inputs were accurate, ranked by what they alone do to the
// graph outputs.
#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis.hpp"
#include "fpguard/round.hpp"
#include "fpguard/stats.hpp"

namespace fpguard::analysis {

namespace {

struct Graphs {
  const Context& ctx;
  std::map<std::string, std::vector<std::size_t>> readers;  // value -> positions

  explicit Graphs(const Context& c) : ctx(c) {
    for (std::size_t pos = 0; pos < c.nodes.size(); ++pos)
      for (const auto& in : c.reads[pos]) readers[in].push_back(pos);
  }
  const model::Node& node(std::size_t pos) const { return *ctx.nodes[pos]; }
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
  // The first consumers downstream, (op, node) each: ReduceMean -> Add -> Sqrt.
  std::vector<std::pair<std::string, std::string>> chain(std::size_t pos, int hops = 3) const {
    std::vector<std::pair<std::string, std::string>> out;
    std::size_t cur = pos;
    for (int h = 0; h < hops; ++h) {
      const auto c = consumers(cur);
      if (c.empty()) break;
      cur = c.front();
      out.emplace_back(rec(cur).op_type, rec(cur).name);
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
    const auto c = ctx.constant_values.find(value);
    const Tensor* t = c == ctx.constant_values.end() ? nullptr : c->second;
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

// The output's homogeneity degree in the node's first input when it is a positive
// integer (scaling that input by 2^-a scales the output by 2^-(a deg)); 0 otherwise.
int degree(const Graphs& g, std::size_t pos) {
  const auto& n = g.node(pos);
  const exec::OpTraits* t = exec::Registry::traits(n);
  if (!t) return 0;
  std::optional<double> exponent;
  if (t->degree == exec::Degree::power && n.has_input(1)) exponent = g.constant_scalar(n.inputs[1]);
  const double d = exec::degree_in_first_input(*t, exponent);
  return d >= 1 && d == std::floor(d) && d <= 64 ? static_cast<int>(d) : 0;
}

bool guarded(const model::Node& n) {
  const exec::OpTraits* t = exec::Registry::traits(n);
  return t && t->guarded;
}

// Multiplying the node's first input by 2^-a brings its largest result to at most half
// the format's max (nullopt when the op does not commute with scaling).
std::optional<Fix> scale_fix(const Graphs& g, std::size_t pos, double out_absmax, const Format& f) {
  const int deg = degree(g, pos);
  if (deg == 0 || !(out_absmax > 0) || !std::isfinite(out_absmax)) return std::nullopt;
  const int k = static_cast<int>(std::ceil(std::log2(out_absmax / (0.5 * f.max()))));
  if (k <= 0) return std::nullopt;
  const int a = (k + deg - 1) / deg;
  const auto& n = g.node(pos);
  Fix fix;
  fix.kind = FixKind::scale;
  fix.nodes = {g.rec(pos).name};
  fix.value = n.inputs.empty() ? std::string() : n.inputs[0];
  fix.format = f.name;
  fix.exponent = -a;
  fix.degree = deg;
  fix.replacement = std::ldexp(out_absmax, -a * deg);
  fix.undo = !g.feeds_norm(pos);
  return fix;
}

Fix keep_fix(const std::vector<std::string>& names) {
  Fix fix;
  fix.kind = FixKind::keep_fp32;
  fix.nodes = names;
  return fix;
}

std::optional<Fix> bf16_fix(const Format& f, double absmax) {
  const Format bf = parse_format("bfloat16");
  if (f.name == "bfloat16" || !(absmax < bf.max())) return std::nullopt;
  Fix fix;
  fix.kind = FixKind::format;
  fix.format = bf.name;
  return fix;
}

void push(std::vector<Fix>& v, std::optional<Fix> fix) {
  if (fix) v.push_back(std::move(*fix));
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
    Origin o;
    o.node = c.label;
    o.op_type = c.kind;
    o.kind = OriginKind::overflow;
    o.cause = Cause::constant;
    o.outputs = {c.name};
    o.format = f.name;
    o.affected = c.overflow;
    o.total = c.size;
    o.absmax = worst;
    o.absorbed = outputs_finite;
    o.saturates = ctx.o.round_options.saturate;
    o.keep_fp32 = g.emulated_readers(c.name);
    Fix replace;
    replace.kind = FixKind::replace_value;
    replace.value = c.label;
    replace.format = f.name;
    replace.value_seen = worst;
    replace.replacement = std::copysign(std::ldexp(1.0, f.emax() - 1), worst);
    o.fixes.push_back(replace);
    push(o.fixes, bf16_fix(f, std::fabs(worst)));
    ctx.diag.origins.push_back(std::move(o));
  }
  for (const auto* vi : ctx.m.graph.runtime_inputs()) {
    auto a = ctx.absmax.find(vi->name);
    if (a == ctx.absmax.end() || !(a->second > f.max()) || !g.read_by_emulated(vi->name)) continue;
    Origin o;
    o.node = vi->name;
    o.op_type = "input";
    o.kind = OriginKind::overflow;
    o.cause = Cause::input;
    o.outputs = {vi->name};
    o.format = f.name;
    o.absmax = a->second;
    const int k = static_cast<int>(std::ceil(std::log2(a->second / (0.5 * f.max()))));
    o.keep_fp32 = g.emulated_readers(vi->name);
    Fix scale;
    scale.kind = FixKind::scale;
    scale.value = vi->name;
    scale.format = f.name;
    scale.exponent = -k;
    scale.replacement = std::ldexp(a->second, -k);
    scale.before_model = true;
    o.fixes.push_back(scale);
    push(o.fixes, bf16_fix(f, a->second));
    ctx.diag.origins.push_back(std::move(o));
  }
}

// NaN: a divisor that rounds to zero (0/0), or one of the other invalid operations.
void nan_cause(const Context& ctx, const Graphs& g, std::size_t pos, Origin& o) {
  const auto& n = g.node(pos);
  const Format& f = *ctx.formats[pos];
  o.cause = Cause::invalid;
  if ((n.op_type == "Div" || n.op_type == "Reciprocal") && n.has_input(n.op_type == "Div")) {
    const auto& d = n.inputs[n.op_type == "Div"];
    auto it = ctx.min_abs_nonzero.find(d);
    if (it != ctx.min_abs_nonzero.end() && it->second < f.smallest_subnormal() / 2) {
      o.cause = Cause::zero_divisor;
      o.related = d;
      o.min_nonzero = it->second;
    }
  }
}

Cause overflow_cause(const Graphs& g, std::size_t pos, double out_absmax, const Format& f) {
  const NodeRecord& rec = g.rec(pos);
  if (!rec.boundary_inputs.empty()) return Cause::boundary;
  if (rec.op_type == "Pow" && degree(g, pos) == 2) return Cause::square;
  if (rec.op_type == "Exp") return Cause::exponential;
  return out_absmax > f.max() ? Cause::computes : Cause::rounding;
}

// An underflow origin: results flush to zero; scaling up before the node, when its
// largest value then still fits, or float32.
void underflow_origin(const Context& ctx, const Comparison& local, double out_absmax,
                      const Format& f, Origin& o) {
  o.kind = OriginKind::underflow;
  o.cause = Cause::flush;
  o.affected = local.underflow;
  o.local_error = local.nrmse();
  double min_nz = std::numeric_limits<double>::infinity();
  for (const auto& name : o.outputs)
    if (auto it = ctx.min_abs_nonzero.find(name); it != ctx.min_abs_nonzero.end())
      min_nz = std::min(min_nz, it->second);
  o.min_nonzero = min_nz;
  if (std::isfinite(min_nz) && min_nz > 0) {
    const int k = static_cast<int>(std::ceil(std::log2(f.smallest_normal() / min_nz)));
    if (k > 0 && std::ldexp(out_absmax, k) < 0.5 * f.max()) {
      Fix scale;
      scale.kind = FixKind::scale;
      scale.nodes = {o.node};
      scale.format = f.name;
      scale.exponent = k;
      scale.replacement = std::ldexp(out_absmax, k);
      o.fixes.push_back(scale);
    }
  }
  o.keep_fp32 = {o.node};
  o.fixes.push_back(keep_fix(o.keep_fp32));
  push(o.fixes, bf16_fix(f, out_absmax));
}

void node_origins(Context& ctx, const Graphs& g) {
  const Format& P = ctx.o.precision;
  const double u = std::ldexp(1.0, -P.precision_bits());
  for (std::size_t pos = 0; pos < ctx.nodes.size(); ++pos) {
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
    o.format = f.name;
    o.total = local.count;
    o.absmax = out_absmax;
    o.input_absmax = rec.input_absmax;
    o.consumers = g.chain(pos);
    o.saturates = ctx.o.round_options.saturate;
    o.iteration = rec.first_overflow_iteration;
    if (local.overflow > 0) {
      o.kind = OriginKind::overflow;
      o.cause = overflow_cause(g, pos, out_absmax, f);
      o.affected = local.overflow + local.nan;  // what the tables count as its own inf/NaN
      if (o.cause == Cause::boundary) o.related = rec.boundary_inputs.front();
      // (Scaling rewrites do not reach into bodies yet.)
      if (rec.parent.empty()) push(o.fixes, scale_fix(g, pos, out_absmax, f));
      o.keep_fp32 = g.out_of_range_region(pos, f.max());
      o.fixes.push_back(keep_fix(o.keep_fp32));
      push(o.fixes, bf16_fix(f, out_absmax));
    } else if (local.nan > 0) {
      o.kind = OriginKind::nan;
      o.affected = local.nan;
      nan_cause(ctx, g, pos, o);
      if (guarded(g.node(pos))) {
        Fix guard;
        guard.kind = FixKind::guard;
        guard.nodes = {rec.name};
        guard.format = f.name;
        guard.replacement = f.smallest_normal();
        o.fixes.push_back(guard);
      }
      o.keep_fp32 = {rec.name};
      o.fixes.push_back(keep_fix(o.keep_fp32));
      push(o.fixes, bf16_fix(f, out_absmax));
    } else if (local.count && local.underflow >= kVerdictFraction * local.count &&
               local.nrmse() > 4 * u && !rec.inputs_nonfinite) {
      underflow_origin(ctx, local, out_absmax, f, o);
    } else {
      continue;
    }
    ctx.diag.origins.push_back(std::move(o));
  }
}

// ---- scaled precisions: what shared scales do to a GEMM's operands ---------------------

// A scaled format by its parts, under its table name when it has one (block:E:S:32 of MX
// elements is the named MX format); nullopt when no format has these parts.
std::optional<std::string> scaled_name(const Format& element, std::string_view scale, int block) {
  const auto f = find_scaled_format("block:" + element.name + ":" + std::string(scale) + ":" +
                                    std::to_string(block));
  if (!f) return std::nullopt;
  for (const auto& named : named_scaled_formats())
    if (named == *f) return named.name;
  return f->name;
}

void push_scaled(std::vector<Fix>& v, const std::optional<std::string>& format,
                 const std::string& current) {
  if (!format || *format == current) return;
  Fix fix;
  fix.kind = FixKind::scaled_format;
  fix.format = *format;
  v.push_back(std::move(fix));
}

// Another scaled format that removes the trouble of `kind` from `f`'s operands, cheapest
// first: a block a quarter the size (an outlier then flushes at most a quarter of the
// neighbours), NVFP4's finer scale for MX FP4 (blocks of 16, an E4M3 scale), or OCP MX blocks
// of the same element for one scale per tensor or channel (each block follows its values).
void scaled_fixes(OriginKind kind, const ScaledFormat& f, std::vector<Fix>& fixes) {
  if (f.integer_elements) return;
  if (f.scope == ScaleScope::block && kind == OriginKind::block_underflow && f.block_size >= 4)
    push_scaled(fixes, scaled_name(f.element, f.scale.name, f.block_size / 4), f.name);
  const bool mx_fp4 = f.rule == ScaleRule::power_of_two && f.element.bits() == 4;
  if (mx_fp4 && kind == OriginKind::block_underflow) push_scaled(fixes, "nvfp4", f.name);
  if (f.rule != ScaleRule::power_of_two)
    push_scaled(fixes, scaled_name(f.element, "float8_e8m0fnu", 32), f.name);
}

// The scaled-precision origin of one operand, if its counts show one (docs/check.md):
// block_underflow when blocks swamped by an outlier hold at least kVerdictFraction of its
// non-zero values; block_saturation when as many were clipped far past rounding;
// scale_underflow (one scale per tensor or channel) when at least half of them went
// subnormal or to zero.
std::optional<Origin> operand_origin(const ScaledOperandRecord& s, const ScaledFormat& f) {
  const auto n = static_cast<double>(s.nonzero);
  if (s.nonzero == 0) return std::nullopt;
  Origin o;
  o.related = s.value;
  o.format = s.format;
  o.operand = s.input;
  o.total = s.nonzero;
  o.blocks = s.blocks;
  const std::uint64_t low = s.subnormal + s.flushed + s.underflow;
  if (f.scope == ScaleScope::block && static_cast<double>(s.swamped) >= kVerdictFraction * n) {
    o.kind = OriginKind::block_underflow;
    o.affected = s.swamped;
    o.blocks_affected = s.swamped_blocks;
  } else if (f.rule == ScaleRule::amax && static_cast<double>(low) >= kMostFraction * n) {
    o.kind = OriginKind::scale_underflow;
    o.affected = low;
  } else if (static_cast<double>(s.clipped) >= kVerdictFraction * n) {
    o.kind = OriginKind::block_saturation;
    o.affected = s.clipped;
    o.blocks_affected = s.clipped_blocks;
  } else {
    return std::nullopt;
  }
  o.cause = o.kind == OriginKind::block_saturation ? Cause::clipped : Cause::outlier_scale;
  return o;
}

void scaled_origins(Context& ctx, const Graphs& g) {
  if (!ctx.o.scaled) return;
  std::set<std::string> already;
  for (const auto& o : ctx.diag.origins) already.insert(o.node);
  for (std::size_t pos = 0; pos < ctx.nodes.size(); ++pos) {
    const NodeRecord& rec = ctx.diag.nodes[pos];
    if (!ctx.formats[pos] || rec.inputs_nonfinite || already.count(rec.name)) continue;
    std::optional<Origin> worst;  // the operand with the largest share affected
    for (const auto& s : rec.scaled_operands) {
      auto o = operand_origin(s, parse_scaled_format(s.format));
      if (o && (!worst || o->affected * worst->total > worst->affected * o->total))
        worst = std::move(o);
    }
    if (!worst) continue;
    Origin o = std::move(*worst);
    o.node = rec.name;
    o.op_type = rec.op_type;
    o.outputs = output_names(g.node(pos));
    o.input_absmax = rec.input_absmax;
    o.consumers = g.chain(pos);
    for (const auto& t : rec.outputs)
      if (t.floating) {
        o.absmax = std::max(o.absmax, t.ref_absmax);
        o.local_error = std::max(o.local_error, t.local.finite ? t.local.nrmse() : 0.0);
      }
    o.input_error = rec.input_error;
    o.keep_fp32 = {rec.name};
    // Cheapest first: the GEMM unscaled in the other precision, then in float32.
    if (ctx.o.precision.name != "float32") {
      Fix unscaled = keep_fix(o.keep_fp32);
      unscaled.kind = FixKind::keep_unscaled;
      unscaled.format = ctx.o.precision.name;
      o.fixes.push_back(std::move(unscaled));
    }
    o.fixes.push_back(keep_fix(o.keep_fp32));
    scaled_fixes(o.kind, parse_scaled_format(o.format), o.fixes);
    ctx.diag.origins.push_back(std::move(o));
  }
}

// The accuracy-origin candidates of a check whose outputs lost accuracy (none otherwise):
// up to 8 emulated nodes, not origins already, whose local error (local nrmse) is well
// above the format's unit roundoff and their inputs' error, largest first, as (local
// error, position).
std::vector<std::pair<double, std::size_t>> accuracy_candidates(const Context& ctx) {
  const bool accuracy_failure =
      std::any_of(ctx.diag.outputs.begin(), ctx.diag.outputs.end(),
                  [](const OutputVerdict& v) { return !v.pass && v.nonfinite == 0; });
  if (!accuracy_failure) return {};
  std::set<std::string> already;
  for (const auto& o : ctx.diag.origins) already.insert(o.node);
  const double u = std::ldexp(1.0, -ctx.o.precision.precision_bits());
  std::vector<std::pair<double, std::size_t>> candidates;
  for (std::size_t pos = 0; pos < ctx.nodes.size(); ++pos) {
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
  return candidates;
}

// What every accuracy-origin run shares with the check: threads, the weight cache (weights
// already rounded or quantized, and a convolution's weights as prepared, are not made again
// for each run), rounding and accumulation. `formats` sets the formats of the run's policy;
// the scales are added after it.
exec::RunOptions origin_run(const Context& ctx, const exec::Executor& ref_ex,
                            const std::function<void(exec::PrecisionPolicy&)>& formats) {
  exec::RunOptions r;
  r.threads = ctx.o.threads;
  r.weights = ref_ex.options().weights;
  formats(r.policy);
  r.policy.round_options = ctx.o.round_options;
  r.policy.accumulate = ctx.o.accumulate;
  r.policy.accumulation = ctx.o.accumulation;
  ctx.scale(r.policy);
  return r;
}

// The accuracy origin at position `pos`: its local error `err`, what it alone does to the
// outputs (`contribution`) against the whole emulated run's error (`total`), its fixes.
Origin accuracy_origin(const Context& ctx, const Graphs& g, std::size_t pos, double err,
                       double contribution, double total) {
  const NodeRecord& rec = ctx.diag.nodes[pos];
  Origin o;
  o.node = rec.name;
  o.op_type = rec.op_type;
  o.kind = OriginKind::accuracy;
  o.cause = Cause::local_error;
  o.outputs = output_names(g.node(pos));
  o.format = rec.precision;  // a scaled precision's name at a node quantizing into it
  o.local_error = err;
  o.input_error = rec.input_error;
  o.contribution = contribution;
  o.total_error = total;
  o.keep_fp32 = {rec.name};
  o.fixes.push_back(keep_fix(o.keep_fp32));
  if (ctx.o.precision.precision_bits() < 11 && rec.precision == ctx.o.precision.name) {
    Fix f16;
    f16.kind = FixKind::format;
    f16.format = "float16";
    o.fixes.push_back(f16);
  }
  return o;
}

// Accuracy origins: large local error with accurate inputs, ranked by what the node
// alone (everything else in float32) does to the graph outputs.
void accuracy_origins(Context& ctx, const Graphs& g,
                      const std::function<const exec::Executor&()>& reference,
                      const std::function<std::vector<NamedValue>()>& first_set) {
  const auto candidates = accuracy_candidates(ctx);
  if (candidates.empty()) return;
  const exec::Executor& ref_ex = reference();
  const std::vector<NamedValue> sample = first_set();
  std::vector<Value> ref_outputs = ctx.first_reference;  // as the lockstep ran set 0
  if (ref_outputs.empty()) {
    exec::Session ref(ref_ex, sample);
    while (!ref.done()) ref.step();
    ref_outputs = reference_outputs(ref);
  }
  // The largest relative RMS error of the outputs (+inf where their forms differ).
  auto output_error = [&](const std::vector<NamedValue>& out) {
    double e = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const ValueComparison c = compare_values(ref_outputs[i], out[i].value);
      e = std::max(e, c.same_form ? c.all.nrmse() : INFINITY);
    }
    return e;
  };
  const double total =
      output_error(!ctx.first_emulated.empty()
                       ? ctx.first_emulated
                       : exec::Executor(ref_ex, origin_run(ctx, ref_ex,
                                                           [&](exec::PrecisionPolicy& p) {
                                                             p.default_format = ctx.o.precision;
                                                             p.exclude_names = ctx.o.keep_fp32;
                                                             p.exclude_op_types =
                                                                 ctx.o.keep_fp32_ops;
                                                           }))
                             .run_values(sample));
  std::vector<Origin> found;
  for (const auto& candidate : candidates) {
    // (not a structured binding: clang 14 cannot capture one in the lambda below)
    const double err = candidate.first;
    const std::size_t pos = candidate.second;
    const std::string& name = g.node(pos).name;
    if (name.empty()) continue;  // a policy cannot name it (see name_nodes)
    const exec::RunOptions one = origin_run(ctx, ref_ex, [&](exec::PrecisionPolicy& p) {
      p.node_formats.emplace(name, *ctx.formats[pos]);
    });
    const double contribution = output_error(exec::Executor(ref_ex, one).run_values(sample));
    if (!(contribution >= 0.1 * total) || contribution == 0) continue;
    found.push_back(accuracy_origin(ctx, g, pos, err, contribution, total));
  }
  std::stable_sort(found.begin(), found.end(), [](const Origin& a, const Origin& b) {
    return a.contribution > b.contribution;
  });
  for (auto& o : found) ctx.diag.origins.push_back(std::move(o));
}

// The largest damage (relative RMS error; +inf for inf/NaN) of the graph outputs each
// node reaches, through what its readers (subgraph captures included) reach.
std::vector<double> reached_output_error(const Context& ctx) {
  const auto& g = ctx.m.graph;
  std::map<std::string, double> output_error;
  for (std::size_t i = 0; i < g.outputs.size() && i < ctx.diag.outputs.size(); ++i) {
    const OutputVerdict& v = ctx.diag.outputs[i];
    const bool broken = v.nonfinite > 0 || v.mismatched_sets > 0 || std::isnan(v.rel_rms_error);
    output_error[g.outputs[i].name] = broken ? INFINITY : v.rel_rms_error;
  }
  std::map<std::string, std::vector<std::size_t>> readers;
  for (std::size_t pos = 0; pos < ctx.nodes.size(); ++pos)
    for (const auto& in : ctx.reads[pos]) readers[in].push_back(pos);
  std::vector<double> reach(ctx.nodes.size(), 0);
  for (std::size_t pos = ctx.nodes.size(); pos-- > 0;)
    for (const auto& out : ctx.nodes[pos]->outputs) {
      if (out.empty()) continue;
      if (auto it = output_error.find(out); it != output_error.end())
        reach[pos] = std::max(reach[pos], it->second);
      if (auto it = readers.find(out); it != readers.end())
        for (const auto r : it->second) reach[pos] = std::max(reach[pos], reach[r]);
    }
  return reach;
}

}  // namespace

void assess_damage(Context& ctx) {
  const std::vector<double> reach = reached_output_error(ctx);
  std::map<std::string, double> measured;  // accuracy origins: their contribution
  for (const auto& o : ctx.diag.origins)
    if (o.kind == OriginKind::accuracy) measured[o.node] = o.contribution;
  for (std::size_t pos = 0; pos < ctx.diag.nodes.size(); ++pos) {
    NodeRecord& rec = ctx.diag.nodes[pos];
    if (auto it = measured.find(rec.name); it != measured.end()) {
      rec.damage = it->second;
      continue;
    }
    double own = 0;  // nothing measured locally: nothing of its own
    for (const auto& t : rec.outputs) {
      if (!t.floating) continue;
      if (t.local.overflow + t.local.nan > 0) own = INFINITY;
      if (t.local.finite > 0) own = std::max(own, t.local.nrmse());
    }
    rec.damage = std::min(own, reach[pos]);
  }
}

void find_origins(Context& ctx, const std::function<const exec::Executor&()>& reference,
                  const std::function<std::vector<NamedValue>()>& sample) {
  const Graphs g(ctx);
  value_origins(ctx, g);
  node_origins(ctx, g);
  scaled_origins(ctx, g);
  accuracy_origins(ctx, g, reference, sample);
}

}  // namespace fpguard::analysis
