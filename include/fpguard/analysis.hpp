// The analysis layer: `fpguard check`. Runs a model in lockstep, node by node: the
// reference (float32, as the user runs it today), the emulated model (a
// PrecisionPolicy), and the local run (each node in its emulated format fed with the
// reference inputs, which isolates the error a node adds from the error it inherits).
// Only numbers are kept per tensor. From them it names the origins of trouble (the node
// where an overflow, a NaN or an accuracy loss starts, not its downstream symptoms),
// applies the static risk rules, and decides pass/fail per graph output. The result is
// a Diagnosis of plain structs that the CLI renders as text or JSON.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fpguard/exec.hpp"
#include "fpguard/format.hpp"
#include "fpguard/inputs.hpp"
#include "fpguard/model.hpp"
#include "fpguard/stats.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::analysis {

// Adds the double-double b_hi + b_lo to hi + lo (TwoSum, renormalised: hi stays the sum
// rounded to double). Sums kept so merge in any order to within 2^-100 relative.
void add_double_double(double& hi, double& lo, double b_hi, double b_lo);

// One tensor of a run compared with the reference tensor, element by element. Counts
// are over elements whose reference is finite. Errors are over elements finite in both.
struct Comparison {
  std::uint64_t count = 0;  // elements compared (reference finite)
  // Finite reference, and inf, a saturated value, or NaN from a reference beyond the
  // format's max (formats without inf).
  std::uint64_t overflow = 0;
  std::uint64_t nan = 0;        // other NaN where the reference is finite
  std::uint64_t underflow = 0;  // non-zero reference, zero value
  std::uint64_t subnormal = 0;  // a non-zero subnormal of the format
  double max_abs = 0;
  double max_rel = 0;  // |v - r| / max(|r|, tiny of the format)
  // |v - r| / max(|r|, floor), the floor max(2^-10 absmax(r), tiny): the error against the
  // tensor's scale. Measured only when asked for (compare(..., scaled)); 0 otherwise.
  double max_scaled = 0;
  double sum_rel = 0;  // for mean_rel
  // Sums for the cosine similarity and the signal-to-noise ratio.
  double dot = 0, vv = 0, rr = 0, dd = 0;
  std::uint64_t finite = 0;  // elements finite in both
  // The five sums are double-doubles: the field above plus its compensation here (what
  // rounding left out when comparisons were merged), so that merging per-sample or
  // per-shard comparisons in any order gives the same sums to within 2^-100 relative.
  // The fields above are always the sums rounded to double (|lo| <= half an ulp).
  struct Low {
    double rel = 0, dot = 0, vv = 0, rr = 0, dd = 0;
  } lo{};

  double mean_rel() const { return finite ? sum_rel / static_cast<double>(finite) : 0; }
  // 1 when both are all zero; 0 when exactly one is; NaN when no element is finite in
  // both.
  double cosine() const;
  // 10 log10(sum r^2 / sum (v - r)^2); +inf when equal.
  double snr_db() const;
  // sqrt(sum (v - r)^2 / sum r^2): the relative RMS error (0 when equal).
  double nrmse() const;
  void merge(const Comparison& o);
  // The check's pass criterion: nothing went non-finite where the reference is finite, and
  // the cosine is at least `min_cosine`.
  bool meets(double min_cosine) const { return overflow + nan == 0 && cosine() >= min_cosine; }
};

// The scale-relative error's floor is 2^-kScaleFloorBits of the reference's absmax.
inline constexpr int kScaleFloorBits = 10;

// Compares `v` with the reference `r` (same size, float32 carriers) in format `f`
// (tiny, max and the subnormal range come from it). With `scaled`, also max_scaled (r's
// absmax is found first: one more pass over r).
Comparison compare(std::span<const float> r, std::span<const float> v, const Format& f,
                   bool scaled = false);
// Several runs against one reference in one pass (the check's emulated and local runs):
// the same numbers as compare(r, vs[k], f) for each k; with `r_stats`, r's statistics too
// (stats(r, {}) without mean and std, which are NaN), in the same pass.
std::vector<Comparison> compare(std::span<const float> r,
                                const std::vector<std::span<const float>>& vs, const Format& f,
                                TensorStats* r_stats = nullptr);
// The same against a float64 reference (the truth run): errors are measured against the
// double values (a scalar loop).
Comparison compare(std::span<const double> r, std::span<const float> v, const Format& f,
                   bool scaled = false);

