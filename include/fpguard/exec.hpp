// The executor: runs a model::Graph on the CPU, node by node in topological order,
// freeing each tensor after its last reader. Floating tensors reach kernels as carriers
// of one type, float32 or (RunOptions::carrier) float64 for a high-precision truth run:
// float16/bfloat16/float32/float64 storage is widened on the way in and narrowed on the
// way out; integer and bool tensors are passed as they are. A PrecisionPolicy gives
// each node a Format, and the emulation model of docs/executor.md applies: weights are
// rounded to the node's format once, inputs are rounded at a precision boundary, the
// kernel computes in the carrier, and floating outputs are rounded to the format with its
// overflow rule. Data-movement ops (Reshape, Transpose, ...) never round. An Observer
// sees every node's inputs and outputs as they are produced. Values that are not tensors
// (sequences, empty optionals: fpguard::Value) pass only through the ops registered to
// take them (kValues); they are never rounded.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fpguard/accumulation.hpp"
#include "fpguard/format.hpp"
#include "fpguard/model.hpp"
#include "fpguard/round.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::exec {

// ---- kernels -------------------------------------------------------------------------
// How an op relates to the emulation model.
enum class OpKind {
  compute,        // rounds weights, boundary inputs and floating outputs to the node's format
  data_movement,  // Reshape, Transpose, Gather...: values pass through unchanged, never rounded
};

// What a kernel takes besides tensors of numeric dtypes (Registry::add): the executor
// refuses any other op a sequence or an empty optional (kValues), or a string tensor
// (kStrings), with an Error naming the node.
enum Accepts : unsigned { kTensors = 0, kValues = 1, kStrings = 2 };

struct KernelContext {
  const model::Node& node;
  std::int64_t opset;                   // version of the default domain
  std::vector<const Tensor*> inputs{};  // nullptr for an omitted optional input
  std::vector<Tensor> outputs{};        // one per node output (kernels fill them)
  // The storage dtype of each floating input before widening (float32 for others):
  // kernels that create floating tensors of "the input's type" read it.
  std::vector<DType> input_dtypes{};
  // Set by a kernel for an output whose storage dtype is not what the executor infers
  // (the float dtype of the inputs for float32 outputs): Cast, ConstantOfShape...
  std::vector<std::optional<DType>> output_dtypes{};
  int threads = 1;
  std::string where;  // "file: node 'x' (Op)" for errors
  // Runs a subgraph of this node (If/Loop/Scan/SequenceMap bodies) with `inputs` bound to
  // its graph inputs in order, reading other values from the enclosing scopes; returns its
  // outputs, tensors in their storage dtypes.
  std::function<std::vector<Value>(const model::Graph&, std::vector<Value>)> run_subgraph{};
  // Low-precision accumulation of this node's products (MatMul, Gemm, Conv): nullptr
  // accumulates in float32.
  const Format* accumulate = nullptr;
  AccumulationOrder accumulation;
  // RunOptions::float32_storage: a Cast to float16/bfloat16 does not round.
  bool float32_storage = false;
  // RunOptions::prepare_in_float32: other executors read this one's float32 weights too
  // (check's), so a kernel keeps no float32 copy of its own in their place.
  bool prepare_in_float32 = false;
  // The carrier of floating values: float32, or float64 (the truth run). Every floating
  // input arrives in it and every floating output is made in it.
  DType carrier = DType::float32;
  // Ops registered with kValues only: the value of input i when it is a sequence or an
  // empty optional (inputs[i] is then nullptr); empty when every input is a tensor.
  std::vector<const Value*> input_values{};
  // Ops registered with kValues only (else empty): a sequence or empty optional made for
  // output i instead of a tensor (set_output).
  std::vector<std::optional<Value>> output_values{};
  // Per input (may be shorter than inputs: false): a weight whose tensor keeps its address
  // and values for the executor's life (a model initializer, or its rounded copy in the
  // WeightCache). What a kernel derives from it alone may be kept in `prepared`.
  std::vector<char> stable_inputs{};
  // Data-movement ops: input 0's own tensor where nothing can read it after this node (its
  // last reader, reading it once, in a run without an observer; not a weight or a view of
  // another's tensor), which the kernel may move into its output instead of copying it (a
  // Reshape, Flatten, Squeeze or Unsqueeze relabels it); nullptr otherwise.
  Tensor* last_read = nullptr;
  // The executor's store of what kernels prepare once (oneDNN primitives, weights
  // reordered into their layout); nullptr: nothing is kept.
  class PreparedCache* prepared = nullptr;
  bool stable(std::size_t i) const { return i < stable_inputs.size() && stable_inputs[i]; }
  // A weight handed to the kernel unrounded (ops with OpTraits::rounds_weight): input
  // `input` is the model's own tensor (stable), which the node's format would round. The
  // kernel rounds what it prepares from it itself, element by element with `options`
  // (deterministic modes only: round(reorder(W)) is reorder(round(W))), or calls
  // round_weight() first. nullopt: every input arrived as the emulation model says.
  struct UnroundedWeight {
    std::size_t input = 0;
    Format format;
    RoundOptions options;
    std::string key;  // what tells this rounding from others (format, options)
    // RunOptions::prepare_in_float32: keep what is prepared in float32 (shared with float32
    // runs) and round it per run; else keep it rounded.
    bool keep_float32 = false;
    std::function<const Tensor*()> rounded;  // the rounded copy (WeightCache), made once
  };
  std::optional<UnroundedWeight> unrounded{};
  // An element-wise op fused into this node (Executor: a Conv, BatchNormalization or MatMul and
  // the activation after it), which the kernel applies in place to output 0's float32
  // values, in any layout (`n` values at `values`, on up to `threads` threads), before it
  // returns: nullptr when none. Kernels that do not take one (OpTraits::applies_epilogue)
  // are never given one.
  const std::function<void(float* values, std::size_t n, int threads)>* epilogue = nullptr;
  // Puts the rounded copy of the unrounded weight in its place (nothing when there is
  // none): for the kernel's paths that do not round it themselves. The observer then sees
  // that copy.
  void round_weight();

