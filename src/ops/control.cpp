// Control flow: If, Loop and Scan run their bodies (subgraphs kept in the IR) through
// KernelContext::run_subgraph, which reads outer values from the enclosing scopes. If
// returns, and Loop carries, sequences and optionals as well as tensors; scan inputs and
// outputs are tensors.
#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

const model::Graph& graph_attr(const KernelContext& ctx, const std::string& name) {
  const auto* a = ctx.node.find_attr(name);
  if (!a || !std::holds_alternative<model::GraphPtr>(a->value))
    ctx.fail("attribute '" + name + "' (a graph) is missing");
  return *std::get<model::GraphPtr>(a->value);
}

// Inputs as their storage dtype (bodies expect float16 where the model stores float16);
// in a float64 run a float32 value stays in its float64 carrier (the truth run).
Tensor stored(const KernelContext& ctx, std::size_t i) {
  const Tensor& t = ctx.in(i);
  if (t.dtype() != ctx.carrier) return t;
  if (ctx.carrier == DType::float64 && ctx.input_dtypes[i] == DType::float32) return t;
  return exec::convert(t, ctx.input_dtypes[i]);
}

// A body's result that must be a tensor (scan outputs, Scan's state, Loop's condition).
Tensor tensor_of(const KernelContext& ctx, Value v, const char* what) {
  if (!v.is_tensor())
    ctx.fail(std::string(what) + " is not a tensor (" + std::string(to_string(v.kind)) + ")");
  return std::move(v.tensor);
}

// Bodies take values: Scan's tensors wrapped.
std::vector<Value> as_values(const std::vector<Tensor>& ts) {
  return {ts.begin(), ts.end()};
}

bool truth(const Tensor& t) {
  std::vector<double> v(t.size());
  to_double(t, v);
  return !v.empty() && v[0] != 0;
}

// Stacks equal-shaped slices along a new `axis`.
Tensor stack(const KernelContext& ctx, const std::vector<Tensor>& parts, std::int64_t axis) {
  if (parts.empty()) return Tensor(ctx.carrier, {0});
  const auto& s = parts[0].shape();
  axis = norm_axis(ctx, axis, static_cast<std::int64_t>(s.size()) + 1);
  Shape os(s);
  os.insert(os.begin() + axis, static_cast<std::int64_t>(parts.size()));
  Tensor out(parts[0].dtype(), os);
  const auto outer = product(s, 0, static_cast<std::size_t>(axis)),
             inner = product(s, static_cast<std::size_t>(axis));
  const auto n = static_cast<std::int64_t>(parts.size());
  for (std::int64_t k = 0; k < n; ++k) {
    const Tensor& p = parts[static_cast<std::size_t>(k)];
    if (p.shape() != s || p.dtype() != out.dtype())
      ctx.fail("scan outputs of different shapes or dtypes");
    for (std::int64_t o = 0; o < outer; ++o)
      copy_elements(p, static_cast<std::size_t>(o * inner), out,
                    static_cast<std::size_t>((o * n + k) * inner), static_cast<std::size_t>(inner));
  }
  return out;
}

// Slice k of `t` along `axis` (the axis removed).
Tensor slice_at(const Tensor& t, std::int64_t axis, std::int64_t k) {
  const auto& s = t.shape();
  Shape os(s);
  os.erase(os.begin() + axis);
  Tensor out(t.dtype(), os);
  const auto outer = product(s, 0, static_cast<std::size_t>(axis)),
             len = s[static_cast<std::size_t>(axis)],
             inner = product(s, static_cast<std::size_t>(axis) + 1);
  for (std::int64_t o = 0; o < outer; ++o)
    copy_elements(t, static_cast<std::size_t>((o * len + k) * inner), out,
                  static_cast<std::size_t>(o * inner), static_cast<std::size_t>(inner));
  return out;
}

