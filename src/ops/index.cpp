// Indexing and rearranging ops: GatherElements, GatherND, ScatterElements (Scatter),
// ScatterND, OneHot, NonZero, TopK, Trilu, EyeLike, CumSum, Split, Pad, DepthToSpace,
// SpaceToDepth, Dropout (inference: identity).
#include <cmath>
#include <cstring>
#include <numeric>

#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

std::vector<std::int64_t> strides_of(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

std::int64_t fix_index(const KernelContext& ctx, std::int64_t i, std::int64_t dim) {
  if (i < -dim || i >= dim)
    ctx.fail("index " + std::to_string(i) + " is out of range for a dimension of " +
             std::to_string(dim));
  return i < 0 ? i + dim : i;
}

void copy_elem(Tensor& out, std::int64_t o, const Tensor& in, std::int64_t i) {
  const auto isz = itemsize(in.dtype());
  std::memcpy(out.bytes() + static_cast<std::size_t>(o) * isz,
              in.bytes() + static_cast<std::size_t>(i) * isz, isz);
}

void gather_elements(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto idx = int_values(ctx, ctx.in(1));
  const Shape& is = ctx.in(1).shape();
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  if (static_cast<std::int64_t>(is.size()) != rank) ctx.fail("indices must have the rank of data");
  const auto axis = static_cast<std::size_t>(norm_axis(ctx, ctx.node.attr_int("axis", 0), rank));
  Tensor& out = ctx.out(0, x.dtype(), is);
  const auto xst = strides_of(x.shape()), ist = strides_of(is);
  for (std::size_t o = 0; o < idx.size(); ++o) {
    std::int64_t rem = static_cast<std::int64_t>(o), off = 0;
    for (std::size_t d = 0; d < is.size(); ++d) {
      std::int64_t k = rem / ist[d];
      rem %= ist[d];
      if (d == axis) k = fix_index(ctx, idx[o], x.shape()[d]);
      off += k * xst[d];
    }
    copy_elem(out, static_cast<std::int64_t>(o), x, off);
  }
}

template <class T>
T reduce_into(const std::string& r, T a, T b) {
  if (r == "add") return static_cast<T>(a + b);
  if (r == "mul") return static_cast<T>(a * b);
  if (r == "max") return std::max(a, b);
  if (r == "min") return std::min(a, b);
  return b;
}

void scatter_elements(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto idx = int_values(ctx, ctx.in(1));
  const Tensor& upd = ctx.in(2);
  const Shape& is = ctx.in(1).shape();
  if (upd.shape() != is) ctx.fail("updates must have the shape of indices");
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  const auto axis = static_cast<std::size_t>(norm_axis(ctx, ctx.node.attr_int("axis", 0), rank));
  const std::string red = ctx.node.attr_string("reduction", "none");
  Tensor out = x;
  const auto xst = strides_of(x.shape()), ist = strides_of(is);
  dispatch(ctx, x.dtype(), [&](auto t) {
    using T = decltype(t);
    auto po = out.template data<T>();
    auto pu = upd.template data<T>();
    for (std::size_t o = 0; o < idx.size(); ++o) {
      std::int64_t rem = static_cast<std::int64_t>(o), off = 0;
      for (std::size_t d = 0; d < is.size(); ++d) {
        std::int64_t k = rem / ist[d];
        rem %= ist[d];
        if (d == axis) k = fix_index(ctx, idx[o], x.shape()[d]);
        off += k * xst[d];
      }
      po[static_cast<std::size_t>(off)] =
          reduce_into<T>(red, po[static_cast<std::size_t>(off)], pu[o]);
    }
  });
  ctx.outputs[0] = std::move(out);
}

void gather_nd(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto idx = int_values(ctx, ctx.in(1));
  const Shape& is = ctx.in(1).shape();
  const auto b = static_cast<std::size_t>(ctx.node.attr_int("batch_dims", 0));
  const auto& xs = x.shape();
  if (is.empty()) ctx.fail("indices must have rank >= 1");
  const auto k = static_cast<std::size_t>(is.back());
  if (b + k > xs.size()) ctx.fail("indices address more dimensions than data has");
  Shape os(is.begin(), is.end() - 1);
  os.insert(os.end(), xs.begin() + static_cast<std::ptrdiff_t>(b + k), xs.end());
  Tensor& out = ctx.out(0, x.dtype(), os);
  const auto slice = product(xs, b + k);
  const auto batch = product(xs, 0, b);
  const auto per_batch_idx = product(is, b, is.size() - 1);
  const auto xst = strides_of(xs);
  const auto isz = itemsize(x.dtype());
  for (std::int64_t bi = 0; bi < batch; ++bi)
    for (std::int64_t j = 0; j < per_batch_idx; ++j) {
      const std::int64_t* tuple =
          idx.data() + (bi * per_batch_idx + j) * static_cast<std::int64_t>(k);
      std::int64_t off = bi * (b ? xst[b - 1] : 0);
      for (std::size_t d = 0; d < k; ++d) off += fix_index(ctx, tuple[d], xs[b + d]) * xst[b + d];
      std::memcpy(out.bytes() + static_cast<std::size_t>((bi * per_batch_idx + j) * slice) * isz,
                  x.bytes() + static_cast<std::size_t>(off) * isz,
                  static_cast<std::size_t>(slice) * isz);
    }
}

void scatter_nd(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto idx = int_values(ctx, ctx.in(1));
  const Shape& is = ctx.in(1).shape();
  const Tensor& upd = ctx.in(2);
  const auto& xs = x.shape();
  const auto k = static_cast<std::size_t>(is.back());
  const auto slice = product(xs, k);
  const auto n = product(is, 0, is.size() - 1);
  const auto xst = strides_of(xs);
  const std::string red = ctx.node.attr_string("reduction", "none");
  Tensor out = x;
  dispatch(ctx, x.dtype(), [&](auto t) {
    using T = decltype(t);
    auto po = out.template data<T>();
    auto pu = upd.template data<T>();
    for (std::int64_t j = 0; j < n; ++j) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d < k; ++d)
        off += fix_index(ctx, idx[static_cast<std::size_t>(j) * k + d], xs[d]) * xst[d];
      for (std::int64_t e = 0; e < slice; ++e)
        po[static_cast<std::size_t>(off + e)] =
            reduce_into<T>(red, po[static_cast<std::size_t>(off + e)],
                           pu[static_cast<std::size_t>(j * slice + e)]);
    }
  });
  ctx.outputs[0] = std::move(out);
}

