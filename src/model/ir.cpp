// The IR's helpers and graph analyses: attribute getters, topological order, consumers,
// liveness.
#include <algorithm>
#include <queue>
#include <set>

#include "fpguard/error.hpp"
#include "fpguard/model.hpp"
#include "tensor/elem_types.hpp"

namespace fpguard::model {

const Attribute* Node::find_attr(const std::string& n) const {
  for (const auto& a : attributes)
    if (a.name == n) return &a;
  return nullptr;
}

std::string Node::describe() const {
  return "node '" + name + "' (" + (domain.empty() ? "" : domain + ".") + op_type + ")";
}

namespace {

template <class T>
const T& typed(const Node& n, const Attribute& a, const char* type) {
  if (const auto* v = std::get_if<T>(&a.value)) return *v;
  throw Error(n.describe(), "attribute '" + a.name + "' is not of type " + type);
}

}  // namespace

std::int64_t Node::attr_int(const std::string& n, std::int64_t def) const {
  const auto* a = find_attr(n);
  return a ? typed<std::int64_t>(*this, *a, "INT") : def;
}

float Node::attr_float(const std::string& n, float def) const {
  const auto* a = find_attr(n);
  if (!a) return def;
  // Some writers store integral values in FLOAT attributes as INT: accept both.
  if (const auto* i = std::get_if<std::int64_t>(&a->value)) return static_cast<float>(*i);
  return typed<float>(*this, *a, "FLOAT");
}

std::string Node::attr_string(const std::string& n, const std::string& def) const {
  const auto* a = find_attr(n);
  return a ? typed<std::string>(*this, *a, "STRING") : def;
}

std::vector<std::int64_t> Node::attr_ints(const std::string& n,
                                          const std::vector<std::int64_t>& def) const {
  const auto* a = find_attr(n);
  return a ? typed<std::vector<std::int64_t>>(*this, *a, "INTS") : def;
}

std::vector<float> Node::attr_floats(const std::string& n, const std::vector<float>& def) const {
  const auto* a = find_attr(n);
  return a ? typed<std::vector<float>>(*this, *a, "FLOATS") : def;
}

const Tensor* Node::attr_tensor(const std::string& n) const {
  const auto* a = find_attr(n);
  return a ? &typed<Tensor>(*this, *a, "TENSOR") : nullptr;
}

const NamedTensor* Graph::find_initializer(const std::string& n) const {
  for (const auto& t : initializers)
    if (t.name == n) return &t;
  return nullptr;
}

std::vector<const ValueInfo*> Graph::runtime_inputs() const {
  std::vector<const ValueInfo*> out;
  for (const auto& v : inputs)
    if (!find_initializer(v.name)) out.push_back(&v);
  return out;
}

std::int64_t Model::default_opset() const {
  auto it = opsets.find("");
  return it == opsets.end() ? 0 : it->second;
}

std::vector<std::string> outer_references(const Graph& g) {
  std::set<std::string> defined;
  for (const auto& v : g.inputs) defined.insert(v.name);
  for (const auto& t : g.initializers) defined.insert(t.name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) defined.insert(o);
  std::vector<std::string> out;
  std::set<std::string> seen;
  auto use = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) out.push_back(name);
  };
  for (const auto& n : g.nodes)
    for (const auto& r : node_reads(n)) use(r);
  for (const auto& o : g.outputs) use(o.name);
  return out;
}

void unshare_subgraphs(Graph& g) {
  for (auto& n : g.nodes)
    for (auto& a : n.attributes) {
      if (auto* sg = std::get_if<GraphPtr>(&a.value)) {
        *sg = std::make_shared<Graph>(**sg);
        unshare_subgraphs(**sg);
      }
      if (auto* sgs = std::get_if<std::vector<GraphPtr>>(&a.value))
        for (auto& sg : *sgs) {
          sg = std::make_shared<Graph>(*sg);
          unshare_subgraphs(*sg);
        }
    }
}

std::vector<const Graph*> subgraphs(const Attribute& a) {
  std::vector<const Graph*> out;
  if (const auto* sg = std::get_if<GraphPtr>(&a.value)) out.push_back(sg->get());
  if (const auto* sgs = std::get_if<std::vector<GraphPtr>>(&a.value))
    for (const auto& sg : *sgs) out.push_back(sg.get());
  return out;
}

