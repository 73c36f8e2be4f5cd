// --annotate OUT.onnx of `check` and `plan`: the model written back with each node's
// findings for Netron (report::annotate), as the user's file was: nodes the CLI named
// for its own use (analysis::name_nodes) get their empty names back.
#pragma once

#include <string>
#include <vector>

#include "fpguard/analysis.hpp"
#include "fpguard/model.hpp"

namespace fpguard::cli {

inline constexpr const char* kAnnotateFlag = "--annotate";

// The node names as loaded, before name_nodes.
std::vector<std::string> node_names(const model::Model& m);
// Annotates `m` (named by name_nodes) in place, restores `original_names` and saves it to
// `out` atomically; an Error names --annotate.
void write_annotated(model::Model& m, const std::vector<std::string>& original_names,
                     const std::string& out, const analysis::Diagnosis& d,
                     const analysis::Plan* plan = nullptr);

}  // namespace fpguard::cli