void if_k(KernelContext& ctx) {
  const auto& g = graph_attr(ctx, truth(ctx.in(0)) ? "then_branch" : "else_branch");
  auto outs = ctx.run_subgraph(g, {});
  if (outs.size() != ctx.outputs.size())
    ctx.fail("the branch returns " + std::to_string(outs.size()) + " outputs for " +
             std::to_string(ctx.outputs.size()));
  for (std::size_t i = 0; i < outs.size(); ++i) ctx.set_output(i, std::move(outs[i]));
}

void loop_k(KernelContext& ctx) {
  const auto& body = graph_attr(ctx, "body");
  const bool has_max = ctx.has(0), has_cond = ctx.has(1);
  const std::int64_t max_trip = has_max ? int_values(ctx, ctx.in(0)).at(0) : INT64_MAX;
  bool cond = has_cond ? truth(ctx.in(1)) : true;
  std::vector<Value> carried;
  for (std::size_t i = 2; i < ctx.num_inputs(); ++i) {
    if (const Value* v = ctx.value_in(i))
      carried.push_back(*v);
    else if (ctx.has(i))
      carried.push_back(stored(ctx, i));
    else  // an omitted loop-carried optional starts empty
      carried.push_back(Value::none());
  }
  const std::size_t n_carried = carried.size();
  if (body.outputs.size() < 1 + n_carried) ctx.fail("the body has too few outputs");
  const std::size_t n_scan = body.outputs.size() - 1 - n_carried;
  std::vector<std::vector<Tensor>> scans(n_scan);
  for (std::int64_t it = 0; it < max_trip && cond; ++it) {
    std::vector<Value> in;
    Tensor iter(DType::int64, {});
    iter.data<std::int64_t>()[0] = it;
    in.push_back(iter);
    Tensor c(DType::bool_, {});
    c.data<std::uint8_t>()[0] = cond ? 1 : 0;
    in.push_back(c);
    for (const auto& t : carried) in.push_back(t);
    auto out = ctx.run_subgraph(body, std::move(in));
    cond = truth(tensor_of(ctx, std::move(out[0]), "the loop condition"));
    for (std::size_t i = 0; i < n_carried; ++i) carried[i] = std::move(out[1 + i]);
    for (std::size_t i = 0; i < n_scan; ++i)
      scans[i].push_back(tensor_of(ctx, std::move(out[1 + n_carried + i]), "a scan output"));
  }
  for (std::size_t i = 0; i < n_carried && i < ctx.outputs.size(); ++i)
    ctx.set_output(i, std::move(carried[i]));
  for (std::size_t i = 0; i < n_scan && n_carried + i < ctx.outputs.size(); ++i)
    ctx.outputs[n_carried + i] = stack(ctx, scans[i], 0);
}

