// The executor: topological run, liveness-based freeing, per-node precision (the
// emulation model of docs/executor.md), observer callbacks.
#include <algorithm>
#include <cstring>
#include <set>

#include "core/parallel.hpp"
#include "exec/counting.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/limits.hpp"
#include "ops/left_nan.hpp"
#include "ops/ops.hpp"
#include "round/fast.hpp"

namespace fpguard::exec {

std::string display_name(const model::Node& n, std::size_t pos) {
  return n.name.empty() ? n.op_type + "_" + std::to_string(pos) : n.name;
}

const Tensor& KernelContext::in(std::size_t i) const {
  if (!has(i)) fail("input " + std::to_string(i) + " is missing");
  return *inputs[i];
}

Tensor& KernelContext::out(std::size_t i, DType dtype, std::vector<std::int64_t> shape) {
  FPG_CHECK(i < outputs.size());
  // Shapes come from the model's data (ConstantOfShape, Expand, Resize...): refuse what
  // cannot be held before allocating it.
  check_memory(element_count(shape, where) * itemsize(dtype), where);
  outputs[i] = Tensor(dtype, std::move(shape));
  return outputs[i];
}

Tensor& KernelContext::out_uninit(std::size_t i, DType dtype, std::vector<std::int64_t> shape) {
  FPG_CHECK(i < outputs.size());
  check_memory(element_count(shape, where) * itemsize(dtype), where);
  outputs[i] = Tensor::uninitialized(dtype, std::move(shape));
  return outputs[i];
}

std::optional<Value> KernelContext::value_of(std::size_t i) const {
  if (const Value* v = value_in(i)) return *v;
  if (!has(i)) return std::nullopt;
  const Tensor& t = *inputs[i];
  return t.dtype() == carrier ? convert(t, input_dtypes[i]) : t;
}

void KernelContext::set_output(std::size_t i, Value v) {
  FPG_CHECK(i < outputs.size());
  if (v.is_tensor()) {
    output_dtypes[i] = v.tensor.dtype();
    outputs[i] = std::move(v.tensor);
    return;
  }
  FPG_CHECK(i < output_values.size());  // the op is registered with kValues
  output_values[i] = std::move(v);
}

void KernelContext::round_weight() {
  if (!unrounded) return;
  inputs[unrounded->input] = unrounded->rounded();
  unrounded.reset();
}

void KernelContext::fail(const std::string& what) const {
  throw Error(where, what);
}

std::optional<Format> PrecisionPolicy::format_for(const model::Node& n) const {
  return format_for(n, n.name);
}

std::optional<Format> PrecisionPolicy::format_for(const model::Node& n,
                                                  const std::string& name) const {
  if (auto it = node_formats.find(name); it != node_formats.end()) {
    if (it->second.name == "float32") return std::nullopt;
    return it->second;
  }
  if (exclude_names.count(name) || exclude_op_types.count(n.op_type)) return std::nullopt;
  if (default_format && default_format->name == "float32") return std::nullopt;
  return default_format;
}

// A value as the executor holds it: a carrier tensor (floating values in the carrier), the
// dtype it is stored in, and the format its values are known to be exact in ("" when
// none was applied), so rounding at a boundary happens only where it changes anything.
struct Executor::Slot {
  Tensor t;
  DType storage = DType::float32;
  std::string exact_in;
  bool weight = false;             // an initializer: rounded once per format, never freed
  const Tensor* source = nullptr;  // the initializer in the model (weights)
  // The carrier: `t`, or for an initializer whose storage already is the carrier (float32
  // or float64, integers, bool) the model's own tensor, which is never copied.
  const Tensor& value() const { return view ? *view : t; }
  const Tensor* view = nullptr;
  // The value's scaled quantizations made for consumers (key: the scaled operand's), kept
  // while the value lives. std::map: entries never move.
  std::map<std::string, Tensor> quantized;
  // A sequence or an empty optional (then `t` is unused); null for a tensor, so tensors
  // pay nothing for it.
  std::unique_ptr<Value> other;
};

namespace {

std::string storage_format(DType d) {
  if (d == DType::float16) return "float16";
  if (d == DType::bfloat16) return "bfloat16";
  return "";
}

// float32_storage: 16-bit floating storage is held as float32 (RunOptions).
Executor::Slot make_slot(const Tensor& t, bool float32_storage, DType carrier) {
  Executor::Slot s;
  s.storage = t.dtype();
  s.t = widen(t, carrier);
  s.exact_in = storage_format(t.dtype());
  if (float32_storage && !s.exact_in.empty()) {
    s.storage = DType::float32;
    s.exact_in.clear();
  }
  return s;
}

Executor::Slot make_slot(Value v) {
  Executor::Slot s;
  s.other = std::make_unique<Value>(std::move(v));
  return s;
}

// "a tensor", "a sequence", "an empty optional": for errors.
std::string a_kind(ValueKind k) {
  return (k == ValueKind::none ? "an " : "a ") + std::string(to_string(k));
}

// A slot's value as a graph output or subgraph result: tensors in their storage dtype.
Value slot_value(const Executor::Slot& s) {
  if (s.other) return *s.other;
  return convert(s.value(), s.storage);
}

template <class T>
void round_in_place(Tensor& t, const Format& f, const RoundOptions& o) {
  auto d = t.data<T>();
  round(std::span<const T>(d.data(), d.size()), d, f, o);
}

void round_in_place(Tensor& t, const Format& f, const RoundOptions& o) {
  if (t.dtype() == DType::float64)
    round_in_place<double>(t, f, o);
  else
    round_in_place<float>(t, f, o);
}

// A float32 or float64 carrier rounded to `f` into a new tensor held in `carrier`. The
// rounding happens in the source's carrier, so a float64 value is rounded once (never
// through float32 first).
Tensor rounded_copy(const Tensor& t, const Format& f, const RoundOptions& o, DType carrier) {
  Tensor r = Tensor::uninitialized(t.dtype(), t.shape());
  if (t.dtype() == DType::float64) {
    const auto in = t.data<double>();
    round(std::span<const double>(in.data(), in.size()), r.data<double>(), f, o);
  } else {
    const auto in = t.data<float>();
    round(std::span<const float>(in.data(), in.size()), r.data<float>(), f, o);
  }
  if (r.dtype() == carrier) return r;  // moved (a conditional expression would copy it)
  return convert(r, carrier);
}

// What makes two rounded copies of one value differ: the format, the rounding options
// (not the thread count) and the carrier they are held in.
std::string round_key(const Format& f, const RoundOptions& o, DType carrier) {
  return f.name + "|" + std::to_string(static_cast<int>(o.rounding)) + "|" +
         std::to_string(o.saturate) + std::to_string(o.flush_subnormals) + "|" +
         std::to_string(o.seed) + "|" + std::string(to_string(carrier));
}

// A float32 or float64 carrier quantized into a scaled format, held in `carrier`. Unlike
// rounded_copy it quantizes in the destination carrier: the scales are computed in its
// precision (float32, as the hardware does), whichever session the value comes from, so
// a weight's one cached copy does not depend on the run that asked first.
// While an OperandCounting is installed on this thread, a copy of float32 values (input
// `input` of `node`) is made by it, which keeps the counts its pass takes.
Tensor scaled_copy(const Tensor& t, const ScaledOperand& op, DType carrier, const model::Node& node,
                   std::size_t input) {
  Tensor r =
      t.dtype() == carrier ? Tensor::uninitialized(t.dtype(), t.shape()) : convert(t, carrier);
  const Tensor& in = t.dtype() == carrier ? t : r;
  if (carrier == DType::float64) {
    const auto x = in.data<double>();
    round_scaled(std::span<const double>(x.data(), x.size()), r.data<double>(), op.layout,
                 op.format, op.options);
  } else if (OperandCounting* counting = OperandCounting::current();
             counting && t.dtype() == DType::float32) {
    counting->quantize(node, input, t.data<float>(), r.data<float>(), op);
  } else {  // (the counts of a run's operand are nobody's)
    const auto x = in.data<float>();
    detail::round_scaled_values(std::span<const float>(x.data(), x.size()), r.data<float>(),
                                op.layout, op.format, op.options);
  }
  return r;
}

// The name of the graph attribute of `n` that holds `g` (a body it runs).
std::string attribute_of(const model::Node& n, const model::Graph& g) {
  for (const auto& a : n.attributes) {
    if (const auto* sg = std::get_if<model::GraphPtr>(&a.value); sg && sg->get() == &g)
      return a.name;
    if (const auto* sgs = std::get_if<std::vector<model::GraphPtr>>(&a.value))
      for (const auto& sg : *sgs)
        if (sg.get() == &g) return a.name;
  }
  return g.name;
}

std::string dims_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

// The element-wise ops a node may run fused into (Executor::run_fused): an Add, or a unary
// op registered with its element-wise code (ElementwiseCode, which ops::in_place_unary
// applies).
bool fusable_op(const model::Node& n) {
  const OpInfo* info = Registry::info(n);
  return info && n.outputs.size() == 1 && !n.outputs[0].empty() &&
         (n.op_type == "Add" || info->elementwise.unary);
}

// Per position of `order`: the position of the node that may run fused into the node
// there (a Conv, BatchNormalization or MatMul: OpTraits::applies_epilogue), or 0 (`with`); and
// when that node is an Add, the positions of the element-wise nodes that may run fused
// after it, in order, or none (`then`: an ops::ElementwiseDag whose input is the Add's
// output and whose result is the last node's; Conv + Add + Relu, ResNet's residual blocks;
// MatMul + bias + GELU, BERT's and GPT-2's feed-forward layers). A node fused into the
// Conv is the only reader of the value before it (which is no graph output), reads it once
// (an activation: as its input 0), and its other inputs exist before the first node runs. An Add
// whose other input comes later (an FPN's lateral Conv plus the upsampled level above it) may still
// run fused into a Conv that runs at the Add's turn instead of its own (`defer`: the Add's
// position), where the Conv's inputs live until then (their last reader is the Conv, or
// comes after the Add). Whether the fusion is exact is decided when it runs.
struct FusionCandidates {
  std::vector<std::size_t> with, defer;
  std::vector<std::vector<std::size_t>> then;
};
// The readers and producers of a graph's values, by position of `order`, for the plan's
// fusions.
class FusionGraph {
 public:
  FusionGraph(const model::Graph& g, const std::vector<std::size_t>& order,
              const std::map<std::string, std::size_t>& last_use)
      : g_(g), order_(order), last_use_(last_use) {
    for (std::size_t pos = 0; pos < order.size(); ++pos) {
      const auto& n = node(pos);
      for (const auto& o : n.outputs) produced_[o] = pos;
      for (const auto& r : model::node_reads(n)) readers_[r].insert(pos);
    }
    for (const auto& o : g.outputs) outputs_.insert(o.name);
  }
  const model::Node& node(std::size_t pos) const { return g_.nodes[order_[pos]]; }