// ---- graph output values --------------------------------------------------------------
// What one run gave for a graph output: a tensor, a sequence of `length` tensors, or an
// empty optional (an optional holding something is that tensor or sequence).
struct ValueForm {
  ValueKind kind = ValueKind::tensor;
  std::size_t length = 0;  // a sequence's
  bool operator==(const ValueForm&) const = default;
};
// A value's form, and its tensors as compared: a tensor itself, a sequence's elements in
// order, none for an empty optional.
ValueForm form_of(const Value& v);
std::vector<const Tensor*> tensors_of(const Value& v);
// A graph output's value `v` against the reference `r`, element by element in float32 (a
// float64 reference as it is): the floating tensors of the same position, up to the
// shorter sequence, each alone (`elements`, a sequence's) and all together (`all`).
// `same_form`: the kinds, the lengths and each pair's sizes agree (pairs of other sizes are
// not compared).
struct ValueComparison {
  Comparison all{};
  std::vector<Comparison> elements{};
  bool same_form = true;
};
ValueComparison compare_values(const Value& r, const Value& v, bool scaled = false);

struct TensorRecord {
  std::string name;
  bool floating = false;  // integer and bool tensors carry no numbers below
  double ref_min = 0, ref_max = 0, ref_absmax = 0;  // over finite reference values
  std::uint64_t ref_nonfinite = 0;
  double headroom_bits = 0;  // log2(format max / ref_absmax); +inf for all zeros
  std::map<int, std::uint64_t> exponent_histogram;  // floor(log2|x|) of the reference
  Comparison propagated;                            // the emulated run vs the reference
  Comparison local;                                 // the local run vs the reference
  // With a reference model (CheckOptions::reference_model): the original's tensor this one is
  // matched to ("" when none: matched by name, else through a same-named producer's output
  // at the same index), and this run against the original's run in float32.
  std::string original{};
  Comparison against_original{};
};

// What a scaled precision's shared scales did to one operand of a MatMul, Gemm or Conv:
// its local run's operand (the reference input) quantized as the emulated run quantizes it
// (exec::scaled_operand: the same format, axis and calibrated amax), as scaled_stats counts
// it; summed over the node's runs. Counts only, so merging is exact.
struct ScaledOperandRecord {
  std::size_t input = 0;      // 0: A / X, 1: B / W
  std::string value{};        // the value it reads
  std::string format{};       // as it applies (a channel-scope activation: "tensor:...")
  bool weight = false;        // an initializer
  std::uint64_t nonzero = 0;  // finite non-zero values
  std::uint64_t blocks = 0;   // scales (blocks, channels, or one per tensor)
  // ScaledFormatStats' counts of the same names.
  std::uint64_t flushed = 0, flushed_blocks = 0, swamped = 0, swamped_blocks = 0;
  std::uint64_t underflow = 0, subnormal = 0;
  std::uint64_t saturated = 0, saturated_blocks = 0, clipped = 0, clipped_blocks = 0;
  void merge(const ScaledOperandRecord& o);
  bool operator==(const ScaledOperandRecord&) const = default;
};

struct NodeRecord {
  // The ONNX node name, or "<OpType>_<topological index>"; for a node of a subgraph (an
  // If/Loop/Scan body) its path, "<outer node>/<attribute>/<node>" ("If_0/then_branch/Mul_2"),
  // nested as deep as the model goes.
  std::string name;
  std::string op_type;
  // Topological position over every node, subgraphs included: a body's nodes come right
  // before the node that runs them.
  std::size_t index = 0;
  // A body node: the name (or path) of the control-flow node that runs it; "" in the main
  // graph.
  std::string parent;
  // How often it ran over all samples (once per sample in the main graph; a body node once
  // per run of its body). Its statistics aggregate over them: worst absmax and errors,
  // counts summed.
  std::uint64_t runs = 0;
  // A body node whose own (local) run overflowed or made NaN: the iteration of each enclosing
  // body in the first run where it did, outermost first (a Loop's or Scan's iteration, 0 for
  // an If branch). Empty otherwise, and in the main graph.
  std::vector<std::size_t> first_overflow_iteration;
  // The format it ran in ("float32" when kept in float32 or moving data; "none" for a
  // node without floating outputs; a scaled precision's name for the MatMul, Gemm and Conv
  // nodes that quantize their operands into it).
  std::string precision;
  bool emulated = false;  // ran in a format other than float32
  std::vector<TensorRecord> outputs;
  // The local run's kernel inputs (rounded to the node's format) held inf/NaN in some
  // sample: trouble in its outputs is inherited, not started here.
  bool inputs_nonfinite = false;
  // Worst propagated relative RMS error of its floating, non-constant inputs.
  double input_error = 0;
  // Largest reference |value| among its floating inputs.
  double input_absmax = 0;
  // Damage to the graph outputs: an estimate of the relative RMS error this node gives
  // them, what the worst-node tables rank by. The error it adds on its own (its largest
  // local relative RMS error; +inf when its local run makes inf/NaN) capped by the largest
  // relative RMS error of the graph outputs it reaches (+inf for an output with inf/NaN
  // where the reference is finite); for an accuracy origin, its measured contribution. 0
  // for a node that reaches no output or was not run locally (its inputs were already
  // broken: the trouble is upstream).
  double damage = 0;
  // Inputs from float32 nodes whose values break (inf/NaN) when rounded to this node's
  // format: a precision boundary that overflows here.
  std::vector<std::string> boundary_inputs;
  // The shapes of its inputs in the first sample ({} for omitted ones).
  std::vector<std::vector<std::int64_t>> input_shapes;
  // A MatMul, Gemm or Conv of a main graph whose operands a scaled precision quantizes, in
  // its local runs: per operand, by input index.
  std::vector<ScaledOperandRecord> scaled_operands{};
};