  std::size_t num_inputs() const { return inputs.size(); }
  bool has(std::size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  // Input i; an Error naming the node when it is missing.
  const Tensor& in(std::size_t i) const;
  Tensor& out(std::size_t i, DType dtype, std::vector<std::int64_t> shape);
  // As out(), with the elements left uninitialised: for kernels that write every element.
  Tensor& out_uninit(std::size_t i, DType dtype, std::vector<std::int64_t> shape);
  // Input i when it is a sequence or an empty optional, else nullptr (a tensor, omitted).
  const Value* value_in(std::size_t i) const {
    return i < input_values.size() ? input_values[i] : nullptr;
  }
  // Input i as a value (a tensor input in its storage dtype), or nullopt when omitted.
  std::optional<Value> value_of(std::size_t i) const;
  // Sets output i to `v`: a tensor (in its storage dtype, which output_dtypes[i] then
  // records) goes to outputs[i], anything else to output_values[i].
  void set_output(std::size_t i, Value v);
  [[noreturn]] void fail(const std::string& what) const;
};

using Kernel = void (*)(KernelContext&);

// How an op's output scales when its inputs are scaled by powers of two, x -> 2^k x (its
// homogeneity degree), as exact scaling (rewrite::find_scale) and the origins' scaling
// fixes propagate it. Inputs not named below must stay unscaled (shapes, indices, axes).
enum class Degree : std::uint8_t {
  none,      // does not commute with scaling (Exp, Sigmoid, Softmax, ...)
  same,      // input 0's degree (data movement, Relu, pooling, most reductions, Resize)
  additive,  // the inputs share one degree; constant inputs are rescaled to it (Add, Max)
  product,   // inputs 0 and 1 add their degrees; a constant input 2 (a bias) is rescaled
  quotient,  // input 0's minus input 1's (Div)
  half,      // half input 0's (Sqrt)
  negated,   // minus input 0's (Reciprocal)
  power,     // input 0's times the constant exponent, input 1 (Pow)
  doubled,   // twice input 0's (ReduceSumSquare)
  clipped,   // input 0's; the bounds, inputs 1 and 2, are rescaled (Clip)
  selected,  // inputs 1 and 2 share one degree; input 0, a condition, is unscaled (Where)
};

// What the registry knows of an op besides its kernel: how it relates to the emulation
// model and what it means numerically. Declared on the op's registration line (designated
// initialisers, e.g. {.kind = OpKind::data_movement, .degree = Degree::same}) and queried
// by analysis and rewrite, which keep no op lists of their own.
struct OpTraits {
  OpKind kind = OpKind::compute;
  std::int64_t min_opset = 1;   // earliest opset whose semantics the kernel implements
  unsigned accepts = kTensors;  // Accepts flags
  Degree degree = Degree::none;
  // Data movement that keeps every value of input 0, only rearranged (no subset, no
  // repeats): Reshape, Transpose, ...
  bool rearranges = false;
  // Produces inf/NaN for some finite arguments (a zero divisor, a negative root, log 0)
  // that an epsilon or a clamp avoids.
  bool guarded = false;
  // Its kernel takes weight input 1 unrounded where the executor can (KernelContext::
  // unrounded) and rounds what it prepares from it: Conv, whose oneDNN path keeps one
  // reordered copy of W however many precisions it runs in; MatMul and Gemm, which round
  // their weight B per call in a node's first run instead of into a kept copy.
  bool rounds_weight = false;
  // Its kernel applies KernelContext::epilogue (an element-wise op fused into it) to its
  // float32 output: Conv, BatchNormalization, MatMul. The executor fuses into no other op.
  bool applies_epilogue = false;
};

// The per-element code of an element-wise op on float32 carriers, the code its kernel runs
// there: what a node fused into the one before it applies (the Executor's epilogues and
// element-wise chains), so that fused and unfused runs give the same bits. Declared on
// the op's registration line with its kernel; absent for ops that never fuse.
struct ElementwiseCode {
  // out[i] = f(in[i]) for i < n; `in` may be `out`, and any split of the values gives the
  // same bits.
  using Map = std::function<void(const float* in, float* out, std::size_t n)>;
  // A unary op's code for node `n` at `opset`; `lo`, `hi`: Clip's bounds from opset 11
  // (nullptr: absent).
  Map (*unary)(const model::Node& n, std::int64_t opset, const float* lo,
               const float* hi) = nullptr;
  // A binary op's code over n values, y[i] = a[i] op b[i]; an operand flagged scalar is
  // one value, read for every i.
  void (*binary)(const float* a, bool a_scalar, const float* b, bool b_scalar, float* y,
                 std::size_t n) = nullptr;
};

struct OpInfo : OpTraits {
  Kernel kernel = nullptr;
  ElementwiseCode elementwise;
};

// The output degree when input 0 has degree 1 and every other input degree 0 (what a
// scaling of the input 0 does to the output); `exponent` is Pow's constant exponent.
// 0 when scaling does not commute with the op.
double degree_in_first_input(const OpTraits& t, std::optional<double> exponent = std::nullopt);

// The registry of kernels of the default domain, by op type. Each ops/ family file has
// one register_*() function with one line per op.
class Registry {
 public:
  void add(const std::string& op, Kernel k, OpTraits traits = {}, ElementwiseCode code = {});
  const OpInfo* find(const std::string& op) const;
  // What the global registry holds for a default-domain op, or nullptr (unknown op, other
  // domain); traits() is its OpTraits part.
  static const OpInfo* info(const model::Node& n);
  static const OpTraits* traits(const model::Node& n) { return info(n); }
  std::vector<std::string> names() const;
  static const Registry& global();

