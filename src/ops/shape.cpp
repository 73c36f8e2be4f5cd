// Shape and data-movement ops. They copy elements as bytes, so every dtype works.
#include <cmath>
#include <cstring>

#include "core/parallel.hpp"
#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

Tensor with_shape(const Tensor& x, Shape shape) {
  // (Written in full below: no zero-fill first, strings default-constructed.)
  Tensor t = Tensor::uninitialized(x.dtype(), std::move(shape));
  FPG_CHECK(t.nbytes() == x.nbytes() && t.size() == x.size());
  if (x.dtype() == DType::string)
    std::copy(x.data<std::string>().begin(), x.data<std::string>().end(),
              t.data<std::string>().begin());
  else if (x.nbytes())
    std::memcpy(t.bytes(), x.bytes(), x.nbytes());
  return t;
}

// x under `shape`: moved when it is the node's to take (KernelContext::last_read), else a
// copy. BERT's 48 Reshapes of 128 x 768 each copied 0.4 MB (bench/README.md, session 22).
Tensor relabeled(KernelContext& ctx, const Tensor& x, Shape shape) {
  if (ctx.last_read != &x) return with_shape(x, std::move(shape));
  Tensor t = std::move(*ctx.last_read);
  t.reshape(std::move(shape));
  return t;
}

void identity(KernelContext& ctx) {
  if (const auto* v = ctx.value_in(0))
    ctx.set_output(0, *v);
  else
    ctx.outputs[0] = ctx.in(0);
}

void reshape(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  std::vector<std::int64_t> target =
      ctx.opset < 5 ? ctx.node.attr_ints("shape") : int_values(ctx, ctx.in(1));
  const bool allowzero = ctx.node.attr_int("allowzero", 0) != 0;
  std::int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowzero) {
      if (i >= x.shape().size())
        ctx.fail("shape has 0 at " + std::to_string(i) + " beyond the input's rank");
      target[i] = x.shape()[i];
    }
    if (target[i] == -1) {
      if (infer >= 0) ctx.fail("shape has more than one -1");
      infer = static_cast<std::int64_t>(i);
    } else if (target[i] < 0) {
      ctx.fail("shape has a negative dimension " + std::to_string(target[i]));
    } else {
      known *= target[i];
    }
  }
  const auto n = static_cast<std::int64_t>(x.size());
  if (infer >= 0) {
    if (known == 0 || n % known)
      ctx.fail("cannot reshape " + shape_str(x.shape()) + " to " + shape_str(target));
    target[static_cast<std::size_t>(infer)] = n / known;
  }
  if (product(target) != n)
    ctx.fail("cannot reshape " + shape_str(x.shape()) + " to " + shape_str(target));
  ctx.outputs[0] = relabeled(ctx, x, target);
}