// The last three are of scaled precisions (CheckOptions::scaled), found from a scaled
// operand's counts (ScaledOperandRecord; docs/check.md gives the thresholds):
//  - block_underflow: block scales (MX, NVFP4) set by outliers flush their neighbours to 0;
//  - block_saturation: values clipped far past rounding by a saturated scale;
//  - scale_underflow: a per-tensor/channel amax (scaled FP8) set by rare outliers puts most
//    values into the element's subnormals or to 0.
enum class OriginKind {
  overflow,
  nan,
  underflow,
  accuracy,
  block_underflow,
  block_saturation,
  scale_underflow
};
std::string_view to_string(OriginKind k);
// The origin kinds named by `words` (every kind but accuracy: the kinds an output can
// absorb), for CheckOptions::fail_on. An unknown word is an Error in option "fail_on".
// scale_underflow: the share of an operand's non-zero values that must go subnormal or to
// zero ("most of them"); block_underflow and block_saturation take kVerdictFraction.
inline constexpr double kMostFraction = 0.5;
std::set<OriginKind> parse_fail_on(const std::vector<std::string>& words);

// What an origin is, beyond its kind: which of the known mechanisms the numbers show.
enum class Cause {
  constant,      // an initializer or Constant beyond the format's range
  input,         // a graph input beyond the format's range
  boundary,      // reads float32 values that overflow when rounded to its format
  square,        // Pow(x, 2) of values beyond sqrt(max)
  exponential,   // Exp of values beyond ln(max)
  computes,      // its exact result is beyond the format's max
  rounding,      // its result rounds past the max (reference within range)
  zero_divisor,  // NaN: the divisor has values that round to 0 (0/0)
  invalid,       // NaN: inf - inf, 0 * inf, 0/0, a root or log of a negative value
  flush,         // underflow: results flush to zero
  local_error,   // accuracy: large error of its own with accurate inputs
  // block_underflow, scale_underflow: a scale set by outliers (a block's largest value, a
  // tensor's amax) flushes the other values or puts them below the element's normal range
  outlier_scale,
  clipped,  // block_saturation: a saturated scale clips values far past rounding
};
std::string_view to_string(Cause c);

// A fix that removes an origin's trouble, as data: the report layer words it (and names
// the CLI flags), a planner or a notebook can apply it.
enum class FixKind {
  scale,          // multiply `value` (an input of nodes[0]) by 2^exponent
  keep_fp32,      // keep `nodes` in float32
  format,         // run in `format` instead
  replace_value,  // use `replacement` instead of the constant's worst value `value_seen`
  guard,          // make the divisor/argument safe: an epsilon of at least `replacement`
  // quantize the operands into the scaled format `format` instead (a smaller block, NVFP4's
  // finer scale, MX blocks instead of one scale per tensor): a precision of the whole model
  scaled_format,
  // run the GEMMs `nodes` unscaled in the other precision `format` (its operands rounded
  // to it) while the rest of the model stays in the scaled precision
  keep_unscaled,
};
std::string_view to_string(FixKind k);

struct Fix {
  FixKind kind = FixKind::keep_fp32;
  std::vector<std::string> nodes;  // keep_fp32: the nodes; scale: the node scaled into
  std::string value;               // scale/replace_value: the value (tensor) to change
  std::string format;              // format: the format to run in; else the origin's
  int exponent = 0;                // scale: multiply by 2^exponent (exact)
  // scale: the largest result after scaling; replace_value/guard: the value to use.
  double replacement = 0;
  double value_seen = 0;  // replace_value: the constant's worst value
  // scale: the homogeneity degree of the node's output in `value`; its outputs change by
  // 2^(exponent * degree) unless a normalisation downstream absorbs it.
  int degree = 1;
  bool undo = true;           // scale: outputs must be multiplied back by 2^(-exponent * degree)
  bool before_model = false;  // scale of a graph input: done before the model runs
};