  // The position of the node that may run fused after a node whose output is `y` (its
  // sole reader), or 0.
  std::size_t sole_reader(const std::string& y) const {
    if (y.empty() || outputs_.count(y) || !readers_.count(y)) return 0;
    const auto& rd = readers_.at(y);
    if (rd.size() != 1) return 0;
    const std::size_t next = *rd.begin();
    const auto& n = node(next);
    if (!fusable_op(n) || std::count(n.inputs.begin(), n.inputs.end(), y) != 1) return 0;
    if (n.op_type == "Add" ? n.inputs.size() != 2 : n.inputs[0] != y) return 0;
    return next;
  }
  // Whether value `v` exists before position `first` (an input, an initializer, or the
  // output of an earlier node).
  bool exists_before(const std::string& v, std::size_t first) const {
    const auto it = produced_.find(v);
    return v.empty() || it == produced_.end() || it->second < first;
  }
  // Whether the inputs of the node at `next` but `y` exist before position `first`.
  bool ready(std::size_t next, const std::string& y, std::size_t first) const {
    const auto& in = node(next).inputs;
    return std::all_of(in.begin(), in.end(),
                       [&](const std::string& v) { return v == y || exists_before(v, first); });
  }
  // Whether the inputs of the node at `pos` live until position `at` (none is freed
  // after a reader between them).
  bool live_until(std::size_t pos, std::size_t at) const {
    const auto& in = node(pos).inputs;
    return std::all_of(in.begin(), in.end(), [&](const std::string& v) {
      const auto it = last_use_.find(v);
      return v.empty() || it == last_use_.end() || it->second == pos || it->second > at;
    });
  }
  // The nodes after the node at `add` (in order) that read its output, their own outputs
  // and scalars alone (a Constant's, or a value that exists before position `first`): the
  // longest run of them that an ops::ElementwiseDag can apply and where no value but the
  // last node's is read elsewhere. It ends at the first node that reads one of their
  // values and cannot join them.
  std::vector<std::size_t> elementwise_after(std::size_t add, std::size_t first) const {
    std::set<std::string> inside{node(add).outputs[0]};
    const auto is_inside = [&](const std::string& v) { return inside.count(v) > 0; };
    const auto scalar = [&](const std::string& v) {
      return exists_before(v, first) || node(produced_.at(v)).op_type == "Constant";
    };
    std::vector<std::size_t> steps, longest;
    // The last position that reads a value of `inside` (no node after it can join).
    std::size_t last = 0;
    const auto read_until = [&](const std::string& v) {
      if (const auto it = readers_.find(v); it != readers_.end() && !it->second.empty())
        last = std::max(last, *it->second.rbegin());
    };
    read_until(node(add).outputs[0]);
    constexpr std::size_t kLongest = 32;
    for (std::size_t p = add + 1; p <= last && p < order_.size() && steps.size() < kLongest; ++p) {
      const auto& n = node(p);
      const auto& in = n.inputs;
      if (std::none_of(in.begin(), in.end(), is_inside)) continue;
      if (!(n.domain.empty() || n.domain == "ai.onnx") || n.outputs.size() != 1 ||
          n.outputs[0].empty() || !ops::ElementwiseDag::supports(n) ||
          !std::all_of(in.begin(), in.end(),
                       [&](const std::string& v) { return is_inside(v) || scalar(v); }))
        break;
      steps.push_back(p);
      inside.insert(n.outputs[0]);
      read_until(n.outputs[0]);
      if (closed(inside, steps)) longest = steps;
    }
    return longest;
  }

 private:
  // Whether the values of `inside` but the last step's output are read by the steps
  // alone (and are no graph outputs).
  bool closed(const std::set<std::string>& inside, const std::vector<std::size_t>& steps) const {
    const std::string& result = node(steps.back()).outputs[0];
    return std::all_of(inside.begin(), inside.end(), [&](const std::string& v) {
      if (v == result) return true;
      if (outputs_.count(v)) return false;
      const auto it = readers_.find(v);
      return it == readers_.end() ||
             std::all_of(it->second.begin(), it->second.end(), [&](std::size_t r) {
               return std::find(steps.begin(), steps.end(), r) != steps.end();
             });
    });
  }

  const model::Graph& g_;
  const std::vector<std::size_t>& order_;
  const std::map<std::string, std::size_t>& last_use_;
  std::map<std::string, std::size_t> produced_;           // value -> its producer's position
  std::map<std::string, std::set<std::size_t>> readers_;  // value -> positions reading it
  std::set<std::string> outputs_;                         // the graph's
};

FusionCandidates fusion_candidates(const model::Graph& g, const std::vector<std::size_t>& order,
                                   const std::map<std::string, std::size_t>& last_use) {
  FusionCandidates fuse{.with = std::vector<std::size_t>(order.size(), 0),
                        .defer = std::vector<std::size_t>(order.size(), 0),
                        .then = std::vector<std::vector<std::size_t>>(order.size())};
  const FusionGraph fg(g, order, last_use);
  std::set<std::size_t> targets;  // positions some node fuses with in its own turn
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const auto& first = fg.node(pos);
    const OpTraits* traits = Registry::traits(first);
    if (!traits || !traits->applies_epilogue || first.outputs.size() != 1) continue;
    const std::string& y = first.outputs[0];
    const std::size_t next = fg.sole_reader(y);
    if (!next) continue;
    const auto& n = fg.node(next);
    std::size_t runs_at = pos;
    if (fg.ready(next, y, pos)) {
      fuse.with[pos] = next;
      targets.insert(next);
    } else if (n.op_type == "Add" && fg.live_until(pos, next)) {
      fuse.defer[pos] = runs_at = next;
    } else {
      continue;
    }
    if (n.op_type == "Add") fuse.then[pos] = fg.elementwise_after(next, runs_at);
  }
  // An Add that a node fuses with in its own turn is that node's (Add(Conv, Conv)).
  for (std::size_t pos = 0; pos < order.size(); ++pos)
    if (fuse.defer[pos] && targets.count(fuse.defer[pos])) fuse.defer[pos] = 0, fuse.then[pos] = {};
  return fuse;
}

// Whether rounding to `f` with `o` commutes with Relu: round(relu(x)) == relu(round(x))
// for every float32 x, NaN and infinities included, so that a Conv fused with its Relu
// may round once, after both. It holds where negative values round to a value <= 0
// (infinities catch an overflow, where a format without them may give NaN, and relu(NaN)
// is NaN), NaN rounds to NaN, and the rounding is a function of the value alone.
bool relu_commutes(const Format& f, const RoundOptions& o) {
  return f.is_signed && f.has_inf() && o.rounding != Rounding::stochastic;
}

}  // namespace