void flatten(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  auto axis = ctx.node.attr_int("axis", 1);
  if (axis < -rank || axis > rank) ctx.fail("axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += rank;
  ctx.outputs[0] = relabeled(ctx, x,
                             {product(x.shape(), 0, static_cast<std::size_t>(axis)),
                              product(x.shape(), static_cast<std::size_t>(axis))});
}

std::vector<std::int64_t> axes_of(const KernelContext& ctx, std::int64_t input_opset) {
  if (ctx.opset >= input_opset)
    return ctx.has(1) ? int_values(ctx, ctx.in(1)) : std::vector<std::int64_t>{};
  return ctx.node.attr_ints("axes");
}

void squeeze(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  auto axes = axes_of(ctx, 13);
  std::vector<bool> drop(static_cast<std::size_t>(rank), false);
  if (axes.empty()) {
    for (std::int64_t d = 0; d < rank; ++d)
      drop[static_cast<std::size_t>(d)] = x.shape()[static_cast<std::size_t>(d)] == 1;
  }
  for (auto a : axes) {
    const auto d = static_cast<std::size_t>(norm_axis(ctx, a, rank));
    if (x.shape()[d] != 1)
      ctx.fail("cannot squeeze axis " + std::to_string(a) + " of size " +
               std::to_string(x.shape()[d]));
    drop[d] = true;
  }
  Shape s;
  for (std::int64_t d = 0; d < rank; ++d)
    if (!drop[static_cast<std::size_t>(d)]) s.push_back(x.shape()[static_cast<std::size_t>(d)]);
  ctx.outputs[0] = relabeled(ctx, x, s);
}

void unsqueeze(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto axes = axes_of(ctx, 13);
  const auto rank = static_cast<std::int64_t>(x.shape().size() + axes.size());
  std::vector<bool> ins(static_cast<std::size_t>(rank), false);
  for (auto a : axes) {
    const auto d = static_cast<std::size_t>(norm_axis(ctx, a, rank));
    if (ins[d]) ctx.fail("axis " + std::to_string(a) + " repeated");
    ins[d] = true;
  }
  Shape s;
  std::size_t k = 0;
  for (std::int64_t d = 0; d < rank; ++d)
    s.push_back(ins[static_cast<std::size_t>(d)] ? 1 : x.shape()[k++]);
  ctx.outputs[0] = relabeled(ctx, x, s);
}

// Copies elements of `x` into a tensor of `out_shape`, where output index -> input
// offset is computed by `src` (from the output multi-index).
template <class Src>
Tensor gather_elems(const Tensor& x, const Shape& out_shape, Src&& src) {
  Tensor out(x.dtype(), out_shape);
  const std::size_t isz = itemsize(x.dtype());
  const auto n = product(out_shape);
  std::vector<std::int64_t> idx(out_shape.size(), 0);
  const std::byte* pi = x.bytes();
  std::byte* po = out.bytes();
  for (std::int64_t o = 0; o < n; ++o) {
    std::memcpy(po + o * isz, pi + src(idx) * isz, isz);
    for (std::size_t d = out_shape.size(); d-- > 0;) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<std::int64_t> strides_of(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// The transpose of permute_into for elements of U's size. Size-1 dimensions are dropped
// and input dimensions that stay neighbours in the output merged; then either the
// innermost input dimension stays innermost (rows copied whole) or the innermost input
// and output dimensions are transposed in 16x16 tiles, so both sides are read and written
// in cache lines. Outer indices are split across threads.
template <class U>
void permute(const std::byte* from, const Shape& shape, const std::vector<std::int64_t>& perm,
             std::byte* to, int threads) {
  const U* src = reinterpret_cast<const U*>(from);
  // ctx.threads > 1 allows the pool (large tensors only); 1 keeps it on this thread.
  threads = threads > 1 ? 0 : 1;
  U* dst = reinterpret_cast<U*>(to);
  const auto n = product(shape);
  if (n == 0) return;
  // Input dims (sizes) after dropping 1s; perm over them; then merge neighbours.
  Shape in;
  std::vector<std::int64_t> remap(shape.size(), -1);
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) remap[d] = static_cast<std::int64_t>(in.size()), in.push_back(shape[d]);
  std::vector<std::int64_t> p;
  for (auto d : perm)
    if (remap[static_cast<std::size_t>(d)] >= 0) p.push_back(remap[static_cast<std::size_t>(d)]);
  // Merge output-adjacent dims that are input-adjacent too: groups of input dims.
  std::vector<std::vector<std::int64_t>> groups;  // in output order
  for (auto d : p) {
    if (!groups.empty() && groups.back().back() + 1 == d)
      groups.back().push_back(d);
    else
      groups.push_back({d});
  }
  const std::size_t r = groups.size();
  if (r <= 1) {
    std::copy(src, src + n, dst);
    return;
  }
  // Sizes of the merged input dims, in input order, and their input strides.
  std::vector<std::size_t> order(r);  // input position -> group
  for (std::size_t g = 0; g < r; ++g) order[g] = g;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return groups[a][0] < groups[b][0]; });
  std::vector<std::int64_t> size(r), istride(r);  // per group (output order)
  for (std::size_t g = 0; g < r; ++g) {
    size[g] = 1;
    for (auto d : groups[g]) size[g] *= in[static_cast<std::size_t>(d)];
  }
  std::int64_t acc = 1;
  for (std::size_t k = r; k-- > 0;) istride[order[k]] = acc, acc *= size[order[k]];
  std::vector<std::int64_t> ostride(r);
  acc = 1;
  for (std::size_t g = r; g-- > 0;) ostride[g] = acc, acc *= size[g];
  const std::size_t last = r - 1;      // innermost output group
  const std::size_t q = order[r - 1];  // the group holding the innermost input dim
  if (q == last) {
    // Rows: the innermost group is contiguous on both sides.
    const auto row = size[last];
    const auto rows = n / row;
    detail::parallel_for(
        static_cast<std::size_t>(rows),
        detail::resolve_threads(threads, static_cast<std::size_t>(n)),
        [&](std::size_t lo, std::size_t hi) {
          for (auto i = static_cast<std::int64_t>(lo); i < static_cast<std::int64_t>(hi); ++i) {
            std::int64_t rest = i, off = 0;
            for (std::size_t g = last; g-- > 0;)
              off += (rest % size[g]) * istride[g], rest /= size[g];
            std::copy(src + off, src + off + row, dst + i * row);
          }
        },
        1);
    return;
  }
  // Tiles over (group q: input-contiguous, group last: output-contiguous); the other groups
  // form the outer index.
  std::vector<std::size_t> outer;
  for (std::size_t g = 0; g < r; ++g)
    if (g != q && g != last) outer.push_back(g);
  std::int64_t n_outer = 1;
  for (auto g : outer) n_outer *= size[g];
  const auto nq = size[q], nl = size[last], sl = istride[last], oq = ostride[q];
  constexpr std::int64_t kTile = 16;
  const auto tiles_q = (nq + kTile - 1) / kTile;
  const auto jobs = n_outer * tiles_q;
  detail::parallel_for(
      static_cast<std::size_t>(jobs), detail::resolve_threads(threads, static_cast<std::size_t>(n)),
      [&](std::size_t lo, std::size_t hi) {
        for (auto job = static_cast<std::int64_t>(lo); job < static_cast<std::int64_t>(hi); ++job) {
          std::int64_t rest = job / tiles_q, ioff = 0, ooff = 0;
          for (std::size_t k = outer.size(); k-- > 0;) {
            const auto g = outer[k];
            const auto v = rest % size[g];
            rest /= size[g], ioff += v * istride[g], ooff += v * ostride[g];
          }
          const auto q0 = (job % tiles_q) * kTile, q1 = std::min(nq, q0 + kTile);
          for (std::int64_t l0 = 0; l0 < nl; l0 += kTile) {
            const auto l1 = std::min(nl, l0 + kTile);
            for (auto a = q0; a < q1; ++a)
              for (auto b = l0; b < l1; ++b) dst[ooff + a * oq + b] = src[ioff + a + b * sl];
          }
        }
      },
      1);
}

void transpose(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto rank = x.shape().size();
  auto perm = ctx.node.attr_ints("perm");
  if (perm.empty())
    for (std::size_t d = 0; d < rank; ++d) perm.push_back(static_cast<std::int64_t>(rank - 1 - d));
  if (perm.size() != rank)
    ctx.fail("perm has " + std::to_string(perm.size()) + " entries for rank " +
             std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (auto& p : perm) {
    p = norm_axis(ctx, p, static_cast<std::int64_t>(rank));
    if (seen[static_cast<std::size_t>(p)]) ctx.fail("perm is not a permutation");
    seen[static_cast<std::size_t>(p)] = true;
  }
  Shape os(rank);
  for (std::size_t d = 0; d < rank; ++d) os[d] = x.shape()[static_cast<std::size_t>(perm[d])];
  ctx.outputs[0] = Tensor::uninitialized(x.dtype(), os);
  permute_into(x, x.shape(), perm, ctx.outputs[0], ctx.threads);
}

void concat(KernelContext& ctx) {
  const Tensor& first = ctx.in(0);
  const auto rank = static_cast<std::int64_t>(first.shape().size());
  const auto axis = static_cast<std::size_t>(norm_axis(ctx, ctx.node.attr_int("axis", 0), rank));
  Shape os = first.shape();
  os[axis] = 0;
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.in(i);
    if (t.dtype() != first.dtype()) ctx.fail("input dtypes differ");
    if (t.shape().size() != first.shape().size()) ctx.fail("input ranks differ");
    for (std::size_t d = 0; d < first.shape().size(); ++d)
      if (d != axis && t.shape()[d] != first.shape()[d])
        ctx.fail("input " + std::to_string(i) + " has shape " + shape_str(t.shape()) +
                 ", incompatible with " + shape_str(first.shape()));
    os[axis] += t.shape()[axis];
  }
  // Every element is written (strings are assigned, so they start constructed).
  Tensor& out = first.dtype() == DType::string ? ctx.out(0, first.dtype(), os)
                                               : ctx.out_uninit(0, first.dtype(), os);
  // Output element e is element (e % span) of the outer index e / span: input i's run
  // [starts[i], starts[i + 1]) of it, each run `len` = starts[i + 1] - starts[i] elements of
  // that input per outer index. The output is split across the threads, each piece copied
  // as the runs it covers.
  const auto inner = product(os, axis + 1), span = os[axis] * inner;
  std::vector<std::int64_t> starts{0};
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i)
    starts.push_back(starts.back() + ctx.in(i).shape()[axis] * inner);
  detail::parallel_for(
      out.size(), detail::resolve_threads(ctx.threads > 1 ? 0 : 1, out.size()),
      [&](std::size_t lo, std::size_t hi) {
        for (auto e = static_cast<std::int64_t>(lo); e < static_cast<std::int64_t>(hi);) {
          const auto o = e / span, within = e % span;
          std::size_t i = 0;
          while (starts[i + 1] <= within) ++i;
          const auto len = starts[i + 1] - starts[i];
          const auto run = std::min(static_cast<std::int64_t>(hi) - e, starts[i + 1] - within);
          copy_elements(ctx.in(i), static_cast<std::size_t>(o * len + within - starts[i]), out,
                        static_cast<std::size_t>(e), static_cast<std::size_t>(run));
          e += run;
        }
      },
      1);
}

