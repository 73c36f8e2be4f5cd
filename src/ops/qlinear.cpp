// The quantized integer ops: MatMulInteger and ConvInteger (int32 results), QLinearMatMul
// and QLinearConv (requantized to int8/uint8). Integer arithmetic is exact: every
// operand is an 8-bit value minus its zero point (|v| <= 255) and the products are summed
// in int32, which no reduction of up to kMaxTerms terms can overflow (checked before the
// loops). Only the requantization of QLinear* is floating: ONNX's y = saturate(round(
// acc * x_scale * w_scale / y_scale) + y_zero_point) with the scales folded into one
// multiplier, as float requantizing kernels do, computed in the carrier (float32, or
// double in the float64 run), rounded half to even.
#include <cmath>
#include <limits>

#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

// The most int32 products of two values in [-255, 255] whose sum cannot overflow.
constexpr std::int64_t kMaxTerms = std::numeric_limits<std::int32_t>::max() / (255 * 255);

// The values of an int8 or uint8 tensor as int32 (the quantized ops take nothing else).
std::vector<std::int32_t> int8_values(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() == DType::int8) {
    const auto d = t.data<std::int8_t>();
    return {d.begin(), d.end()};
  }
  if (t.dtype() == DType::uint8) {
    const auto d = t.data<std::uint8_t>();
    return {d.begin(), d.end()};
  }
  ctx.fail(std::string(what) + " has dtype " + std::string(to_string(t.dtype())) +
           "; quantized ops take int8 or uint8");
}

// A zero point (input `i`, optional: 0 when absent) of the data tensor `data`: the same
// dtype, and either one value or `len` values (one per row, column or output channel).
std::vector<std::int32_t> zero_point(const KernelContext& ctx, std::size_t i, const Tensor& data,
                                     std::int64_t len, const char* what) {
  if (!ctx.has(i)) return {0};
  const Tensor& z = ctx.in(i);
  if (z.dtype() != data.dtype())
    ctx.fail(std::string(what) + " has dtype " + std::string(to_string(z.dtype())) +
             ", its input " + std::string(to_string(data.dtype())));
  if (z.size() != 1 && (z.shape().size() != 1 || z.shape()[0] != len))
    ctx.fail(std::string(what) + " has shape " + shape_str(z.shape()) + "; expected one value or " +
             std::to_string(len));
  return int8_values(ctx, z, what);
}

// A scale (input `i`, floating): one value or `len` values, as zero_point.
template <class T>
std::vector<T> scale(const KernelContext& ctx, std::size_t i, std::int64_t len, const char* what) {
  const Tensor& s = ctx.in(i);
  require_float(ctx, s, what);
  if (s.size() != 1 && (s.shape().size() != 1 || s.shape()[0] != len))
    ctx.fail(std::string(what) + " has shape " + shape_str(s.shape()) + "; expected one value or " +
             std::to_string(len));
  const auto d = s.data<T>();
  for (const T v : d)
    if (!(v > 0) || !std::isfinite(v))
      ctx.fail(std::string(what) + " must be finite and positive, not " + std::to_string(v));
  return {d.begin(), d.end()};
}

template <class V>
auto at(const std::vector<V>& v, std::int64_t i) {
  return v.size() == 1 ? v[0] : v[static_cast<std::size_t>(i)];
}

void check_terms(const KernelContext& ctx, std::int64_t k) {
  if (k > kMaxTerms)
    ctx.fail("a reduction of " + std::to_string(k) + " products may overflow the int32 " +
             "accumulator (at most " + std::to_string(kMaxTerms) + ")");
}

// c[m x n] = a[m x k] b[k x n], exact in int32 (check_terms bounds k).
void gemm_int32(std::int64_t m, std::int64_t n, std::int64_t k, const std::int32_t* a,
                const std::int32_t* b, std::int32_t* c) {
  std::fill(c, c + m * n, 0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t q = 0; q < k; ++q) {
      const std::int32_t v = a[i * k + q];
      if (v == 0) continue;
      const std::int32_t* br = b + q * n;
      std::int32_t* cr = c + i * n;
      for (std::int64_t j = 0; j < n; ++j) cr[j] += v * br[j];
    }
}

