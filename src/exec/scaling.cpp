// Scaled precisions in the executor (docs/executor.md): which operands of MatMul, Gemm and
// Conv a scaled format quantizes, along which axes, with which amax; the keys of quantized
// copies and the counts taken while quantizing (exec/counting.hpp); and the calibration
// run that finds the static activation scales.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "exec/counting.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "round/fast.hpp"
#include "stats/kernels.hpp"

namespace fpguard::exec {

bool is_scaled_operand(const model::Node& n, std::size_t input) {
  if (input > 1 || (!n.domain.empty() && n.domain != "ai.onnx")) return false;
  return n.op_type == "MatMul" || n.op_type == "Gemm" || n.op_type == "Conv";
}

namespace {

// The reduction axis of operand `input` (blocks follow it) and its output-channel axis
// (channel scales of weights follow it; nullopt: one scale per tensor), for a tensor of
// rank `rank`; nullopt when the rank does not fit the op.
struct Axes {
  int reduction = -1;
  std::optional<int> channel;
};

std::optional<Axes> operand_axes(const model::Node& n, std::size_t input, std::size_t rank) {
  if (n.op_type == "MatMul") {
    if (rank == 0) return std::nullopt;
    if (rank == 1) return Axes{.reduction = 0, .channel = std::nullopt};
    // A [..., M, K]: K is -1, M -2; B [..., K, N]: K is -2, N -1.
    return input == 0 ? Axes{.reduction = -1, .channel = -2} : Axes{.reduction = -2, .channel = -1};
  }
  if (n.op_type == "Gemm") {
    if (rank != 2) return std::nullopt;
    // A is [M, K] ([K, M] with transA), B [K, N] ([N, K] with transB).
    const bool t = n.attr_int(input == 0 ? "transA" : "transB", 0) != 0;
    const int k = input == 0 ? (t ? 0 : 1) : (t ? 1 : 0);
    return Axes{.reduction = k, .channel = 1 - k};
  }
  // Conv: X [N, C, ...] and W [O, C/group, ...] reduce over their axis 1; W's outputs are 0.
  if (rank < 3) return std::nullopt;
  return Axes{.reduction = 1, .channel = input == 1 ? std::optional<int>(0) : std::nullopt};
}

}  // namespace

std::optional<ScaledOperand> scaled_operand(const model::Node& n, const std::string& path,
                                            std::size_t input,
                                            const std::vector<std::int64_t>& shape, bool weight,
                                            const ScaledFormat& f, const PrecisionPolicy& policy) {
  if (!is_scaled_operand(n, input)) return std::nullopt;
  const auto axes = operand_axes(n, input, shape.size());
  if (!axes) return std::nullopt;
  ScaledOperand op{.format = f, .layout = {.shape = shape, .axis = axes->reduction}, .options = {}};
  if (f.scope == ScaleScope::channel) {
    if (weight && axes->channel)
      op.layout.axis = *axes->channel;
    else
      op.format.scope = ScaleScope::tensor;  // activations: one static scale per tensor
  }
  if (f.scope == ScaleScope::block && n.op_type == "Conv" && input == 0) {
    // X [N, C, ...] as [N, group, C/group, ...]: a block never spans two groups, whose
    // products are separate reductions.
    const std::int64_t g = n.attr_int("group", 1);
    if (g <= 0 || shape[1] % g) return std::nullopt;
    op.layout.shape.insert(op.layout.shape.begin() + 1, g);
    op.layout.shape[2] /= g;
    op.layout.axis = 2;
  }
  if (f.rule == ScaleRule::amax && !weight)
    if (auto a = policy.activation_amax.find({path, input}); a != policy.activation_amax.end())
      op.options.amax = std::ldexp(a->second, policy.amax_margin);
  return op;
}

std::string scaled_key(const ScaledOperand& op, DType carrier) {
  std::string key = "scaled|" + op.format.name + "|" + std::string(to_string(op.format.scope)) +
                    "|" + std::to_string(op.layout.axis) + "|";
  for (const auto d : op.layout.shape) key += std::to_string(d) + ",";
  char amax[40] = "own";
  if (op.options.amax) std::snprintf(amax, sizeof amax, "%a", *op.options.amax);
  return key + "|" + amax + "|" + std::string(to_string(carrier));
}

namespace {
thread_local OperandCounting* installed = nullptr;
}  // namespace

OperandCounting::OperandCounting() : previous_(installed) {
  installed = this;
}

OperandCounting::~OperandCounting() {
  installed = previous_;
}

OperandCounting* OperandCounting::current() {
  return installed;
}

void OperandCounting::quantize(const model::Node& node, std::size_t input, std::span<const float> x,
                               std::span<float> y, const ScaledOperand& op) {
  detail::BlockCounts b;
  const auto c = detail::round_scaled_counting(x, y, op.layout, op.format, op.options, b);
  if (!c) {  // no fast path: nothing counted in passing
    round_scaled(x, y, op.layout, op.format, op.options);
    return;
  }
  counted_[{&node, input}] = {.key = scaled_key(op, DType::float32),
                              .stats = detail::counted_stats(op.format, op.layout.axis, *c, b)};
}

const OperandCounting::Counted* OperandCounting::find(const model::Node& node,
                                                      std::size_t input) const {
  const auto it = counted_.find({&node, input});
  return it == counted_.end() ? nullptr : &it->second;
}

std::vector<std::string> scaled_nodes(const model::Model& m, const PrecisionPolicy& policy) {
  std::vector<std::string> out;
  if (!policy.scaled) return out;
  for_each_node(m.graph, m.path.string(),
                [&](const model::Node& n, const std::string& path, const model::Graph&) {
                  if (is_scaled_operand(n, 0) && policy.format_for(n, path)) out.push_back(path);
                });
  return out;
}

void check_unscaled_names(const model::Model& m, const PrecisionPolicy& policy) {
  if (policy.unscaled_names.empty()) return;
  const std::vector<std::string> scaled = scaled_nodes(m, policy);
  std::map<std::string, std::string> op_types;  // every node's, by name
  for_each_node(m.graph, m.path.string(),
                [&](const model::Node& n, const std::string& path, const model::Graph&) {
                  op_types.emplace(path, n.op_type);
                });
  for (const auto& name : policy.unscaled_names) {
    if (std::find(scaled.begin(), scaled.end(), name) != scaled.end()) continue;
    const auto it = op_types.find(name);
    std::string msg = it == op_types.end() ? "the model has no node named '" + name + "'"
                      : it->second != "MatMul" && it->second != "Gemm" && it->second != "Conv"
                          ? "'" + name + "' is a " + it->second +
                                " node; only MatMul, Gemm and Conv operands are quantized"
                          : "'" + name + "' runs in float32, not quantized";
    if (auto hint = did_you_mean(name, scaled); !hint.empty())
      msg += "; did you mean '" + hint + "'?";
    throw Error::in_option("keep_unscaled", name, msg);
  }
}

namespace {

// The largest finite |x| of a float32 or float64 carrier.
double finite_absmax(const Tensor& t) {
  if (t.dtype() == DType::float64) return detail::finite_absmax(t.data<double>());
  return detail::finite_absmax(t.data<float>());
}

struct Calibration : Observer {
  std::map<std::pair<std::string, std::size_t>, double> amax;
  void see(const model::Node& node, const std::string& path,
           const std::vector<const Tensor*>& inputs) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Tensor* t = inputs[i];
      if (!t || !is_scaled_operand(node, i) || !is_float(t->dtype())) continue;
      double& a = amax[{path, i}];
      a = std::max(a, finite_absmax(*t));
    }
  }
  void on_node(const model::Node& node, std::size_t pos, const std::vector<const Tensor*>& inputs,
               const std::vector<NamedTensor>&) override {
    see(node, display_name(node, pos), inputs);
  }
  void on_body_node(const BodyNode& b, const std::vector<const Tensor*>& inputs,
                    const std::vector<NamedTensor>&) override {
    see(b.node, b.path, inputs);
  }
};

template <class Named>
std::map<std::pair<std::string, std::size_t>, double> calibrate(
    const Executor& ex, const std::vector<std::vector<Named>>& samples) {
  Calibration c;
  for (const auto& sample : samples) {
    Session s(ex, sample);
    while (!s.done()) s.step(&c);
  }
  return std::move(c.amax);
}

}  // namespace

std::map<std::pair<std::string, std::size_t>, double> calibrate_activations(
    const Executor& ex, const std::vector<std::vector<NamedTensor>>& samples) {
  return calibrate(ex, samples);
}

std::map<std::pair<std::string, std::size_t>, double> calibrate_activations(
    const Executor& ex, const std::vector<std::vector<NamedValue>>& samples) {
  return calibrate(ex, samples);
}

Executor calibrated_executor(const model::Model& m, RunOptions o,
                             const std::vector<std::vector<NamedValue>>& samples) {
  if (!o.policy.scaled || o.policy.scaled->rule != ScaleRule::amax) return Executor(m, o);
  RunOptions plain;
  plain.threads = o.threads;
  const Executor reference(m, plain);
  o.policy.activation_amax = calibrate_activations(reference, samples);
  return Executor(reference, o);
}

}  // namespace fpguard::exec