// What a node fused into a Conv applies (Executor::run_fused).
struct Executor::Fusion {
  const ops::InPlace* epilogue = nullptr;  // an activation, which the kernel applies
  const Tensor* addend = nullptr;          // Add's other input, added after the kernel
  bool addend_first = false;               // it is the Add's input 0
  // The nodes' format (an emulated run): the kernel's output, the sums and each result
  // after the Add rounded to it, as apart.
  std::optional<ArrayRounder> round{};
  const ops::InPlace* then = nullptr;  // element-wise nodes after the Add, in the same pass
  std::size_t then_rank = 0;           // the largest rank of their scalar operands
  std::string output;                  // the last fused node's output: the result's name
  mutable bool applied = false;        // false: shapes differed, the Conv ran alone
};

// The values a graph sees: its own, then those of the enclosing graphs' scopes.
struct Executor::Scope {
  std::map<std::string, Slot> values;
  Scope* parent = nullptr;

  Slot* find(const std::string& name) {
    for (Scope* s = this; s; s = s->parent)
      if (auto it = s->values.find(name); it != s->values.end()) return &it->second;
    return nullptr;
  }
};

void Executor::plan(Plans& plans, const model::Graph& g, const std::vector<std::string>& outer,
                    const std::string& where) {
  Plan p;
  p.order = model::topological_order(g, where, outer);
  const auto last_use = model::last_use(g, p.order);
  p.dead_after.resize(p.order.size());
  for (std::size_t pos = 0; pos < p.order.size(); ++pos) {
    const auto& node = g.nodes[p.order[pos]];
    auto dies_here = [&](const std::string& name) {
      const auto lu = last_use.find(name);
      return lu != last_use.end() && lu->second == pos;
    };
    for (const auto& name : model::node_reads(node))
      if (dies_here(name)) p.dead_after[pos].push_back(name);
    for (const auto& name : node.outputs)
      if (!name.empty() && dies_here(name) &&
          std::find(p.dead_after[pos].begin(), p.dead_after[pos].end(), name) ==
              p.dead_after[pos].end())
        p.dead_after[pos].push_back(name);
  }
  auto fuse = fusion_candidates(g, p.order, last_use);
  p.fuse_with = std::move(fuse.with);
  p.fuse_then = std::move(fuse.then);
  p.defer = std::move(fuse.defer);
  // Values visible to subgraphs: everything of this scope and the enclosing ones.
  std::vector<std::string> visible = outer;
  for (const auto& v : g.inputs) visible.push_back(v.name);
  for (const auto& t : g.initializers) visible.push_back(t.name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) visible.push_back(o);
  for (const auto& n : g.nodes)
    for (const auto& a : n.attributes) {
      if (const auto* sg = std::get_if<model::GraphPtr>(&a.value))
        plan(plans, **sg, visible, where);
      if (const auto* sgs = std::get_if<std::vector<model::GraphPtr>>(&a.value))
        for (const auto& sg : *sgs) plan(plans, *sg, visible, where);
    }
  plans[&g] = std::move(p);
}

const Tensor& WeightCache::get(const Tensor* source, const Tensor& weight, const Format& f,
                               const RoundOptions& o, DType carrier) {
  // Same format, different rounding options or carrier: a different rounded tensor.
  return get(source, round_key(f, o, carrier), [&] {
    Tensor r = rounded_copy(weight, f, o, carrier);
    // A weight viewing its bytes (a file's map, the parsed model's buffer) that is already
    // exact in `f`: the cache shares the view instead of holding a copy of the same bytes.
    if (weight.is_view() && r.dtype() == weight.dtype() &&
        std::memcmp(r.bytes(), weight.bytes(), r.nbytes()) == 0)
      return weight;
    return r;
  });
}

const Tensor& WeightCache::get(const Tensor* source, const std::string& key,
                               const std::function<Tensor()>& make) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto w = rounded_.find({source, key});
  if (w == rounded_.end()) w = rounded_.emplace(std::make_pair(source, key), make()).first;
  return w->second;  // std::map nodes never move
}

std::size_t WeightCache::copies() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return rounded_.size();
}

std::shared_ptr<const void> PreparedCache::get_any(
    const model::Node& node, const std::string& key,
    const std::function<std::shared_ptr<const void>()>& make) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto [it, fresh] = items_.try_emplace({&node, key});
  if (fresh) {
    try {
      it->second = make();
    } catch (...) {
      items_.erase(it);
      throw;
    }
  }
  return it->second;
}

unsigned PreparedCache::reads(const model::Node& node, const std::string& key) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return reads_[{&node, key}]++;
}

std::shared_ptr<const void> PreparedCache::latest_any(
    const model::Node& node, const std::string& key,
    const std::function<std::shared_ptr<const void>()>& make) {
  const std::lock_guard<std::mutex> lock(mutex_);
  Key k{&node, key};
  if (!latest_ || latest_key_ != k) {
    latest_.reset();  // before making the next: one is held at a time
    latest_ = make();
    latest_key_ = std::move(k);
  }
  return latest_;
}

Executor::Executor(const model::Model& m, RunOptions options)
    : model_(m), options_(std::move(options)), where_(m.path.string()) {
  init_options();
  const auto missing = unsupported_ops(m.graph);
  if (!missing.empty()) {
    std::string list;
    for (const auto& op : missing) list += (list.empty() ? "" : ", ") + op;
    throw Error(where_,
                "unsupported op" + std::string(missing.size() > 1 ? "s" : "") + ": " + list);
  }
  const auto opset = m.default_opset();
  for (const auto& n : m.graph.nodes) {
    const auto* info = Registry::global().find(n.op_type);
    if (opset < info->min_opset)
      throw Error(where_ + ": " + n.describe(), "opset " + std::to_string(opset) +
                                                    " is older than this kernel supports (" +
                                                    std::to_string(info->min_opset) + ")");
  }
  auto plans = std::make_shared<Plans>();
  plan(*plans, m.graph, {}, where_);
  plans_ = std::move(plans);
}

Executor::Executor(const Executor& like, RunOptions options)
    : model_(like.model_), options_(std::move(options)), plans_(like.plans_), where_(like.where_) {
  init_options();
}

void Executor::init_options() {
  if (!options_.weights) options_.weights = std::make_shared<WeightCache>();
  if (options_.carrier != DType::float32 && options_.carrier != DType::float64)
    throw Error(where_, "the carrier must be float32 or float64, not " +
                            std::string(to_string(options_.carrier)));
  if (options_.threads <= 0) options_.threads = available_cores();
  ops::set_blas_threads(options_.threads);
}

const std::vector<std::size_t>& Executor::order() const {
  return plans_->at(&model_.graph).order;
}

template <class Named>
std::unique_ptr<Executor::Scope> Executor::feed(const std::vector<Named>& inputs) const {
  if (options_.profiler) options_.profiler->start_run();
  const auto& g = model_.graph;
  auto scope = std::make_unique<Scope>();
  for (const auto& in : inputs) {
    if constexpr (std::is_same_v<Named, NamedTensor>)
      feed_one(*scope, in.name, &in.tensor, nullptr);
    else
      feed_one(*scope, in.name, in.value.is_tensor() ? &in.value.tensor : nullptr, &in.value);
  }
  for (const auto* v : g.runtime_inputs())
    if (!scope->values.count(v->name)) throw Error(where_, "input '" + v->name + "' was not given");
  add_initializers(g, *scope);
  return scope;
}

