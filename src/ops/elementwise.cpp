// Elementwise ops: unary math, binary arithmetic with numpy broadcasting, comparisons,
// logic, Where, Cast. Floating inputs arrive as carriers (float32, or float64 in a truth
// run); the math is written once over the carrier type.
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/parallel.hpp"
#include "fpguard/round.hpp"
#include "ops/left_nan.hpp"
#include "ops/ops.hpp"
#include "ops/vmath.hpp"

namespace fpguard::ops {

namespace {

// Calls run(o, ia, ib, len, inc_a, inc_b) over `out` in runs of `len` consecutive output
// elements starting at output offset o, whose inputs start at offsets ia, ib and advance
// by inc_a, inc_b (1, or 0 where the input is broadcast) per element. Dimensions of size 1
// are dropped and neighbours whose strides continue each other merged first, so
// [1,256,768] + [768] is 256 runs of 768 and equal shapes are one run. Large outputs are
// split across threads (chunks of whole elements; a run may straddle two chunks).
template <class Run>
void broadcast_runs(const Shape& out, const Shape& a, const Shape& b, Run&& run, int threads) {
  const auto n = product(out);
  if (n == 0) return;
  const auto sa0 = broadcast_strides(a, out), sb0 = broadcast_strides(b, out);
  // Coalesced dims, innermost first.
  std::vector<std::int64_t> dim, sa, sb;
  for (std::size_t d = out.size(); d-- > 0;) {
    if (out[d] == 1) continue;
    if (!dim.empty() && sa0[d] == sa.back() * dim.back() && sb0[d] == sb.back() * dim.back()) {
      dim.back() *= out[d];
      continue;
    }
    dim.push_back(out[d]), sa.push_back(sa0[d]), sb.push_back(sb0[d]);
  }
  if (dim.empty()) dim = {1}, sa = {0}, sb = {0};
  const std::size_t r = dim.size();
  detail::parallel_for(static_cast<std::size_t>(n), threads > 1 ? 0 : 1,
                       [&](std::size_t lo, std::size_t hi) {
                         // The multi-index of lo (innermost first) and the input offsets it maps
                         // to.
                         std::vector<std::int64_t> idx(r);
                         std::int64_t ia = 0, ib = 0, rest = static_cast<std::int64_t>(lo);
                         for (std::size_t d = 0; d < r; ++d) {
                           idx[d] = rest % dim[d], rest /= dim[d];
                           ia += idx[d] * sa[d], ib += idx[d] * sb[d];
                         }
                         auto o = static_cast<std::int64_t>(lo);
                         const auto end = static_cast<std::int64_t>(hi);
                         while (o < end) {
                           const auto len = std::min(dim[0] - idx[0], end - o);
                           run(o, ia, ib, len, sa[0], sb[0]);
                           o += len, ia += len * sa[0], ib += len * sb[0], idx[0] += len;
                           if (idx[0] < dim[0]) break;  // only at the chunk's end
                           ia -= sa[0] * dim[0], ib -= sb[0] * dim[0], idx[0] = 0;
                           for (std::size_t d = 1; d < r; ++d) {
                             ++idx[d], ia += sa[d], ib += sb[d];
                             if (idx[d] < dim[d]) break;
                             ia -= sa[d] * dim[d], ib -= sb[d] * dim[d], idx[d] = 0;
                           }
                         }
                       });
}

// Calls f(o, ia, ib) for every output index o with the broadcast input offsets.
template <class Fn>
void broadcast2(const Shape& out, const Shape& a, const Shape& b, Fn&& f, int threads = 1) {
  broadcast_runs(
      out, a, b,
      [&](std::int64_t o, std::int64_t ia, std::int64_t ib, std::int64_t len, std::int64_t inc_a,
          std::int64_t inc_b) {
        for (std::int64_t k = 0; k < len; ++k) f(o + k, ia + k * inc_a, ib + k * inc_b);
      },
      threads);
}

// Unary kernels with attributes: f is generic over the carrier type.
template <class Fn>
void unary_with(KernelContext& ctx, Fn&& f) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  with_carrier(ctx, [&](auto t) {
    using T = decltype(t);
    auto in = x.data<T>();
    auto out = ctx.out_uninit(0, carrier_dtype<T>(), x.shape()).template data<T>();
    detail::parallel_for(in.size(), ctx.threads > 1 ? 0 : 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) out[i] = f(in[i]);
    });
  });
}

// A unary math function F (a generic lambda, instantiated for the carrier type).
template <auto F>
void unary(KernelContext& ctx) {
  unary_with(ctx, F);
}

// A function with vector code for float32 carriers, vec(in, out, n); F on float64 ones.
template <auto F, class Vec>
void unary_simd(KernelContext& ctx, Vec vec) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  if (ctx.carrier != DType::float32) return unary<F>(ctx);
  auto in = x.data<float>();
  Tensor& y = ctx.out_uninit(0, DType::float32, x.shape());
  float* out = y.data<float>().data();
  detail::parallel_for(in.size(), ctx.threads > 1 ? 0 : 1, [&](std::size_t lo, std::size_t hi) {
    vec(in.data() + lo, out + lo, hi - lo);
  });
}

// vmath's vector code of V on float32 values (any split gives the same bits).
template <vmath::Fn V>
void vec_code(const float* in, float* out, std::size_t n) {
  vmath::apply(V, in, out, n);
}
template <vmath::Exact V>
void exact_code(const float* in, float* out, std::size_t n) {
  vmath::apply_exact(V, in, out, n);
}