 private:
  std::map<std::string, OpInfo> ops_;
};

// Op types of `g` (and its subgraphs) that have no kernel, each once, sorted; ops of
// other domains count as unsupported ("com.microsoft.FusedConv").
std::vector<std::string> unsupported_ops(const model::Graph& g);

// ---- precision -----------------------------------------------------------------------
// The format of each node. nullopt = float32 (no emulation).
struct PrecisionPolicy {
  std::optional<Format> default_format;        // every floating node unless excluded
  std::set<std::string> exclude_names;         // nodes kept in float32 by name
  std::set<std::string> exclude_op_types;      // ... or by op type
  std::map<std::string, Format> node_formats;  // explicit per-node formats (win over all)
  RoundOptions round_options;                  // overflow rule (saturate), rounding mode
  // Nodes that run in a format accumulate their products (MatMul, Gemm, Conv) in this
  // one, in this order (nullopt: float32, as GPUs do by default).
  std::optional<Format> accumulate;
  AccumulationOrder accumulation;
  // A scaled precision (docs/executor.md): each MatMul, Gemm and Conv node that runs in a
  // format quantizes its floating operands (inputs 0 and 1: A and B, X and W) into this one
  // before its kernel, with scales along the reduction axis (scaled_operand); the node's
  // format (the "other" precision) still rounds its bias and its outputs, and every other
  // node runs in it as usual.
  std::optional<ScaledFormat> scaled;
  // Nodes (by name; body nodes by path) that run without the scaled format: their operands
  // are rounded to the node's format (the other precision), as any node's inputs are.
  std::set<std::string> unscaled_names;
  // Static activation scales for the amax rule: the calibrated largest |x| of an operand
  // that is not an initializer, by (node path, input index) (calibrate_activations), times
  // 2^amax_margin. An operand without an entry, and every operand of other rules, uses its
  // own amax (dynamic scaling).
  std::map<std::pair<std::string, std::size_t>, double> activation_amax;
  int amax_margin = 0;

  std::optional<Format> format_for(const model::Node& n) const;
  // The same for a node known by `name`: a body node's path (BodyNode::path), which
  // exclude_names and node_formats match instead of the node's own name.
  std::optional<Format> format_for(const model::Node& n, const std::string& name) const;
};

// How a scaled precision quantizes input `input` of a node: the format as it applies to
// this operand (activations of channel-scope formats take one scale per tensor), where
// its scales lie, and the static amax (PrecisionPolicy::activation_amax) it uses, if any.
struct ScaledOperand {
  ScaledFormat format;
  ScaledLayout layout;
  ScaledOptions options;
};
// The floating operands a scaled precision quantizes: inputs 0 and 1 of MatMul, Gemm and
// Conv; none for other ops.
bool is_scaled_operand(const model::Node& n, std::size_t input);
// The nodes whose operands policy.scaled quantizes: MatMul, Gemm and Conv nodes that run
// in a format (format_for), by their for_each_node names, in its order; unscaled_names are
// among them. None without a scaled precision.
std::vector<std::string> scaled_nodes(const model::Model& m, const PrecisionPolicy& policy);
// Each of policy.unscaled_names must be one of scaled_nodes: else Error::in_option
// ("keep_unscaled", name, ...) saying whether the model has no such node, it is another
// op, or it runs in float32, with a did-you-mean over scaled_nodes.
void check_unscaled_names(const model::Model& m, const PrecisionPolicy& policy);
// Input `input` (of shape `shape`, an initializer when `weight`) of `n` under `f`: blocks
// along the reduction axis (MatMul A: -1, B: -2; Gemm per transA/transB; Conv X and W: the
// input-channel axis, X's channels split by group), channel scales along the output axis
// (MatMul B: -1; Gemm B per transB; Conv W: 0) for weights, one per tensor for activations.
// nullopt when the shape does not fit the op (its kernel then reports it). `path`: the
// node's name as policies know it, for the calibrated amax of `policy`.
std::optional<ScaledOperand> scaled_operand(const model::Node& n, const std::string& path,
                                            std::size_t input,
                                            const std::vector<std::int64_t>& shape, bool weight,
                                            const ScaledFormat& f, const PrecisionPolicy& policy);

// ---- observing ------------------------------------------------------------------------
// One control-flow node around a body node (If, Loop, Scan, SequenceMap).
struct Enclosing {
  const model::Node* node = nullptr;  // the control-flow node
  std::string path;                   // its name or path ("If_3", "Loop_0/body/If_2")
  std::string attribute;              // the graph attribute holding the body ("then_branch")
  // The how-manieth run of that body during this run of the node, from 0: a Loop's or
  // Scan's iteration (Scan-8 counts on across batch entries), 0 for If.
  std::size_t iteration = 0;
};

// A node of a subgraph as an observer sees it.
// The name a node goes by in check, plan, policies and profiles: its own, or
// "<OpType>_<pos>" for an unnamed node at `pos` of its graph's topological order.
std::string display_name(const model::Node& n, std::size_t pos);

// Every node of `g` and of its subgraphs (If/Loop/Scan bodies, nested as deep as the model
// goes), each with the name check, plan, convert and policies know it by: a main-graph
// node its display name, a body node its path (BodyNode::path), and the graph holding it.
// Each graph in topological order, a body's nodes right before the node that holds them
// (the order of analysis::Diagnosis::nodes). `where` prefixes errors (the file). The
// mutable form edits nodes in place: subgraphs shared with another copy of the model
// (model::Graph keeps them as shared pointers) change there too (model::unshare_subgraphs).
void for_each_node(const model::Graph& g, const std::string& where,
                   const std::function<void(const model::Node&, const std::string& path,
                                            const model::Graph& graph)>& f);
void for_each_node(model::Graph& g, const std::string& where,
                   const std::function<void(model::Node&, const std::string& path)>& f);
// The names of for_each_node, in its order.
std::vector<std::string> node_paths(const model::Model& m);
// What each node reads and writes, by value key: a value of the main graph by its name, one
// a body defines by "<body prefix><name>" (the prefix of its nodes' paths); a body reading a
// value of an enclosing graph reads that graph's key (as analysis::Diagnosis names values).
// Per node path, its inputs' and outputs' keys in order ("" for an omitted one).
struct NodeKeys {
  std::vector<std::string> inputs, outputs;
};
std::map<std::string, NodeKeys> value_keys(const model::Model& m);
// The keys (value_keys) of the names one graph of a model sees: its own values (inputs,
// initializers, node outputs) as "<prefix><name>", an enclosing graph's as that graph keys
// them, a name no graph defines as itself. The one place a body's captured names resolve.
class ValueScope {
 public:
  // The scope of `g` (its nodes' paths prefixed by `prefix`: "" for the main graph)
  // inside this one; a default-constructed scope is the one around the main graph.
  ValueScope inner(const model::Graph& g, const std::string& prefix) const;
  std::string key(const std::string& name) const;
  // Every name it sees (model::topological_order's `outer` for a graph inside it).
  std::vector<std::string> names() const;