struct Origin {
  std::string node;     // node name; for an initializer, the initializer's name
  std::string op_type;  // "initializer", "Constant" or "input" for values
  OriginKind kind = OriginKind::overflow;
  Cause cause = Cause::computes;
  std::vector<std::string> outputs;  // the tensors it produces
  std::string format;                // the format the node (or value) is in
  // The local run (reference inputs rounded to the node's format): values affected of
  // those compared, summed over its floating outputs: for overflow and NaN origins those
  // its local run made inf, NaN or saturated (overflow + nan of its outputs' local
  // comparisons, the worst-node tables' "local inf/NaN"); for underflow ones those it
  // flushed to zero. For constants: values beyond the range, of the constant's size.
  std::uint64_t affected = 0, total = 0;
  double absmax = 0;        // largest reference |output| (constants: worst signed value)
  double input_absmax = 0;  // largest reference |input|
  // The value it concerns besides its outputs: the boundary input (boundary), the divisor
  // (zero_divisor).
  std::string related;
  // underflow: smallest non-zero reference |output|; zero_divisor: of the divisor.
  double min_nonzero = 0;
  double local_error = 0, input_error = 0;  // relative RMS (underflow, accuracy)
  // Constants and inputs: the graph outputs stay finite (its consumers absorb it).
  bool absorbed = false;
  bool saturates = false;  // the check saturates at the format's max instead of overflowing
                           // (so `affected` counts saturated values)
  std::vector<std::pair<std::string, std::string>> consumers;  // first (op, node) downstream
  std::vector<Fix> fixes;                                      // cheapest first
  // The nodes that keeping in float32 removes this trouble with (what the planner
  // seeds from): for overflows, the origin and every node reading its out-of-range
  // values; for constants and inputs, the emulated nodes reading them.
  std::vector<std::string> keep_fp32;
  // Accuracy origins: relative RMS error of the graph outputs when only this node runs
  // in the emulated format (everything else float32), and of the whole emulated run.
  double contribution = 0, total_error = 0;
  // A body node: NodeRecord::first_overflow_iteration.
  std::vector<std::size_t> iteration{};
  // Scaled-precision kinds: the operand (`related` is the value it reads, `format` the scaled
  // format as it applies to it), its scales and those affected (blocks swamped or clipped;
  // scale_underflow counts no blocks: 0), summed over runs; `affected` of `total` count its
  // values (flushed in swamped blocks; clipped; subnormal or zero) of its non-zero ones.
  std::size_t operand = 0;
  std::uint64_t blocks = 0, blocks_affected = 0;
};

// When a check fails and no origin is found: the first tensor in topological order
// (subgraphs included) whose emulated values went non-finite where the reference is finite,
// or else whose cosine with the reference fell below the pass criterion.
struct FirstTrouble {
  std::string tensor;              // its key (a body value: "<outer>/<attribute>/<name>")
  std::string node;                // its producer; "" for a graph input
  std::string op_type;             // the producer's op
  bool nonfinite = true;           // else it left the tolerance
  double cosine = 0;               // against the reference
  bool producer_emulated = false;  // the producer runs in the format (its own run stayed sound)
};

// A static risk rule: data, so users can turn rules off by id.
struct Rule {
  std::string_view id;
  std::string_view rationale;
};
const std::vector<Rule>& rules();

// How much a rule finding matters. major: the observed values come within
// kRuleMarginBits of the trouble (or are past it), or it affects at least kRuleShare of a
// tensor's values or of its L2 norm; minor: the rest (the text counts them in one line).
enum class Severity { minor, major };
std::string_view to_string(Severity s);
inline constexpr double kRuleMarginBits = 4;
inline constexpr double kRuleShare = 0.001;

// What a rule saw; the report layer words it by id.
struct RuleFinding {
  std::string id;
  std::string node;     // node (or initializer) name
  std::string op_type;  // the node's op ("initializer"/"Constant" for constant rules)
  std::string tensor;   // large-range: the tensor
  std::string format;
  double observed = 0;   // what the reference run reached (|x|, smallest |x|, count, K)
  double limit = 0;      // where the trouble starts
  double parameter = 0;  // pow: the exponent; constant-*: worst/smallest value; large-range: ULP
  std::uint64_t count = 0, total = 0;  // constant-*: values affected of the constant's size
  bool centred = false;                // norm-as-primitives: a LayerNorm (else RMSNorm)
  // The ONNX element types (names, "float16") the type rules concern: cast-type: the Cast's
  // `to`, then the declared type of its output; cast-chain: the first Cast's input ("" when
  // unknown), its `to`, the second Cast's `to`; schema-type: the type received. Empty for the
  // other rules.
  std::vector<std::string> types{};
  // How far the observed values stay from the trouble, in bits: log2 of the factor by which
  // they could grow (log, root-after-reduction: shrink) before it starts; 0 or less once
  // they reach it (a reduction depth of 2^p or more, large-range). NaN for the constant
  // rules, which are measured by their share instead.
  double margin_bits = 0;
  // constant-*: the affected values' share of the constant's L2 norm,
  // sqrt(sum x^2 over them / sum x^2 over all); 0 for the other rules.
  double norm_share = 0;
  Severity severity = Severity::major;  // from margin_bits, count / total and norm_share
};