// A transcendental function: vmath's vector code on float32 carriers (within 4 ULP of the
// correctly rounded result), F (std::) on float64 ones.
template <vmath::Fn V, auto F>
void unary_vec(KernelContext& ctx) {
  unary_simd<F>(ctx, vec_code<V>);
}

// A piecewise function: vmath's vector code on float32 carriers, bit for bit F's results.
template <vmath::Exact V, auto F>
void unary_exact(KernelContext& ctx) {
  unary_simd<F>(ctx, exact_code<V>);
}

constexpr auto f_abs = [](auto x) { return std::fabs(x); };
constexpr auto f_neg = [](auto x) { return -x; };
constexpr auto f_sqrt = [](auto x) { return std::sqrt(x); };
constexpr auto f_exp = [](auto x) { return std::exp(x); };
constexpr auto f_log = [](auto x) { return std::log(x); };
// Relu; vmath::Exact::relu is this formula's vector form.
constexpr auto f_relu = [](auto x) {
  return x > 0 ? x : (x == 0 ? 0.0f : (std::isnan(x) ? x : 0.0f));
};
constexpr auto f_sigmoid = [](auto x) {
  return x >= 0 ? 1.0f / (1.0f + std::exp(-x)) : std::exp(x) / (1.0f + std::exp(x));
};
constexpr auto f_tanh = [](auto x) { return std::tanh(x); };
constexpr auto f_erf = [](auto x) { return std::erf(x); };
constexpr auto f_reciprocal = [](auto x) { return 1.0f / x; };
constexpr auto f_floor = [](auto x) { return std::floor(x); };
constexpr auto f_ceil = [](auto x) { return std::ceil(x); };
// Ties to even (the default FE mode).
constexpr auto f_round = [](auto x) { return std::nearbyint(x); };
constexpr auto f_sin = [](auto x) { return std::sin(x); };
constexpr auto f_cos = [](auto x) { return std::cos(x); };
constexpr auto f_tan = [](auto x) { return std::tan(x); };
constexpr auto f_asin = [](auto x) { return std::asin(x); };
constexpr auto f_acos = [](auto x) { return std::acos(x); };
constexpr auto f_atan = [](auto x) { return std::atan(x); };
constexpr auto f_sinh = [](auto x) { return std::sinh(x); };
constexpr auto f_cosh = [](auto x) { return std::cosh(x); };
constexpr auto f_asinh = [](auto x) { return std::asinh(x); };
constexpr auto f_acosh = [](auto x) { return std::acosh(x); };
constexpr auto f_atanh = [](auto x) { return std::atanh(x); };
constexpr auto f_softplus = [](auto x) { return x > 20 ? x : std::log1p(std::exp(x)); };
constexpr auto f_softsign = [](auto x) { return x / (1 + std::fabs(x)); };
constexpr auto f_sign = [](auto x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : x); };

// Unary ops whose float kernel is above but that also take integer inputs.
template <auto F, class IntFn>
void unary_any(KernelContext& ctx, IntFn&& fi) {
  const Tensor& x = ctx.in(0);
  if (x.dtype() == ctx.carrier) return unary<F>(ctx);
  dispatch(ctx, x.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_floating_point_v<T>) {
      ctx.fail("unexpected dtype");
    } else {
      auto in = x.template data<T>();
      auto out = ctx.out(0, x.dtype(), x.shape()).template data<T>();
      for (std::size_t i = 0; i < in.size(); ++i) out[i] = fi(in[i]);
    }
  });
}

void abs_k(KernelContext& c) {
  unary_any<f_abs>(c, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_signed_v<T>)
      return static_cast<T>(v < 0 ? -v : v);
    else
      return v;
  });
}
void neg_k(KernelContext& c) {
  unary_any<f_neg>(c, [](auto v) { return static_cast<decltype(v)>(-v); });
}
void sign_k(KernelContext& c) {
  unary_any<f_sign>(c,
                    [](auto v) { return static_cast<decltype(v)>(v > 0 ? 1 : (v < 0 ? -1 : 0)); });
}

// The formulas of the ops with attributes that a fused Conv applies too (in_place_unary):
// one lambda each, so the kernel and the fused path compute the same operations.
auto leaky_relu_fn(const model::Node& n) {
  const float a = n.attr_float("alpha", 0.01f);
  return [a](auto x) { return x >= 0 ? x : a * x; };
}
auto hard_sigmoid_fn(const model::Node& n) {
  const float a = n.attr_float("alpha", 0.2f), b = n.attr_float("beta", 0.5f);
  return [a, b](auto x) {
    using T = decltype(x);
    return std::clamp(a * x + b, T{0}, T{1});
  };
}
template <class T>
auto clip_fn(T lo, T hi) {
  return [lo, hi](T v) { return std::isnan(v) ? v : std::min(std::max(v, lo), hi); };
}
// Clip's bounds before opset 11: its min and max attributes.
std::pair<float, float> clip_attributes(const model::Node& n) {
  return {n.attr_float("min", -INFINITY), n.attr_float("max", INFINITY)};
}