void slice(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (ctx.opset < 10) {
    starts = ctx.node.attr_ints("starts"), ends = ctx.node.attr_ints("ends"),
    axes = ctx.node.attr_ints("axes");
  } else {
    starts = int_values(ctx, ctx.in(1)), ends = int_values(ctx, ctx.in(2));
    if (ctx.has(3)) axes = int_values(ctx, ctx.in(3));
    if (ctx.has(4)) steps = int_values(ctx, ctx.in(4));
  }
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    ctx.fail("starts, ends, axes and steps differ in length");
  Shape os = x.shape();
  std::vector<std::int64_t> begin(static_cast<std::size_t>(rank), 0),
      step(static_cast<std::size_t>(rank), 1);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const auto d = static_cast<std::size_t>(norm_axis(ctx, axes[i], rank));
    const auto dim = x.shape()[d];
    const auto s = steps[i];
    if (s == 0) ctx.fail("step 0");
    auto clampi = [](std::int64_t v, std::int64_t lo, std::int64_t hi) {
      return std::min(std::max(v, lo), hi);
    };
    std::int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
    std::int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (s > 0)
      b = clampi(b, 0, dim), e = clampi(e, 0, dim);
    else
      b = clampi(b, 0, dim - 1), e = clampi(e, -1, dim - 1);
    const std::int64_t len = s > 0 ? std::max<std::int64_t>(0, (e - b + s - 1) / s)
                                   : std::max<std::int64_t>(0, (b - e + (-s) - 1) / (-s));
    os[d] = len, begin[d] = b, step[d] = s;
  }
  const auto st = strides_of(x.shape());
  ctx.outputs[0] = gather_elems(x, os, [&](const std::vector<std::int64_t>& idx) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) off += (begin[d] + idx[d] * step[d]) * st[d];
    return off;
  });
}