// A remark on the whole diagnosis.
enum class NoteKind {
  mixed_storage,  // the model stores 16-bit values: `count` float32 nodes stay float32
  no_float_node,  // nothing runs in the format
  // (read from older files only: Diagnosis::generated records generated inputs now)
  generated,
};
std::string_view to_string(NoteKind k);
struct Note {
  NoteKind kind = NoteKind::generated;
  std::size_t count = 0;
  std::string text{};
};

// A graph output whose emulated value differs from the reference's in kind or length: the
// input set (global index) and what each run gave.
struct OutputMismatch {
  std::size_t set = 0;
  ValueForm reference{}, emulated{};
  bool operator==(const OutputMismatch&) const = default;
};

struct OutputVerdict {
  std::string name;  // the graph output's; a sequence element's "name[k]
  // Over the elements finite in both runs; NaN (no value) when there are none, as cosine.
  // max_rel_error: pointwise, |v - r| / max(|r|, tiny); max_scaled_error: against the
  // output's scale, |v - r| / max(|r|, 2^-10 absmax(r), tiny), the worst over the input sets;
  // rel_rms_error: sqrt(sum (v - r)^2 / sum r^2) (NaN too when the reference is all zeros
  // and the output is not).
  double max_abs_error = 0, max_rel_error = 0, max_scaled_error = 0, rel_rms_error = 0;
  double cosine = 1;
  std::uint64_t nonfinite = 0;          // non-finite where the reference is finite
  std::uint64_t outside_tolerance = 0;  // with atol/rtol: elements past them
  // Sequence and optional outputs. `elements`: a sequence's elements, each judged alone by
  // position ("name[k]", over the sets that have one), while the numbers above are those of
  // all its elements together; empty for other outputs. `mismatched_sets`: the sets where
  // the emulated value differs from the reference's in kind or length (a sequence of
  // another length, an optional empty in one run only), which fails it; `mismatch`: the
  // first of them. Elements present in both runs are compared all the same.
  std::vector<OutputVerdict> elements{};
  std::uint64_t mismatched_sets = 0;
  std::optional<OutputMismatch> mismatch{};
  bool pass = true;
};

// A scaled precision's calibrated activation amax, by (node path, input index) of each
// scaled operand (exec::calibrate_activations).
using ActivationAmax = std::map<std::pair<std::string, std::size_t>, double>;

struct CheckOptions {
  Format precision = parse_format("float16");
  // A scaled precision (exec::PrecisionPolicy::scaled): the MatMul, Gemm and Conv nodes
  // quantize their operands into it, and `precision` is the format of everything else (the
  // other precision). Amax-rule formats calibrate their activation scales on all the input
  // sets' reference run first, and multiply them by 2^amax_margin.
  std::optional<ScaledFormat> scaled{};
  int amax_margin = 0;
  // With `scaled`: MatMul/Gemm/Conv nodes that run unscaled, in `precision` (their operands
  // rounded to it, as any node's), by name (body nodes by path).
  std::set<std::string> keep_unscaled;
  // The activation amax calibrated beforehand (calibrate(), over every input set: the ranks
  // or shards of a distributed check each see only theirs); nullopt: calibrated on the sets
  // the check runs.
  std::optional<ActivationAmax> activation_amax{};
  std::set<std::string> keep_fp32;      // node names kept in float32
  std::set<std::string> keep_fp32_ops;  // op types kept in float32
  RoundOptions round_options;
  // Low-precision accumulation of MatMul/Gemm/Conv products in emulated nodes (nullopt:
  // float32), in this order.
  std::optional<Format> accumulate;
  AccumulationOrder accumulation;
  // The reference run's carrier: float32 (the model as the user runs it today) or
  // float64 (every floating node computed in double: the truth). The emulated and local
  // runs stay on float32 carriers either way.
  DType reference = DType::float32;
  // Pass criterion: outputs finite wherever the reference is, cosine >= min_cosine,
  // and, when atol or rtol is given, |v - r| <= atol + rtol |r| everywhere.
  double min_cosine = 0.999;
  std::optional<double> atol, rtol;
  std::set<std::string> disabled_rules;
  // Origins of these kinds fail the check even when every output passes (absorbed).
  std::set<OriginKind> fail_on;
  // The inputs the caller generated (recorded in the diagnosis as they are).
  std::vector<inputs::Generated> generated;
  // A converted model's original (nullptr: none). With it the check judges the model against
  // the original run in float32 (see check()), and the clipping rules compare initializers.
  const model::Model* reference_model = nullptr;
  int threads = 0;
  // After each main-graph node of each sample, and between the body-node runs of a
  // control-flow node: (done, total) main-graph node steps. An exception it throws cancels.
  std::function<void(std::size_t, std::size_t)> progress;
};