void leaky_relu(KernelContext& c) {
  unary_with(c, leaky_relu_fn(c.node));
}
void elu(KernelContext& c) {
  const float a = c.node.attr_float("alpha", 1.0f);
  unary_with(c, [a](auto x) { return x >= 0 ? x : a * (std::exp(x) - 1); });
}
void selu(KernelContext& c) {
  const float a = c.node.attr_float("alpha", 1.67326319217681884765625f);
  const float g = c.node.attr_float("gamma", 1.05070102214813232421875f);
  unary_with(c, [a, g](auto x) { return x > 0 ? g * x : g * (a * std::exp(x) - a); });
}
void celu(KernelContext& c) {
  const float a = c.node.attr_float("alpha", 1.0f);
  unary_with(c, [a](auto x) {
    using T = decltype(x);
    return std::max(T{0}, x) + std::min(T{0}, a * (std::exp(x / a) - 1));
  });
}
void hard_sigmoid(KernelContext& c) {
  unary_with(c, hard_sigmoid_fn(c.node));
}
// HardSwish; vmath::Exact::hard_swish is this formula's vector form.
constexpr auto f_hard_swish = [](auto x) {
  using T = decltype(x);
  return x * std::clamp(x / T{6} + T{0.5}, T{0}, T{1});
};
void thresholded_relu(KernelContext& c) {
  const float a = c.node.attr_float("alpha", 1.0f);
  unary_with(c, [a](auto x) { return x > a ? x : decltype(x){0}; });
}
void gelu(KernelContext& c) {
  const std::string approx = c.node.attr_string("approximate", "none");
  if (approx == "tanh") {
    unary_with(c, [](auto x) {
      const double v = x;
      return static_cast<decltype(x)>(
          0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    });
  } else if (approx == "none") {
    unary_with(c, [](auto x) {
      return static_cast<decltype(x)>(0.5 * x *
                                      (1 + std::erf(static_cast<double>(x) * 0.7071067811865476)));
    });
  } else {
    c.fail("attribute approximate = '" + approx + "' (expected 'none' or 'tanh')");
  }
}
void clip(KernelContext& c) {
  const Tensor& x = c.in(0);
  if (c.opset < 11) {
    const auto [lo, hi] = clip_attributes(c.node);
    return unary_with(c, [lo, hi](auto v) {
      using T = decltype(v);
      return clip_fn(T{lo}, T{hi})(v);
    });
  }
  dispatch(c, x.dtype(), [&](auto t) {
    using T = decltype(t);
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (c.has(1)) lo = c.in(1).template data<T>()[0];
    if (c.has(2)) hi = c.in(2).template data<T>()[0];
    auto in = x.template data<T>();
    auto out = c.out(0, x.dtype(), x.shape()).template data<T>();
    if constexpr (std::is_floating_point_v<T>) {
      const auto f = clip_fn(lo, hi);
      for (std::size_t i = 0; i < in.size(); ++i) out[i] = f(in[i]);
    } else {
      for (std::size_t i = 0; i < in.size(); ++i) out[i] = std::min(std::max(in[i], lo), hi);
    }
  });
}

// ---- binary ----------------------------------------------------------------------------
enum class Bin { add, sub, mul, div, pow, max, min, mod, fmod };

template <Bin op, class T>
T apply(T a, T b) {
  if constexpr (op == Bin::add) {
    if constexpr (std::is_floating_point_v<T>)
      return left_nan_sum(a, b);  // (the same NaN as a fused Add's)
    else
      return static_cast<T>(a + b);
  } else if constexpr (op == Bin::sub)
    return static_cast<T>(a - b);
  else if constexpr (op == Bin::mul)
    return static_cast<T>(a * b);
  else if constexpr (op == Bin::div) {
    if constexpr (std::is_integral_v<T>)
      return b == 0 ? T{0} : static_cast<T>(a / b);
    else
      return a / b;
  } else if constexpr (op == Bin::pow) {
    // x^2 of a float is exact in double, as pow's is: the same value, without the call.
    if constexpr (std::is_same_v<T, float>)
      if (b == 2) return static_cast<T>(static_cast<double>(a) * static_cast<double>(a));
    return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  } else if constexpr (op == Bin::max) {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(a) || std::isnan(b)) return a + b;
    return std::max(a, b);
  } else if constexpr (op == Bin::min) {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(a) || std::isnan(b)) return a + b;
    return std::min(a, b);
  } else if constexpr (op == Bin::fmod) {
    if constexpr (std::is_integral_v<T>)
      return b == 0 ? T{0} : static_cast<T>(a % b);
    else
      return std::fmod(a, b);
  } else {  // Python-style modulo: the sign of the divisor
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T{0};
      T r = static_cast<T>(a % b);
      if constexpr (std::is_signed_v<T>)
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    } else {
      T r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
}

template <Bin op>
void binary_into(KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch(ctx, a.dtype(), [&](auto t) {
    using T = decltype(t);
    auto pa = a.template data<T>();
    auto pb = b.template data<T>();
    auto po = out.template data<T>();
    // Each run in one of four loop shapes the compiler vectorises (no index arithmetic).
    broadcast_runs(
        out.shape(), a.shape(), b.shape(),
        [&](std::int64_t o, std::int64_t ia, std::int64_t ib, std::int64_t len, std::int64_t inc_a,
            std::int64_t inc_b) {
          T* y = po.data() + o;
          const T* x1 = pa.data() + ia;
          const T* x2 = pb.data() + ib;
          if (inc_a && inc_b) {
            for (std::int64_t k = 0; k < len; ++k) y[k] = apply<op, T>(x1[k], x2[k]);
          } else if (inc_a) {
            const T v = *x2;
            for (std::int64_t k = 0; k < len; ++k) y[k] = apply<op, T>(x1[k], v);
          } else if (inc_b) {
            const T v = *x1;
            for (std::int64_t k = 0; k < len; ++k) y[k] = apply<op, T>(v, x2[k]);
          } else {
            std::fill(y, y + len, apply<op, T>(*x1, *x2));
          }
        },
        ctx.threads);
  });
}

