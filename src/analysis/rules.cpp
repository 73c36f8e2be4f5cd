// Static risk rules: patterns known to break in low precision, each a row of one table
// (id, rationale, check), so users can turn any of them off by id. They read the graph,
// the constants, and the shapes and reference ranges of the first run.
#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"

namespace fpguard::analysis {

namespace {

struct RuleContext {
  const Context& ctx;
  std::map<std::string, std::vector<std::size_t>> readers;  // value -> positions
  const Format& f;

  const model::Node& node(std::size_t pos) const { return *ctx.nodes[pos]; }
  const NodeRecord& rec(std::size_t pos) const { return ctx.diag.nodes[pos]; }
  std::string producer_op(const std::string& value) const {
    auto p = ctx.producer.find(value);
    return p == ctx.producer.end() ? "" : node(p->second).op_type;
  }
  // Reference |value| maximum (all samples) of input i of the node at `pos`; 0 if unknown.
  double in_absmax(std::size_t pos, std::size_t i) const {
    const auto& n = node(pos);
    if (!n.has_input(i)) return 0;
    auto it = ctx.absmax.find(n.inputs[i]);
    return it == ctx.absmax.end() ? 0 : it->second;
  }
  // Smallest non-zero reference |value| of `value`; +inf if unknown.
  double min_nonzero(const std::string& value) const {
    auto it = ctx.min_abs_nonzero.find(value);
    return it == ctx.min_abs_nonzero.end() ? INFINITY : it->second;
  }
  std::vector<std::size_t> readers_of(const std::string& value) const {
    auto it = readers.find(value);
    return it == readers.end() ? std::vector<std::size_t>{} : it->second;
  }
  // The element count a reduction combines, from the first input's shape.
  std::int64_t reduced_count(std::size_t pos) const {
    const auto& n = node(pos);
    const auto& shapes = rec(pos).input_shapes;
    if (shapes.empty() || shapes[0].empty()) return 0;
    const auto& s = shapes[0];
    std::vector<std::int64_t> axes = n.attr_ints("axes", {});
    if (axes.empty() && n.has_input(1) && shapes.size() > 1) return 0;  // runtime axes
    std::int64_t count = 1;
    if (axes.empty()) {
      if (n.attr_int("noop_with_empty_axes", 0)) return 0;
      for (auto d : s) count *= d;
      return count;
    }
    for (auto a : axes) {
      const auto r = static_cast<std::int64_t>(s.size());
      const auto ax = a < 0 ? a + r : a;
      if (ax >= 0 && ax < r) count *= s[static_cast<std::size_t>(ax)];
    }
    return count;
  }
};

using Check = void (*)(const RuleContext&, std::vector<RuleFinding>&);

// A finding of rule `id` at the node at `pos` (op, format filled in).
RuleFinding& add(const RuleContext& rc, std::vector<RuleFinding>& out, const std::string& id,
                 std::size_t pos) {
  RuleFinding r;
  r.id = id;
  r.node = rc.rec(pos).name;
  r.op_type = rc.node(pos).op_type;
  r.format = rc.f.name;
  out.push_back(std::move(r));
  return out.back();
}

// Initializers and Constant values: overflow and flush to zero in the format (from the
// scan check() made before running).
void constants(const RuleContext& rc, std::vector<RuleFinding>& out, bool overflow) {
  for (const auto& c : rc.ctx.constants) {
    if (overflow ? !c.overflow : !c.underflow) continue;
    RuleFinding r;
    r.id = overflow ? "constant-overflow" : "constant-underflow";
    r.node = c.label;
    r.op_type = c.kind;
    r.format = rc.f.name;
    r.count = overflow ? c.overflow : c.underflow;
    r.total = c.size;
    r.parameter =
        overflow ? (std::fabs(c.min) > std::fabs(c.max) ? c.min : c.max) : c.min_abs_nonzero;
    r.limit = overflow ? rc.f.max() : rc.f.smallest_subnormal();
    const double part = overflow ? c.sumsq_overflow : c.sumsq_underflow;
    r.norm_share = c.sumsq > 0 ? std::sqrt(part / c.sumsq) : 0;
    out.push_back(std::move(r));
  }
}

void constant_overflow(const RuleContext& rc, std::vector<RuleFinding>& out) {
  constants(rc, out, true);
}
void constant_underflow(const RuleContext& rc, std::vector<RuleFinding>& out) {
  constants(rc, out, false);
}

// Every node of `ops` that runs emulated, with a message.
template <class Fn>
void each(const RuleContext& rc, std::initializer_list<std::string_view> ops, Fn fn) {
  for (std::size_t pos = 0; pos < rc.ctx.nodes.size(); ++pos) {
    if (!rc.ctx.formats[pos]) continue;
    const auto& op = rc.node(pos).op_type;
    if (std::find(ops.begin(), ops.end(), op) != ops.end()) fn(pos);
  }
}

// Op rules are data-aware: they fire when the values seen in the reference run come
// within kMarginBits of the trouble (a factor of 256), so a bfloat16 check is not told
// that Pow overflows past 1.8e19.
constexpr double kMarginBits = 8;

std::optional<double> exponent_of(const RuleContext& rc, std::size_t pos) {
  const auto& n = rc.node(pos);
  if (!n.has_input(1)) return std::nullopt;
  const auto c = rc.ctx.constant_values.find(n.inputs[1]);
  const Tensor* t = c == rc.ctx.constant_values.end() ? nullptr : c->second;
  if (!t || t->size() != 1 || t->dtype() == DType::string) return std::nullopt;
  std::vector<double> v(1);
  to_double(*t, v);
  return v[0];
}

void pow_rule(const RuleContext& rc, std::vector<RuleFinding>& out) {
  each(rc, {"Pow"}, [&](std::size_t pos) {
    const double y = exponent_of(rc, pos).value_or(2);
    if (!(y > 1)) return;
    const double limit = std::pow(rc.f.max(), 1 / y), seen = rc.in_absmax(pos, 0);
    if (!(seen > 0) || std::log2(limit / seen) >= kMarginBits) return;
    auto& r = add(rc, out, "pow", pos);
    r.parameter = y, r.limit = limit, r.observed = seen;
  });
}

bool max_subtracted(const RuleContext& rc, std::size_t pos) {  // Exp(Sub(x, ReduceMax(x)))
  const auto& n = rc.node(pos);
  if (!n.has_input(0) || rc.producer_op(n.inputs[0]) != "Sub") return false;
  const auto& sub = rc.node(rc.ctx.producer.at(n.inputs[0]));
  return sub.has_input(1) && rc.producer_op(sub.inputs[1]) == "ReduceMax";
}

void exp_rule(const RuleContext& rc, std::vector<RuleFinding>& out) {
  each(rc, {"Exp"}, [&](std::size_t pos) {
    const double limit = std::log(rc.f.max()), seen = rc.in_absmax(pos, 0);
    if (max_subtracted(rc, pos) || !(seen > limit / 2)) return;
    auto& r = add(rc, out, "exp", pos);
    r.limit = limit, r.observed = seen;
  });
}

void log_rule(const RuleContext& rc, std::vector<RuleFinding>& out) {
  each(rc, {"Log"}, [&](std::size_t pos) {
    const auto& n = rc.node(pos);
    const double seen = n.has_input(0) ? rc.min_nonzero(n.inputs[0]) : INFINITY;
    if (!(std::log2(seen / rc.f.smallest_normal()) < kMarginBits)) return;
    auto& r = add(rc, out, "log", pos);
    r.limit = rc.f.smallest_subnormal() / 2, r.observed = seen;
  });
}

bool is_reduction(const std::string& op) {
  return op.rfind("Reduce", 0) == 0;
}

void root_after_reduction(const RuleContext& rc, std::vector<RuleFinding>& out) {
  each(rc, {"Reciprocal", "Div"}, [&](std::size_t pos) {
    const auto& n = rc.node(pos);
    const std::size_t arg = n.op_type == "Div" ? 1 : 0;
    if (!n.has_input(arg)) return;
    // Look through one Add (the epsilon) and one Sqrt.
    std::string v = n.inputs[arg];
    for (int hop = 0; hop < 3; ++hop) {
      const std::string op = rc.producer_op(v);
      if (is_reduction(op)) {
        const double seen = rc.min_nonzero(v);
        if (!(std::log2(seen / rc.f.smallest_normal()) < kMarginBits)) return;
        auto& r = add(rc, out, "root-after-reduction", pos);
        r.limit = rc.f.smallest_subnormal() / 2, r.observed = seen;
        return;
      }
      if (op != "Add" && op != "Sqrt") return;
      const auto& p = rc.node(rc.ctx.producer.at(v));
      if (!p.has_input(0)) return;
      v = p.inputs[0];
    }
  });
}

void sum_of_squares(const RuleContext& rc, std::vector<RuleFinding>& out) {
  each(rc, {"ReduceSumSquare", "ReduceL2"}, [&](std::size_t pos) {
    const double limit = std::sqrt(rc.f.max()), seen = rc.in_absmax(pos, 0);
    if (!(seen > 0) || std::log2(limit / seen) >= kMarginBits) return;
    auto& r = add(rc, out, "sum-of-squares", pos);
    r.limit = limit, r.observed = seen;
  });
}

void long_reduction(const RuleContext& rc, std::vector<RuleFinding>& out) {
  const std::int64_t limit = std::int64_t{1} << rc.f.precision_bits();
  each(rc, {"ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1", "ReduceL2"},
       [&](std::size_t pos) {
         const auto n = rc.reduced_count(pos);
         if (n < limit) return;
         auto& r = add(rc, out, "long-reduction", pos);
         r.observed = static_cast<double>(n), r.limit = static_cast<double>(limit);
       });
}

void softmax_without_max(const RuleContext& rc, std::vector<RuleFinding>& out) {
  each(rc, {"Exp"}, [&](std::size_t pos) {
    const auto& n = rc.node(pos);
    if (n.outputs.empty()) return;
    bool summed = false;
    for (auto r : rc.readers_of(n.outputs[0]))
      if (rc.node(r).op_type == "ReduceSum") summed = true;
    if (!summed || max_subtracted(rc, pos)) return;
    auto& r = add(rc, out, "softmax-without-max", pos);
    r.limit = std::log(rc.f.max()), r.observed = rc.in_absmax(pos, 0);
  });
}

void norm_as_primitives(const RuleContext& rc, std::vector<RuleFinding>& out) {
  each(rc, {"Pow"}, [&](std::size_t pos) {
    const auto& n = rc.node(pos);
    if (n.outputs.empty()) return;
    bool mean = false;
    for (auto r : rc.readers_of(n.outputs[0]))
      if (rc.node(r).op_type == "ReduceMean") mean = true;
    if (!mean) return;
    const bool centred = n.has_input(0) && rc.producer_op(n.inputs[0]) == "Sub";
    const double limit = std::sqrt(rc.f.max()), seen = rc.in_absmax(pos, 0);
    if (!(seen > 0) || std::log2(limit / seen) >= kMarginBits) return;
    auto& r = add(rc, out, "norm-as-primitives", pos);
    r.centred = centred, r.limit = limit, r.observed = seen;
  });
}

void large_k(const RuleContext& rc, std::vector<RuleFinding>& out) {
  const std::int64_t limit = std::int64_t{1} << rc.f.precision_bits();
  each(rc, {"MatMul", "Gemm", "Conv"}, [&](std::size_t pos) {
    const auto& n = rc.node(pos);
    const auto& s = rc.rec(pos).input_shapes;
    std::int64_t k = 0;
    if (s.size() >= 2 && !s[0].empty() && !s[1].empty()) {
      if (n.op_type == "MatMul")
        k = s[0].back();
      else if (n.op_type == "Gemm")
        k = n.attr_int("transA", 0) ? s[0][0] : s[0].back();
      else if (s[1].size() >= 2) {  // Conv: C/group * kernel size
        k = s[1][1];
        for (std::size_t d = 2; d < s[1].size(); ++d) k *= s[1][d];
      }
    }
    if (k < limit) return;
    auto& r = add(rc, out, "large-k", pos);
    r.observed = static_cast<double>(k), r.limit = static_cast<double>(limit);
  });
}

void large_range(const RuleContext& rc, std::vector<RuleFinding>& out) {
  const double limit = std::ldexp(1.0, rc.f.mantissa_bits - 1);  // ULP >= 0.5
  for (std::size_t pos = 0; pos < rc.ctx.nodes.size(); ++pos) {
    if (!rc.ctx.formats[pos]) continue;
    for (const auto& t : rc.rec(pos).outputs)
      if (t.floating && t.ref_absmax >= limit && t.ref_absmax <= rc.f.max()) {
        const int e = static_cast<int>(std::floor(std::log2(t.ref_absmax)));
        auto& r = add(rc, out, "large-range", pos);
        r.tensor = t.name, r.observed = t.ref_absmax, r.limit = limit;
        r.parameter = std::ldexp(1.0, e - rc.f.mantissa_bits);
        break;
      }
  }
}

// ---- rules for models another tool converted -------------------------------------------

bool is_cast(const model::Node& n) {
  return n.op_type == "Cast" && (n.domain.empty() || n.domain == "ai.onnx");
}

std::string type_name(int elem_type) {
  return elem_type ? model::onnx_type_name(elem_type) : std::string();
}

// The declared element types of main-graph values: value_info and graph outputs.
std::map<std::string, int> declared_types(const model::Graph& g) {
  std::map<std::string, int> out;
  for (const auto& v : g.value_info)
    if (v.elem_type) out[v.name] = v.elem_type;
  for (const auto& v : g.outputs)
    if (v.elem_type) out[v.name] = v.elem_type;
  return out;
}

// A main-graph Cast whose `to` is not the type its output is declared with.
void cast_type(const RuleContext& rc, std::vector<RuleFinding>& out) {
  const auto declared = declared_types(rc.ctx.m.graph);
  for (std::size_t pos = 0; pos < rc.ctx.nodes.size(); ++pos) {
    const auto& n = rc.node(pos);
    if (!is_cast(n) || !rc.rec(pos).parent.empty() || n.outputs.empty()) continue;
    const auto d = declared.find(n.outputs[0]);
    const auto to = static_cast<int>(n.attr_int("to", 0));
    if (d == declared.end() || d->second == to) continue;
    auto& r = add(rc, out, "cast-type", pos);
    r.tensor = n.outputs[0];
    r.types = {type_name(to), type_name(d->second)};
    r.count = 1, r.total = 1;  // the runtime rejects the model or the types drift: major
  }
}

// Bits of a floating element type (0 for others).
int float_bits(int elem_type) {
  switch (elem_type) {
    case 11:
      return 64;
    case 1:
      return 32;
    case 10:
    case 16:
      return 16;
    default:
      return 0;
  }
}

// A Cast of a Cast's result: redundant, and a silent rounding when the middle type is
// narrower than both ends (float32 -> float16 -> float32).
void cast_chain(const RuleContext& rc, std::vector<RuleFinding>& out) {
  for (std::size_t pos = 0; pos < rc.ctx.nodes.size(); ++pos) {
    const auto& n = rc.node(pos);
    if (!is_cast(n) || !n.has_input(0)) continue;
    const auto p = rc.ctx.producer.find(n.inputs[0]);
    if (p == rc.ctx.producer.end() || !is_cast(rc.node(p->second))) continue;
    const auto& first = rc.node(p->second);
    int from = 0;
    if (first.has_input(0))
      if (auto t = rc.ctx.elem_types.find(first.inputs[0]); t != rc.ctx.elem_types.end())
        from = t->second;
    const auto mid = static_cast<int>(first.attr_int("to", 0));
    const auto to = static_cast<int>(n.attr_int("to", 0));
    auto& r = add(rc, out, "cast-chain", pos);
    r.tensor = n.inputs[0];
    r.types = {type_name(from), type_name(mid), type_name(to)};
    const bool narrows = float_bits(mid) && float_bits(mid) < float_bits(to) &&
                         (!from || float_bits(mid) < float_bits(from));
    r.count = narrows ? 1 : 0, r.total = 1;  // a rounding round trip: major
  }
}

// A node (a body node too) that receives a 16-bit floating type its ONNX schema (at the
// model's opset) does not accept, by the types shape inference gives every value, declared
// or not: the same schema facts convert keeps such nodes in float32 by.
void schema_type(const RuleContext& rc, std::vector<RuleFinding>& out) {
  if (rc.ctx.elem_types.empty()) return;
  for (std::size_t pos = 0; pos < rc.ctx.nodes.size(); ++pos) {
    const auto& n = rc.node(pos);
    if (!(n.domain.empty() || n.domain == "ai.onnx")) continue;
    const auto opset = rc.ctx.m.default_opset();
    const auto typing = model::op_typing(n.op_type, n.domain, opset);
    if (!typing.known) continue;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const auto t = n.has_input(i) ? rc.ctx.elem_types.find(n.inputs[i]) : rc.ctx.elem_types.end();
      if (t == rc.ctx.elem_types.end() || (t->second != 10 && t->second != 16)) continue;
      const auto& param = typing.input_param(i);
      if (param.empty() || !typing.allowed.count(param) || typing.allows(param, t->second))
        continue;
      auto& r = add(rc, out, "schema-type", pos);
      r.tensor = n.inputs[i];
      r.types = {type_name(t->second)};
      r.parameter = static_cast<double>(opset);
      r.count = 1, r.total = 1;  // a runtime refuses it or has no kernel: major
      break;
    }
  }
}

// Every initializer of `m`, subgraphs' too, by the key the diagnosis gives it: its name in
// the main graph, "<body prefix><name>" in a body (the prefix of the body's node paths).
std::map<std::string, const Tensor*> initializers_by_key(const model::Model& m) {
  std::map<std::string, const Tensor*> out;
  for (const auto& t : m.graph.initializers) out[t.name] = &t.tensor;
  exec::for_each_node(m.graph, "model",
                      [&](const model::Node& n, const std::string& path, const model::Graph&) {
                        for (const auto& a : n.attributes)
                          for (const model::Graph* g : model::subgraphs(a))
                            for (const auto& t : g->initializers)
                              out[path + "/" + a.name + "/" + t.name] = &t.tensor;
                      });
  return out;
}

// Initializers a converter clipped (bodies' too), against the reference model's ones of the
// same key: values at the converted tensor's largest |value| whose original was larger
// (clipped to +-max_finite_val), or (`floor`) at its smallest non-zero |value| whose
// original was smaller and not zero (raised to +-min_positive_val).
void clipped(const RuleContext& rc, std::vector<RuleFinding>& out, bool floor) {
  if (!rc.ctx.o.reference_model) return;
  const auto orig = initializers_by_key(*rc.ctx.o.reference_model);
  for (const auto& [key, tensor] : initializers_by_key(rc.ctx.m)) {
    const auto found = orig.find(key);
    if (found == orig.end()) continue;
    const Tensor& init = *tensor;
    const Tensor& original = *found->second;
    if (!exec::is_float(init.dtype()) || !exec::is_float(original.dtype()) ||
        original.size() != init.size() || init.size() == 0)
      continue;
    std::vector<double> c(init.size()), x(init.size());
    to_double(init, c);
    to_double(original, x);
    double edge = floor ? INFINITY : 0;
    for (double v : c)
      if (std::isfinite(v) && v != 0)
        edge = floor ? std::min(edge, std::fabs(v)) : std::max(edge, std::fabs(v));
    if (!std::isfinite(edge) || edge == 0) continue;
    const double tol = std::ldexp(1.0, -8);  // past rounding
    std::uint64_t count = 0;
    double worst = edge, part = 0, all = 0;
    for (std::size_t k = 0; k < c.size(); ++k) {
      const double a = std::fabs(x[k]);
      if (std::isfinite(a)) all += a * a;
      if (std::fabs(c[k]) != edge) continue;
      const bool hit = floor ? a > 0 && a < edge * (1 - tol) : a > edge * (1 + tol);
      if (!hit) continue;
      ++count, part += std::isfinite(a) ? a * a : 0;
      worst = floor ? std::min(worst, a) : std::max(worst, a);
    }
    if (!count) continue;
    RuleFinding r;
    r.id = floor ? "floored-initializer" : "clipped-initializer";
    r.node = key, r.op_type = "initializer", r.format = rc.f.name;
    r.count = count, r.total = c.size();
    r.parameter = edge, r.observed = worst;
    r.norm_share = all > 0 ? std::sqrt(part / all) : 0;
    out.push_back(std::move(r));
  }
}

void clipped_initializer(const RuleContext& rc, std::vector<RuleFinding>& out) {
  clipped(rc, out, false);
}
void floored_initializer(const RuleContext& rc, std::vector<RuleFinding>& out) {
  clipped(rc, out, true);
}

struct RuleRow {
  Rule rule;
  Check check;
};

const std::vector<RuleRow>& table() {
  static const std::vector<RuleRow> t = {
      {{"constant-overflow",
        "an initializer or Constant beyond the format's max becomes inf/NaN (or saturates) "
        "when weights are converted"},
       constant_overflow},
      {{"constant-underflow",
        "non-zero constants below half the smallest subnormal become 0 (an epsilon of 1e-8 "
        "is 0 in float16)"},
       constant_underflow},
      {{"pow",
        "Pow multiplies exponents: x^2 overflows from sqrt(max) on (256 in float16); "
        "fires within 2^8 of it"},
       pow_rule},
      {{"exp",
        "Exp overflows from ln(max) on (11.09 in float16) unless its input is "
        "max-subtracted"},
       exp_rule},
      {{"log", "Log of a value that flushed to zero is -inf"}, log_rule},
      {{"root-after-reduction",
        "Div/Reciprocal by (the Sqrt of) a reduction: a small variance flushes to zero and "
        "the result is inf"},
       root_after_reduction},
      {{"sum-of-squares", "ReduceSumSquare/ReduceL2 square before summing"}, sum_of_squares},
      {{"long-reduction",
        "a sum of 2^p or more terms can overflow though each fits, and stops growing when "
        "accumulated in the format"},
       long_reduction},
      {{"softmax-without-max", "a softmax without max-subtraction overflows for large logits"},
       softmax_without_max},
      {{"norm-as-primitives",
        "a LayerNorm/RMSNorm written as ReduceMean/Pow/Sqrt squares raw activations"},
       norm_as_primitives},
      {{"large-k",
        "MatMul/Gemm/Conv with a reduction depth of 2^p or more need float32 accumulation"},
       large_k},
      {{"large-range",
        "activations with |x| >= 2^(m-1) are spaced 0.5 or more apart (512 in float16)"},
       large_range},
      {{"cast-type", "a Cast whose `to` contradicts the type its output is declared with"},
       cast_type},
      {{"cast-chain",
        "a Cast of a Cast's result: redundant, and a silent rounding when the middle type is "
        "the narrowest"},
       cast_chain},
      {{"schema-type",
        "an op receives a 16-bit type its ONNX schema does not accept at the model's opset"},
       schema_type},
      {{"clipped-initializer",
        "with a reference model: initializer values a converter clipped to its largest "
        "value (max_finite_val)"},
       clipped_initializer},
      {{"floored-initializer",
        "with a reference model: small initializer values a converter raised to its "
        "smallest (min_positive_val)"},
       floored_initializer},
  };
  return t;
}

}  // namespace

