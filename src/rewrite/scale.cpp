// Exact power-of-two scale rewriting (rewrite::find_scale / apply_scale). Scaling a value
// x by s = 2^-k changes every value computed from it by s^d, d its homogeneity degree in
// x, found by propagation: Mul adds degrees, Div subtracts, Pow(., e) multiplies by e,
// Sqrt halves, Reciprocal negates, MatMul/Conv add their operands', and the linear data
// movement and reductions keep them. An additive constant (the eps of a norm, a bias)
// next to a value of degree d is rescaled by 2^(-k d) so the function is unchanged. Where
// a value of degree d != 0 meets an op without a degree (Softmax, Exp, ...) or a graph
// output, it is multiplied back by 2^(k d). A value of degree 0 needs nothing: RMS
// normalisation x * rsqrt(mean(x^2) + eps) is of degree 0, so scaling its input needs no
// undo (and dividing its result by the scale would be a bug).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/rewrite.hpp"

namespace fpguard::rewrite {

namespace {

struct Analysis {
  const model::Model& m;
  std::map<std::string, double> deg;  // scaled values (degree != 0)
  std::set<std::string> constants;    // initializers and Constant outputs
  std::map<std::string, std::size_t> producer;
  std::vector<std::string> nodes;  // nodes that read a scaled value
  // (node index, input index, degree): an additive constant to rescale by 2^(-k d).
  std::vector<std::tuple<std::size_t, std::size_t, double>> rescale;
  // (node index, input index, degree): a scaled value read by an op without a degree.
  std::vector<std::tuple<std::size_t, std::size_t, double>> undo;
  std::string why_not;

  explicit Analysis(const model::Model& mm) : m(mm) {
    for (const auto& t : m.graph.initializers) constants.insert(t.name);
    for (std::size_t i = 0; i < m.graph.nodes.size(); ++i) {
      const auto& n = m.graph.nodes[i];
      for (const auto& o : n.outputs) producer[o] = i;
      if (n.op_type == "Constant" && !n.outputs.empty()) constants.insert(n.outputs[0]);
    }
  }

  std::optional<double> constant_scalar(const std::string& v) const {
    const Tensor* t = nullptr;
    if (const auto* init = m.graph.find_initializer(v)) t = &init->tensor;
    if (auto p = producer.find(v); !t && p != producer.end())
      t = m.graph.nodes[p->second].attr_tensor("value");
    if (!t || t->size() != 1) return std::nullopt;
    std::vector<double> x(1);
    to_double(*t, x);
    return x[0];
  }