template <Bin op>
void binary(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b0 = ctx.in(1);
  Tensor bconv;
  const Tensor* b = &b0;
  if (a.dtype() != b0.dtype()) {
    if (op == Bin::pow) {  // the exponent may be of another type
      bconv = exec::convert(b0, a.dtype());
      b = &bconv;
    } else {
      ctx.fail("input dtypes differ: " + std::string(to_string(a.dtype())) + " and " +
               std::string(to_string(b0.dtype())));
    }
  }
  if (op == Bin::mod && exec::is_float(a.dtype()) && ctx.node.attr_int("fmod", 0) == 0)
    ctx.fail("Mod of floating inputs requires fmod=1");
  Tensor& out = ctx.out_uninit(0, a.dtype(), broadcast_shapes(ctx, a.shape(), b->shape()));
  if (op == Bin::mod && ctx.node.attr_int("fmod", 0) == 1)
    binary_into<Bin::fmod>(ctx, a, *b, out);
  else
    binary_into<op>(ctx, a, *b, out);
}

// Max, Min, Sum, Mean: any number of inputs, broadcast together.
template <Bin op>
void variadic(KernelContext& ctx, bool mean = false) {
  Tensor acc = ctx.in(0);
  for (std::size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Tensor& b = ctx.in(i);
    if (b.dtype() != acc.dtype()) ctx.fail("input dtypes differ");
    Tensor out(acc.dtype(), broadcast_shapes(ctx, acc.shape(), b.shape()));
    binary_into<op>(ctx, acc, b, out);
    acc = std::move(out);
  }
  if (mean) {
    require_float(ctx, acc);
    with_carrier(ctx, [&](auto t) {
      using T = decltype(t);
      for (auto& v : acc.data<T>()) v /= static_cast<T>(ctx.num_inputs());
    });
  }
  ctx.outputs[0] = std::move(acc);
}
void max_k(KernelContext& c) {
  variadic<Bin::max>(c);
}
void min_k(KernelContext& c) {
  variadic<Bin::min>(c);
}
void sum_k(KernelContext& c) {
  variadic<Bin::add>(c);
}
void mean_k(KernelContext& c) {
  variadic<Bin::add>(c, true);
}

enum class Cmp { eq, lt, gt, le, ge };

template <Cmp op>
void compare(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  if (a.dtype() != b.dtype()) ctx.fail("input dtypes differ");
  Tensor& out = ctx.out(0, DType::bool_, broadcast_shapes(ctx, a.shape(), b.shape()));
  auto po = out.data<std::uint8_t>();
  dispatch(ctx, a.dtype(), [&](auto t) {
    using T = decltype(t);
    auto pa = a.template data<T>();
    auto pb = b.template data<T>();
    broadcast2(out.shape(), a.shape(), b.shape(),
               [&](std::int64_t o, std::int64_t i, std::int64_t j) {
                 const T x = pa[i], y = pb[j];
                 bool r;
                 if constexpr (op == Cmp::eq)
                   r = x == y;
                 else if constexpr (op == Cmp::lt)
                   r = x < y;
                 else if constexpr (op == Cmp::gt)
                   r = x > y;
                 else if constexpr (op == Cmp::le)
                   r = x <= y;
                 else
                   r = x >= y;
                 po[o] = r ? 1 : 0;
               });
  });
}

enum class Logic { and_, or_, xor_ };

template <Logic op>
void logic(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  if (a.dtype() != DType::bool_ || b.dtype() != DType::bool_) ctx.fail("inputs must be bool");
  Tensor& out = ctx.out(0, DType::bool_, broadcast_shapes(ctx, a.shape(), b.shape()));
  auto pa = a.data<std::uint8_t>(), pb = b.data<std::uint8_t>();
  auto po = out.data<std::uint8_t>();
  broadcast2(out.shape(), a.shape(), b.shape(),
             [&](std::int64_t o, std::int64_t i, std::int64_t j) {
               if constexpr (op == Logic::and_)
                 po[o] = pa[i] & pb[j];
               else if constexpr (op == Logic::or_)
                 po[o] = pa[i] | pb[j];
               else
                 po[o] = pa[i] ^ pb[j];
             });
}

void not_k(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  if (a.dtype() != DType::bool_) ctx.fail("input must be bool");
  auto pa = a.data<std::uint8_t>();
  auto po = ctx.out(0, DType::bool_, a.shape()).data<std::uint8_t>();
  for (std::size_t i = 0; i < pa.size(); ++i) po[i] = pa[i] ? 0 : 1;
}

void isnan_k(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  require_float(ctx, a);
  auto po = ctx.out(0, DType::bool_, a.shape()).data<std::uint8_t>();
  with_carrier(ctx, [&](auto t) {
    auto pa = a.data<decltype(t)>();
    for (std::size_t i = 0; i < pa.size(); ++i) po[i] = std::isnan(pa[i]) ? 1 : 0;
  });
}