void one_hot(KernelContext& ctx) {
  std::vector<double> ind(ctx.in(0).size()), depth_v(1);
  to_double(ctx.in(0), ind);
  to_double(ctx.in(1), depth_v);
  const Tensor& values = ctx.in(2);
  const auto depth = static_cast<std::int64_t>(depth_v[0]);
  const Shape& is = ctx.in(0).shape();
  const auto rank = static_cast<std::int64_t>(is.size()) + 1;
  const auto axis = static_cast<std::size_t>(norm_axis(ctx, ctx.node.attr_int("axis", -1), rank));
  Shape os(is);
  os.insert(os.begin() + static_cast<std::ptrdiff_t>(axis), depth);
  Tensor& out = ctx.out(0, values.dtype(), os);
  const auto outer = product(is, 0, axis), inner = product(is, axis);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t d = 0; d < depth; ++d)
      for (std::int64_t i = 0; i < inner; ++i) {
        auto v = static_cast<std::int64_t>(ind[static_cast<std::size_t>(o * inner + i)]);
        if (v < 0) v += depth;
        copy_elem(out, (o * depth + d) * inner + i, values, v == d ? 1 : 0);
      }
}

void non_zero(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  std::vector<double> v(x.size());
  to_double(x, v);
  const auto& s = x.shape();
  std::vector<std::int64_t> hits;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != 0) hits.push_back(static_cast<std::int64_t>(i));
  const auto nnz = static_cast<std::int64_t>(hits.size());
  auto out =
      ctx.out(0, DType::int64, {static_cast<std::int64_t>(s.size()), nnz}).data<std::int64_t>();
  const auto st = strides_of(s);
  for (std::int64_t j = 0; j < nnz; ++j)
    for (std::size_t d = 0; d < s.size(); ++d)
      out[d * static_cast<std::size_t>(nnz) + static_cast<std::size_t>(j)] =
          (hits[static_cast<std::size_t>(j)] / st[d]) % s[d];
}

