// The rewrite layer: turns a plan into a real mixed-precision ONNX model. Nodes outside
// the float32 set run in float16 or bfloat16: their initializers are stored in that type,
// Cast nodes sit exactly at the boundaries between float32 and low-precision values (one
// per value and target type, shared by every reader), and what the ONNX schema of an op
// does not allow in the format stays float32. docs/convert.md has the rules.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "fpguard/format.hpp"
#include "fpguard/model.hpp"

namespace fpguard::rewrite {

struct ConvertOptions {
  Format precision = parse_format("float16");  // float16 or bfloat16
  std::set<std::string> keep_fp32;             // node names (unnamed: analysis::name_nodes)
  std::set<std::string> keep_fp32_ops;         // op types
  bool keep_io_types = false;                  // graph inputs/outputs keep float32 (Casts inside)
};

struct ConvertReport {
  std::size_t low_nodes = 0;   // floating compute nodes now in the format
  std::size_t fp32_nodes = 0;  // floating compute nodes left in float32
  std::size_t casts = 0;       // Cast nodes added
  std::size_t initializers_converted = 0;
  // Nodes left in float32 because their op has no kernel of the format in the ONNX
  // schema at the model's opset ("node (Op)"), and other things worth saying.
  std::vector<std::string> kept_by_spec;
  std::vector<std::string> warnings;
};

// The converted model (the input is not modified). Errors (a format other than float16
// or bfloat16, bfloat16 before opset 13, unknown node names) are fpguard::Error.
model::Model convert(const model::Model& m, const ConvertOptions& o, ConvertReport* report);

}  // namespace fpguard::rewrite