  // The output degree of node i, or nullopt when it has none (then its scaled inputs are
  // undone). Records constants to rescale.
  std::optional<double> degree_of(std::size_t i) {
    const auto& n = m.graph.nodes[i];
    auto d = [&](std::size_t k) -> std::optional<double> {  // degree of input k
      if (!n.has_input(k)) return 0.0;
      auto it = deg.find(n.inputs[k]);
      return it == deg.end() ? 0.0 : it->second;
    };
    auto scaled = [&](std::size_t k) { return n.has_input(k) && deg.count(n.inputs[k]); };
    const exec::OpTraits* traits = exec::Registry::traits(n);
    if (!traits) return std::nullopt;
    // The inputs from `first` on share one degree; constant ones are rescaled to it.
    auto shared = [&](std::size_t first, bool rescale_constants) -> std::optional<double> {
      std::optional<double> common;
      for (std::size_t k = first; k < n.inputs.size(); ++k)
        if (scaled(k)) {
          if (common && *common != *d(k)) return std::nullopt;
          common = d(k);
        }
      for (std::size_t k = first; k < n.inputs.size(); ++k)
        if (n.has_input(k) && !scaled(k)) {
          if (!constants.count(n.inputs[k])) return std::nullopt;  // another activation
          if (rescale_constants) rescale.emplace_back(i, k, *common);
        }
      return common;
    };
    switch (traits->degree) {
      case exec::Degree::none:
        return std::nullopt;
      case exec::Degree::same:
        for (std::size_t k = 1; k < n.inputs.size(); ++k)
          if (scaled(k)) return std::nullopt;  // shapes/indices derived from x
        return d(0);
      case exec::Degree::additive:
        return shared(0, true);
      case exec::Degree::selected:
        if (scaled(0)) return std::nullopt;
        return shared(1, true);
      case exec::Degree::product: {
        const double out = *d(0) + *d(1);
        if (n.has_input(2) && out != 0) {  // the bias is added: a constant to rescale
          if (scaled(2) || !constants.count(n.inputs[2])) return std::nullopt;
          rescale.emplace_back(i, 2, out);
        }
        return out;
      }
      case exec::Degree::quotient:
        return *d(0) - *d(1);
      case exec::Degree::half:
        return *d(0) / 2;
      case exec::Degree::negated:
        return -*d(0);
      case exec::Degree::doubled:
        return 2 * *d(0);
      case exec::Degree::power: {
        if (scaled(1)) return std::nullopt;
        const auto e = n.has_input(1) ? constant_scalar(n.inputs[1]) : std::nullopt;
        if (!e) return std::nullopt;
        return *e * *d(0);
      }
      case exec::Degree::clipped:
        if (scaled(1) || scaled(2)) return std::nullopt;
        for (std::size_t k = 1; k < 3; ++k)
          if (n.has_input(k)) rescale.emplace_back(i, k, *d(0));
        return d(0);
    }
    return std::nullopt;
  }

  bool run(const std::string& x) {
    if (!producer.count(x) && !m.graph.find_initializer(x)) {
      bool input = false;
      for (const auto& v : m.graph.inputs) input = input || v.name == x;
      if (!input) {
        why_not = "no value named '" + x + "'";
        return false;
      }
    }
    deg[x] = 1;
    for (const auto i : model::topological_order(m.graph, m.path.string())) {
      const auto& n = m.graph.nodes[i];
      bool reads = false;
      for (const auto& in : n.inputs) reads = reads || (!in.empty() && deg.count(in));
      if (!reads) continue;
      for (const auto& a : n.attributes)
        if (std::holds_alternative<model::GraphPtr>(a.value) ||
            std::holds_alternative<std::vector<model::GraphPtr>>(a.value)) {
          why_not = "a subgraph reads a scaled value";
          return false;
        }
      nodes.push_back(n.name);
      const auto out = degree_of(i);
      if (!out) {
        for (std::size_t k = 0; k < n.inputs.size(); ++k)
          if (!n.inputs[k].empty() && deg.count(n.inputs[k]))
            undo.emplace_back(i, k, deg[n.inputs[k]]);
        continue;
      }
      if (*out != 0)
        for (const auto& o : n.outputs)
          if (!o.empty()) deg[o] = *out;
    }
    return true;
  }
};

}  // namespace

std::optional<ScaleRewrite> find_scale(const model::Model& m, const std::string& value,
                                       const std::map<std::string, double>& absmax, const Format& f,
                                       std::string* why_not, std::optional<int> fixed_k) {
  Analysis a(m);
  auto fail = [&](const std::string& why) -> std::optional<ScaleRewrite> {
    if (why_not) *why_not = why;
    return std::nullopt;
  };
  if (!a.run(value)) return fail(a.why_not);
  // k: the values of positive degree must drop to half the format's max, those of
  // negative degree must not rise past it, and k d must be an integer everywhere (the
  // factors are powers of two).
  double kmin = 1, kmax = 64;
  std::set<double> degrees;
  for (const auto& [v, d] : a.deg) {
    degrees.insert(d);
    auto it = absmax.find(v);
    if (it == absmax.end() || !(it->second > 0)) continue;
    const double room = std::log2(0.5 * f.max() / it->second);  // < 0: must shrink
    if (d > 0) kmin = std::max(kmin, -room / d);
    if (d < 0) kmax = std::min(kmax, room / -d);
  }
  for (const auto& [i, k, d] : a.rescale) degrees.insert(d);
  for (const auto& [i, k, d] : a.undo) degrees.insert(d);
  if (fixed_k) kmin = kmax = *fixed_k;
  for (int k = static_cast<int>(std::ceil(kmin - 1e-9)); k <= kmax; ++k) {
    const bool integral = std::all_of(degrees.begin(), degrees.end(), [&](double d) {
      return std::fabs(k * d - std::round(k * d)) < 1e-9;
    });
    if (!integral) continue;
    ScaleRewrite s;
    s.value = value;
    s.k = k;
    s.nodes = a.nodes;
    for (const auto& [i, in, d] : a.rescale)
      s.rescale.push_back({m.graph.nodes[i].name, in, static_cast<int>(std::lround(-k * d))});
    for (const auto& [i, in, d] : a.undo)
      s.undo.push_back({m.graph.nodes[i].name, in, static_cast<int>(std::lround(k * d))});
    for (const auto& o : m.graph.outputs)
      if (auto it = a.deg.find(o.name); it != a.deg.end())
        s.output_undo.push_back({o.name, static_cast<int>(std::lround(k * it->second))});
    return s;
  }
  return fail(
      fmt::format("no power of two fits: the subgraph from '{}' needs k >= {:.2f} and "
                  "k <= {:.2f}",
                  value, kmin, kmax));
}

namespace {

// The rewrite of one ScaleRewrite into a copy of the model: the Mul nodes and power-of-two
// initializers it adds, under names no other value or node has.
class ScaleWriter {
 public:
  ScaleWriter(const model::Model& m, const ScaleRewrite& s) : m_(m), s_(s), out_(m) {
    const auto& g = out_.graph;
    for (const auto& n : g.nodes) {
      names_.insert(n.name);
      names_.insert(n.outputs.begin(), n.outputs.end());
      names_.insert(n.inputs.begin(), n.inputs.end());
    }
    for (const auto& t : g.initializers) names_.insert(t.name);
    for (std::size_t i = 0; i < g.nodes.size(); ++i) index_[g.nodes[i].name] = i;
  }