void top_k(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto k = ctx.opset < 10 ? ctx.node.attr_int("k", 1) : int_values(ctx, ctx.in(1)).at(0);
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  const auto axis = static_cast<std::size_t>(norm_axis(ctx, ctx.node.attr_int("axis", -1), rank));
  const bool largest = ctx.node.attr_int("largest", 1) != 0;
  const auto& s = x.shape();
  if (k < 0 || k > s[axis]) ctx.fail("K = " + std::to_string(k) + " is out of range");
  Shape os = s;
  os[axis] = k;
  const auto outer = product(s, 0, axis), len = s[axis], inner = product(s, axis + 1);
  std::vector<double> v(x.size());
  to_double(x, v);
  Tensor vals_d(DType::float64, os);
  auto pv = vals_d.data<double>();
  auto pi = ctx.out(1, DType::int64, os).data<std::int64_t>();
  std::vector<std::int64_t> order(static_cast<std::size_t>(len));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      auto at = [&](std::int64_t j) {
        return v[static_cast<std::size_t>((o * len + j) * inner + i)];
      };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        return largest ? at(a) > at(b) : at(a) < at(b);
      });
      for (std::int64_t j = 0; j < k; ++j) {
        const auto dst = static_cast<std::size_t>((o * k + j) * inner + i);
        pv[dst] = at(order[static_cast<std::size_t>(j)]);
        pi[dst] = order[static_cast<std::size_t>(j)];
      }
    }
  ctx.outputs[0] = exec::convert(vals_d, x.dtype());
}

void trilu(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto& s = x.shape();
  if (s.size() < 2) ctx.fail("input must have rank >= 2");
  const std::int64_t k = ctx.has(1) ? int_values(ctx, ctx.in(1)).at(0) : 0;
  const bool upper = ctx.node.attr_int("upper", 1) != 0;
  const auto rows = s[s.size() - 2], cols = s.back();
  Tensor& out = ctx.out(0, x.dtype(), s);  // zero-filled
  const auto n = static_cast<std::int64_t>(x.size());
  for (std::int64_t e = 0; e < n; ++e) {
    const auto j = e % cols, i = (e / cols) % rows;
    if (upper ? j - i >= k : j - i <= k) copy_elem(out, e, x, e);
  }
}

void eye_like(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (x.shape().size() != 2) ctx.fail("input must be 2-D");
  DType dt = ctx.input_dtypes[0];
  if (ctx.node.has_attr("dtype")) {
    const auto d = model::dtype_of(static_cast<int>(ctx.node.attr_int("dtype", 1)));
    if (!d) ctx.fail("unsupported dtype");
    dt = *d;
  }
  const auto k = ctx.node.attr_int("k", 0);
  Tensor d(DType::float64, x.shape());
  auto pd = d.data<double>();
  for (std::int64_t i = 0; i < x.shape()[0]; ++i) {
    const auto j = i + k;
    if (j >= 0 && j < x.shape()[1]) pd[static_cast<std::size_t>(i * x.shape()[1] + j)] = 1;
  }
  if (exec::is_float(dt)) {
    ctx.outputs[0] = exec::convert(d, ctx.carrier);
    ctx.output_dtypes[0] = dt;
  } else {
    ctx.outputs[0] = exec::convert(d, dt);
  }
}

void cum_sum(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  const auto axis =
      static_cast<std::size_t>(norm_axis(ctx, int_values(ctx, ctx.in(1)).at(0), rank));
  const bool exclusive = ctx.node.attr_int("exclusive", 0) != 0,
             reverse = ctx.node.attr_int("reverse", 0) != 0;
  const auto& s = x.shape();
  const auto outer = product(s, 0, axis), len = s[axis], inner = product(s, axis + 1);
  Tensor& out = ctx.out(0, x.dtype(), s);
  dispatch(ctx, x.dtype(), [&](auto t) {
    using T = decltype(t);
    auto pi = x.template data<T>();
    auto po = out.template data<T>();
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        T acc{0};
        for (std::int64_t jj = 0; jj < len; ++jj) {
          const auto j = reverse ? len - 1 - jj : jj;
          const auto at = static_cast<std::size_t>((o * len + j) * inner + i);
          if (exclusive) {
            po[at] = acc;
            acc = static_cast<T>(acc + pi[at]);
          } else {
            acc = static_cast<T>(acc + pi[at]);
            po[at] = acc;
          }
        }
      }
  });
}