struct Diagnosis {
  std::string model;
  std::string precision;  // a scaled precision's name when scaled
  // A scaled precision: the format of the other ops, and the amax margin; "" otherwise.
  std::string other_precision{};
  int amax_margin = 0;
  std::string reference = "float32";
  // The original a converted model was checked against (its path); "" without one.
  std::string reference_model{};
  std::string accumulate = "float32";  // of MatMul/Gemm/Conv products
  std::size_t samples = 0;
  double min_cosine = 0.999;  // the pass criterion it was judged by
  std::optional<double> atol, rtol;
  std::set<OriginKind> fail_on;  // absorbed origins of these kinds fail it
  // Every output passes and, with fail_on, no absorbed origin is of those kinds.
  bool pass = true;
  std::vector<inputs::Generated> generated;  // inputs drawn from a generator; empty: all given
  std::vector<OutputVerdict> outputs;
  std::vector<Origin> origins;
  // When every output passes: the origins (overflow, nan, underflow) whose trouble the
  // outputs absorbed, by name, in the order of `origins`.
  std::vector<std::string> absorbed;
  std::vector<NodeRecord> nodes;  // in topological order
  std::vector<RuleFinding> rules;
  std::vector<Note> notes;
  // Set when the check fails and `origins` is empty: where the trouble shows first.
  std::optional<FirstTrouble> first_trouble;
};

// The node names this analysis reports ("<OpType>_<index>" for unnamed nodes), indexed
// like model.graph.nodes.
std::vector<std::string> display_names(const model::Model& m);
// Gives unnamed nodes their display names, so that policies can name them too.
void name_nodes(model::Model& m);

// Runs the check over one or more input sets (statistics aggregate over them: max of
// absmax, worst errors, counts summed). Errors of the model or the inputs are
// fpguard::Error.
// With CheckOptions::reference_model, `m` is a converted model checked as it is deployed
// (its 16-bit values and Casts, its float32 nodes kept): the lockstep and the origins run
// against its float32 twin as for any mixed model, while the output verdicts compare it with
// the original run in float32, as does each main-graph tensor matched to one of the
// original's (TensorRecord::against_original). A failure without origins names the first
// matched tensor that went non-finite or left the cosine criterion. Inputs are fed to the
// original converted to its declared types. Graph inputs and outputs that differ in name, or
// in element type other than float32/float16/bfloat16 swaps, are an Error in option
// "reference_model".
Diagnosis check(const model::Model& m, const std::vector<std::vector<NamedValue>>& samples,
                const CheckOptions& o);

// ---- sharded checks: accumulate over input sets, merge, finish ---------------------------
// check() = finish(accumulate(all sets)). The state is everything the lockstep keeps, all
// of it mergeable (counts, extremes, histograms, double-double sums), so states of
// disjoint input sets (shards, on other processes or machines) merge into the state of
// all of them, and finish() derives the same Diagnosis one check over all sets gives.

inline constexpr std::size_t kNoSet = static_cast<std::size_t>(-1);

// Per node: the input set (global index) in which what only the first occurrence sets was
// recorded, so that merging keeps the earliest: its input shapes, its first overflow's
// iteration, and each boundary input (NodeRecord::boundary_inputs, in that order).
struct NodeFirsts {
  std::size_t shapes = kNoSet;
  std::size_t overflow = kNoSet;
  std::vector<std::size_t> boundary{};
};

// One scan of a floating constant (initializer or Constant node value) in the format.
struct ConstantScan {
  std::string name;   // the value's name (what nodes read)
  std::string label;  // initializer name, or the Constant node's name
  std::string kind;   // "initializer" or "Constant"
  std::uint64_t size = 0, overflow = 0, underflow = 0;
  double min = 0, max = 0;     // over finite values
  double min_abs_nonzero = 0;  // NaN when all are zero
  // Sums of squares over the finite values: all of them, those that flush to zero and
  // those that overflow in the format (measured only when some do).
  double sumsq = 0, sumsq_underflow = 0, sumsq_overflow = 0;
  double absmax = 0;       // the largest |value|
  bool nonfinite = false;  // holds inf or NaN
};

struct CheckState {
  // The input sets accumulated: their global indices, ascending (set i of a check over
  // several sets is its i-th).
  std::vector<std::size_t> sets{};
  // Every node in the order of Diagnosis::nodes, with the numbers aggregated so far
  // (damage, headroom_bits and a non-floating node's precision are derived by finish()).
  std::vector<NodeRecord> nodes{};
  std::vector<NodeFirsts> firsts{};  // parallel to nodes
  // Graph outputs: the emulated run against the reference (the verdicts' numbers), and the
  // counts of the verdicts (name, nonfinite, outside_tolerance, the mismatches, and the same of
  // each element; the rest is judged).
  std::vector<Comparison> output_cmp{};
  std::vector<OutputVerdict> verdicts{};
  // Per graph output, a sequence's comparisons by element position (parallel to
  // verdicts[i].elements; empty for other outputs).
  std::vector<std::vector<Comparison>> element_cmp{};
  // Per value key: the reference's largest |value| and smallest non-zero |value| over the
  // sets, and the values whose finite reference values were recorded at least once.
  std::map<std::string, double> absmax{};
  std::map<std::string, double> min_abs_nonzero{};
  std::set<std::string> seen{};
  // The model's floating constants as scanned in the format, in the order of the nodes
  // (static: the same in every state of one check). finish() of the model's graph alone
  // takes them instead of the constants' values.
  std::vector<ConstantScan> constants{};
};