 private:
  std::map<std::string, std::string> keys_;
};

class Executor;

struct BodyNode {
  const model::Node& node;
  std::size_t position = 0;  // in its own graph's topological order
  // "<outer>/<attribute>/<node>", nested as deep as the model goes: the enclosing node's
  // path, the attribute, then the node's name, or "<OpType>_<position>" when it has none
  // (unnamed main-graph nodes are "<OpType>_<position>" too, as check names them).
  std::string path;
  std::vector<Enclosing> enclosing;  // outermost first
  std::optional<Format> format;      // the format it ran in (nullopt: float32)
  // A live value of its scope or an enclosing one, as held (a carrier, not rounded to
  // this node's format), or nullptr (absent, or a sequence or empty optional).
  std::function<const Tensor*(const std::string&)> value;
  // Runs the node again on the same values in `fmt` (nullopt: float32), keeping nothing
  // and observing nothing: the node's non-empty tensor outputs in order. Its own subgraphs
  // run again too (with their own formats). With `as` (an executor of the same model), it
  // runs with that executor's options (carrier, accumulation, storage), as
  // Session::evaluate_next does: a float32 run that keeps 16-bit storage in float32.
  std::function<std::vector<NamedTensor>(const std::optional<Format>&, const Executor* as)>
      evaluate;
};

class Observer {
 public:
  virtual ~Observer() = default;
  // Called after each node ran (and its outputs were rounded), before any input is
  // freed. Sequences and empty optionals are not shown: such an input is nullptr, such an
  // output is left out. Inputs and outputs are carriers as the kernels see them: floating values in
  // the executor's carrier, float32 or float64 (already rounded to the node's format and
  // to their storage dtype), integer and bool tensors as stored. nullptr marks an omitted
  // input. The tensors live only for the call (an observer copies what it keeps); an
  // input address is stable within a run (a weight rounded once shows the same address
  // to every node that reads it).
  // Main-graph nodes only; body nodes come to on_body_node.
  // One exception to "rounded": a weight whose kernel rounds it itself (KernelContext::
  // unrounded) is shown unrounded to an observer whose reads_weights() is false.
  virtual void on_node(const model::Node& node, std::size_t position,
                       const std::vector<const Tensor*>& inputs,
                       const std::vector<NamedTensor>& outputs) = 0;
  // Each node of a subgraph (If/Loop/Scan/SequenceMap bodies, nested as deep as the model
  // goes), once per run of its body, as on_node: after it ran, inputs and outputs as the
  // kernel saw them, lent for the call. It comes while the enclosing node runs, so before
  // on_node of that node. The observer given to Session::step (or RunOptions::observer)
  // sees the bodies of the node it observes. Ignored by default.
  virtual void on_body_node(const BodyNode& /*node*/, const std::vector<const Tensor*>& /*inputs*/,
                            const std::vector<NamedTensor>& /*outputs*/) {}
  // Whether on_node (`body`: on_body_node) reads the values of weight inputs
  // (initializers). One that does not lets the executor hand a kernel that rounds its
  // weight itself that weight unrounded, with no rounded copy of it kept.
  virtual bool reads_weights(bool /*body*/) const { return true; }
  // Whether on_node reads every node's outputs. One that does not lets Executor::run fuse
  // a node with the one after it (RunOptions::fuse): it is then shown the first node
  // with the second's outputs, and never the second.
  virtual bool watches_values() const { return true; }
};

// What kernels prepare once per node and keep for every later run (a oneDNN convolution's
// primitive and its weights reordered into the primitive's layout): (node, key) -> an
// object of the kernel's choosing, made under the lock the first time. Thread-safe; a
// WeightCache holds one, shared by the executors (and their Sessions) that share the
// WeightCache. Keys must name everything the object depends on besides the node (input
// shapes, the address of a stable input: a model initializer or a WeightCache entry, so
// executors that read the same weight in the same precision share what is made of it).
class PreparedCache {
 public:
  template <class T>
  std::shared_ptr<const T> get(const model::Node& node, const std::string& key,
                               const std::function<std::shared_ptr<const T>()>& make) {
    return std::static_pointer_cast<const T>(
        get_any(node, key, [&]() -> std::shared_ptr<const void> { return make(); }));
  }
  // The same for an object wanted by several executors running one node in turn (check's
  // local and emulated runs of it: a weight rounded from its float32 prepared copy), and
  // not after: only the latest one made is kept.
  template <class T>
  std::shared_ptr<const T> latest(const model::Node& node, const std::string& key,
                                  const std::function<std::shared_ptr<const T>()>& make) {
    return std::static_pointer_cast<const T>(
        latest_any(node, key, [&]() -> std::shared_ptr<const void> { return make(); }));
  }
  // How many times `node` asked for `key` before (0 the first time): a kernel's way to
  // tell its first run(s) from later ones.
  unsigned reads(const model::Node& node, const std::string& key);