  model::Model write() && {
    const std::string scaled = scale_readers();
    undo_readers(scaled);
    rescale_constants();
    std::vector<model::Node> tail = undo_outputs();
    auto& g = out_.graph;
    std::vector<model::Node> nodes;
    for (auto& n : g.nodes) {
      if (auto it = before_.find(n.name); it != before_.end())
        for (auto& b : it->second) nodes.push_back(std::move(b));
      nodes.push_back(std::move(n));
    }
    for (auto& t : tail) nodes.push_back(std::move(t));
    g.nodes = std::move(nodes);
    return std::move(out_);
  }

 private:
  std::string unique(const std::string& base) {
    std::string x = base;
    for (int i = 1; names_.count(x); ++i) x = base + "_" + std::to_string(i);
    names_.insert(x);
    return x;
  }

  std::string pow2(int e) {
    const std::string name = unique(fmt::format("fpguard_pow2_{}", e));
    Tensor t(DType::float32, {});
    t.data<float>()[0] = std::ldexp(1.0f, e);
    out_.graph.initializers.push_back({name, std::move(t)});
    return name;
  }

  // `in` * 2^e, written `name`.
  model::Node mul(const std::string& in, int e, const std::string& name, const std::string& out) {
    model::Node n;
    n.name = name;
    n.op_type = "Mul";
    n.inputs = {in, pow2(e)};
    n.outputs = {out};
    return n;
  }
  model::Node mul(const std::string& in, int e, const std::string& hint) {
    const std::string name = unique(hint);
    return mul(in, e, name, unique(in + "_x2^" + std::to_string(e)));
  }