void isinf_k(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  require_float(ctx, a);
  const bool pos = ctx.node.attr_int("detect_positive", 1),
             neg = ctx.node.attr_int("detect_negative", 1);
  auto po = ctx.out(0, DType::bool_, a.shape()).data<std::uint8_t>();
  with_carrier(ctx, [&](auto t) {
    auto pa = a.data<decltype(t)>();
    for (std::size_t i = 0; i < pa.size(); ++i)
      po[i] = std::isinf(pa[i]) && ((pa[i] > 0 && pos) || (pa[i] < 0 && neg)) ? 1 : 0;
  });
}

void where_k(KernelContext& ctx) {
  const Tensor& c = ctx.in(0);
  const Tensor& x = ctx.in(1);
  const Tensor& y = ctx.in(2);
  if (c.dtype() != DType::bool_) ctx.fail("condition must be bool");
  if (x.dtype() != y.dtype()) ctx.fail("X and Y dtypes differ");
  const Shape xy = broadcast_shapes(ctx, x.shape(), y.shape());
  const Shape shape = broadcast_shapes(ctx, c.shape(), xy);
  Tensor& out = ctx.out(0, x.dtype(), shape);
  const auto sc = broadcast_strides(c.shape(), shape), sx = broadcast_strides(x.shape(), shape),
             sy = broadcast_strides(y.shape(), shape);
  auto pc = c.data<std::uint8_t>();
  dispatch(ctx, x.dtype(), [&](auto t) {
    using T = decltype(t);
    auto px = x.template data<T>(), py = y.template data<T>();
    auto po = out.template data<T>();
    const auto n = product(shape);
    std::vector<std::int64_t> idx(shape.size(), 0);
    for (std::int64_t o = 0; o < n; ++o) {
      std::int64_t ic = 0, ix = 0, iy = 0, rem = o;
      for (std::size_t d = shape.size(); d-- > 0;) {
        const auto k = rem % shape[d];
        rem /= shape[d];
        ic += k * sc[d], ix += k * sx[d], iy += k * sy[d];
      }
      po[o] = pc[ic] ? px[ix] : py[iy];
    }
  });
}

// Cast to STRING: each value as the shortest decimal that reads back to it in its storage
// type (a float32 0.97676110267 is "0.9767611", as NumPy prints it), "NaN", "INF" and
// "-INF" for the special values (the spellings ONNX reads back); integers in decimal,
// bool as 1 and 0.
Tensor to_text(const KernelContext& ctx, const Tensor& x, DType storage) {
  Tensor out(DType::string, x.shape());
  auto o = out.data<std::string>();
  if (x.dtype() == DType::string) {
    std::copy(x.data<std::string>().begin(), x.data<std::string>().end(), o.begin());
    return out;
  }
  auto put = [&](std::size_t i, auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(v)) return void(o[i] = "NaN");
      if (std::isinf(v)) return void(o[i] = v > 0 ? "INF" : "-INF");
    }
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    o[i].assign(buf, r.ptr);
  };
  if (storage == DType::float64) {
    const Tensor d = exec::convert(x, DType::float64);
    const auto v = d.data<double>();
    for (std::size_t i = 0; i < v.size(); ++i) put(i, v[i]);
    return out;
  }
  if (exec::is_float(storage)) {  // float16/bfloat16 values are float32 values: printed so
    const Tensor f = exec::convert(x, DType::float32);
    const auto v = f.data<float>();
    for (std::size_t i = 0; i < v.size(); ++i) put(i, v[i]);
    return out;
  }
  dispatch(ctx, x.dtype(), [&](auto t) {
    using T = decltype(t);
    using Wide = std::conditional_t<std::is_same_v<T, std::uint64_t>, T, std::int64_t>;
    const auto d = x.data<T>();
    for (std::size_t i = 0; i < d.size(); ++i) put(i, static_cast<Wide>(d[i]));
  });
  return out;
}

// Cast from STRING: decimal and scientific notation, and "NaN", "INF", "+INF", "-INF" in
// any case; read as a float32 for a float32 target (rounded once), else as a double,
// then converted as a double would be (integers truncated toward zero, saturating).
// Anything else fails naming the node and the string.
Tensor from_text(const KernelContext& ctx, const Tensor& x, DType to) {
  const auto in = x.data<std::string>();
  Tensor out(DType::float64, x.shape());
  auto o = out.data<double>();
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::string& s = in[i];
    char* end = nullptr;
    o[i] = to == DType::float32 ? static_cast<double>(std::strtof(s.c_str(), &end))
                                : std::strtod(s.c_str(), &end);
    while (*end && std::isspace(static_cast<unsigned char>(*end))) ++end;
    if (s.empty() || end == s.c_str() || *end != '\0')
      ctx.fail("'" + s + "' is not a number (element " + std::to_string(i) + ")");
  }
  return out;
}

// Cast and CastLike: floating results are carriers (float32 or float64) holding values
// of `to` (a Cast to float16 rounds to float16, in the carrier, so a float64 value is
// rounded once); the executor stores them as `to`. A Cast to float32 in a float64 run
// does not round: float32 is the precision the truth run replaces.
void cast_to(KernelContext& ctx, const Tensor& x, DType to) {
  if (to == DType::string) {
    ctx.outputs[0] = to_text(ctx, x, ctx.input_dtypes[0]);
    return;
  }
  if (x.dtype() == DType::string) return cast_to(ctx, from_text(ctx, x, to), to);
  if (exec::is_float(to)) {
    Tensor f = exec::convert(x, ctx.carrier);
    if ((to == DType::float16 || to == DType::bfloat16) && !ctx.float32_storage) {
      with_carrier(ctx, [&](auto t) {
        using T = decltype(t);
        auto d = f.data<T>();
        round(std::span<const T>(d.data(), d.size()), d,
              parse_format(to == DType::float16 ? "float16" : "bfloat16"));
      });
    }
    ctx.outputs[0] = std::move(f);
    ctx.output_dtypes[0] = to;
  } else {
    ctx.outputs[0] = exec::convert(x, to);
  }
}