 private:
  using Key = std::pair<const model::Node*, std::string>;
  std::shared_ptr<const void> get_any(const model::Node& node, const std::string& key,
                                      const std::function<std::shared_ptr<const void>()>& make);
  std::shared_ptr<const void> latest_any(const model::Node& node, const std::string& key,
                                         const std::function<std::shared_ptr<const void>()>& make);
  std::map<Key, std::shared_ptr<const void>> items_;
  std::map<Key, unsigned> reads_;
  Key latest_key_;
  std::shared_ptr<const void> latest_;
  std::mutex mutex_;
};

// Initializers rounded to a format, once (as TensorRT rounds weights at build time):
// (initializer, format name) -> rounded carrier. Executors of the same model may share
// one (a lockstep analysis rounds each weight once for all its runs); they then share its
// PreparedCache too (a convolution's weights reordered once per weight and precision).
class WeightCache {
 public:
  // The rounded carrier of `weight` (a float32 or float64 carrier of `source`) in `f`,
  // held in `carrier`; the address is stable for the cache's lifetime.
  const Tensor& get(const Tensor* source, const Tensor& weight, const Format& f,
                    const RoundOptions& o, DType carrier = DType::float32);
  // The same for any quantization of `source`: `make()` computes it once per `key`.
  const Tensor& get(const Tensor* source, const std::string& key,
                    const std::function<Tensor()>& make);
  // What kernels prepare from these weights and the model's (KernelContext::prepared).
  PreparedCache& prepared() { return prepared_; }
  // How many rounded or quantized copies it holds.
  std::size_t copies() const;

 private:
  std::map<std::pair<const Tensor*, std::string>, Tensor> rounded_;
  mutable std::mutex mutex_;
  PreparedCache prepared_;
};

// ---- profiling ---------------------------------------------------------------------------
// Where a run's time goes (`fpguard run --profile`). Each node's time is its own: the
// kernel, the rounding of its inputs and outputs, its bookkeeping, but not the nodes of
// its bodies (an If's or Loop's time excludes theirs) nor the observer's. Body nodes are
// named by their path (BodyNode::path) and sum over every run of their body.
struct NodeTime {
  std::string path;  // the display name ("Conv_3") or a body node's path
  std::string op_type;
  std::uint64_t calls = 0;  // over all runs together (a Loop body node: once per iteration)
  double ms = 0;            // in a run: the median over the runs
  // The node it ran fused into (RunOptions::fuse; its time is that node's), or "".
  std::string fused_into{};
};
// One op type: how many distinct nodes of it ran, and their time.
struct OpTypeTime {
  std::string op_type;
  std::uint64_t nodes = 0;
  double ms = 0;  // its nodes' times summed
};
struct Profile {
  std::vector<NodeTime> nodes;  // in the order they first ran
  std::uint64_t runs = 0;       // completed runs the medians are taken over
  double total_ms() const;      // the nodes' times summed
  // A run's time outside every node (median over the runs): from the session's start
  // (feeding the inputs) to its last node, less the nodes' times; the executor's work
  // between nodes (freeing dead values, looking values up, building each kernel's context).
  double outside_ms = 0;
};
// The op types of `p`, slowest first (ties by name).
std::vector<OpTypeTime> by_op_type(const Profile& p);

// Collects the time of each node over the runs of an executor given it
// (RunOptions::profiler). Not thread-safe: one run at a time. A run counts when its last
// main-graph node has run (Session::step); a node's time is the median of its times in
// each run (robust to a run whose threads lost their core); clear() starts afresh (after
// a warm-up run).
class Profiler {
 public:
  Profile profile() const;
  void clear();

