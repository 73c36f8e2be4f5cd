// Node paths: every node of a model, subgraphs included, under the name check, plan,
// convert and policies know it by (exec::for_each_node).
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

// Walks `g` (its nodes prefixed by `prefix`), whose subgraphs see `outer` and its values.
template <class G, class F>
void walk(G& g, const std::string& prefix, std::vector<std::string> outer, const std::string& where,
          const F& f) {
  const auto order = model::topological_order(g, where, outer);
  for (const auto& v : g.inputs) outer.push_back(v.name);
  for (const auto& t : g.initializers) outer.push_back(t.name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) outer.push_back(o);
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    auto& n = g.nodes[order[pos]];
    const std::string path = prefix + display_name(n, pos);
    for (const auto& a : n.attributes)
      for (auto* sg : graphs_of<G>(a)) walk(*sg, path + "/" + a.name + "/", outer, where, f);
    f(n, path, g);
  }
}

}  // namespace

void for_each_node(const model::Graph& g, const std::string& where,
                   const std::function<void(const model::Node&, const std::string& path,
                                            const model::Graph& graph)>& f) {
  walk(g, "", {}, where, f);
}

void for_each_node(model::Graph& g, const std::string& where,
                   const std::function<void(model::Node&, const std::string& path)>& f) {
  walk(g, "", {}, where,
       [&](model::Node& n, const std::string& path, model::Graph&) { f(n, path); });
}

std::vector<std::string> node_paths(const model::Model& m) {
  std::vector<std::string> out;
  for_each_node(m.graph, m.path.string(),
                [&](const model::Node&, const std::string& path, const model::Graph&) {
                  out.push_back(path);
                });
  return out;
}

}  // namespace fpguard::exec
