// Sequences and optionals: SequenceConstruct/Empty/Insert/At/Erase/Length,
// SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement
// (SequenceMap runs a body: control.cpp). A sequence holds its tensors in their storage
// dtypes; nothing here rounds.
#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

const std::vector<Tensor>& sequence_in(const KernelContext& ctx, std::size_t i) {
  const Value* v = ctx.value_in(i);
  if (!v || v->kind != ValueKind::sequence)
    ctx.fail("input " + std::to_string(i) + " is not a sequence");
  return v->items;
}

Tensor tensor_in(const KernelContext& ctx, std::size_t i) {
  auto v = ctx.value_of(i);
  if (!v || !v->is_tensor()) ctx.fail("input " + std::to_string(i) + " is not a tensor");
  return std::move(v->tensor);
}

// A position input (a scalar or one-element int32/int64 tensor) checked against
// [-n, n) or, where `end_ok` (an insertion point), [-n, n]; made non-negative.
std::size_t position(const KernelContext& ctx, std::size_t i, std::size_t n, bool end_ok) {
  const auto v = int_values(ctx, ctx.in(i));
  if (v.size() != 1) ctx.fail("the position must be a single integer");
  const auto len = static_cast<std::int64_t>(n);
  const std::int64_t p = v[0] < 0 ? v[0] + len : v[0];
  if (p < 0 || p > len || (p == len && !end_ok))
    ctx.fail("position " + std::to_string(v[0]) + " is out of range for a sequence of " +
             std::to_string(n) + " tensors");
  return static_cast<std::size_t>(p);
}

void sequence_construct(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
    items.push_back(tensor_in(ctx, i));
    if (items.back().dtype() != items[0].dtype())
      ctx.fail("the tensors of a sequence must have one dtype");
  }
  ctx.set_output(0, Value::sequence(std::move(items)));
}

void sequence_empty(KernelContext& ctx) {
  ctx.set_output(0, Value::sequence({}));
}

void sequence_insert(KernelContext& ctx) {
  auto items = sequence_in(ctx, 0);
  Tensor t = tensor_in(ctx, 1);
  if (!items.empty() && t.dtype() != items[0].dtype())
    ctx.fail("inserting a " + std::string(to_string(t.dtype())) + " tensor into a sequence of " +
             std::string(to_string(items[0].dtype())));
  const std::size_t p = ctx.has(2) ? position(ctx, 2, items.size(), true) : items.size();
  items.insert(items.begin() + static_cast<std::ptrdiff_t>(p), std::move(t));
  ctx.set_output(0, Value::sequence(std::move(items)));
}

void sequence_at(KernelContext& ctx) {
  const auto& items = sequence_in(ctx, 0);
  ctx.set_output(0, items[position(ctx, 1, items.size(), false)]);
}

void sequence_erase(KernelContext& ctx) {
  auto items = sequence_in(ctx, 0);
  if (items.empty()) ctx.fail("erasing from an empty sequence");
  const std::size_t p = ctx.has(1) ? position(ctx, 1, items.size(), false) : items.size() - 1;
  items.erase(items.begin() + static_cast<std::ptrdiff_t>(p));
  ctx.set_output(0, Value::sequence(std::move(items)));
}

void sequence_length(KernelContext& ctx) {
  Tensor n(DType::int64, {});
  n.data<std::int64_t>()[0] = static_cast<std::int64_t>(sequence_in(ctx, 0).size());
  ctx.set_output(0, std::move(n));
}

// Elements [begin, begin + len) of `t` along `axis`.
Tensor slice_axis(const Tensor& t, std::size_t axis, std::int64_t begin, std::int64_t len) {
  Shape os = t.shape();
  const std::int64_t dim = os[axis];
  os[axis] = len;
  Tensor out(t.dtype(), os);
  const auto outer = product(t.shape(), 0, axis), inner = product(t.shape(), axis + 1);
  const auto row = static_cast<std::size_t>(len * inner);
  for (std::int64_t o = 0; o < outer; ++o)
    copy_elements(t, static_cast<std::size_t>((o * dim + begin) * inner), out,
                  static_cast<std::size_t>(o) * row, row);
  return out;
}

void split_to_sequence(KernelContext& ctx) {
  Tensor x = tensor_in(ctx, 0);
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  const auto axis = static_cast<std::size_t>(norm_axis(ctx, ctx.node.attr_int("axis", 0), rank));
  const std::int64_t dim = x.shape()[axis];
  std::vector<std::int64_t> lens;
  if (!ctx.has(1)) {
    lens.assign(static_cast<std::size_t>(dim), 1);
  } else {
    const Tensor& split = ctx.in(1);
    const auto v = int_values(ctx, split);
    if (split.shape().empty()) {  // a scalar: chunks of that size, the last one shorter
      if (v[0] <= 0) ctx.fail("split must be positive");
      for (std::int64_t at = 0; at < dim; at += v[0]) lens.push_back(std::min(v[0], dim - at));
    } else {
      std::int64_t sum = 0;
      for (auto l : v) {
        if (l < 0) ctx.fail("split lengths must be non-negative");
        sum += l;
      }
      if (sum != dim)
        ctx.fail("split lengths sum to " + std::to_string(sum) + ", the axis has " +
                 std::to_string(dim));
      lens = v;
    }
  }
  // keepdims applies when split is not given: the size-1 pieces may drop the axis.
  const bool squeeze = !ctx.has(1) && ctx.node.attr_int("keepdims", 1) == 0;
  std::vector<Tensor> items;
  std::int64_t at = 0;
  for (auto l : lens) {
    Tensor piece = slice_axis(x, axis, at, l);
    at += l;
    if (squeeze) {
      Shape s = piece.shape();
      s.erase(s.begin() + static_cast<std::ptrdiff_t>(axis));
      Tensor sq(piece.dtype(), s);
      copy_elements(piece, 0, sq, 0, piece.size());
      piece = std::move(sq);
    }
    items.push_back(std::move(piece));
  }
  ctx.set_output(0, Value::sequence(std::move(items)));
}

