// The rewrite layer: turns a plan into a real mixed-precision ONNX model. Nodes outside
// the float32 set run in float16 or bfloat16: their initializers are stored in that type,
// Cast nodes sit exactly at the boundaries between float32 and low-precision values (one
// per value and target type, shared by every reader), and what the ONNX schema of an op
// does not allow in the format stays float32. docs/convert.md has the rules.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fpguard/analysis.hpp"
#include "fpguard/format.hpp"
#include "fpguard/model.hpp"

namespace fpguard::rewrite {

// The formats convert writes (ONNX computes in no other low-precision format; FP8 and
// smaller formats are deployed through quantization tools instead).
inline constexpr std::array<std::string_view, 2> kConvertFormats{"float16", "bfloat16"};
bool can_convert(const Format& f);
// A plan for `precision` (a format's name, scalar or scaled) that convert cannot write:
// Error(where, why: a scaled format ONNX has no types for, or a scalar one it has no
// arithmetic in). Returns when convert writes it.
void require_convertible_plan(const std::string& where, const std::string& precision);

struct ConvertOptions {
  Format precision = parse_format("float16");  // one of kConvertFormats
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

// ---- exact power-of-two scaling -----------------------------------------------------
// Multiplying `value` by 2^-k, and what that takes to keep the model's function: the
// nodes that then compute scaled values, the additive constants rescaled by 2^exponent,
// the readers without a homogeneity degree that get the value multiplied back by
// 2^exponent, and the graph outputs multiplied back. Every factor is a power of two, so
// in float32 the rewritten model differs from the original only by where rounding falls.
struct ScaleRewrite {
  struct Point {
    std::string node;
    std::size_t input = 0;
    int exponent = 0;
  };
  std::string value;
  int k = 0;
  std::vector<std::string> nodes;
  std::vector<Point> rescale, undo;
  std::vector<std::pair<std::string, int>> output_undo;
};

// The rewrite that scales `value` so that every value computed from it with a positive
// degree stays within half of f's max (reference |value| maxima in `absmax`), with the
// smallest such k; nullopt (and why in *why_not) when none exists. With `fixed_k`, that
// k (replaying a plan), if the degrees allow it.
std::optional<ScaleRewrite> find_scale(const model::Model& m, const std::string& value,
                                       const std::map<std::string, double>& absmax, const Format& f,
                                       std::string* why_not = nullptr,
                                       std::optional<int> fixed_k = std::nullopt);
// The rewritten model: a Mul by 2^-k where the subgraph reads `value`, Muls back at the
// undo points, rescaled constants as new initializers.
model::Model apply_scale(const model::Model& m, const ScaleRewrite& s);

// ---- verification ---------------------------------------------------------------------
// One graph output of a converted model against the float32 original on the same inputs.
struct Verified {
  std::string output{};
  double cosine = 1, max_abs_error = 0;
  std::uint64_t nonfinite = 0;  // non-finite where the original is finite
  bool mismatch = false;        // a value of another kind or length (sequences, optionals)
  bool pass = true;             // none of these and cosine >= min_cosine
};
// Runs `original` on `sample` and `converted` on it converted to its declared input types,
// and compares each output with floating values (check's criterion, in float32; a
// sequence's elements together, and one whose kind or length differs fails), in graph
// order.
std::vector<Verified> verify(const model::Model& original, const model::Model& converted,
                             const std::vector<NamedValue>& sample, double min_cosine, int threads);

// ---- plans ----------------------------------------------------------------------------
// What convert does with a plan (analysis::PlanFile, plan.json read back) on `m`, whose
// unnamed nodes carry analysis::name_nodes' names as they did when it was planned: the
// model with the plan's exact scale rewrites applied in order (their nodes are named in
// fp32_nodes), and o.keep_fp32 extended by its fp32_nodes. Errors name `where` (the plan),
// and `model_name` for a node the model lacks (a plan for another model).
model::Model apply_plan(const model::Model& m, const analysis::PlanFile& plan, ConvertOptions& o,
                        const std::string& where, const std::string& model_name);

// The planner's scale rewrites (analysis::PlanOptions::scaler) for format `f`: find_scale
// and apply_scale (the analysis layer does not depend on this one).
decltype(analysis::PlanOptions::scaler) exact_scaler(const Format& f);

// The planner's Cast count (analysis::PlanOptions::count_casts): the Cast nodes convert adds
// with keep_io_types, keeping the check options' keep_fp32 and keep_fp32_ops, in their
// precision (float16's placement for a format convert does not write, or for bfloat16
// before opset 13).
decltype(analysis::PlanOptions::count_casts) cast_counter();

}  // namespace fpguard::rewrite