void gather(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto indices = int_values(ctx, ctx.in(1));
  const Shape& is = ctx.in(1).shape();
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  const auto axis = static_cast<std::size_t>(norm_axis(ctx, ctx.node.attr_int("axis", 0), rank));
  const auto dim = x.shape()[axis];
  Shape os(x.shape().begin(), x.shape().begin() + static_cast<std::ptrdiff_t>(axis));
  os.insert(os.end(), is.begin(), is.end());
  os.insert(os.end(), x.shape().begin() + static_cast<std::ptrdiff_t>(axis) + 1, x.shape().end());
  const auto outer = product(x.shape(), 0, axis), inner = product(x.shape(), axis + 1);
  const auto n = static_cast<std::int64_t>(indices.size());
  Tensor& out = ctx.out(0, x.dtype(), os);
  for (std::int64_t k = 0; k < n; ++k) {
    auto i = indices[static_cast<std::size_t>(k)];
    if (i < -dim || i >= dim)
      ctx.fail("index " + std::to_string(i) + " is out of range for axis of size " +
               std::to_string(dim));
    if (i < 0) i += dim;
    for (std::int64_t o = 0; o < outer; ++o)
      copy_elements(x, static_cast<std::size_t>((o * dim + i) * inner), out,
                    static_cast<std::size_t>((o * n + k) * inner), static_cast<std::size_t>(inner));
  }
}