void Executor::feed_one(Scope& scope, const std::string& name, const Tensor* tensor,
                        const Value* other) const {
  const auto& g = model_.graph;
  auto& values = scope.values;
  const model::ValueInfo* declared = nullptr;
  for (const auto& v : g.inputs)
    if (v.name == name) declared = &v;
  if (!declared) {
    std::vector<std::string> names;
    for (const auto* v : g.runtime_inputs()) names.push_back(v->name);
    std::string msg = "the model has no input named '" + name + "'";
    if (auto hint = did_you_mean(name, names); !hint.empty())
      msg += "; did you mean '" + hint + "'?";
    throw Error(where_, msg);
  }
  const auto& vi = *declared;
  const std::string w = where_ + ": input '" + name + "'";
  const ValueKind kind = tensor ? ValueKind::tensor : other->kind;
  const bool fits = vi.kind == model::TypeKind::optional ||
                    (vi.kind == model::TypeKind::tensor && kind == ValueKind::tensor) ||
                    (vi.kind == model::TypeKind::sequence && kind == ValueKind::sequence);
  if (vi.kind == model::TypeKind::other)
    throw Error(w, "its declared type (a map or sparse tensor) is not supported");
  if (!fits)
    throw Error(w, "is " + a_kind(kind) + " but the model declares " +
                       (vi.kind == model::TypeKind::sequence ? "a sequence" : "a tensor"));
  if (!tensor) {
    values[name] = make_slot(*other);
    return;
  }
  const Tensor& t = *tensor;
  if (vi.elem_type != 0) {
    const auto want = model::dtype_of(vi.elem_type);
    if (!want)
      throw Error(w, "declared type " + model::onnx_type_name(vi.elem_type) + " is not supported");
    const bool bf16_bits = *want == DType::bfloat16 && t.dtype() == DType::uint16;
    if (*want != t.dtype() && !bf16_bits)
      throw Error(w, "has dtype " + std::string(to_string(t.dtype())) + " but the model declares " +
                         std::string(to_string(*want)));
  }
  if (vi.has_shape) {
    const auto& s = t.shape();
    if (s.size() != vi.shape.size())
      throw Error(w, "has shape " + dims_text(s) + " but the model declares rank " +
                         std::to_string(vi.shape.size()));
    for (std::size_t d = 0; d < s.size(); ++d)
      if (vi.shape[d].fixed() && vi.shape[d].value != s[d])
        throw Error(w, "dimension " + std::to_string(d) + " is " + std::to_string(s[d]) +
                           " but the model declares " + std::to_string(vi.shape[d].value));
  }
  if (vi.elem_type == model::onnx_elem_type(DType::bfloat16) && t.dtype() == DType::uint16) {
    // NumPy and ONNX's own test data carry bfloat16 as its uint16 bit patterns.
    Tensor bits(DType::bfloat16, t.shape());
    std::copy(t.bytes(), t.bytes() + t.nbytes(), bits.bytes());
    values[name] = make_slot(bits, options_.float32_storage, options_.carrier);
    return;
  }
  values[name] = make_slot(t, options_.float32_storage, options_.carrier);
}

bool Executor::fuses() const {
  return options_.fuse && (!options_.observer || !options_.observer->watches_values());
}

std::vector<NamedTensor> Executor::run(const std::vector<NamedTensor>& inputs) const {
  Session s(*this, inputs);
  s.fuse_ = fuses();
  while (!s.done()) s.step(options_.observer);
  return s.take_outputs();
}

std::vector<NamedValue> Executor::run_values(const std::vector<NamedValue>& inputs) const {
  Session s(*this, inputs);
  s.fuse_ = fuses();
  while (!s.done()) s.step(options_.observer);
  return s.take_output_values();
}