void cast_k(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto to = model::dtype_of(static_cast<int>(ctx.node.attr_int("to", 0)));
  if (!to)
    ctx.fail("Cast to " + model::onnx_type_name(static_cast<int>(ctx.node.attr_int("to", 0))) +
             " is not supported");
  cast_to(ctx, x, *to);
}

void cast_like_k(KernelContext& ctx) {
  const DType to = ctx.input_dtypes[1];  // the storage dtype (not the carrier)
  const Tensor& x = ctx.in(0);
  cast_to(ctx, x, to);
}

void prelu(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& slope = ctx.in(1);
  require_float(ctx, x);
  require_float(ctx, slope, "slope");
  const Shape shape = broadcast_shapes(ctx, x.shape(), slope.shape());
  if (shape != x.shape())
    ctx.fail("slope " + shape_str(slope.shape()) + " does not broadcast to X");
  with_carrier(ctx, [&](auto t) {
    using T = decltype(t);
    auto px = x.data<T>(), ps = slope.data<T>();
    auto po = ctx.out(0, carrier_dtype<T>(), shape).template data<T>();
    broadcast2(shape, x.shape(), slope.shape(),
               [&](std::int64_t o, std::int64_t i, std::int64_t j) {
                 po[o] = px[i] < 0 ? px[i] * ps[j] : px[i];
               });
  });
}

void shrink(KernelContext& c) {
  const float l = c.node.attr_float("lambd", 0.5f), b = c.node.attr_float("bias", 0.0f);
  if (c.in(0).dtype() != c.carrier) {
    // Integer inputs: compute through float (exact for the small types the tests use).
    const Tensor x = exec::convert(c.in(0), DType::float32);
    Tensor o(DType::float32, x.shape());
    auto pi = x.data<float>();
    auto po = o.data<float>();
    for (std::size_t i = 0; i < pi.size(); ++i)
      po[i] = pi[i] < -l ? pi[i] + b : (pi[i] > l ? pi[i] - b : 0.0f);
    c.outputs[0] = exec::convert(o, c.in(0).dtype());
    return;
  }
  unary_with(c, [l, b](auto x) { return x < -l ? x + b : (x > l ? x - b : decltype(x){0}); });
}

void mish(KernelContext& c) {
  unary_with(c, [](auto x) {
    const double v = x;
    return static_cast<decltype(x)>(v * std::tanh(std::log1p(std::exp(v))));
  });
}

void bit_shift(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  const bool left = ctx.node.attr_string("direction", "") == "LEFT";
  if (a.dtype() != b.dtype()) ctx.fail("input dtypes differ");
  Tensor& out = ctx.out(0, a.dtype(), broadcast_shapes(ctx, a.shape(), b.shape()));
  dispatch(ctx, a.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_unsigned_v<T>) {
      auto pa = a.template data<T>(), pb = b.template data<T>();
      auto po = out.template data<T>();
      broadcast2(
          out.shape(), a.shape(), b.shape(), [&](std::int64_t o, std::int64_t i, std::int64_t j) {
            const auto sh = pb[j];
            po[o] = sh >= sizeof(T) * 8 ? T{0} : static_cast<T>(left ? pa[i] << sh : pa[i] >> sh);
          });
    } else {
      ctx.fail("BitShift takes unsigned integers only");
    }
  });
}

using Map = exec::ElementwiseCode::Map;
using BinaryMap = decltype(exec::ElementwiseCode::binary);

// An element-wise formula `f` out of place, value by value (each value computed on its
// own, as unary_with computes it: a split changes no bit).
template <class F>
Map scalar_map(F f) {
  return [f](const float* in, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = f(in[i]);
  };
}

// The ElementwiseCode::unary of the ops that fuse (their registration lines below).
template <void (*Code)(const float*, float*, std::size_t)>
Map code_map(const model::Node&, std::int64_t, const float*, const float*) {
  return Code;
}
Map leaky_relu_map(const model::Node& n, std::int64_t, const float*, const float*) {
  return scalar_map(leaky_relu_fn(n));
}
Map hard_sigmoid_map(const model::Node& n, std::int64_t, const float*, const float*) {
  return scalar_map(hard_sigmoid_fn(n));
}
Map clip_map(const model::Node& n, std::int64_t opset, const float* lo, const float* hi) {
  if (opset < 11) {
    const auto [a_lo, a_hi] = clip_attributes(n);
    return scalar_map(clip_fn(a_lo, a_hi));
  }
  return scalar_map(clip_fn(lo ? *lo : std::numeric_limits<float>::lowest(),
                            hi ? *hi : std::numeric_limits<float>::max()));
}

// A binary op's ElementwiseCode::binary: its per-element code on float32 carriers as
// binary_into's loops run it.
template <Bin op>
void binary_map(const float* a, bool a_scalar, const float* b, bool b_scalar, float* y,
                std::size_t n) {
  if (!a_scalar && !b_scalar) {
    for (std::size_t k = 0; k < n; ++k) y[k] = apply<op, float>(a[k], b[k]);
  } else if (!a_scalar) {
    const float v = *b;
    for (std::size_t k = 0; k < n; ++k) y[k] = apply<op, float>(a[k], v);
  } else if (!b_scalar) {
    const float v = *a;
    for (std::size_t k = 0; k < n; ++k) y[k] = apply<op, float>(v, b[k]);
  } else {
    std::fill(y, y + n, apply<op, float>(*a, *b));
  }
}

