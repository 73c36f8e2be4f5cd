// Node paths: every node of a model, subgraphs included, under the name check, plan,
// convert and policies know it by (exec::for_each_node).
#include <map>

#include "fpguard/exec.hpp"

namespace fpguard::exec {

namespace {

// The graphs of a body-carrying attribute (one, or a list).
template <class G>
std::vector<G*> graphs_of(const model::Attribute& a) {
  std::vector<G*> out;
  if (const auto* sg = std::get_if<model::GraphPtr>(&a.value)) out.push_back(sg->get());
  if (const auto* sgs = std::get_if<std::vector<model::GraphPtr>>(&a.value))
    for (const auto& sg : *sgs) out.push_back(sg.get());
  return out;
}

// Walks `g` (its nodes prefixed by `prefix`) inside `outer`; each node is shown with the
// scope of its graph.
template <class G, class F>
void walk(G& g, const std::string& prefix, const ValueScope& outer, const std::string& where,
          const F& f) {
  const auto order = model::topological_order(g, where, outer.names());
  const ValueScope scope = outer.inner(g, prefix);
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    auto& n = g.nodes[order[pos]];
    const std::string path = prefix + display_name(n, pos);
    for (const auto& a : n.attributes)
      for (auto* sg : graphs_of<G>(a)) walk(*sg, path + "/" + a.name + "/", scope, where, f);
    f(n, path, g, scope);
  }
}

}  // namespace

void for_each_node(const model::Graph& g, const std::string& where,
                   const std::function<void(const model::Node&, const std::string& path,
                                            const model::Graph& graph)>& f) {
  walk(g, "", {}, where,
       [&](const model::Node& n, const std::string& path, const model::Graph& graph,
           const ValueScope&) { f(n, path, graph); });
}

void for_each_node(model::Graph& g, const std::string& where,
                   const std::function<void(model::Node&, const std::string& path)>& f) {
  walk(g, "", {}, where,
       [&](model::Node& n, const std::string& path, model::Graph&, const ValueScope&) {
         f(n, path);
       });
}

std::vector<std::string> node_paths(const model::Model& m) {
  std::vector<std::string> out;
  for_each_node(m.graph, m.path.string(),
                [&](const model::Node&, const std::string& path, const model::Graph&) {
                  out.push_back(path);
                });
  return out;
}

std::map<std::string, NodeKeys> value_keys(const model::Model& m) {
  std::map<std::string, NodeKeys> out;
  auto of = [](const ValueScope& scope, const std::string& v) {
    return v.empty() ? v : scope.key(v);
  };
  walk(m.graph, "", {}, m.path.string(),
       [&](const model::Node& n, const std::string& path, const model::Graph&,
           const ValueScope& scope) {
         auto& k = out[path];
         for (const auto& v : n.inputs) k.inputs.push_back(of(scope, v));
         for (const auto& v : n.outputs) k.outputs.push_back(of(scope, v));
       });
  return out;
}

ValueScope ValueScope::inner(const model::Graph& g, const std::string& prefix) const {
  ValueScope s = *this;
  auto own = [&](const std::string& v) { s.keys_[v] = prefix + v; };
  for (const auto& v : g.inputs) own(v.name);
  for (const auto& t : g.initializers) own(t.name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) own(o);
  return s;
}

std::string ValueScope::key(const std::string& name) const {
  const auto k = keys_.find(name);
  return k == keys_.end() ? name : k->second;
}

std::vector<std::string> ValueScope::names() const {
  std::vector<std::string> out;
  out.reserve(keys_.size());
  for (const auto& [name, key] : keys_) out.push_back(name);
  return out;
}

}  // namespace fpguard::exec