// (A - a_zero) x (B - b_zero) in int32, batched with numpy broadcasting (rank >= 1 each,
// as MatMul); zero points per tensor, per row of A, per column of B. Returns the output
// shape and the accumulators; inputs 0, 1 are A, B and za, zb the zero points' inputs.
std::pair<Shape, std::vector<std::int32_t>> matmul_int(const KernelContext& ctx, std::size_t ia,
                                                       std::size_t ib, std::size_t za,
                                                       std::size_t zb) {
  const Tensor& ta = ctx.in(ia);
  const Tensor& tb = ctx.in(ib);
  Shape sa = ta.shape(), sb = tb.shape();
  if (sa.empty() || sb.empty()) ctx.fail("inputs must have rank >= 1");
  const bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  const std::int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  if (sb[sb.size() - 2] != k)
    ctx.fail("shapes " + shape_str(ta.shape()) + " and " + shape_str(tb.shape()) +
             " cannot be multiplied");
  check_terms(ctx, k);
  auto a = int8_values(ctx, ta, "A"), b = int8_values(ctx, tb, "B");
  const auto zav = zero_point(ctx, za, ta, m, "the zero point of A");
  const auto zbv = zero_point(ctx, zb, tb, n, "the zero point of B");
  for (std::size_t e = 0; e < a.size(); ++e) a[e] -= at(zav, static_cast<std::int64_t>(e) / k % m);
  for (std::size_t e = 0; e < b.size(); ++e) b[e] -= at(zbv, static_cast<std::int64_t>(e) % n);
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const Shape batch = broadcast_shapes(ctx, ba, bb);
  Shape os = batch;
  if (!va) os.push_back(m);
  if (!vb) os.push_back(n);
  std::vector<std::int32_t> acc(static_cast<std::size_t>(product(os)));
  const auto sta = broadcast_strides(ba, batch), stb = broadcast_strides(bb, batch);
  for (std::int64_t i = 0, nb = product(batch); i < nb; ++i) {
    std::int64_t oa = 0, ob = 0, rem = i;
    for (std::size_t d = batch.size(); d-- > 0;) {
      const auto q = rem % batch[d];
      rem /= batch[d];
      oa += q * sta[d], ob += q * stb[d];
    }
    gemm_int32(m, n, k, a.data() + oa * m * k, b.data() + ob * k * n, acc.data() + i * m * n);
  }
  return {os, acc};
}

// Conv of (X - x_zero) with (W - w_zero) in int32 (im2col, padding contributes 0); the
// zero point of W per tensor or per output channel. Returns the output shape and the
// accumulators.
std::pair<Shape, std::vector<std::int32_t>> conv_int(const KernelContext& ctx, std::size_t ix,
                                                     std::size_t iw, std::size_t zx,
                                                     std::size_t zw) {
  const Tensor& tx = ctx.in(ix);
  const Tensor& tw = ctx.in(iw);
  if (tw.shape().size() < 3 || tx.shape().size() != tw.shape().size())
    ctx.fail("X " + shape_str(tx.shape()) + " and W " + shape_str(tw.shape()) +
             " ranks do not match");
  const ConvGeometry geo = conv_geometry(ctx, tx.shape(), tw.shape());
  const auto cg = geo.c / geo.group, mg = geo.m / geo.group;
  const auto ksize = product(geo.kernel), osize = product(geo.out), isize = product(geo.in);
  const auto kk = cg * ksize;
  check_terms(ctx, kk);
  auto x = int8_values(ctx, tx, "X"), w = int8_values(ctx, tw, "W");
  const auto zxv = zero_point(ctx, zx, tx, 1, "x_zero_point");
  const auto zwv = zero_point(ctx, zw, tw, geo.m, "w_zero_point");
  for (auto& v : x) v -= zxv[0];
  for (std::size_t e = 0; e < w.size(); ++e) w[e] -= at(zwv, static_cast<std::int64_t>(e) / kk);
  Shape os{geo.n, geo.m};
  os.insert(os.end(), geo.out.begin(), geo.out.end());
  std::vector<std::int32_t> acc(static_cast<std::size_t>(product(os)));
  std::vector<std::int32_t> col(static_cast<std::size_t>(kk * osize));
  for (std::int64_t b = 0; b < geo.n; ++b)
    for (std::int64_t g = 0; g < geo.group; ++g) {
      for (std::int64_t ci = 0; ci < cg; ++ci)
        im2col(geo, x.data() + (b * geo.c + g * cg + ci) * isize, col.data() + ci * ksize * osize);
      gemm_int32(mg, osize, kk, w.data() + g * mg * kk, col.data(),
                 acc.data() + (b * geo.m + g * mg) * osize);
    }
  return {os, acc};
}

void int32_output(KernelContext& ctx, const Shape& shape, const std::vector<std::int32_t>& acc) {
  auto out = ctx.out(0, DType::int32, shape).data<std::int32_t>();
  std::copy(acc.begin(), acc.end(), out.begin());
}

void matmul_integer(KernelContext& ctx) {
  const auto [shape, acc] = matmul_int(ctx, 0, 1, 2, 3);
  int32_output(ctx, shape, acc);
}