namespace {

// The storage dtype of a node's float outputs: the first input in the carrier's storage
// dtype (a float16 model stays float16), else float32; a kernel may say otherwise.
DType float_output_storage(const KernelContext& ctx) {
  for (std::size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.inputs[i] && ctx.inputs[i]->dtype() == ctx.carrier) return ctx.input_dtypes[i];
  return DType::float32;
}

// The outputs `ctx`'s kernel produced, held as the executor holds values: in the carrier,
// rounded to their storage format and to `fmt` (the node's format; data movement passes
// `carried_format` on instead, Cast rounding itself); output 0 already is where `rounded`
// (a fused Add rounded it).
std::vector<std::pair<std::string, Executor::Slot>> node_outputs(
    KernelContext& ctx, bool moves_data, const std::optional<Format>& fmt, const RunOptions& o,
    const std::string& carried_format, bool rounded = false) {
  const DType carrier = ctx.carrier, float_storage = float_output_storage(ctx);
  std::vector<std::pair<std::string, Executor::Slot>> out;
  for (std::size_t i = 0; i < ctx.node.outputs.size(); ++i) {
    const std::string& name = ctx.node.outputs[i];
    if (name.empty()) continue;
    if (i < ctx.output_values.size() && ctx.output_values[i]) {
      out.emplace_back(name, make_slot(std::move(*ctx.output_values[i])));
      continue;
    }
    Executor::Slot s;
    Tensor t = std::move(ctx.outputs[i]);
    s.storage = ctx.output_dtypes[i].value_or(t.dtype() == carrier ? float_storage : t.dtype());
    if (o.float32_storage && !storage_format(s.storage).empty()) s.storage = DType::float32;
    // A computed float32 result in a float64 run would be a kernel computing in float: a
    // bug. (Data movement may pass stored float32 values on, e.g. a Constant: widened.)
    FPG_CHECK(moves_data || !(carrier == DType::float64 && t.dtype() == DType::float32));
    if (t.dtype() != carrier && is_float(t.dtype())) t = widen(t, carrier);
    if (t.dtype() == carrier) {
      const std::string sf = storage_format(s.storage);
      if (moves_data) {
        // Kernels that change the storage type (Cast) round to it themselves.
        s.exact_in = sf.empty() ? carried_format : sf;
      } else {
        if (!sf.empty()) round_in_place(t, parse_format(sf), {});
        if (fmt && !(rounded && i == 0)) round_in_place(t, *fmt, o.policy.round_options);
        s.exact_in = fmt ? fmt->name : sf;
      }
    }
    s.t = std::move(t);
    out.emplace_back(name, std::move(s));
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, Executor::Slot>> Executor::run_node(
    const model::Node& node, std::size_t pos, Scope& scope, const std::optional<Format>& fmt,
    Observer* observer, const std::vector<Enclosing>& enclosing, const std::string& path,
    Profiler* profiler, const Fusion* fusion) const {
  const auto* info = Registry::global().find(node.op_type);
  const auto& policy = options_.policy;
  const std::string here = path.empty() ? display_name(node, pos) : path;
  if (profiler) profiler->enter(node, here);
  const Profiler::Guard timing{profiler};
  KernelContext ctx{.node = node,
                    .opset = model_.default_opset(),
                    .threads = options_.threads,
                    .where = where_ + ": " + node.describe(),
                    .accumulate = fmt && policy.accumulate && policy.accumulate->name != "float32"
                                      ? &*policy.accumulate
                                      : nullptr,
                    .accumulation = policy.accumulation,
                    .float32_storage = options_.float32_storage,
                    .prepare_in_float32 = options_.prepare_in_float32,
                    .carrier = options_.carrier,
                    .prepared = &options_.weights->prepared()};
  std::map<const model::Graph*, std::size_t> runs;  // of each body, for Enclosing::iteration
  ctx.run_subgraph = [&](const model::Graph& sub, std::vector<Value> in) {
    std::vector<Enclosing> chain = enclosing;
    chain.push_back({.node = &node,
                     .path = here,
                     .attribute = attribute_of(node, sub),
                     .iteration = runs[&sub]++});
    return run_body(sub, std::move(in), scope, observer, chain, profiler, ctx);
  };
  std::vector<Tensor> converted;  // inputs converted from another carrier or rounded
  const std::string carried_format =
      gather_inputs(ctx, *info, here, scope, fmt, observer, !enclosing.empty(), converted);
  if (!observer && enclosing.empty() && info->kind == OpKind::data_movement)
    ctx.last_read = last_read(node, pos, scope, ctx);
  ctx.outputs.resize(node.outputs.size());
  ctx.output_dtypes.resize(node.outputs.size());
  if (info->accepts & kValues) ctx.output_values.resize(node.outputs.size());
  if (fusion) ctx.epilogue = fusion->epilogue;
  info->kernel(ctx);
  if (fusion) fusion->applied = add_in_place(ctx, *fusion);
  auto out = node_outputs(ctx, info->kind == OpKind::data_movement, fmt, options_, carried_format,
                          fusion && fusion->applied && fusion->round);
  if (fusion && fusion->applied) out.at(0).first = fusion->output;
  if (profiler) profiler->stop();
  if (observer) {  // lend the outputs to the observer without copying them
    std::vector<NamedTensor> produced;
    for (auto& [name, slot] : out)
      if (!slot.other) produced.push_back({name, std::move(slot.t)});
    if (enclosing.empty())
      observer->on_node(node, pos, ctx.inputs, produced);
    else
      observe_body(*observer, node, pos, scope, fmt, enclosing, here, ctx.inputs, produced);
    std::size_t k = 0;
    for (auto& [name, slot] : out)
      if (!slot.other) slot.t = std::move(produced[k++].tensor);
  }
  return out;
}

namespace {

// Whether `a` broadcasts along the last axis of `y` alone: a bias, [N] or [1, ..., 1, N]
// against [..., N] (the Add's result then has y's shape).
bool is_row_bias(const Tensor& a, const Tensor& y) {
  const auto& as = a.shape();
  const auto& ys = y.shape();
  if (as.empty() || ys.empty() || as.size() > ys.size() || as.back() != ys.back()) return false;
  return a.size() == static_cast<std::size_t>(as.back());
}

}  // namespace

bool Executor::add_in_place(KernelContext& ctx, const Fusion& f) {
  if (!f.addend) return true;
  Tensor& y = ctx.outputs.at(0);
  const Tensor& a = *f.addend;
  if (y.dtype() != DType::float32 || a.dtype() != DType::float32) return false;
  // The same shape (a residual), or a bias along the last axis (a MatMul's).
  const bool row = y.shape() != a.shape();
  if (row && !is_row_bias(a, y)) return false;
  // (a scalar of higher rank would broadcast the nodes after the Add to another shape)
  if (f.then && f.then_rank > y.shape().size()) return false;
  float* py = y.data<float>().data();
  const float* pa = a.data<float>().data();
  const std::size_t width = row ? a.size() : y.size();
  // The Add kernel's sums, its input 0 on the left: the same bits, NaNs included.
  // The nodes after the Add take each piece of sums while it is in the cache.
  constexpr std::size_t kPiece = 4096;
  detail::parallel_for(
      y.size(), ctx.threads > 1 ? 0 : 1,
      [&](std::size_t lo, std::size_t hi) {
        for (std::size_t piece = lo; piece < hi; piece += kPiece) {
          const std::size_t end = std::min(hi, piece + kPiece);
          const auto round_piece = [&] {
            if (f.round) (*f.round)(py + piece, py + piece, end - piece);
          };
          round_piece();  // the kernel's output, as its node's
          for (std::size_t i = piece; i < end;) {
            // A run of y along one copy of the addend.
            const std::size_t at = i % width, n = std::min(end - i, width - at);
            const float* pb = pa + at;
            float* out = py + i;
            if (f.addend_first)
              for (std::size_t k = 0; k < n; ++k) out[k] = ops::left_nan_sum(pb[k], out[k]);
            else
              for (std::size_t k = 0; k < n; ++k) out[k] = ops::left_nan_sum(out[k], pb[k]);
            i += n;
          }
          round_piece();  // the sums, as the Add's
          if (f.then) (*f.then)(py + piece, end - piece, 1);
        }
      },
      64);
  return true;
}

namespace {

// A float32 tensor of the scope, or nullptr (absent, another dtype, not a tensor).
const Tensor* float32_value(const Executor::Slot* s) {
  if (!s || s->other || s->value().dtype() != DType::float32) return nullptr;
  return &s->value();
}

// The activation `n` as an in-place function on float32 values (its bounds, Clip's, read
// from the scope), or an empty function where it cannot be one.
template <class Scope>
ops::InPlace activation_of(const model::Node& n, std::int64_t opset, Scope& scope) {
  const Tensor* bounds[2] = {nullptr, nullptr};
  for (std::size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
    if (n.inputs[i].empty()) continue;
    bounds[i - 1] = float32_value(scope.find(n.inputs[i]));
    if (!bounds[i - 1] || bounds[i - 1]->size() == 0) return {};
  }
  return ops::in_place_unary(n, opset, bounds[0], bounds[1]);
}

// The element-wise nodes at positions `then` of `order` after the Add `add`
// (Plan::fuse_then) as one ops::ElementwiseDag on the values of `scope`, or nullopt where
// one cannot be a step (a scalar operand that is no float32 tensor of one value). A
// Constant that has not run yet gives its value attribute. In a format `fmt` (every
// node's), the scalars and each step's result are rounded to it. `rank`: the largest rank
// of the scalars.
template <class Scope>
std::optional<ops::ElementwiseDag> elementwise_dag(
    const model::Graph& g, const std::vector<std::size_t>& order, const model::Node& add,
    const std::vector<std::size_t>& then, std::int64_t opset, const std::optional<Format>& fmt,
    const RoundOptions& round_options, Scope& scope, std::size_t& rank) {
  using Operand = ops::ElementwiseDag::Operand;
  if (then.empty()) return std::nullopt;
  std::map<std::string, int> value{{add.outputs[0], 0}};  // the DAG's values
  ops::ElementwiseDag dag;
  rank = 0;
  for (const std::size_t at : then) {
    const model::Node& n = g.nodes[order[at]];
    std::vector<std::optional<Operand>> in;
    for (const auto& v : n.inputs) {
      if (v.empty()) {
        in.emplace_back();
        continue;
      }
      if (const auto it = value.find(v); it != value.end()) {
        in.push_back(Operand{.value = it->second});
        continue;
      }
      const Tensor* t = float32_value(scope.find(v));
      for (std::size_t p = at; !t && p-- > 0;) {
        const model::Node& c = g.nodes[order[p]];
        if (c.op_type == "Constant" && c.outputs.size() == 1 && c.outputs[0] == v)
          t = c.attr_tensor("value");
      }
      if (!t || t->dtype() != DType::float32 || t->size() != 1) return std::nullopt;
      rank = std::max(rank, t->shape().size());
      const float scalar = t->template data<float>()[0];
      in.push_back(
          Operand{.value = -1, .scalar = fmt ? round(scalar, *fmt, round_options) : scalar});
    }
    if (!dag.append(n, opset, in)) return std::nullopt;
    value[n.outputs[0]] = static_cast<int>(dag.size());
  }
  if (fmt) dag.round_to(*fmt, round_options);
  return dag;
}

}  // namespace

std::optional<Executor::Fusion> Executor::fusion_for(std::size_t pos, std::size_t next,
                                                     const std::vector<std::size_t>& then,
                                                     Scope& scope, FusionFns& fns) const {
  const auto& g = model_.graph;
  const model::Node& conv = g.nodes[order()[pos]];
  const model::Node& n = g.nodes[order()[next]];
  const auto& policy = options_.policy;
  const auto fmt = policy.format_for(conv), fmt_next = policy.format_for(n);
  const Slot* x = scope.find(conv.inputs.at(0));
  if (options_.carrier != DType::float32 || !float32_value(x) ||
      fmt.has_value() != fmt_next.has_value() || (fmt && !(*fmt == *fmt_next)))
    return std::nullopt;
  // The Conv's output is rounded to its storage format and to `fmt`. A fused Add (and the
  // nodes after it) rounds the Conv's output, its sums and each node's result to `fmt` as
  // the nodes apart would (a float32 model, a rounding of the value alone); an activation
  // applied by the kernel cannot, and only Relu commutes with the rounding after it, in
  // some formats.
  const std::string storage = options_.float32_storage ? "" : storage_format(x->storage);
  const bool rounds_each = fmt && storage.empty() && n.op_type == "Add" &&
                           policy.round_options.rounding != Rounding::stochastic;
  if ((fmt || !storage.empty()) && !rounds_each) {
    if (n.op_type != "Relu") return std::nullopt;
    if (fmt && !relu_commutes(*fmt, policy.round_options)) return std::nullopt;
    if (!storage.empty() && !relu_commutes(parse_format(storage), {})) return std::nullopt;
  }
  if (n.op_type == "Add") return add_fusion(conv, n, then, *x, fmt, scope, fns);
  Fusion f{.output = n.outputs[0]};
  fns.epilogue = activation_of(n, model_.default_opset(), scope);
  if (!fns.epilogue) return std::nullopt;
  f.epilogue = &fns.epilogue;
  return f;
}

std::optional<Executor::Fusion> Executor::add_fusion(
    const model::Node& conv, const model::Node& add, const std::vector<std::size_t>& then,
    const Slot& x, const std::optional<Format>& fmt, Scope& scope, FusionFns& fns) const {
  const auto& g = model_.graph;
  const auto& policy = options_.policy;
  Fusion f{.output = add.outputs[0]};
  const bool first = add.inputs[1] == conv.outputs[0];
  const Slot* a = scope.find(add.inputs[first ? 0 : 1]);
  if (!float32_value(a) || a->storage != x.storage) return std::nullopt;
  f.addend = &a->value();
  f.addend_first = first;
  if (fmt) {  // the addend as the Add reads it: rounded to fmt (a weight's from the cache)
    f.round.emplace(*fmt, policy.round_options);  // (a piece at a time, on its thread)
    if (a->exact_in != fmt->name) {
      if (a->weight) {
        f.addend = &options_.weights->get(a->source, a->value(), *fmt, policy.round_options,
                                          options_.carrier);
      } else {
        fns.addend = rounded_copy(a->value(), *fmt, policy.round_options, options_.carrier);
        f.addend = &fns.addend;
      }
    }
  }
  const bool same_format = std::all_of(then.begin(), then.end(), [&](std::size_t at) {
    return policy.format_for(g.nodes[order()[at]]) == fmt;
  });
  auto dag = same_format ? elementwise_dag(g, order(), add, then, model_.default_opset(), fmt,
                                           policy.round_options, scope, f.then_rank)
                         : std::nullopt;
  if (dag) {
    fns.then = *dag;
    f.then = &fns.then;
    f.output = g.nodes[order()[then.back()]].outputs[0];
  }
  return f;
}

std::vector<std::pair<std::string, Executor::Slot>> Executor::run_fused(
    std::size_t pos, std::size_t next, const std::vector<std::size_t>& then, Scope& scope,
    Observer* observer, Profiler* profiler, bool& fused, bool& fused_then) const {
  const auto& g = model_.graph;
  const model::Node& conv = g.nodes[order()[pos]];
  const auto fmt = options_.policy.format_for(conv);
  FusionFns fns;
  const auto f = fusion_for(pos, next, then, scope, fns);
  auto out = run_node(conv, pos, scope, fmt, observer, {}, {}, profiler, f ? &*f : nullptr);
  fused = f && f->applied;
  fused_then = fused && f->then;
  if (profiler && fused) {
    std::vector<std::size_t> ran{next};
    if (fused_then) ran.insert(ran.end(), then.begin(), then.end());
    for (const std::size_t at : ran) {
      const model::Node& n = g.nodes[order()[at]];
      profiler->fused(n, display_name(n, at), display_name(conv, pos));
    }
  }
  return out;
}

std::vector<Value> Executor::run_body(const model::Graph& sub, std::vector<Value> in, Scope& scope,
                                      Observer* observer, const std::vector<Enclosing>& chain,
                                      Profiler* profiler, const KernelContext& ctx) const {
  Scope inner;
  inner.parent = &scope;
  if (in.size() != sub.inputs.size())
    ctx.fail("subgraph '" + sub.name + "' takes " + std::to_string(sub.inputs.size()) +
             " inputs, given " + std::to_string(in.size()));
  for (std::size_t i = 0; i < in.size(); ++i)
    inner.values[sub.inputs[i].name] =
        in[i].is_tensor() ? make_slot(in[i].tensor, options_.float32_storage, options_.carrier)
                          : make_slot(std::move(in[i]));
  add_initializers(sub, inner);
  run_graph(sub, inner, observer, chain, profiler);
  std::vector<Value> out;
  for (const auto& o : sub.outputs) {
    Slot* s = inner.find(o.name);
    if (!s) ctx.fail("subgraph output '" + o.name + "' was not produced");
    out.push_back(slot_value(*s));
  }
  return out;
}

std::string Executor::gather_inputs(KernelContext& ctx, const OpInfo& info, const std::string& here,
                                    Scope& scope, const std::optional<Format>& fmt,
                                    const Observer* observer, bool body,
                                    std::vector<Tensor>& converted) const {
  const model::Node& node = ctx.node;
  converted.reserve(node.inputs.size());
  std::string carried_format;  // what data-movement ops pass on
  for (const auto& name : node.inputs) {
    if (name.empty()) {
      ctx.inputs.push_back(nullptr);
      ctx.input_dtypes.push_back(DType::float32);
      continue;
    }
    Slot* found = scope.find(name);
    if (!found) throw Error(ctx.where, "input '" + name + "' is not available");
    Slot& s = *found;
    if (s.other) {
      if (!(info.accepts & kValues))
        throw Error(ctx.where, "input '" + name + "' is " + a_kind(s.other->kind) + "; " +
                                   node.op_type + " takes tensors");
      ctx.input_values.resize(node.inputs.size());
      ctx.input_values[ctx.inputs.size()] = s.other.get();
      ctx.inputs.push_back(nullptr);
      ctx.input_dtypes.push_back(DType::float32);
      continue;
    }
    ctx.input_dtypes.push_back(s.storage);
    const Tensor& v = s.value();
    if (v.dtype() == DType::string && !(info.accepts & kStrings))
      throw Error(ctx.where, "input '" + name + "' is a string tensor; " + node.op_type +
                                 " takes numeric tensors");
    if (carried_format.empty() && is_float(v.dtype())) carried_format = s.exact_in;
    ctx.stable_inputs.resize(ctx.inputs.size() + 1);
    ctx.inputs.push_back(kernel_input(ctx, info, s, here, fmt, observer, body, converted));
  }
  return carried_format;
}

const Tensor* Executor::kernel_input(KernelContext& ctx, const OpInfo& info, Slot& s,
                                     const std::string& here, const std::optional<Format>& fmt,
                                     const Observer* observer, bool body,
                                     std::vector<Tensor>& converted) const {
  const auto& policy = options_.policy;
  const DType carrier = options_.carrier;
  const Tensor& v = s.value();
  const bool floating = is_float(v.dtype());
  // A weight read in place (the model's tensor) or through the WeightCache keeps its
  // address; one widened into this run's scope does not, nor does a per-run copy.
  auto& stable = ctx.stable_inputs.back();
  const std::size_t i = ctx.inputs.size();
  if (fmt && floating && policy.scaled && !policy.unscaled_names.count(here)) {
    bool lasts = false;
    if (const Tensor* q = quantized_input(s, ctx.node, here, i, lasts, converted)) {
      stable = lasts;
      return q;
    }
  }
  if (fmt && floating && s.exact_in != fmt->name) {
    // A value (not a weight) is rounded for each node that reads it (the same values each
    // time: a stochastic draw depends on the seed and the element's index), the copy freed
    // with the node's inputs. Kept with the value, the copies of values read again later
    // (an FPN's skip connections, in check's local run) held memory between their readers,
    // fresh pages faulted in by every command (DBNet's check: peak 259 -> 220 MB, 4-11% less
    // time; bench/README.md, session 22).
    if (!s.weight) {
      converted.push_back(rounded_copy(v, *fmt, policy.round_options, carrier));
      return &converted.back();
    }
    stable = true;
    const auto rounded = [this, &s, &v, f = *fmt] {
      return &options_.weights->get(s.source, v, f, options_.policy.round_options,
                                    options_.carrier);
    };
    if (!hands_unrounded(info, ctx, s, observer, body)) return rounded();
    ctx.unrounded = {.input = i,
                     .format = *fmt,
                     .options = policy.round_options,
                     .key = round_key(*fmt, policy.round_options, carrier),
                     .keep_float32 = options_.prepare_in_float32,
                     .rounded = rounded};
    return &v;
  }
  if (floating && v.dtype() != carrier) {  // another executor's session (local run)
    converted.push_back(convert(v, carrier));
    return &converted.back();
  }
  stable = s.weight && s.view;
  return &v;
}

Tensor* Executor::last_read(const model::Node& node, std::size_t pos, Scope& scope,
                            const KernelContext& ctx) const {
  if (node.inputs.empty() || node.inputs[0].empty() || ctx.inputs.empty()) return nullptr;
  const std::string& name = node.inputs[0];
  if (std::count(node.inputs.begin(), node.inputs.end(), name) != 1) return nullptr;
  const auto& dead = plans_->at(&model_.graph).dead_after.at(pos);
  if (std::find(dead.begin(), dead.end(), name) == dead.end()) return nullptr;
  const auto it = scope.values.find(name);
  if (it == scope.values.end()) return nullptr;
  Slot& s = it->second;
  // (Its own storage, handed to the kernel as it is: not converted or rounded.)
  if (s.weight || s.view || s.other || ctx.inputs[0] != &s.t) return nullptr;
  return &s.t;
}

bool Executor::hands_unrounded(const OpInfo& info, const KernelContext& ctx, const Slot& s,
                               const Observer* observer, bool body) const {
  // Input 1, held in place (a stable address: what the kernel prepares is keyed by it),
  // in the carrier the kernel prepares from, rounded the same whatever the element order.
  return info.rounds_weight && ctx.inputs.size() == 1 && s.view &&
         options_.carrier == DType::float32 && s.value().dtype() == DType::float32 &&
         options_.policy.round_options.rounding != Rounding::stochastic && !ctx.accumulate &&
         !ctx.unrounded && (!observer || !observer->reads_weights(body));
}

const Tensor* Executor::quantized_input(Slot& s, const model::Node& node, const std::string& path,
                                        std::size_t i, bool& stable,
                                        std::vector<Tensor>& held) const {
  const auto& policy = options_.policy;
  const Tensor& v = s.value();
  const auto op = scaled_operand(node, path, i, v.shape(), s.weight, *policy.scaled, policy);
  if (!op) return nullptr;
  const DType carrier = options_.carrier;
  const std::string key = scaled_key(*op, carrier);
  stable = false;
  if (!s.weight) {
    auto [it, fresh] = s.quantized.try_emplace(key);
    if (fresh) it->second = scaled_copy(v, *op, carrier, node, i);
    return &it->second;
  }
  const auto make = [&] { return scaled_copy(v, *op, carrier, node, i); };
  // check's runs: the node's first two reads (its local and emulated runs of the first
  // input set, one after the other) share one quantization made for them (the latest kept,
  // freed when another is made: the heap hands the next node's the same pages), as a
  // weight rounded by its kernel is (docs/executor.md). A copy kept per weight wrote
  // fresh pages for every weight of the model. Later reads take the WeightCache's.
  if (options_.prepare_in_float32) {
    auto& prepared = options_.weights->prepared();
    const auto source = reinterpret_cast<std::uintptr_t>(s.source);
    const std::string latest_key = "scaled|" + std::to_string(source) + "|" + key;
    if (prepared.reads(node, latest_key) < 2) {
      const auto q = prepared.latest<Tensor>(
          node, latest_key, [&] { return std::make_shared<const Tensor>(make()); });
      held.push_back(Tensor::view(q->dtype(), q->shape(), q->bytes(), q));
      return &held.back();
    }
  }
  stable = true;  // quantized once, as weights are rounded once
  return &options_.weights->get(s.source, key, make);
}

void Executor::add_initializers(const model::Graph& g, Scope& scope) const {
  for (const auto& t : g.initializers)
    if (!scope.values.count(t.name)) {
      Slot& s = scope.values[t.name];
      if (is_float(t.tensor.dtype()) && t.tensor.dtype() != options_.carrier) {
        // widened once per run
        s = make_slot(t.tensor, options_.float32_storage, options_.carrier);
      } else {
        s.storage = t.tensor.dtype();
        s.view = &t.tensor;
      }
      s.weight = true;
      s.source = &t.tensor;
    }
}

namespace {

// Frees what nobody reads after position `pos` of the plan's order (including outputs
// nobody reads at all); values of enclosing scopes and weights stay.
template <class Plan, class Values>
void free_dead(const Plan& plan, std::size_t pos, Values& values) {
  for (const auto& name : plan.dead_after[pos]) {
    auto it = values.find(name);
    if (it != values.end() && !it->second.weight) values.erase(it);
  }
}

}  // namespace

void Executor::run_graph(const model::Graph& g, Scope& scope, Observer* observer,
                         const std::vector<Enclosing>& enclosing, Profiler* profiler) const {
  const Plan& plan = plans_->at(&g);
  const std::string prefix = enclosing.back().path + "/" + enclosing.back().attribute + "/";
  for (std::size_t pos = 0; pos < plan.order.size(); ++pos) {
    const auto& node = g.nodes[plan.order[pos]];
    const auto* info = Registry::global().find(node.op_type);
    const std::string path = prefix + display_name(node, pos);
    const std::optional<Format> fmt =
        info->kind == OpKind::data_movement ? std::nullopt : options_.policy.format_for(node, path);
    for (auto& [name, slot] : run_node(node, pos, scope, fmt, observer, enclosing, path, profiler))
      scope.values[name] = std::move(slot);
    free_dead(plan, pos, scope.values);
  }
}

void Executor::observe_body(Observer& observer, const model::Node& node, std::size_t pos,
                            Scope& scope, const std::optional<Format>& fmt,
                            const std::vector<Enclosing>& enclosing, const std::string& path,
                            const std::vector<const Tensor*>& inputs,
                            const std::vector<NamedTensor>& outputs) const {
  const bool moves_data = Registry::global().find(node.op_type)->kind == OpKind::data_movement;
  BodyNode b{
      .node = node,
      .position = pos,
      .path = path,
      .enclosing = enclosing,
      .format = fmt,
      .value = [&scope](const std::string& name) -> const Tensor* {
        const Slot* s = scope.find(name);
        return s && !s->other ? &s->value() : nullptr;
      },
      .evaluate =
          [&, moves_data](const std::optional<Format>& f, const Executor* as) {
            const Executor& ex = as ? *as : *this;
            FPG_CHECK(&ex.model_ == &model_);
            std::vector<NamedTensor> out;
            for (auto& [name, slot] : ex.run_node(node, pos, scope, moves_data ? std::nullopt : f,
                                                  nullptr, enclosing, path))
              if (!slot.other) out.push_back({name, std::move(slot.t)});
            return out;
          }};
  observer.on_body_node(b, inputs, outputs);
}

// ---- Profiler -------------------------------------------------------------------------

void Profiler::enter(const model::Node& node, const std::string& path) {
  auto [it, fresh] = index_.try_emplace(&node, nodes_.size());
  if (fresh) {
    nodes_.push_back({.path = path, .op_type = node.op_type});
    run_ms_.emplace_back(runs_, 0.0);  // absent from the runs before
  }
  stack_.push_back({.index = it->second, .start = std::chrono::steady_clock::now()});
}

void Profiler::fused(const model::Node& node, const std::string& path, const std::string& into) {
  auto [it, fresh] = index_.try_emplace(&node, nodes_.size());
  if (fresh) {
    nodes_.push_back({.path = path, .op_type = node.op_type});
    run_ms_.emplace_back(runs_, 0.0);
  }
  nodes_[it->second].fused_into = into;
  ++nodes_[it->second].calls;
}

void Profiler::stop() {
  const Frame& f = stack_.back();
  const auto own = std::chrono::steady_clock::now() - f.start - f.nested;
  nodes_[f.index].ms += std::chrono::duration<double, std::milli>(own).count();
  ++nodes_[f.index].calls;
}

void Profiler::leave() {
  const auto all = std::chrono::steady_clock::now() - stack_.back().start;
  stack_.pop_back();
  if (!stack_.empty()) stack_.back().nested += all;
}

void Profiler::start_run() {
  run_start_ = std::chrono::steady_clock::now();
}

void Profiler::end_run() {
  const std::chrono::duration<double, std::milli> all =
      std::chrono::steady_clock::now() - run_start_;
  double inside = 0;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    inside += nodes_[i].ms;
    run_ms_[i].push_back(nodes_[i].ms);
    nodes_[i].ms = 0;
  }
  outside_ms_.push_back(std::max(0.0, all.count() - inside));
  ++runs_;
}

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}
}  // namespace