void shape_k(KernelContext& ctx) {
  const auto& s = ctx.in(0).shape();
  const auto rank = static_cast<std::int64_t>(s.size());
  auto start = ctx.node.attr_int("start", 0), end = ctx.node.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<std::int64_t>(start, 0, rank), end = std::clamp<std::int64_t>(end, 0, rank);
  const auto n = std::max<std::int64_t>(0, end - start);
  auto out = ctx.out(0, DType::int64, {n}).data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] = s[static_cast<std::size_t>(start + i)];
}

void size_k(KernelContext& ctx) {
  ctx.out(0, DType::int64, {}).data<std::int64_t>()[0] =
      static_cast<std::int64_t>(ctx.in(0).size());
}

void constant(KernelContext& ctx) {
  const auto& n = ctx.node;
  if (const Tensor* t = n.attr_tensor("value")) {
    ctx.outputs[0] = exec::widen(*t, ctx.carrier);
    ctx.output_dtypes[0] = t->dtype();
  } else if (n.has_attr("value_float")) {
    ctx.out(0, DType::float32, {}).data<float>()[0] = n.attr_float("value_float", 0);
  } else if (n.has_attr("value_floats")) {
    const auto v = n.attr_floats("value_floats");
    auto o = ctx.out(0, DType::float32, {static_cast<std::int64_t>(v.size())}).data<float>();
    std::copy(v.begin(), v.end(), o.begin());
  } else if (n.has_attr("value_int")) {
    ctx.out(0, DType::int64, {}).data<std::int64_t>()[0] = n.attr_int("value_int", 0);
  } else if (n.has_attr("value_ints")) {
    const auto v = n.attr_ints("value_ints");
    auto o = ctx.out(0, DType::int64, {static_cast<std::int64_t>(v.size())}).data<std::int64_t>();
    std::copy(v.begin(), v.end(), o.begin());
  } else {
    ctx.fail("no supported value attribute (value, value_float(s), value_int(s))");
  }
}

void constant_of_shape(KernelContext& ctx) {
  const auto shape = int_values(ctx, ctx.in(0));
  Tensor value(DType::float32, {1});
  if (const Tensor* t = ctx.node.attr_tensor("value")) {
    if (t->size() != 1) ctx.fail("value must have one element");
    value = *t;
  }
  const DType storage = value.dtype();
  const Tensor v = exec::widen(value, ctx.carrier);
  Tensor& out = ctx.out(0, v.dtype(), shape);
  const std::size_t isz = itemsize(v.dtype());
  for (std::size_t i = 0; i < out.size(); ++i) std::memcpy(out.bytes() + i * isz, v.bytes(), isz);
  ctx.output_dtypes[0] = storage;
}

void expand(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto shape = int_values(ctx, ctx.in(1));
  const Shape os = broadcast_shapes(ctx, x.shape(), shape);
  const auto st = broadcast_strides(x.shape(), os);
  ctx.outputs[0] = gather_elems(x, os, [&](const std::vector<std::int64_t>& idx) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * st[d];
    return off;
  });
}