// Registration of an op that fuses, its kernel and its ElementwiseCode from one
// definition: vmath's vector code V on float32 carriers (F on others), or the binary
// kernel of `op`.
template <vmath::Fn V, auto F>
void add_fusing(Registry& r, const std::string& name, exec::OpTraits t = {}) {
  r.add(name, unary_vec<V, F>, t, {.unary = code_map<vec_code<V>>});
}
template <vmath::Exact V, auto F>
void add_fusing(Registry& r, const std::string& name, exec::OpTraits t = {}) {
  r.add(name, unary_exact<V, F>, t, {.unary = code_map<exact_code<V>>});
}
template <Bin op>
void add_fusing(Registry& r, const std::string& name, exec::OpTraits t = {}) {
  r.add(name, binary<op>, t, {.binary = binary_map<op>});
}

// The ElementwiseCode of `n` (default domain), or nullptr.
const exec::ElementwiseCode* code_of(const model::Node& n) {
  const exec::OpInfo* info = Registry::info(n);
  return info && (info->elementwise.unary || info->elementwise.binary) ? &info->elementwise
                                                                       : nullptr;
}

// The exact function whose code `m` is (exact_code<V>: code_map's), or nullopt.
std::optional<vmath::Exact> exact_in(const Map& m) {
  using Code = void (*)(const float*, float*, std::size_t);
  const Code* c = m.target<Code>();
  if (c && *c == exact_code<vmath::Exact::relu>) return vmath::Exact::relu;
  if (c && *c == exact_code<vmath::Exact::hard_swish>) return vmath::Exact::hard_swish;
  return std::nullopt;
}

}  // namespace

void ExactEpilogue::operator()(float* values, std::size_t n, int threads) const {
  detail::parallel_for(n, threads > 1 ? 0 : 1, [&](std::size_t a, std::size_t b) {
    vmath::apply_exact(f, values + a, values + a, b - a);
  });
}

InPlace in_place_unary(const model::Node& n, std::int64_t opset, const Tensor* lo,
                       const Tensor* hi) {
  const exec::ElementwiseCode* code = code_of(n);
  if (!code || !code->unary) return {};
  const float l = lo ? lo->data<float>()[0] : 0, h = hi ? hi->data<float>()[0] : 0;
  Map m = code->unary(n, opset, lo ? &l : nullptr, hi ? &h : nullptr);
  if (const auto f = exact_in(m)) return ExactEpilogue{*f};
  return [m](float* v, std::size_t n, int threads) {
    detail::parallel_for(n, threads > 1 ? 0 : 1,
                         [&](std::size_t a, std::size_t b) { m(v + a, v + a, b - a); });
  };
}

struct ElementwiseDag::Step {
  Map unary;           // a unary op (its input a[0]), or
  BinaryMap binary{};  // a binary one
  Operand a[2]{};      // its operands
};

bool ElementwiseDag::supports(const model::Node& n) {
  return code_of(n) != nullptr;
}

bool ElementwiseDag::append(const model::Node& n, std::int64_t opset,
                            const std::vector<std::optional<Operand>>& in) {
  const int values = static_cast<int>(steps_.size()) + 1;
  const auto from_dag = [&](const std::optional<Operand>& o) {
    return o && o->value >= 0 && o->value < values;
  };
  const auto scalar = [](const std::optional<Operand>& o) { return o && o->value == -1; };
  const exec::ElementwiseCode* code = code_of(n);
  if (!code || in.size() != n.inputs.size() || in.empty()) return false;
  auto step = std::make_shared<Step>();
  if (const BinaryMap b = code->binary) {
    // (one operand at least from the DAG: the result has the DAG's shape)
    if (in.size() != 2 || !(from_dag(in[0]) || from_dag(in[1])) ||
        !(from_dag(in[0]) || scalar(in[0])) || !(from_dag(in[1]) || scalar(in[1])))
      return false;
    step->binary = b;
    step->a[0] = *in[0];
    step->a[1] = *in[1];
  } else {
    if (!from_dag(in[0])) return false;
    step->a[0] = *in[0];
    // A unary op's further inputs (Clip's bounds) are scalars.
    const float* bound[2] = {nullptr, nullptr};
    for (std::size_t i = 1; i < in.size(); ++i) {
      if (i > 2 || (in[i] && !scalar(in[i]))) return false;
      if (in[i]) bound[i - 1] = &in[i]->scalar;
    }
    step->unary = code->unary(n, opset, bound[0], bound[1]);
  }
  steps_.push_back(std::move(step));
  return true;
}