Profile Profiler::profile() const {
  Profile p{.nodes = nodes_, .runs = runs_};
  if (runs_ == 0) return p;  // the run under way, as far as it went
  for (std::size_t i = 0; i < p.nodes.size(); ++i) p.nodes[i].ms = median(run_ms_[i]);
  p.outside_ms = median(outside_ms_);
  return p;
}

void Profiler::clear() {
  FPG_CHECK(stack_.empty());
  nodes_.clear();
  run_ms_.clear();
  outside_ms_.clear();
  index_.clear();
  runs_ = 0;
}

double Profile::total_ms() const {
  double t = 0;
  for (const auto& n : nodes) t += n.ms;
  return t;
}

std::vector<OpTypeTime> by_op_type(const Profile& p) {
  std::map<std::string, OpTypeTime> m;
  for (const auto& n : p.nodes) {
    auto& o = m[n.op_type];
    o.op_type = n.op_type;
    ++o.nodes;
    o.ms += n.ms;
  }
  std::vector<OpTypeTime> out;
  for (auto& [op, t] : m) out.push_back(t);
  std::stable_sort(out.begin(), out.end(),
                   [](const OpTypeTime& a, const OpTypeTime& b) { return a.ms > b.ms; });
  return out;
}

// ---- Session --------------------------------------------------------------------------