 private:
  friend class Executor;
  friend class Session;
  struct Frame {
    std::size_t index = 0;
    std::chrono::steady_clock::time_point start{};
    std::chrono::steady_clock::duration nested{};  // of the nodes of its bodies
  };
  // A node starts (`node` identifies it across runs); stop() records its own time before
  // the observer sees it; leave() ends it (after the observer, or by an exception).
  void enter(const model::Node& node, const std::string& path);
  void stop();
  void leave();
  // `node` ran fused into `into` (a node already entered in this run): a call of no time.
  void fused(const model::Node& node, const std::string& path, const std::string& into);
  void start_run();  // a session starts (before its inputs are fed)
  void end_run();    // the last main-graph node ran
  struct Guard {     // leave()s when it goes out of scope; nothing when `p` is null
    Profiler* p = nullptr;
    ~Guard() {
      if (p) p->leave();
    }
  };
  std::vector<NodeTime> nodes_;              // ms: in the run under way
  std::vector<std::vector<double>> run_ms_;  // per node, its ms in each completed run
  std::map<const model::Node*, std::size_t> index_;
  std::vector<Frame> stack_;
  std::uint64_t runs_ = 0;
  std::chrono::steady_clock::time_point run_start_{};
  std::vector<double> outside_ms_;  // per completed run
};

struct RunOptions {
  PrecisionPolicy policy;
  int threads = 0;  // 0: all hardware threads
  Observer* observer = nullptr;
  std::shared_ptr<WeightCache> weights;  // nullptr: the executor makes its own
  // Hold float16/bfloat16 storage (initializers, inputs, Cast results, outputs) as
  // float32 without rounding: the float32 twin of a mixed-precision model (the reference
  // of `check` on a converted model).
  bool float32_storage = false;
  // The carrier of every floating value: float32 (the default), or float64 for the
  // high-precision truth run (weights and inputs widened to double, kernels computing in
  // double; float16/bfloat16 storage and Casts to them still round to that format).
  DType carrier = DType::float32;
  // Times every node of every run (nullptr: nothing is timed, nothing costs).
  Profiler* profiler = nullptr;
  // What kernels that round a weight themselves (OpTraits::rounds_weight: Conv, MatMul,
  // Gemm) keep of it: false, what they prepare from it rounded, once per weight and format
  // (fastest); true, the float32 prepared copy, which a float32 executor sharing the
  // WeightCache makes and keeps too, rounded again whenever the node runs (the latest
  // rounding kept: PreparedCache::latest). check's runs hold the weights once so
  // (docs/executor.md).
  bool prepare_in_float32 = false;
  // Executor::run and run_values run a Conv and the element-wise op that is the only
  // reader of its output as one node (docs/executor.md, "Fusion"), where the results are
  // bit for bit those of the two nodes apart and the observer does not watch values
  // (Observer::watches_values). Sessions stepped by an analysis never fuse.
  bool fuse = true;
};

class Session;

// Prepares a model for repeated runs: checks every op is supported (one Error listing
// all unsupported ops), orders the graph and computes liveness.
class Executor {
 public:
  Executor(const model::Model& m, RunOptions options = {});
  // Another executor of `like`'s model with other options: it shares `like`'s checks of
  // the model and its plans (a lockstep analysis builds three executors of one model).
  Executor(const Executor& like, RunOptions options);
  // Runs once. Inputs are matched by name to the graph's runtime inputs (an initializer
  // that is also a graph input may be overridden); missing inputs, unknown names and
  // dtype/rank mismatches with the declared type are Errors. Returns the graph outputs
  // in graph order.
  std::vector<NamedTensor> run(const std::vector<NamedTensor>& inputs) const;
  // The same for models whose inputs or outputs may be sequences or optionals (an
  // optional input is given as its tensor, its sequence, or Value::none()). run() refuses
  // an output that is not a tensor.
  std::vector<NamedValue> run_values(const std::vector<NamedValue>& inputs) const;
  const model::Model& model() const { return model_; }
  const RunOptions& options() const { return options_; }
  // The main graph's nodes in the order they run (indices into model().graph.nodes).
  const std::vector<std::size_t>& order() const;

  struct Slot;   // a value as the executor holds it (implementation detail)
  struct Scope;  // the values of one graph execution (implementation detail)

