#include "annotate.hpp"

#include "fpguard/error.hpp"
#include "fpguard/report.hpp"

namespace fpguard::cli {

std::vector<std::string> node_names(const model::Model& m) {
  std::vector<std::string> names;
  names.reserve(m.graph.nodes.size());
  for (const auto& n : m.graph.nodes) names.push_back(n.name);
  return names;
}

void write_annotated(model::Model& m, const std::vector<std::string>& original_names,
                     const std::string& out, const analysis::Diagnosis& d,
                     const analysis::Plan* plan) {
  report::annotate_in_place(m, d, plan);
  FPG_CHECK(original_names.size() == m.graph.nodes.size());
  for (std::size_t i = 0; i < original_names.size(); ++i) m.graph.nodes[i].name = original_names[i];
  try {
    model::save(m, out);
  } catch (const Error& e) {
    throw Error(kAnnotateFlag, e.what());
  }
}

}  // namespace fpguard::cli