void conv_integer(KernelContext& ctx) {
  const auto [shape, acc] = conv_int(ctx, 0, 1, 2, 3);
  int32_output(ctx, shape, acc);
}

// y = saturate(round_half_even((acc + bias(e)) * multiplier(e)) + y_zero_point) in
// y_zero_point's dtype (uint8 when absent); multiplier(e) = x_scale * w_scale / y_scale
// for output element e, bias(e) the int32 bias of QLinearConv (summed in int64: exact).
template <class T, class M, class B>
void requantize(KernelContext& ctx, const Shape& shape, const std::vector<std::int32_t>& acc,
                M multiplier, B bias) {
  const DType to = ctx.has(7) ? ctx.in(7).dtype() : DType::uint8;
  if (to != DType::int8 && to != DType::uint8) ctx.fail("y_zero_point must be int8 or uint8");
  if (ctx.has(7) && ctx.in(7).size() != 1) ctx.fail("y_zero_point must hold one value");
  const T zy = ctx.has(7) ? static_cast<T>(int8_values(ctx, ctx.in(7), "y_zero_point")[0]) : T{0};
  const T lo = to == DType::int8 ? -128 : 0, hi = to == DType::int8 ? 127 : 255;
  Tensor& out = ctx.out(0, to, shape);
  auto write = [&](auto* y) {
    using Y = std::remove_pointer_t<decltype(y)>;
    for (std::size_t e = 0; e < acc.size(); ++e) {
      const T v = static_cast<T>(std::int64_t{acc[e]} + bias(e)) * multiplier(e);
      y[e] = static_cast<Y>(std::clamp(std::nearbyint(v) + zy, lo, hi));
    }
  };
  if (to == DType::int8)
    write(out.data<std::int8_t>().data());
  else
    write(out.data<std::uint8_t>().data());
}

// QLinearMatMul(a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero): scales and
// zero points per tensor, per row of a, per column of b.
template <class T>
void qlinear_matmul(KernelContext& ctx) {
  const auto [shape, acc] = matmul_int(ctx, 0, 3, 2, 5);
  const Shape& sa = ctx.in(0).shape();
  const Shape& sb = ctx.in(3).shape();
  const std::int64_t m = sa.size() > 1 ? sa[sa.size() - 2] : 1, n = sb.size() > 1 ? sb.back() : 1;
  const auto as = scale<T>(ctx, 1, m, "a_scale"), bs = scale<T>(ctx, 4, n, "b_scale");
  const auto ys = scale<T>(ctx, 6, 1, "y_scale");
  requantize<T>(
      ctx, shape, acc,
      [&](std::size_t e) {
        const auto i = static_cast<std::int64_t>(e);
        return at(as, i / n % m) * at(bs, i % n) / ys[0];
      },
      [](std::size_t) { return std::int64_t{0}; });
}

// QLinearConv(x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero[, B]): w's scale
// and zero point per tensor or per output channel; the int32 bias B (one per output
// channel) is added to the accumulators before requantization.
template <class T>
void qlinear_conv(KernelContext& ctx) {
  const auto [shape, acc] = conv_int(ctx, 0, 3, 2, 5);
  const std::int64_t m = shape[1], osize = product(shape, 2);
  const auto xs = scale<T>(ctx, 1, 1, "x_scale"), ws = scale<T>(ctx, 4, m, "w_scale");
  const auto ys = scale<T>(ctx, 6, 1, "y_scale");
  std::vector<std::int32_t> bias{0};
  if (ctx.has(8)) {
    const Tensor& b = ctx.in(8);
    if (b.dtype() != DType::int32 || b.shape() != Shape{m})
      ctx.fail("B must be int32 of shape [" + std::to_string(m) + "]");
    bias.assign(b.data<std::int32_t>().begin(), b.data<std::int32_t>().end());
  }
  const auto channel = [&](std::size_t e) { return static_cast<std::int64_t>(e) / osize % m; };
  requantize<T>(
      ctx, shape, acc, [&](std::size_t e) { return xs[0] * at(ws, channel(e)) / ys[0]; },
      [&](std::size_t e) { return std::int64_t{at(bias, channel(e))}; });
}

}  // namespace

void register_qlinear(Registry& r) {
  r.add("MatMulInteger", matmul_integer, {.min_opset = 10});
  r.add("ConvInteger", conv_integer, {.min_opset = 10});
  r.add("QLinearMatMul", carried<qlinear_matmul<float>, qlinear_matmul<double>>, {.min_opset = 10});
  r.add("QLinearConv", carried<qlinear_conv<float>, qlinear_conv<double>>, {.min_opset = 10});
}

}  // namespace fpguard::ops