 private:
  friend class Session;
  struct Plan {  // per graph (the main graph and every subgraph)
    std::vector<std::size_t> order;
    // Per position of `order`: the values nothing reads after that node (its reads whose
    // last use it is, its outputs nobody reads later), freed once it has run.
    std::vector<std::vector<std::string>> dead_after;
    // Per position: the position of the element-wise node that may run fused into this
    // one (OpTraits::applies_epilogue), or 0 (never a fusion's target: it comes after).
    std::vector<std::size_t> fuse_with;
    // Per position: when fuse_with's (or defer's) node is an Add, the positions of the
    // element-wise nodes that may run fused after it, in order (their result the last
    // one's), or none.
    std::vector<std::vector<std::size_t>> fuse_then;
    // Per position: the position of an Add whose other input comes after this node, at
    // whose turn this node may run instead, fused with it, or 0 (an FPN's lateral Conv).
    std::vector<std::size_t> defer;
  };
  struct Fusion;  // what a fused node applies (executor.cpp)
  using Plans = std::map<const model::Graph*, Plan>;
  static void plan(Plans& plans, const model::Graph& g, const std::vector<std::string>& outer,
                   const std::string& where);
  void init_options();  // the weight cache, the carrier's check, the threads
  // Runs a subgraph (a body of `enclosing.back()`) on `scope`; `observer` sees its nodes,
  // `profiler` (if any) times them.
  void run_graph(const model::Graph& g, Scope& scope, Observer* observer,
                 const std::vector<Enclosing>& enclosing, Profiler* profiler) const;
  // Runs `node` (at `pos` of its graph's order) on the values of `scope` in `fmt`
  // (nullopt: float32); `observer` sees its kernel inputs and outputs. The outputs are
  // returned, not stored. Floating values of the scope held in another carrier are
  // converted to this executor's (rounded to `fmt` in their own carrier first).
  // `enclosing`: the control-flow nodes around it (empty in the main graph), `path` its
  // name as policies and observers know it (BodyNode::path; its display name in the main
  // graph). `profiler` (if any) times it and its bodies' nodes: the runs of the graph,
  // not the evaluations of a node in another format.
  std::vector<std::pair<std::string, Slot>> run_node(const model::Node& node, std::size_t pos,
                                                     Scope& scope, const std::optional<Format>& fmt,
                                                     Observer* observer,
                                                     const std::vector<Enclosing>& enclosing = {},
                                                     const std::string& path = {},
                                                     Profiler* profiler = nullptr,
                                                     const Fusion* fusion = nullptr) const;
  // Runs the Conv at `pos` of the main graph and the node at `next` (Plan::fuse_with), and
  // the ones at `then` after it (Plan::fuse_then; empty: none), as one where that is exact
  // for these values and formats (`fused`, `fused_then` then true), returning the last
  // fused node's outputs; else the Conv alone, returning its outputs (`next` runs in its
  // turn).
  std::vector<std::pair<std::string, Slot>> run_fused(std::size_t pos, std::size_t next,
                                                      const std::vector<std::size_t>& then,
                                                      Scope& scope, Observer* observer,
                                                      Profiler* profiler, bool& fused,
                                                      bool& fused_then) const;
  // The functions a fusion applies (Fusion points to them).
  struct FusionFns {
    std::function<void(float*, std::size_t, int)> epilogue, then;
    Tensor addend;  // an Add's other input rounded to the nodes' format, where no weight
  };
  // The fusion of the Conv at `pos` with the node at `next` (and `then`, where they can) on
  // the values of `scope`, or nullopt where the result would not be bit for bit the nodes'
  // (formats that do not commute with the op, other carriers and dtypes); `fns` holds its
  // functions.
  std::optional<Fusion> fusion_for(std::size_t pos, std::size_t next,
                                   const std::vector<std::size_t>& then, Scope& scope,
                                   FusionFns& fns) const;
  // fusion_for's Add `add` after `conv` (and the nodes at `then` after it, where they can
  // run fused): `x` the Conv's input 0, `fmt` the nodes' format.
  std::optional<Fusion> add_fusion(const model::Node& conv, const model::Node& add,
                                   const std::vector<std::size_t>& then, const Slot& x,
                                   const std::optional<Format>& fmt, Scope& scope,
                                   FusionFns& fns) const;
  // A fused Add: its other input added to the kernel's output 0 in place; false (nothing
  // done) when their shapes or dtypes differ.
  static bool add_in_place(KernelContext& ctx, const Fusion& f);
  bool fuses() const;  // whether run and run_values fuse (RunOptions::fuse, the observer)
  // Runs the body `sub` of the node `ctx` runs on `in`, in a scope inside `scope`, and
  // returns its outputs (KernelContext::run_subgraph); `chain` ends with that node.
  std::vector<Value> run_body(const model::Graph& sub, std::vector<Value> in, Scope& scope,
                              Observer* observer, const std::vector<Enclosing>& chain,
                              Profiler* profiler, const KernelContext& ctx) const;
  // The inputs of ctx.node, from `scope`, into `ctx` (inputs, their dtypes and stability,
  // values that are not tensors, an unrounded weight) as the node (named `here`, inside a
  // body when `body`) reads them in `fmt`; `converted` holds those converted from another
  // carrier. Returns the exact format of the first floating input (what data movement
  // passes on).
  std::string gather_inputs(KernelContext& ctx, const OpInfo& info, const std::string& here,
                            Scope& scope, const std::optional<Format>& fmt,
                            const Observer* observer, bool body,
                            std::vector<Tensor>& converted) const;
  // The next input of `ctx`, held by `s`, as the kernel reads it: quantized into the scaled
  // format, rounded to `fmt` (a weight through the WeightCache, or handed over unrounded),
  // converted to this carrier, or as it is; marks it stable (ctx.stable_inputs.back()).
  const Tensor* kernel_input(KernelContext& ctx, const OpInfo& info, Slot& s,
                             const std::string& here, const std::optional<Format>& fmt,
                             const Observer* observer, bool body,
                             std::vector<Tensor>& converted) const;
  // Shows a body node to `observer` (Observer::on_body_node).
  void observe_body(Observer& observer, const model::Node& node, std::size_t pos, Scope& scope,
                    const std::optional<Format>& fmt, const std::vector<Enclosing>& enclosing,
                    const std::string& path, const std::vector<const Tensor*>& inputs,
                    const std::vector<NamedTensor>& outputs) const;
  template <class Named>
  std::unique_ptr<Scope> feed(const std::vector<Named>& inputs) const;
  // One input: `tensor`, or else `other` (a sequence or an empty optional).
  void feed_one(Scope& scope, const std::string& name, const Tensor* tensor,
                const Value* other) const;
  void add_initializers(const model::Graph& g, Scope& scope) const;
  // Input `i` of `node` (named `path`), held by `s`, quantized into the policy's scaled
  // format (PrecisionPolicy::scaled), once per value (weights once per cache, but the first
  // two reads of check's runs); nullptr when it is not a scaled operand. `stable`: whether
  // its address lasts (a WeightCache entry); a copy of the call is kept in `held`.
  const Tensor* quantized_input(Slot& s, const model::Node& node, const std::string& path,
                                std::size_t i, bool& stable, std::vector<Tensor>& held) const;
  // Whether the next input of `ctx` (a weight held by `s`, which the node's format rounds)
  // goes to the kernel unrounded (KernelContext::unrounded): the op rounds its weight
  // itself (OpTraits::rounds_weight) and `observer` (on a body node: `body`) does not read
  // weights.
  bool hands_unrounded(const OpInfo& info, const KernelContext& ctx, const Slot& s,
                       const Observer* observer, bool body) const;
  // KernelContext::last_read for `node` at plan position `pos` of the main graph, whose
  // inputs `ctx` holds: input 0's tensor in `scope` where the node is its last reader and
  // reads it once, and it is the slot's own (no weight, view or conversion); else nullptr.
  Tensor* last_read(const model::Node& node, std::size_t pos, Scope& scope,
                    const KernelContext& ctx) const;