void split(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  const auto axis = static_cast<std::size_t>(norm_axis(ctx, ctx.node.attr_int("axis", 0), rank));
  const auto dim = x.shape()[axis];
  const auto n = static_cast<std::int64_t>(ctx.node.outputs.size());
  std::vector<std::int64_t> sizes;
  if (ctx.opset >= 13) {
    if (ctx.has(1)) sizes = int_values(ctx, ctx.in(1));
  } else {
    sizes = ctx.node.attr_ints("split");
  }
  if (sizes.empty()) {
    const auto chunk = ctx.node.has_attr("num_outputs") ? (dim + n - 1) / n : dim / n;
    if (!ctx.node.has_attr("num_outputs") && dim % n)
      ctx.fail("axis of " + std::to_string(dim) + " does not split evenly in " + std::to_string(n));
    for (std::int64_t i = 0; i < n; ++i) sizes.push_back(std::min(chunk, dim - chunk * i));
  }
  if (static_cast<std::int64_t>(sizes.size()) != n)
    ctx.fail("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(n) +
             " outputs");
  if (std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) != dim)
    ctx.fail("split sizes do not sum to the axis length");
  const auto outer = product(x.shape(), 0, axis), inner = product(x.shape(), axis + 1);
  const auto isz = static_cast<std::int64_t>(itemsize(x.dtype()));
  std::int64_t at = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    Shape os = x.shape();
    os[axis] = sizes[static_cast<std::size_t>(i)];
    Tensor& out = ctx.out(static_cast<std::size_t>(i), x.dtype(), os);
    const auto len = os[axis] * inner;
    for (std::int64_t o = 0; o < outer; ++o)
      if (len)
        std::memcpy(out.bytes() + o * len * isz, x.bytes() + (o * dim * inner + at) * isz,
                    static_cast<std::size_t>(len * isz));
    at += len;
  }
}

void pad(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  std::vector<std::int64_t> pads;
  if (ctx.opset < 11)
    pads = ctx.node.attr_ints("pads");
  else
    pads = int_values(ctx, ctx.in(1));
  std::vector<std::int64_t> axes;
  if (ctx.has(3))
    axes = int_values(ctx, ctx.in(3));
  else
    for (std::int64_t d = 0; d < rank; ++d) axes.push_back(d);
  if (pads.size() != 2 * axes.size())
    ctx.fail("pads has " + std::to_string(pads.size()) + " values for " +
             std::to_string(axes.size()) + " axes");
  std::vector<std::int64_t> before(static_cast<std::size_t>(rank), 0),
      after(static_cast<std::size_t>(rank), 0);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto d = static_cast<std::size_t>(norm_axis(ctx, axes[i], rank));
    before[d] = pads[i], after[d] = pads[i + axes.size()];
  }
  const std::string mode = ctx.node.attr_string("mode", "constant");
  Shape os = x.shape();
  for (std::size_t d = 0; d < os.size(); ++d) {
    os[d] += before[d] + after[d];
    if (os[d] < 0) ctx.fail("negative output dimension");
    if (mode != "constant" && x.shape()[d] == 0 && os[d] > 0)
      ctx.fail("cannot " + mode + "-pad an empty axis");
  }
  Tensor fill(x.dtype(), {1});
  if (ctx.opset < 11) {
    Tensor f(DType::float32, {1});
    f.data<float>()[0] = ctx.node.attr_float("value", 0);
    fill = exec::convert(f, x.dtype());
  } else if (ctx.has(2) && ctx.in(2).size() > 0) {
    std::memcpy(fill.bytes(), ctx.in(2).bytes(), itemsize(x.dtype()));
  }
  Tensor& out = ctx.out(0, x.dtype(), os);
  const auto xst = strides_of(x.shape());
  const auto n = product(os);
  for (std::int64_t o = 0; o < n; ++o) {
    std::int64_t rem = o, off = 0;
    bool outside = false;
    for (std::size_t d = os.size(); d-- > 0;) {
      std::int64_t p = rem % os[d] - before[d];
      rem /= os[d];
      const auto len = x.shape()[d];
      if (p < 0 || p >= len) {
        if (mode == "constant")
          outside = true;
        else if (mode == "edge")
          p = p < 0 ? 0 : len - 1;
        else if (mode == "wrap")
          p = ((p % len) + len) % len;
        else if (mode == "reflect") {
          if (len == 1)
            p = 0;
          else {
            const auto period = 2 * (len - 1);
            p = ((p % period) + period) % period;
            if (p >= len) p = period - p;
          }
        } else
          ctx.fail("mode '" + mode + "' is not supported");
      }
      off += p * xst[d];
    }
    if (outside)
      copy_elem(out, o, fill, 0);
    else
      copy_elem(out, o, x, off);
  }
}