// Scan-8: every input and output has a batch axis first (scan inputs and outputs are
// [batch, sequence, ...]), input 0 is the optional sequence_lens, and `directions` gives
// each scan input's direction. Each batch entry is scanned on its own over its length;
// scan outputs past a shorter length stay zero.
void scan8_k(KernelContext& ctx) {
  const auto& body = graph_attr(ctx, "body");
  const auto m = static_cast<std::size_t>(ctx.node.attr_int("num_scan_inputs", 0));
  if (m == 0 || m + 1 > ctx.num_inputs()) ctx.fail("num_scan_inputs is out of range");
  const std::size_t n_state = ctx.num_inputs() - 1 - m;
  if (body.outputs.size() < n_state) ctx.fail("the body has too few outputs");
  const std::size_t k = body.outputs.size() - n_state;
  const auto dirs = ctx.node.attr_ints("directions", std::vector<std::int64_t>(m, 0));
  if (dirs.size() != m) ctx.fail("directions needs one entry per scan input");
  std::vector<Tensor> state, scan_in;
  for (std::size_t i = 0; i < n_state; ++i) state.push_back(stored(ctx, 1 + i));
  for (std::size_t j = 0; j < m; ++j) scan_in.push_back(stored(ctx, 1 + n_state + j));
  std::int64_t batch = -1, max_len = -1;
  auto same = [&](std::int64_t& v, std::int64_t got, const char* what) {
    if (v >= 0 && v != got) ctx.fail(std::string("inputs differ in ") + what);
    v = got;
  };
  for (const auto& t : state) {
    if (t.shape().empty()) ctx.fail("a state input has no batch axis");
    same(batch, t.shape()[0], "batch size");
  }
  for (const auto& t : scan_in) {
    if (t.shape().size() < 2) ctx.fail("a scan input needs [batch, sequence, ...] axes");
    same(batch, t.shape()[0], "batch size");
    same(max_len, t.shape()[1], "sequence length");
  }
  std::vector<std::int64_t> lens(static_cast<std::size_t>(batch), max_len);
  if (ctx.has(0)) {
    lens = int_values(ctx, ctx.in(0));
    if (static_cast<std::int64_t>(lens.size()) != batch)
      ctx.fail("sequence_lens needs one length per batch entry");
    for (auto l : lens)
      if (l < 0 || l > max_len) ctx.fail("a sequence length is out of range");
  }
  std::vector<std::vector<Tensor>> states(n_state), outs(k);
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto len = lens[static_cast<std::size_t>(b)];
    std::vector<Tensor> st, in_b;
    for (const auto& t : state) st.push_back(slice_at(t, 0, b));
    for (const auto& t : scan_in) in_b.push_back(slice_at(t, 0, b));
    std::vector<std::vector<Tensor>> steps(k);
    for (std::int64_t t = 0; t < len; ++t) {
      std::vector<Value> in = as_values(st);
      for (std::size_t j = 0; j < m; ++j)
        in.push_back(slice_at(in_b[j], 0, dirs[j] ? len - 1 - t : t));
      auto out = ctx.run_subgraph(body, std::move(in));
      for (std::size_t i = 0; i < n_state; ++i)
        st[i] = tensor_of(ctx, std::move(out[i]), "a state");
      for (std::size_t i = 0; i < k; ++i)
        steps[i].push_back(tensor_of(ctx, std::move(out[n_state + i]), "a scan output"));
    }
    for (std::size_t i = 0; i < n_state; ++i) states[i].push_back(std::move(st[i]));
    for (std::size_t i = 0; i < k; ++i) {
      if (steps[i].empty()) ctx.fail("an empty sequence leaves the scan output's shape unknown");
      while (static_cast<std::int64_t>(steps[i].size()) < max_len)
        steps[i].emplace_back(steps[i][0].dtype(), steps[i][0].shape());
      outs[i].push_back(stack(ctx, steps[i], 0));
    }
  }
  for (std::size_t i = 0; i < n_state; ++i) ctx.outputs[i] = stack(ctx, states[i], 0);
  for (std::size_t i = 0; i < k; ++i) ctx.outputs[n_state + i] = stack(ctx, outs[i], 0);
}