  const model::Model& model_;
  RunOptions options_;
  std::shared_ptr<const Plans> plans_;  // shared by the executors of one model
  std::string where_;
};

// One execution of an executor's main graph, advanced a node at a time: what a lockstep
// analysis needs (two sessions side by side, plus the next node evaluated in another
// format on one session's values). Executor::run is a session stepped to the end. The
// inputs, outputs and every value still to be read stay accessible through value()
// until the next step.
class Session {
 public:
  // Feeds and checks the inputs as Executor::run does.
  Session(const Executor& ex, const std::vector<NamedTensor>& inputs);
  Session(const Executor& ex, const std::vector<NamedValue>& inputs);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  bool done() const;
  std::size_t position() const { return pos_; }  // of the next node in Executor::order()
  const model::Node& next() const;
  // Runs the next node in the format the executor's policy gives it and keeps its
  // outputs; `observer` (if any) sees its kernel inputs and outputs. Values whose last
  // reader was the previous node are freed first.
  void step(Observer* observer = nullptr);
  // Evaluates the next node in `fmt` (nullopt: float32) on this session's values
  // without keeping anything or advancing, and returns its outputs (carriers, the
  // node's non-empty outputs in order): the "local" run of a node fed with another
  // run's inputs. `observer` (if any) sees the kernel inputs (rounded to `fmt`). With
  // `as`, an executor of the same model, the node runs with its options (carrier,
  // accumulation, storage) instead: a float32 local run on a float64 session's values,
  // each rounded to `fmt` from its float64 value.
  std::vector<NamedTensor> evaluate_next(const std::optional<Format>& fmt,
                                         Observer* observer = nullptr,
                                         const Executor* as = nullptr) const;
  // A live tensor as a carrier (floating values in the executor's carrier), or nullptr
  // (also for a sequence or an empty optional).
  const Tensor* value(const std::string& name) const;
  // The graph outputs in their storage dtypes (after done()); an output that is not a
  // tensor is an Error (outputs_values() returns it).
  std::vector<NamedTensor> outputs() const;
  std::vector<NamedValue> output_values() const;
  // outputs() and output_values(), each value that needs no conversion moved out of the
  // session instead of copied (a GPT-2's logits at sequence 512 are 103 MB): for a session
  // about to end, whose values nobody reads after. Executor::run and run_values use them.
  std::vector<NamedTensor> take_outputs();
  std::vector<NamedValue> take_output_values();

 private:
  friend class Executor;
  const Executor& ex_;
  std::unique_ptr<Executor::Scope> scope_;
  std::size_t pos_ = 0;
  bool fuse_ = false;  // Executor::run's sessions (RunOptions::fuse)
  // Positions of nodes that ran fused into an earlier one, skipped in their turn.
  std::vector<char> fused_;
  // Per position: 1 + the position of a node deferred to run in its turn (Plan::defer),
  // or 0.
  std::vector<std::size_t> deferred_;
  bool deferred(std::size_t pos) const;  // whether the node at `pos` waits for a later turn
  // Runs the node at `pos` fused with the one at `with` (and Plan::fuse_then's) where the
  // fusion is exact, else the node at `pos` alone.
  void run_fused(std::size_t pos, std::size_t with, Observer* observer);
  Tensor output(const std::string& name) const;  // a graph output, converted (outputs())
};

// The calibration of a scaled precision's static activation scales
// (PrecisionPolicy::activation_amax): runs `ex` (meant to emulate nothing: the reference) on
// every input set and returns, per (node path, input index) of each operand that
// is_scaled_operand, its largest finite |x| over all of them (initializers included).
std::map<std::pair<std::string, std::size_t>, double> calibrate_activations(
    const Executor& ex, const std::vector<std::vector<NamedTensor>>& samples);
std::map<std::pair<std::string, std::size_t>, double> calibrate_activations(
    const Executor& ex, const std::vector<std::vector<NamedValue>>& samples);

// The executor of `m` in `o` that `fpguard run` and fpguard.run use: a scaled precision of
// the amax rule (o.policy.scaled: fp8, tensor:, channel:) first gets its activations' amax
// calibrated on `samples` by a run that emulates nothing (static scaling, as deployed).
Executor calibrated_executor(const model::Model& m, RunOptions o,
                             const std::vector<std::vector<NamedValue>>& samples);

// ---- helpers shared by kernels and the CLI --------------------------------------------
bool is_float(DType d);
// Converts values to another dtype (float -> int truncates toward zero, saturating;
// -> bool is != 0; -> float16/bfloat16 rounds to nearest-even).
Tensor convert(const Tensor& t, DType to);
// A floating tensor in the carrier dtype (float32 or float64; others unchanged).
Tensor widen(const Tensor& t, DType carrier = DType::float32);

}  // namespace fpguard::exec