void concat_from_sequence(KernelContext& ctx) {
  const auto& items = sequence_in(ctx, 0);
  if (items.empty()) ctx.fail("concatenating an empty sequence");
  const bool new_axis = ctx.node.attr_int("new_axis", 0) != 0;
  const Shape& first = items[0].shape();
  const auto rank = static_cast<std::int64_t>(first.size());
  const auto axis =
      static_cast<std::size_t>(norm_axis(ctx, ctx.node.attr_int("axis", 0), rank + new_axis));
  // Each item seen with the axis it contributes along (inserted, of size 1, for new_axis).
  auto view = [&](const Tensor& t) {
    Shape s = t.shape();
    if (new_axis) s.insert(s.begin() + static_cast<std::ptrdiff_t>(axis), 1);
    return s;
  };
  Shape os = view(items[0]);
  os[axis] = 0;
  for (const auto& t : items) {
    const Shape s = view(t);
    if (t.dtype() != items[0].dtype() || s.size() != os.size())
      ctx.fail("the tensors differ in dtype or rank");
    for (std::size_t d = 0; d < s.size(); ++d)
      if (d != axis && s[d] != os[d])
        ctx.fail("the tensors differ in shape off the concatenation axis: " + shape_str(s) +
                 " and " + shape_str(view(items[0])));
    os[axis] += s[axis];
  }
  Tensor out(items[0].dtype(), os);
  const auto outer = product(os, 0, axis);
  std::size_t at = 0;  // elements into an output row
  const auto out_row = static_cast<std::size_t>(product(os, axis));
  for (const auto& t : items) {
    const auto row = static_cast<std::size_t>(product(view(t), axis));
    for (std::int64_t o = 0; o < outer; ++o)
      copy_elements(t, static_cast<std::size_t>(o) * row, out,
                    static_cast<std::size_t>(o) * out_row + at, row);
    at += row;
  }
  ctx.set_output(0, std::move(out));
}

void optional_k(KernelContext& ctx) {
  auto v = ctx.value_of(0);
  ctx.set_output(0, v ? std::move(*v) : Value::none());
}

void optional_has_element(KernelContext& ctx) {
  const Value* v = ctx.value_in(0);
  Tensor b(DType::bool_, {});
  b.data<std::uint8_t>()[0] = ctx.has(0) || (v && v->kind != ValueKind::none);
  ctx.set_output(0, std::move(b));
}

void optional_get_element(KernelContext& ctx) {
  auto v = ctx.value_of(0);
  if (!v || v->kind == ValueKind::none) ctx.fail("the optional is empty");
  ctx.set_output(0, std::move(*v));
}

}  // namespace

void register_sequence(Registry& r) {
  // Tensors move in and out of sequences whole or through copy_elements: strings too.
  const unsigned whole = exec::kValues | exec::kStrings;
  const auto moves = OpKind::data_movement;
  r.add("SequenceConstruct", sequence_construct,
        {.kind = moves, .min_opset = 11, .accepts = whole});
  r.add("SequenceEmpty", sequence_empty, {.kind = moves, .min_opset = 11, .accepts = whole});
  r.add("SequenceInsert", sequence_insert, {.kind = moves, .min_opset = 11, .accepts = whole});
  r.add("SequenceAt", sequence_at, {.kind = moves, .min_opset = 11, .accepts = whole});
  r.add("SequenceErase", sequence_erase, {.kind = moves, .min_opset = 11, .accepts = whole});
  r.add("SequenceLength", sequence_length, {.kind = moves, .min_opset = 11, .accepts = whole});
  r.add("SplitToSequence", split_to_sequence, {.kind = moves, .min_opset = 11, .accepts = whole});
  r.add("ConcatFromSequence", concat_from_sequence,
        {.kind = moves, .min_opset = 11, .accepts = whole});
  r.add("Optional", optional_k, {.kind = moves, .min_opset = 15, .accepts = whole});
  r.add("OptionalHasElement", optional_has_element,
        {.kind = moves, .min_opset = 15, .accepts = whole});
  r.add("OptionalGetElement", optional_get_element,
        {.kind = moves, .min_opset = 15, .accepts = whole});
}

}  // namespace fpguard::ops