// Input sets read one at a time (inputs::SetList::read): `count` of them, the k-th by
// read(k), so that a check holds one set at a time whatever their number.
struct SetReader {
  std::size_t count = 0;
  std::function<std::vector<NamedValue>(std::size_t)> read;
};

// `sets` read one at a time (they outlive the reader), adding the inputs they generate to
// *generated.
SetReader read_lazily(const inputs::SetList& sets,
                      std::vector<inputs::Generated>* generated = nullptr);
// check() over sets read one at a time; the accuracy origins read set 0 again.
Diagnosis check(const model::Model& m, const SetReader& samples, const CheckOptions& o);

// Runs the lockstep of check() over `samples`, whose global indices are `sets` (ascending;
// empty: 0, 1, ...), and returns what it keeps. Errors as check().
CheckState accumulate(const model::Model& m, const std::vector<std::vector<NamedValue>>& samples,
                      const CheckOptions& o, std::vector<std::size_t> sets = {});
// The same, reading the sets one at a time (twice for a scaled precision that calibrates
// its activation amax on them: once to calibrate, once to check).
CheckState accumulate(const model::Model& m, const SetReader& samples, const CheckOptions& o,
                      std::vector<std::size_t> sets = {});
// The activation amax a check with `o` and a scaled precision of the amax rule (fp8,
// tensor:, channel:) calibrates on `samples` (with its reference run: o.reference, and a
// mixed model's storage; o.scaled is not looked at): the maximum over the sets, so that the
// amax of disjoint sets combine by max_amax into theirs, exactly.
ActivationAmax calibrate(const model::Model& m, const SetReader& samples, const CheckOptions& o);
void max_amax(ActivationAmax& into, const ActivationAmax& from);
// Adds `from` to `into` (same model and options). An input set in both, or states of
// different graphs, are an Error.
void merge(CheckState& into, const CheckState& from);
// The Diagnosis of a state (the same model and options it was accumulated with). The
// accuracy origins' contributions are measured on the state's first input set (its
// smallest index), which `first_set` returns; it is called only when there are accuracy
// candidates. A state of another graph is an Error.
Diagnosis finish(const model::Model& m, CheckState state, const CheckOptions& o,
                 const std::function<std::vector<NamedValue>()>& first_set);
// The same from the model's graph alone (model::load_graph_bytes: its large tensors without
// values), the state's constant scans standing in for the constants. Only the accuracy
// origins' runs need the model itself: `model` returns it (the same model, its nodes named
// as in `graph`), called, as first_set, only when there are accuracy candidates.
Diagnosis finish(const model::Model& graph, CheckState state, const CheckOptions& o,
                 const std::function<const model::Model&()>& model,
                 const std::function<std::vector<NamedValue>()>& first_set);

}  // namespace fpguard::analysis