void scan_k(KernelContext& ctx) {
  if (ctx.opset < 9) return scan8_k(ctx);
  const auto& body = graph_attr(ctx, "body");
  const auto m = static_cast<std::size_t>(ctx.node.attr_int("num_scan_inputs", 0));
  if (m == 0 || m > ctx.num_inputs()) ctx.fail("num_scan_inputs is out of range");
  const std::size_t n_state = ctx.num_inputs() - m;
  const auto in_axes = ctx.node.attr_ints("scan_input_axes", std::vector<std::int64_t>(m, 0));
  const auto in_dirs = ctx.node.attr_ints("scan_input_directions", std::vector<std::int64_t>(m, 0));
  const std::size_t k = body.outputs.size() - n_state;
  const auto out_axes = ctx.node.attr_ints("scan_output_axes", std::vector<std::int64_t>(k, 0));
  const auto out_dirs =
      ctx.node.attr_ints("scan_output_directions", std::vector<std::int64_t>(k, 0));
  std::vector<Tensor> state, scan_in;
  std::vector<std::int64_t> axes;
  for (std::size_t i = 0; i < n_state; ++i) state.push_back(stored(ctx, i));
  std::int64_t len = -1;
  for (std::size_t j = 0; j < m; ++j) {
    scan_in.push_back(stored(ctx, n_state + j));
    const auto r = static_cast<std::int64_t>(scan_in.back().shape().size());
    axes.push_back(norm_axis(ctx, in_axes[j], r));
    const auto l = scan_in.back().shape()[static_cast<std::size_t>(axes.back())];
    if (len >= 0 && l != len) ctx.fail("scan inputs differ in length");
    len = l;
  }
  std::vector<std::vector<Tensor>> outs(k);
  for (std::int64_t t = 0; t < len; ++t) {
    std::vector<Value> in = as_values(state);
    for (std::size_t j = 0; j < m; ++j)
      in.push_back(slice_at(scan_in[j], axes[j], in_dirs[j] ? len - 1 - t : t));
    auto out = ctx.run_subgraph(body, std::move(in));
    for (std::size_t i = 0; i < n_state; ++i)
      state[i] = tensor_of(ctx, std::move(out[i]), "a state");
    for (std::size_t i = 0; i < k; ++i)
      outs[i].push_back(tensor_of(ctx, std::move(out[n_state + i]), "a scan output"));
  }
  for (std::size_t i = 0; i < n_state; ++i) ctx.outputs[i] = std::move(state[i]);
  for (std::size_t i = 0; i < k; ++i) {
    if (out_dirs[i]) std::reverse(outs[i].begin(), outs[i].end());
    ctx.outputs[n_state + i] = stack(ctx, outs[i], out_axes[i]);
  }
}

// SequenceMap: the body runs once per element of the first input (a sequence); each
// further input is a sequence of the same length (element i is passed) or a tensor
// (passed whole); each body output is collected into an output sequence.
void sequence_map_k(KernelContext& ctx) {
  const auto& body = graph_attr(ctx, "body");
  const Value* first = ctx.value_in(0);
  if (!first || first->kind != ValueKind::sequence) ctx.fail("input 0 is not a sequence");
  const std::size_t n = first->items.size();
  std::vector<std::optional<Value>> rest;
  for (std::size_t j = 1; j < ctx.num_inputs(); ++j) {
    rest.push_back(ctx.value_of(j));
    if (!rest.back() || rest.back()->kind == ValueKind::none)
      ctx.fail("input " + std::to_string(j) + " is missing or empty");
    if (rest.back()->kind == ValueKind::sequence && rest.back()->items.size() != n)
      ctx.fail("input " + std::to_string(j) + " is a sequence of " +
               std::to_string(rest.back()->items.size()) + " tensors, input 0 of " +
               std::to_string(n));
  }
  std::vector<std::vector<Tensor>> outs(body.outputs.size());
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<Value> in{first->items[i]};
    for (const auto& v : rest)
      in.push_back(v->kind == ValueKind::sequence ? Value(v->items[i]) : *v);
    auto out = ctx.run_subgraph(body, std::move(in));
    for (std::size_t k = 0; k < outs.size(); ++k)
      outs[k].push_back(tensor_of(ctx, std::move(out[k]), "a body output"));
  }
  for (std::size_t k = 0; k < outs.size() && k < ctx.outputs.size(); ++k)
    ctx.set_output(k, Value::sequence(std::move(outs[k])));
}

}  // namespace

void register_control(Registry& r) {
  r.add("If", if_k, {.kind = OpKind::data_movement, .accepts = exec::kValues | exec::kStrings});
  r.add("Loop", loop_k, {.kind = OpKind::data_movement, .accepts = exec::kValues | exec::kStrings});
  r.add("Scan", scan_k, {.kind = OpKind::data_movement, .min_opset = 8});
  r.add(
      "SequenceMap", sequence_map_k,
      {.kind = OpKind::data_movement, .min_opset = 17, .accepts = exec::kValues | exec::kStrings});
}

}  // namespace fpguard::ops