Session::Session(const Executor& ex, const std::vector<NamedTensor>& inputs)
    : ex_(ex), scope_(ex.feed(inputs)) {}

Session::Session(const Executor& ex, const std::vector<NamedValue>& inputs)
    : ex_(ex), scope_(ex.feed(inputs)) {}

Session::~Session() = default;

bool Session::done() const {
  return pos_ >= ex_.order().size();
}

const model::Node& Session::next() const {
  FPG_CHECK(!done());
  return ex_.model_.graph.nodes[ex_.order()[pos_]];
}

namespace {
std::optional<Format> node_format(const Executor& ex, const model::Node& node) {
  if (Registry::global().find(node.op_type)->kind == OpKind::data_movement) return std::nullopt;
  return ex.options().policy.format_for(node);
}
}  // namespace

bool Session::deferred(std::size_t pos) const {
  const auto& plan = ex_.plans_->at(&ex_.model_.graph);
  const std::size_t at = plan.defer[pos];
  return at && at < deferred_.size() && deferred_[at] == pos + 1;
}

void Session::run_fused(std::size_t pos, std::size_t with, Observer* observer) {
  const auto& plan = ex_.plans_->at(&ex_.model_.graph);
  bool fused = false, fused_then = false;
  const auto& then = plan.fuse_then[pos];
  for (auto& [name, slot] :
       ex_.run_fused(pos, with, then, *scope_, observer, ex_.options_.profiler, fused, fused_then))
    scope_->values[name] = std::move(slot);
  if (fused) {
    fused_.resize(plan.order.size());
    fused_[with] = 1;
    if (fused_then)
      for (const std::size_t at : then) fused_[at] = 1;
  }
}