const std::vector<Rule>& rules() {
  static const std::vector<Rule> r = [] {
    std::vector<Rule> out;
    for (const auto& row : table()) out.push_back(row.rule);
    return out;
  }();
  return r;
}

void check_rule_ids(const std::set<std::string>& ids_given) {
  for (const auto& id : ids_given)
    if (std::none_of(table().begin(), table().end(),
                     [&](const RuleRow& r) { return r.rule.id == id; })) {
      std::vector<std::string> ids;
      for (const auto& r : table()) ids.emplace_back(r.rule.id);
      std::string msg = "there is no rule '" + id + "'";
      if (auto hint = did_you_mean(id, ids); !hint.empty()) msg += "; did you mean '" + hint + "'?";
      throw Error::in_option("disabled_rules", id, msg);
    }
}

std::string_view to_string(Severity s) {
  return s == Severity::major ? "major" : "minor";
}

namespace {

// How far the observed values stay from the trouble (RuleFinding::margin_bits): the rules
// whose trouble is values flushing to zero measure how far they could shrink, the constant
// rules none (NaN), the others how far they could grow.
double margin_bits(const RuleFinding& r) {
  if (r.id == "constant-overflow" || r.id == "constant-underflow" || !r.types.empty() ||
      r.id == "clipped-initializer" || r.id == "floored-initializer")
    return std::numeric_limits<double>::quiet_NaN();
  if (r.id == "log" || r.id == "root-after-reduction") return std::log2(r.observed / r.limit);
  if (!(r.observed > 0)) return std::numeric_limits<double>::infinity();  // nothing seen
  return std::log2(r.limit / r.observed);
}

Severity severity(const RuleFinding& r) {
  const bool narrow = r.margin_bits < kRuleMarginBits;  // (false for NaN)
  const bool many =
      r.total > 0 && static_cast<double>(r.count) >= kRuleShare * static_cast<double>(r.total);
  return narrow || many || r.norm_share >= kRuleShare ? Severity::major : Severity::minor;
}

}  // namespace

void apply_rules(Context& ctx) {
  RuleContext rc{ctx, {}, ctx.o.precision};
  for (std::size_t pos = 0; pos < ctx.nodes.size(); ++pos)
    for (const auto& in : rc.node(pos).inputs)
      if (!in.empty()) rc.readers[in].push_back(pos);
  for (const auto& row : table())
    if (!ctx.o.disabled_rules.count(std::string(row.rule.id))) row.check(rc, ctx.diag.rules);
  for (auto& r : ctx.diag.rules) {
    r.margin_bits = margin_bits(r);
    r.severity = severity(r);
  }
}

}  // namespace fpguard::analysis
