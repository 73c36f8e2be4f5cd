// Netron annotations: each node's findings written into the model itself (a body node's on
// the node inside its subgraph), as NodeProto.metadata_props ("fpguard.*" keys, numbers in
// report::num) and a few lines of its doc_string, so that clicking a node shows them.
// Nothing the runtime reads changes.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/report.hpp"
#include "node_numbers.hpp"

namespace fpguard::report {

namespace {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// What one node gets: metadata in the order written, and the doc_string lines.
struct Notes {
  Metadata meta;
  std::vector<std::string> lines;
  std::vector<std::string> origins;  // "overflow (computes)" ...
  void set(const std::string& key, std::string value) {
    meta.emplace_back(std::string(kAnnotationPrefix) + key, std::move(value));
  }
};

bool ours(const std::string& key) {
  return key.rfind(kAnnotationPrefix, 0) == 0;
}

// The node's own doc_string without an earlier annotation (a second annotate replaces
// the first instead of stacking).
std::string own_doc(const std::string& doc) {
  if (doc.rfind(kAnnotationMarker, 0) == 0) return "";
  const auto at = doc.find(std::string("\n\n").append(kAnnotationMarker));
  return at == std::string::npos ? doc : doc.substr(0, at);
}

void add_numbers(const analysis::NodeRecord& r, const std::string& format, Notes& n) {
  n.set("precision", r.precision);
  const detail::NodeNumbers x = detail::node_numbers(r);
  if (!x.floating) {
    n.lines.push_back(
        fmt::format("{} check in {}: no floating-point output", kAnnotationMarker, format));
    return;
  }
  // Errors as the check's tables show them: n/a where nothing was finite in both runs.
  n.set("damage", detail::damage_cell(x.damage));
  n.set("headroom_bits", num(x.headroom));
  n.set("overflow_local", std::to_string(x.local_overflow));
  n.set("overflow_propagated", std::to_string(x.propagated_overflow));
  n.set("local_error", num_na(x.local));
  n.set("propagated_error", num_na(x.propagated));
  n.lines.push_back(fmt::format(
      "{} check in {}: ran in {}; damage to the outputs {}; headroom {} bits; inf/NaN values "
      "{} local (its own), {} propagated (with what it inherits); relative RMS error {} local, "
      "{} propagated",
      kAnnotationMarker, format, r.precision, detail::damage_cell(x.damage), num(x.headroom),
      x.local_overflow, x.propagated_overflow, num_na(x.local), num_na(x.propagated)));
}

// Every node of `m` (subgraphs included) by the name a diagnosis knows it by (a body node
// by its path); a diagnosis of another model is refused.
std::map<std::string, model::Node*> locate(model::Model& m, const analysis::Diagnosis& d) {
  std::map<std::string, model::Node*> out;
  exec::for_each_node(m.graph, m.path.string(),
                      [&](model::Node& n, const std::string& path) { out.emplace(path, &n); });
  for (const auto& r : d.nodes)
    if (!out.count(r.name))
      throw Error(m.path.string(),
                  "the diagnosis names node '" + r.name + "', which this model does not have");
  return out;
}

// Origins go on their node; a value's (initializer, graph input) on the nodes reading it
// (`keys`: exec::value_keys), body nodes reading it from an enclosing graph included.
void add_origins(const analysis::Diagnosis& d, const std::map<std::string, model::Node*>& nodes,
                 const std::map<std::string, exec::NodeKeys>& keys,
                 std::map<std::string, Notes>& notes) {
  for (const auto& o : d.origins) {
    std::vector<std::string> targets;
    std::string tag =
        fmt::format("{} ({})", analysis::to_string(o.kind), analysis::to_string(o.cause));
    if (nodes.count(o.node)) {
      targets.push_back(o.node);
    } else {
      tag = fmt::format("{} ({} '{}')", analysis::to_string(o.kind), analysis::to_string(o.cause),
                        o.node);
      for (const auto& [path, k] : keys)
        if (std::find(k.inputs.begin(), k.inputs.end(), o.node) != k.inputs.end())
          targets.push_back(path);
    }
    for (const auto& t : targets) {
      notes[t].origins.push_back(tag);
      notes[t].lines.push_back("origin: " + describe(o));
      for (const auto& f : o.fixes) notes[t].lines.push_back("fix: " + describe(f));
    }
  }
}

std::string plan_value(const analysis::Plan& p, const analysis::NodeRecord& r) {
  if (auto it = p.reasons.find(r.name); it != p.reasons.end())
    return "float32: " + describe(it->second, p.precision);
  if (std::find(p.fp32_nodes.begin(), p.fp32_nodes.end(), r.name) != p.fp32_nodes.end())
    return "float32";
  if (r.precision == "none") return "none";
  for (const auto& s : p.scaled)
    if (s.node == r.name)
      return fmt::format("{}, after scaling '{}' by 2^-{}", p.precision, s.value, s.k);
  return p.precision;
}

void write_notes(model::Node& node, const Notes& n) {
  std::erase_if(node.metadata, [](const auto& kv) { return ours(kv.first); });
  node.metadata.insert(node.metadata.end(), n.meta.begin(), n.meta.end());
  std::string doc = own_doc(node.doc_string);
  for (std::size_t i = 0; i < n.lines.size(); ++i)
    doc += (i == 0 ? (doc.empty() ? "" : "\n\n") : "\n") + n.lines[i];
  node.doc_string = std::move(doc);
}

void annotate_model_metadata(model::Model& m, const analysis::Diagnosis& d,
                             const analysis::Plan* plan) {
  std::erase_if(m.metadata, [](const auto& kv) { return ours(kv.first); });
  auto set = [&](const char* key, std::string v) {
    m.metadata.emplace_back(std::string(kAnnotationPrefix) + key, std::move(v));
  };
  set("precision", d.precision);
  set("verdict", d.pass ? "pass" : "fail");
  if (plan)
    set("plan", fmt::format("{} of {} floating compute nodes in float32; {}",
                            plan->fp32_nodes.size(), plan->float_nodes,
                            plan->meets ? "meets the tolerance" : "does not meet the tolerance"));
}

}  // namespace

void annotate_in_place(model::Model& m, const analysis::Diagnosis& d, const analysis::Plan* plan) {
  model::unshare_subgraphs(m.graph);  // body nodes are written in this model only
  const auto nodes = locate(m, d);
  std::map<std::string, Notes> notes;
  for (const auto& r : d.nodes) add_numbers(r, d.precision, notes[r.name]);
  add_origins(d, nodes, exec::value_keys(m), notes);
  for (auto& [path, n] : notes) {
    std::string joined;
    for (const auto& o : n.origins) joined += (joined.empty() ? "" : "; ") + o;
    if (!joined.empty()) n.set("origin", joined);
  }
  if (plan)
    for (const auto& r : d.nodes) {
      auto& n = notes[r.name];
      n.set("plan", plan_value(*plan, r));
      n.lines.push_back("plan: " + n.meta.back().second);
    }
  for (const auto& [path, n] : notes) write_notes(*nodes.at(path), n);
  annotate_model_metadata(m, d, plan);
}

model::Model annotate(const model::Model& m, const analysis::Diagnosis& d,
                      const analysis::Plan* plan) {
  model::Model out = m;
  annotate_in_place(out, d, plan);
  return out;
}

}  // namespace fpguard::report