void ElementwiseDag::run(float* values, std::size_t n) const {
  // Each step's result for a block of values in scratch, the last step's in `values`
  // itself (what it reads there, the input, is read value by value before it is written):
  // one step needs no scratch, and takes all n values as one block.
  const std::size_t steps = steps_.size(), block = steps == 1 ? n : 512;
  std::vector<float> scratch((steps - 1) * block);
  std::vector<float*> at(steps + 1);
  for (std::size_t off = 0; off < n; off += block) {
    const std::size_t len = std::min(block, n - off);
    at[0] = values + off;
    for (std::size_t k = 0; k < steps; ++k)
      at[k + 1] = k + 1 == steps ? values + off : scratch.data() + k * block;
    for (std::size_t k = 0; k < steps; ++k) {
      const Step& s = *steps_[k];
      const auto ptr = [&](const Operand& o) -> const float* {
        return o.value < 0 ? &o.scalar : at[static_cast<std::size_t>(o.value)];
      };
      if (s.unary)
        s.unary(ptr(s.a[0]), at[k + 1], len);
      else
        s.binary(ptr(s.a[0]), s.a[0].value < 0, ptr(s.a[1]), s.a[1].value < 0, at[k + 1], len);
      if (round_) (*round_)(at[k + 1], at[k + 1], len);
    }
  }
}

void ElementwiseDag::round_to(const Format& f, const RoundOptions& o) {
  round_.emplace(f, o);
}

void ElementwiseDag::operator()(float* values, std::size_t n, int threads) const {
  if (steps_.empty()) return;
  detail::parallel_for(n, threads > 1 ? 0 : 1,
                       [&](std::size_t lo, std::size_t hi) { run(values + lo, hi - lo); });
}

void register_elementwise(Registry& r) {
  r.add("PRelu", prelu);
  r.add("Shrink", shrink);
  r.add("Mish", mish);
  r.add("BitShift", bit_shift);
  r.add("Abs", abs_k, {.degree = Degree::same});
  r.add("Neg", neg_k, {.degree = Degree::same});
  r.add("Sign", sign_k);
  r.add("Sqrt", unary<f_sqrt>, {.degree = Degree::half, .guarded = true});
  r.add("Exp", unary_vec<vmath::Fn::exp, f_exp>);
  r.add("Log", unary_vec<vmath::Fn::log, f_log>, {.guarded = true});
  add_fusing<vmath::Exact::relu, f_relu>(r, "Relu", {.degree = Degree::same});
  add_fusing<vmath::Fn::sigmoid, f_sigmoid>(r, "Sigmoid");
  add_fusing<vmath::Fn::tanh, f_tanh>(r, "Tanh");
  add_fusing<vmath::Fn::erf, f_erf>(r, "Erf");
  r.add("Reciprocal", unary<f_reciprocal>, {.degree = Degree::negated, .guarded = true});
  r.add("Floor", unary<f_floor>);
  r.add("Ceil", unary<f_ceil>);
  r.add("Round", unary<f_round>);
  r.add("Sin", unary<f_sin>);
  r.add("Cos", unary<f_cos>);
  r.add("Tan", unary<f_tan>);
  r.add("Asin", unary<f_asin>);
  r.add("Acos", unary<f_acos>);
  r.add("Atan", unary<f_atan>);
  r.add("Sinh", unary<f_sinh>);
  r.add("Cosh", unary<f_cosh>);
  r.add("Asinh", unary<f_asinh>);
  r.add("Acosh", unary<f_acosh>);
  r.add("Atanh", unary<f_atanh>);
  r.add("Softplus", unary<f_softplus>);
  r.add("Softsign", unary<f_softsign>);
  r.add("LeakyRelu", leaky_relu, {.degree = Degree::same}, {.unary = leaky_relu_map});
  r.add("Elu", elu);
  r.add("Selu", selu);
  r.add("Celu", celu);
  r.add("HardSigmoid", hard_sigmoid, {}, {.unary = hard_sigmoid_map});
  add_fusing<vmath::Exact::hard_swish, f_hard_swish>(r, "HardSwish");
  r.add("ThresholdedRelu", thresholded_relu);
  r.add("Gelu", gelu);
  r.add("Clip", clip, {.degree = Degree::clipped}, {.unary = clip_map});
  add_fusing<Bin::add>(r, "Add", {.degree = Degree::additive});
  add_fusing<Bin::sub>(r, "Sub", {.degree = Degree::additive});
  add_fusing<Bin::mul>(r, "Mul", {.degree = Degree::product});
  add_fusing<Bin::div>(r, "Div", {.degree = Degree::quotient, .guarded = true});
  add_fusing<Bin::pow>(r, "Pow", {.degree = Degree::power, .guarded = true});
  r.add("Mod", binary<Bin::mod>);
  r.add("Max", max_k, {.degree = Degree::additive});
  r.add("Min", min_k, {.degree = Degree::additive});
  r.add("Sum", sum_k, {.degree = Degree::additive});
  r.add("Mean", mean_k);
  r.add("Equal", compare<Cmp::eq>);
  r.add("Less", compare<Cmp::lt>);
  r.add("Greater", compare<Cmp::gt>);
  r.add("LessOrEqual", compare<Cmp::le>);
  r.add("GreaterOrEqual", compare<Cmp::ge>);
  r.add("And", logic<Logic::and_>);
  r.add("Or", logic<Logic::or_>);
  r.add("Xor", logic<Logic::xor_>);
  r.add("Not", not_k);
  r.add("IsNaN", isnan_k);
  r.add("IsInf", isinf_k);
  r.add("Where", where_k, {.kind = OpKind::data_movement, .degree = Degree::selected});
  // A Cast is a precision boundary: its result is the target type's value, never rounded
  // to the node's format (a Cast to float32 in a float16 graph yields float32 values).
  r.add("Cast", cast_k, {.kind = OpKind::data_movement, .accepts = exec::kStrings});
  r.add("CastLike", cast_like_k, {.kind = OpKind::data_movement, .accepts = exec::kStrings});
}

}  // namespace fpguard::ops