namespace fpguard::analysis {

// ---- planning: which nodes stay in float32 (`fpguard plan`) -----------------------------

enum class Objective {
  fewest_fp32,   // as few float32 nodes as possible
  fewest_casts,  // prune only where it does not add Cast nodes
};

// An exact power-of-two scale rewrite the plan applies: `value` multiplied by 2^-k (and
// what that takes elsewhere, see rewrite::find_scale), for the overflow at `node`.
struct Scaled {
  std::string node, value;
  int k = 0;
};

// What a pass of the planner tries, for its progress callback: the model as it is, the
// scale rewrite at `node`, the model after the rewrites, `fp32` nodes in float32 (the
// search growing), or the plan without `node` (pruning).
enum class PlanStepKind { as_is, scaling, after_scaling, growing, pruning };
struct PlanStep {
  PlanStepKind kind = PlanStepKind::as_is;
  std::string node{};
  std::size_t fp32 = 0;
};

struct PlanOptions {
  CheckOptions check;  // format, tolerance, samples' options; keep_fp32 is forced into the plan
  Objective objective = Objective::fewest_fp32;
  // Rewrites a model so that `value` is scaled by an exact power of two chosen from the
  // reference maxima (value name -> absmax), or nullopt. `fpguard plan` passes the rewrite
  // layer's find_scale/apply_scale (the analysis layer does not depend on it); empty: no
  // scale rewrites.
  std::function<std::optional<std::pair<model::Model, Scaled>>(
      const model::Model&, const std::string& value, const std::map<std::string, double>&,
      std::string* why_not)>
      scaler;
  std::size_t max_passes = 48;  // check() runs at most (each is three model runs)
  // Called before each pass: (pass number, what it tries).
  std::function<void(std::size_t, const PlanStep&)> progress;
  // How a pass checks a model with these options; empty: check(model, samples, options).
  // The CLI under mpirun spreads each pass's input sets over the ranks (accumulate, merge,
  // finish: the same Diagnosis); plan() then sees only the first set, for the float32
  // outputs that verify a scale rewrite.
  std::function<Diagnosis(const model::Model&, const CheckOptions&)> check_pass;
  // The Cast nodes converting a model with the options' float32 nodes (keep_fp32,
  // keep_fp32_ops) adds, graph inputs and outputs keeping their types, bodies included.
  // `fpguard plan` passes rewrite::cast_counter (convert itself: one definition of where a
  // Cast goes); empty: not counted (Plan::casts 0, and fewest_casts prunes as fewest_fp32).
  std::function<std::size_t(const model::Model&, const CheckOptions&)> count_casts;
};

// Why the plan keeps a node in float32.
enum class KeepReason {
  forced,         // the caller asked for it (CheckOptions::keep_fp32)
  origin,         // an overflow/NaN/underflow origin
  reads_origin,   // reads an origin's out-of-range values
  accuracy,       // an accuracy origin: `error` is its contribution to the outputs
  largest_error,  // the largest local error left: `error` is its relative RMS
};
std::string_view to_string(KeepReason r);
struct Reason {
  KeepReason kind = KeepReason::forced;
  std::string origin{};  // origin, reads_origin: the origin node
  OriginKind origin_kind = OriginKind::overflow;
  double error = 0;
};

struct Island {
  std::vector<std::string> nodes;  // connected float32 nodes, topological order
  Reason reason;                   // why its first node is there
};

// A scale rewrite the planner tried and did not use.
enum class RefusalKind {
  no_rewrite,        // the rewrite layer found none: `why` says what stopped it
  changes_function,  // the float32 outputs changed by `error` (relative RMS)
  still_overflows,   // the node still overflows after it
};
std::string_view to_string(RefusalKind k);
struct ScaleRefusal {
  RefusalKind kind = RefusalKind::no_rewrite;
  std::string value{}, node{};  // the value scaled, for the overflow at node
  int k = 0;
  double error = 0;
  std::string why{};
};

struct Plan {
  std::string model, precision;
  std::vector<Scaled> scaled;  // applied in this order
  model::Model rewritten;      // the model after the scale rewrites (fp32_nodes name its nodes)
  double min_cosine = 0.999;
  std::optional<double> atol, rtol;
  std::vector<std::string> fp32_nodes;  // topological order
  // A scaled precision: GEMMs the search kept out of it that run unscaled in the other
  // precision instead of float32, where that still meets the tolerance (topological order).
  std::vector<std::string> unscaled_nodes;
  std::map<std::string, Reason> reasons;  // fp32 or unscaled node -> why
  std::vector<Island> islands;
  std::size_t casts = 0;  // Cast nodes convert adds (inputs/outputs kept; PlanOptions::count_casts)
  std::size_t passes = 0;                    // check() runs used
  std::size_t float_nodes = 0;               // floating compute nodes
  std::size_t low_nodes = 0;                 // ... of them in the low-precision format
  bool meets = false;                        // the final plan meets the tolerance on every sample
  std::vector<OutputVerdict> final_outputs;  // of the final plan
  Diagnosis final_check;                     // the final plan's check (its per-node records)
  std::vector<ScaleRefusal> refused;         // scale rewrites tried and not used
  // How the input sets were made, set by the caller (plan() sees only the tensors):
  // plan.json records it so that convert verifies on the same inputs.
  std::optional<inputs::Provenance> inputs{};
};

// Finds a small set of nodes to keep in float32 so that the emulated model meets the
// tolerance on every sample: removes overflows by exact scaling where the scaler can
// (verified: the float32 function unchanged, the overflow gone), seeds from check's
// origins, adds the nodes with the largest error contribution while it fails, then
// prunes. When no plan meets the tolerance, returns the best one found with meets = false.
Plan plan(const model::Model& m, const std::vector<std::vector<NamedValue>>& samples,
          const PlanOptions& o);

// A plan.json read back (what convert needs of it; report::read_plan reads it).
struct PlanFile {
  std::string precision;
  std::vector<std::string> fp32_nodes;
  std::vector<std::string> unscaled_nodes;          // Plan::unscaled_nodes; absent in older plans
  std::vector<std::pair<std::string, int>> scaled;  // (value, k), in order
  std::optional<inputs::Provenance> inputs{};       // absent in older plans
};

}  // namespace fpguard::analysis