template <bool to_space>
void depth_space(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto& s = x.shape();
  if (s.size() != 4) ctx.fail("input must be 4-D");
  const auto b = ctx.node.attr_int("blocksize", 0);
  if (b <= 0) ctx.fail("blocksize must be positive");
  const bool crd = ctx.node.attr_string("mode", "DCR") == "CRD";
  const auto n = s[0], c = s[1], h = s[2], w = s[3];
  Shape os;
  if (to_space) {
    if (c % (b * b)) ctx.fail("channels are not a multiple of blocksize^2");
    os = {n, c / (b * b), h * b, w * b};
  } else {
    if (h % b || w % b) ctx.fail("height and width must be multiples of blocksize");
    os = {n, c * b * b, h / b, w / b};
  }
  // Both are a transpose of a 6-D view (c' = channels of the spatially large tensor, the
  // small spatial size h x w): DepthToSpace reads [n, b, b, c', h, w] (DCR) or
  // [n, c', b, b, h, w] (CRD) as [n, c', h, b, w, b]; SpaceToDepth the reverse.
  Tensor& out = ctx.out_uninit(0, x.dtype(), os);
  const auto co = to_space ? os[1] : c;
  const auto hs = to_space ? h : os[2], ws = to_space ? w : os[3];
  if (to_space) {
    if (crd)
      permute_into(x, {n, co, b, b, hs, ws}, {0, 1, 4, 2, 5, 3}, out, ctx.threads);
    else
      permute_into(x, {n, b, b, co, hs, ws}, {0, 3, 4, 1, 5, 2}, out, ctx.threads);
  } else {
    if (crd)
      permute_into(x, {n, co, hs, b, ws, b}, {0, 1, 3, 5, 2, 4}, out, ctx.threads);
    else
      permute_into(x, {n, co, hs, b, ws, b}, {0, 3, 5, 1, 2, 4}, out, ctx.threads);
  }
}

void dropout(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (ctx.has(2)) {
    const Tensor& t = ctx.in(2);
    std::vector<double> ratio(1, 0.5);
    if (ctx.has(1)) to_double(ctx.in(1), ratio);
    if (t.dtype() == DType::bool_ && t.size() == 1 && t.data<std::uint8_t>()[0] && ratio[0] != 0)
      ctx.fail("training_mode = true (random dropout) is not supported");
  }
  ctx.outputs[0] = x;
  if (ctx.outputs.size() > 1) {
    Tensor& m = ctx.out(1, DType::bool_, x.shape());
    std::fill(m.data<std::uint8_t>().begin(), m.data<std::uint8_t>().end(), std::uint8_t{1});
  }
}

}  // namespace

void register_index(Registry& r) {
  r.add("GatherElements", gather_elements, {.kind = OpKind::data_movement});
  r.add("GatherND", gather_nd, {.kind = OpKind::data_movement});
  r.add("ScatterElements", scatter_elements);
  r.add("Scatter", scatter_elements);
  r.add("ScatterND", scatter_nd);
  r.add("OneHot", one_hot, {.kind = OpKind::data_movement});
  r.add("NonZero", non_zero);
  r.add("TopK", top_k, {.kind = OpKind::data_movement});
  r.add("Trilu", trilu, {.kind = OpKind::data_movement});
  r.add("EyeLike", eye_like, {.kind = OpKind::data_movement});
  r.add("CumSum", cum_sum);
  r.add("Split", split, {.kind = OpKind::data_movement, .degree = Degree::same});
  r.add("Pad", pad, {.kind = OpKind::data_movement});
  r.add("DepthToSpace", depth_space<true>, {.kind = OpKind::data_movement, .degree = Degree::same});
  r.add("SpaceToDepth", depth_space<false>,
        {.kind = OpKind::data_movement, .degree = Degree::same});
  r.add("Dropout", dropout, {.kind = OpKind::data_movement, .degree = Degree::same});
}

}  // namespace fpguard::ops