void Session::step(Observer* observer) {
  const auto& plan = ex_.plans_->at(&ex_.model_.graph);
  // (the inputs of a deferred node live until it has run)
  if (pos_ > 0 && !deferred(pos_ - 1)) free_dead(plan, pos_ - 1, scope_->values);
  const auto& node = next();
  Profiler* profiler = ex_.options_.profiler;
  const auto run_alone = [&] {
    for (auto& [name, slot] :
         ex_.run_node(node, pos_, *scope_, node_format(ex_, node), observer, {}, {}, profiler))
      scope_->values[name] = std::move(slot);
  };
  const bool may_fuse = fuse_ && (!observer || !observer->watches_values());
  const std::size_t late = pos_ < deferred_.size() ? deferred_[pos_] : 0;
  if (pos_ < fused_.size() && fused_[pos_]) {
    // It ran fused into an earlier node.
  } else if (late) {  // a node deferred to this one's turn: the two fused if they can be
    run_fused(late - 1, pos_, observer);
    free_dead(plan, late - 1, scope_->values);
    if (pos_ >= fused_.size() || !fused_[pos_]) run_alone();
  } else if (may_fuse && plan.defer[pos_]) {  // it runs in the turn of the Add it fuses with
    deferred_.resize(plan.order.size());
    deferred_[plan.defer[pos_]] = pos_ + 1;
  } else if (may_fuse && plan.fuse_with[pos_]) {
    run_fused(pos_, plan.fuse_with[pos_], observer);
  } else {
    run_alone();
  }
  ++pos_;
  if (profiler && done()) profiler->end_run();
}

std::vector<NamedTensor> Session::evaluate_next(const std::optional<Format>& fmt,
                                                Observer* observer, const Executor* as) const {
  const auto& node = next();
  const bool moves_data = Registry::global().find(node.op_type)->kind == OpKind::data_movement;
  const Executor& ex = as ? *as : ex_;
  FPG_CHECK(&ex.model_ == &ex_.model_);
  std::vector<NamedTensor> out;
  for (auto& [name, slot] :
       ex.run_node(node, pos_, *scope_, moves_data ? std::nullopt : fmt, observer))
    if (!slot.other) out.push_back({name, std::move(slot.t)});
  return out;
}

const Tensor* Session::value(const std::string& name) const {
  const Executor::Slot* s = scope_->find(name);
  return s && !s->other ? &s->value() : nullptr;
}

Tensor Session::output(const std::string& name) const {
  const Executor::Slot* s = scope_->find(name);
  if (!s) throw Error(ex_.where_, "graph output '" + name + "' was not produced");
  if (s->other)
    throw Error(ex_.where_,
                "graph output '" + name + "' is " + a_kind(s->other->kind) + ", not a tensor");
  return convert(s->value(), s->storage);
}

std::vector<NamedTensor> Session::outputs() const {
  std::vector<NamedTensor> out;
  for (const auto& o : ex_.model_.graph.outputs) out.push_back({o.name, output(o.name)});
  return out;
}

namespace {

// The output already taken under `name` (an output named twice), or null.
template <class Named>
const Named* taken(const std::vector<Named>& out, const std::string& name) {
  const auto it =
      std::find_if(out.begin(), out.end(), [&](const Named& t) { return t.name == name; });
  return it == out.end() ? nullptr : &*it;
}

// Whether take_outputs may move a graph output's tensor out of its slot: one the session
// made (not a weight or a view of one), already in its storage dtype.
bool movable(const Executor::Slot* s) {
  return s && !s->other && !s->view && !s->weight && s->t.dtype() == s->storage;
}

}  // namespace

std::vector<NamedTensor> Session::take_outputs() {
  std::vector<NamedTensor> out;
  for (const auto& o : ex_.model_.graph.outputs) {
    Executor::Slot* s = scope_->find(o.name);
    if (const NamedTensor* again = taken(out, o.name))
      out.push_back(*again);
    else
      out.push_back({o.name, movable(s) ? std::move(s->t) : output(o.name)});
  }
  return out;
}

std::vector<NamedValue> Session::take_output_values() {
  std::vector<NamedValue> out;
  for (const auto& o : ex_.model_.graph.outputs) {
    Executor::Slot* s = scope_->find(o.name);
    if (!s) throw Error(ex_.where_, "graph output '" + o.name + "' was not produced");
    if (const NamedValue* again = taken(out, o.name))
      out.push_back(*again);
    else
      out.push_back({o.name, movable(s) ? Value(std::move(s->t)) : slot_value(*s)});
  }
  return out;
}

std::vector<NamedValue> Session::output_values() const {
  std::vector<NamedValue> out;
  for (const auto& o : ex_.model_.graph.outputs) {
    const Executor::Slot* s = scope_->find(o.name);
    if (!s) throw Error(ex_.where_, "graph output '" + o.name + "' was not produced");
    out.push_back({o.name, slot_value(*s)});
  }
  return out;
}

}  // namespace fpguard::exec