void tile(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto reps = int_values(ctx, ctx.in(1));
  if (reps.size() != x.shape().size()) ctx.fail("repeats has the wrong length");
  Shape os = x.shape();
  for (std::size_t d = 0; d < os.size(); ++d) os[d] *= reps[d];
  const auto st = strides_of(x.shape());
  ctx.outputs[0] = gather_elems(x, os, [&](const std::vector<std::int64_t>& idx) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) off += (idx[d] % x.shape()[d]) * st[d];
    return off;
  });
}

void range_k(KernelContext& ctx) {
  const Tensor& s = ctx.in(0);
  dispatch(ctx, s.dtype(), [&](auto t) {
    using T = decltype(t);
    const T start = s.template data<T>()[0], limit = ctx.in(1).template data<T>()[0],
            delta = ctx.in(2).template data<T>()[0];
    if (delta == 0) ctx.fail("delta is 0");
    const double cnt = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                                 static_cast<double>(delta));
    const auto n = static_cast<std::int64_t>(std::max(0.0, cnt));
    auto o = ctx.out(0, s.dtype(), {n}).template data<T>();
    for (std::int64_t i = 0; i < n; ++i)
      o[static_cast<std::size_t>(i)] = static_cast<T>(start + static_cast<T>(i) * delta);
  });
}

}  // namespace

void permute_into(const Tensor& x, const Shape& view, const std::vector<std::int64_t>& perm,
                  Tensor& out, int threads) {
  FPG_CHECK(product(view) == static_cast<std::int64_t>(x.size()) && out.size() == x.size() &&
            out.dtype() == x.dtype() && perm.size() == view.size());
  switch (itemsize(x.dtype())) {
    case 1:
      return permute<std::uint8_t>(x.bytes(), view, perm, out.bytes(), threads);
    case 2:
      return permute<std::uint16_t>(x.bytes(), view, perm, out.bytes(), threads);
    case 4:
      return permute<std::uint32_t>(x.bytes(), view, perm, out.bytes(), threads);
    default:
      return permute<std::uint64_t>(x.bytes(), view, perm, out.bytes(), threads);
  }
}

void register_shape(Registry& r) {
  r.add("Identity", identity,
        {.kind = OpKind::data_movement,
         .accepts = exec::kValues | exec::kStrings,
         .degree = Degree::same,
         .rearranges = true});
  // Shape-only ops move whole tensors: strings pass too.
  r.add("Reshape", reshape,
        {.kind = OpKind::data_movement,
         .accepts = exec::kStrings,
         .degree = Degree::same,
         .rearranges = true});
  r.add("Flatten", flatten,
        {.kind = OpKind::data_movement,
         .accepts = exec::kStrings,
         .degree = Degree::same,
         .rearranges = true});
  r.add("Squeeze", squeeze,
        {.kind = OpKind::data_movement,
         .accepts = exec::kStrings,
         .degree = Degree::same,
         .rearranges = true});
  r.add("Unsqueeze", unsqueeze,
        {.kind = OpKind::data_movement,
         .accepts = exec::kStrings,
         .degree = Degree::same,
         .rearranges = true});
  r.add("Transpose", transpose,
        {.kind = OpKind::data_movement, .degree = Degree::same, .rearranges = true});
  r.add("Concat", concat,
        {.kind = OpKind::data_movement, .accepts = exec::kStrings, .degree = Degree::additive});
  r.add("Slice", slice, {.kind = OpKind::data_movement, .degree = Degree::same});
  r.add("Gather", gather,
        {.kind = OpKind::data_movement, .accepts = exec::kStrings, .degree = Degree::same});
  r.add("Expand", expand, {.kind = OpKind::data_movement, .degree = Degree::same});
  r.add("Tile", tile, {.kind = OpKind::data_movement, .degree = Degree::same});
  r.add("Shape", shape_k, {.kind = OpKind::data_movement, .accepts = exec::kStrings});
  r.add("Size", size_k, {.kind = OpKind::data_movement, .accepts = exec::kStrings});
  r.add("Constant", constant, {.kind = OpKind::data_movement});
  r.add("ConstantOfShape", constant_of_shape, {.kind = OpKind::data_movement});
  r.add("Range", range_k);
}

}  // namespace fpguard::ops