  // x * 2^-k, read by every node of the subgraph that reads x (not by the undo points);
  // returns its name.
  std::string scale_readers() {
    const std::set<std::string> inside(s_.nodes.begin(), s_.nodes.end());
    model::Node scale = mul(s_.value, -s_.k, s_.value + "_scale");
    const std::string scaled = scale.outputs[0];
    std::set<std::pair<std::string, std::size_t>> undone;
    for (const auto& u : s_.undo) undone.insert({u.node, u.input});
    std::string first;
    for (auto& n : out_.graph.nodes)
      if (inside.count(n.name))
        for (std::size_t k = 0; k < n.inputs.size(); ++k)
          if (n.inputs[k] == s_.value && !undone.count({n.name, k})) {
            if (first.empty()) first = n.name;
            n.inputs[k] = scaled;
          }
    if (!first.empty()) before_[first].push_back(std::move(scale));
    return scaled;
  }

  // Readers without a degree get the value multiplied back (x itself: the original).
  void undo_readers(const std::string& scaled) {
    for (const auto& u : s_.undo) {
      auto& n = out_.graph.nodes[index_.at(u.node)];
      if (n.inputs[u.input] == scaled || n.inputs[u.input] == s_.value) {
        n.inputs[u.input] = s_.value;
        continue;
      }
      model::Node back = mul(n.inputs[u.input], u.exponent, n.name + "_unscale");
      n.inputs[u.input] = back.outputs[0];
      before_[n.name].push_back(std::move(back));
    }
  }

  // Additive constants rescaled: a new initializer each (others may read the original).
  void rescale_constants() {
    for (const auto& r : s_.rescale) {
      auto& n = out_.graph.nodes[index_.at(r.node)];
      const std::string& c = n.inputs[r.input];
      const Tensor* t = nullptr;
      if (const auto* init = m_.graph.find_initializer(c)) t = &init->tensor;
      for (const auto& p : m_.graph.nodes)
        if (!t && p.op_type == "Constant" && !p.outputs.empty() && p.outputs[0] == c)
          t = p.attr_tensor("value");
      if (!t) throw Error(m_.path.string(), "constant '" + c + "' not found");
      Tensor scaled = *t;
      if (scaled.dtype() == DType::float32)
        for (auto& v : scaled.data<float>()) v = std::ldexp(v, r.exponent);
      else if (scaled.dtype() == DType::float64)
        for (auto& v : scaled.data<double>()) v = std::ldexp(v, r.exponent);
      else
        throw Error(m_.path.string(), "constant '" + c + "' is not float32/float64");
      const std::string name = unique(c + "_x2^" + std::to_string(r.exponent));
      out_.graph.initializers.push_back({name, std::move(scaled)});
      n.inputs[r.input] = name;
    }
  }

  // Graph outputs of nonzero degree: computed scaled, multiplied back under their name.
  std::vector<model::Node> undo_outputs() {
    std::vector<model::Node> tail;
    for (const auto& [o, e] : s_.output_undo) {
      const std::string inner = unique(o + "_scaled");
      for (auto& n : out_.graph.nodes) {
        for (auto& x : n.outputs)
          if (x == o) x = inner;
        for (auto& x : n.inputs)
          if (x == o) x = inner;
      }
      tail.push_back(mul(inner, e, unique(o + "_unscale"), o));
    }
    return tail;
  }

  const model::Model& m_;
  const ScaleRewrite& s_;
  model::Model out_;
  std::set<std::string> names_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::vector<model::Node>> before_;  // Muls, by the node they precede
};

}  // namespace

model::Model apply_scale(const model::Model& m, const ScaleRewrite& s) {
  return ScaleWriter(m, s).write();
}

}  // namespace fpguard::rewrite

namespace fpguard::rewrite {

decltype(analysis::PlanOptions::scaler) exact_scaler(const Format& f) {
  return [f](const model::Model& m, const std::string& value,
             const std::map<std::string, double>& absmax,
             std::string* why) -> std::optional<std::pair<model::Model, analysis::Scaled>> {
    const auto s = find_scale(m, value, absmax, f, why);
    if (!s) return std::nullopt;
    return std::make_pair(apply_scale(m, *s), analysis::Scaled{"", value, s->k});
  };
}

}  // namespace fpguard::rewrite