std::vector<std::string> node_reads(const Node& n) {
  std::vector<std::string> out;
  for (const auto& i : n.inputs)
    if (!i.empty()) out.push_back(i);
  for (const auto& a : n.attributes)
    for (const Graph* g : subgraphs(a))
      for (auto& r : outer_references(*g))
        if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(std::move(r));
  return out;
}

std::vector<std::size_t> topological_order(const Graph& g, const std::string& where,
                                           const std::vector<std::string>& outer) {
  const std::size_t n = g.nodes.size();
  std::map<std::string, std::size_t> producer;
  for (std::size_t i = 0; i < n; ++i)
    for (const auto& o : g.nodes[i].outputs)
      if (!o.empty()) producer[o] = i;
  std::set<std::string> available(outer.begin(), outer.end());
  for (const auto& v : g.inputs) available.insert(v.name);
  for (const auto& t : g.initializers) available.insert(t.name);

  std::vector<std::size_t> pending(n, 0);
  std::vector<std::vector<std::size_t>> successors(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::set<std::size_t> deps;
    for (const auto& r : node_reads(g.nodes[i])) {
      auto it = producer.find(r);
      if (it != producer.end()) {
        deps.insert(it->second);
      } else if (!available.count(r)) {
        throw Error(where.empty() ? g.nodes[i].describe() : where + ": " + g.nodes[i].describe(),
                    "input '" + r +
                        "' is not produced by any node and is not a graph input or "
                        "initializer");
      }
    }
    pending[i] = deps.size();
    for (auto d : deps) successors[d].push_back(i);
  }
  // Kahn's algorithm with the smallest ready index first: file order when already sorted.
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<std::size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const auto i = ready.top();
    ready.pop();
    order.push_back(i);
    for (auto s : successors[i])
      if (--pending[s] == 0) ready.push(s);
  }
  if (order.size() != n) {
    for (std::size_t i = 0; i < n; ++i)
      if (pending[i] > 0)
        throw Error(where.empty() ? g.nodes[i].describe() : where + ": " + g.nodes[i].describe(),
                    "the graph has a cycle through this node");
  }
  return order;
}

std::map<std::string, std::vector<std::size_t>> consumers(const Graph& g) {
  std::map<std::string, std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& r : node_reads(g.nodes[i])) {
      auto& v = out[r];
      if (v.empty() || v.back() != i) v.push_back(i);
    }
  return out;
}

std::map<std::string, std::size_t> last_use(const Graph& g, const std::vector<std::size_t>& order) {
  std::set<std::string> outputs;
  for (const auto& o : g.outputs) outputs.insert(o.name);
  std::map<std::string, std::size_t> out;
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const auto& node = g.nodes[order[pos]];
    for (const auto& o : node.outputs)
      if (!o.empty() && !outputs.count(o)) out[o] = pos;
    for (const auto& r : node_reads(node))
      if (!outputs.count(r)) out[r] = pos;
  }
  return out;
}

const std::string& OpTyping::input_param(std::size_t i) const {
  static const std::string none;
  if (i < input_params.size()) return input_params[i];
  return inputs_variadic && !input_params.empty() ? input_params.back() : none;
}

const std::string& OpTyping::output_param(std::size_t i) const {
  static const std::string none;
  if (i < output_params.size()) return output_params[i];
  return outputs_variadic && !output_params.empty() ? output_params.back() : none;
}

bool OpTyping::allows(const std::string& param, int elem_type) const {
  auto it = allowed.find(param);
  return it != allowed.end() && it->second.count(elem_type);
}

std::optional<DType> dtype_of(int code) {
  const auto* t = detail::find_pb_type(code);
  return t ? t->dtype : std::nullopt;
}

int onnx_elem_type(DType d) {
  return detail::pb_type(d).code;
}

std::string onnx_type_name(int code) {
  const auto* t = detail::find_pb_type(code);
  return t ? std::string(t->name) : "type " + std::to_string(code);
}

}  // namespace fpguard::model
