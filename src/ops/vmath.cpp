// Vectorised float32 exp, log, tanh, erf and sigmoid (ops/vmath.hpp), compiled once per
// SIMD target and chosen at run time (HWY_DYNAMIC_DISPATCH), like round/round_simd.cpp.
//
// Accuracy: within 4 ULP of the correctly rounded result for every float32 input, on every
// target (FMA or not), and the C library's special values. Checked by tests/vmath_test.cpp
// (strided sweeps of the whole float32 range plus exhaustive passes where the kernels
// switch) and tests/vmath_exhaustive_test.cpp (all 2^32 inputs), which measure at most
// 1 ULP for exp, log, tanh and erf and 2 ULP for sigmoid on AVX3, AVX2, SSE4, SSSE3 and
// SCALAR (subnormal results: at most 1 * 2^-149). How each function gets there:
//
//  - exp: Highway's Exp (Cody-Waite reduction by ln 2, degree-7 polynomial, 2^q applied
//    in two halves so that subnormal results are rounded once) on x clamped to
//    [-105, 89]. Below -104 it returns 0 (exp(-104) < 2^-150 rounds to 0 anyway), above
//    88.73 the two 2^64 factors overflow to +inf as they should; the clamp keeps the
//    exponent arithmetic in range for larger |x| and for +-inf. NaN lanes are restored.
//  - log: Highway's Log (musl's reduction to [sqrt(2)/2, sqrt(2)], subnormals scaled up
//    first); 0, negatives, +inf and NaN are blended in afterwards.
//  - tanh: |x| < 0.5625: x + x * T(x^2) with a fitted T (scripts/fit_vmath.py), whose
//    rounding errors are scaled down by |T| <= 0.1; above, where tanh >= 0.5,
//    1 - 2 / (exp(2|x|) + 1) (2|x| is exact; the error of the quotient, at most 0.5, is
//    halved relative to the result's ULP). |x| >= 9.5 gives 1 (tanh rounds to 1 above
//    9.01). The sign is copied back, so tanh(-0) = -0.
//  - erf: |x| < 0.875: x + x * P(x^2); above, 1 - exp(-x^2) * R(|x| - 2.4375) with R
//    fitted to erfc(x) exp(x^2) on [0.875, 4]. There erf is in [0.78, 1), so its ULP is
//    2^-24 and erfc = 1 - erf <= 0.22 only needs an absolute error of a fraction of it:
//    the rounding of x^2 (relative 2^-24, multiplying erfc by up to 1 + x^2 2^-24) and
//    the few-ULP error of exp and of R cost at most ~0.5 ULP of erf together. |x| is
//    clamped to 4, where 1 - erfc(4) = 1 - 1.5e-8 rounds to 1 (erf rounds to 1 above
//    3.92). Odd by construction (the sign is copied back).
//  - sigmoid: e = exp(-|x|) in (0, 1]; 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0,
//    so that large negative x keep the full relative accuracy of exp (and subnormal
//    results are not flushed): sigmoid(-100) = exp(-100) / 1.
//
// The polynomial coefficients come from scripts/fit_vmath.py (a weighted minimax fit in
// double with NumPy, rounded to float32); it prints the blocks below.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/vmath.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// Highway's Exp and Log, per target (the header has its own per-target include guard).
#include <hwy/contrib/math/math-inl.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/vmath.hpp"
// ReluV, HardSwishV (per target, like Highway's headers).
#include "ops/vmath-inl.hpp"

// Target-independent constants: defined once (outside the per-target pass).
#ifndef FPGUARD_OPS_VMATH_CONSTANTS_
#define FPGUARD_OPS_VMATH_CONSTANTS_
namespace fpguard::ops::vmath::detail {

// scripts/fit_vmath.py; each table is highest power first.
// erf(x) = x + x * P(x^2) for |x| < kErfSplit: max relative error 3.6e-8 in float32.
constexpr float kErfSplit = 0.875f;
constexpr float kErfSmall[] = {8.675364370e-05f,  -8.211098029e-04f, 5.206746981e-03f,
                               -2.686158381e-02f, 1.128373295e-01f,  -3.761263490e-01f,
                               1.283791661e-01f};
// erfc(x) = exp(-x^2) * R(x - kErfMid) for kErfSplit <= x <= kErfHi: max absolute error
// 2.8e-8 in float32 (0.47 * 2^-24).
constexpr float kErfMid = 2.4375f;
constexpr float kErfHi = 4.0f;
constexpr float kErfMidPoly[] = {9.713279724e-06f,  2.273187602e-05f,  4.617908780e-05f,
                                 -8.467519365e-05f, 1.847738604e-04f,  -8.484872524e-04f,
                                 2.716088668e-03f,  -8.636111394e-03f, 2.650080435e-02f,
                                 -7.756106555e-02f, 2.155523896e-01f};
// tanh(x) = x + x * t * T(t), t = x^2, for |x| < kTanhSplit: max relative error 1.7e-8.
constexpr float kTanhSplit = 0.5625f;
constexpr float kTanhSmall[] = {2.353587421e-03f,  -8.378583938e-03f, 2.177188918e-02f,
                                -5.395812914e-02f, 1.333328485e-01f,  -3.333333135e-01f};
// tanh(x) rounds to 1 in float32 above 9.01; the exp branch saturates there by itself.
constexpr float kTanhHi = 9.5f;

}  // namespace fpguard::ops::vmath::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace fpguard::ops::vmath::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace fpguard::ops::vmath::detail;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

template <std::size_t K>
HWY_INLINE VF Horner(DF d, VF x, const float (&c)[K]) {
  VF acc = hn::Set(d, c[0]);
  for (std::size_t k = 1; k < K; ++k) acc = hn::MulAdd(acc, x, hn::Set(d, c[k]));
  return acc;
}

HWY_INLINE VF RestoreNaN(VF x, VF y) {
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// exp(x) for every x except NaN (a NaN lane returns some number: see RestoreNaN).
HWY_INLINE VF ExpNoNaN(DF d, VF x) {
  // Highway's Exp is valid on [-FLT_MAX, 104] but its 2^q needs q in range: clamp.
  const VF xc = hn::Min(hn::Max(x, hn::Set(d, -105.0f)), hn::Set(d, 89.0f));
  return hn::Exp(d, xc);
}

HWY_INLINE VF ExpV(DF d, VF x) {
  return RestoreNaN(x, ExpNoNaN(d, x));
}

HWY_INLINE VF LogV(DF d, VF x) {
  const VF inf = hn::Set(d, std::numeric_limits<float>::infinity());
  VF y = hn::Log(d, x);
  y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Neg(inf), y);
  y = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Set(d, std::numeric_limits<float>::quiet_NaN()),
                     y);
  y = hn::IfThenElse(hn::Eq(x, inf), inf, y);
  return RestoreNaN(x, y);
}

HWY_INLINE VF TanhV(DF d, VF x) {
  const VF one = hn::Set(d, 1.0f);
  const VF sign = hn::And(x, hn::SignBit(d));
  const VF a = hn::Abs(x);
  const VF t = hn::Mul(a, a);
  const VF small = hn::MulAdd(a, hn::Mul(t, Horner(d, t, kTanhSmall)), a);
  const VF ac = hn::Min(a, hn::Set(d, kTanhHi));
  const VF e = ExpNoNaN(d, hn::Add(ac, ac));
  const VF large = hn::Sub(one, hn::Div(hn::Set(d, 2.0f), hn::Add(e, one)));
  const VF y = hn::IfThenElse(hn::Lt(a, hn::Set(d, kTanhSplit)), small, large);
  return RestoreNaN(x, hn::Or(y, sign));
}

HWY_INLINE VF ErfV(DF d, VF x) {
  const VF sign = hn::And(x, hn::SignBit(d));
  const VF a = hn::Abs(x);
  const VF t = hn::Mul(a, a);
  const VF small = hn::MulAdd(a, Horner(d, t, kErfSmall), a);
  const VF ac = hn::Min(a, hn::Set(d, kErfHi));
  const VF e = ExpNoNaN(d, hn::Neg(hn::Mul(ac, ac)));
  const VF r = Horner(d, hn::Sub(ac, hn::Set(d, kErfMid)), kErfMidPoly);
  const VF large = hn::NegMulAdd(e, r, hn::Set(d, 1.0f));
  const VF y = hn::IfThenElse(hn::Lt(a, hn::Set(d, kErfSplit)), small, large);
  return RestoreNaN(x, hn::Or(y, sign));
}

HWY_INLINE VF SigmoidV(DF d, VF x) {
  const VF one = hn::Set(d, 1.0f);
  const VF e = ExpNoNaN(d, hn::Neg(hn::Abs(x)));
  const VF num = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), e, one);
  return RestoreNaN(x, hn::Div(num, hn::Add(one, e)));
}

template <class Kernel>
HWY_INLINE void Loop(const float* in, float* out, std::size_t n, Kernel kernel) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  std::size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(kernel(d, hn::LoadU(d, in + i)), d, out + i);
  if (i < n) {  // the tail goes through the same vector code, via a padded buffer
    HWY_ALIGN float buf[hn::MaxLanes(d)] = {};
    std::memcpy(buf, in + i, (n - i) * sizeof(float));
    hn::Store(kernel(d, hn::Load(d, buf)), d, buf);
    std::memcpy(out + i, buf, (n - i) * sizeof(float));
  }
}

void ApplyImpl(int fn, const float* in, float* out, std::size_t n) {
  switch (static_cast<Fn>(fn)) {
    case Fn::exp:
      return Loop(in, out, n, [](DF d, VF v) HWY_ATTR { return ExpV(d, v); });
    case Fn::log:
      return Loop(in, out, n, [](DF d, VF v) HWY_ATTR { return LogV(d, v); });
    case Fn::tanh:
      return Loop(in, out, n, [](DF d, VF v) HWY_ATTR { return TanhV(d, v); });
    case Fn::erf:
      return Loop(in, out, n, [](DF d, VF v) HWY_ATTR { return ErfV(d, v); });
    case Fn::sigmoid:
      return Loop(in, out, n, [](DF d, VF v) HWY_ATTR { return SigmoidV(d, v); });
  }
}

void ApplyExactImpl(int fn, const float* in, float* out, std::size_t n) {
  switch (static_cast<Exact>(fn)) {
    case Exact::hard_swish:
      return Loop(in, out, n, [](DF d, VF v) HWY_ATTR { return HardSwishV(d, v); });
    case Exact::relu:
      return Loop(in, out, n, [](DF d, VF v) HWY_ATTR { return ReluV(d, v); });
  }
}

// Kahan-compensated float32 lanes: the sum's error stays ~2^-24 relative whatever n (the
// terms are all >= 0), at five adds per vector next to exp's ~20 operations. The plain
// sum rides along for the non-finite cases, where the compensation turns inf into NaN.
struct KahanLanes {
  VF sum, comp, plain;
  HWY_INLINE void Add(VF v) {
    const VF y = hn::Sub(v, comp);
    const VF t = hn::Add(sum, y);
    comp = hn::Sub(hn::Sub(t, sum), y);
    sum = t;
    plain = hn::Add(plain, v);
  }
};

float ExpShiftedSumImpl(const float* in, float shift, float* out, std::size_t n) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF s = hn::Set(d, shift);
  KahanLanes acc{hn::Zero(d), hn::Zero(d), hn::Zero(d)};
  std::size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF e = ExpV(d, hn::Sub(hn::LoadU(d, in + i), s));
    hn::StoreU(e, d, out + i);
    acc.Add(e);
  }
  if (i < n) {
    HWY_ALIGN float buf[hn::MaxLanes(d)] = {};
    std::memcpy(buf, in + i, (n - i) * sizeof(float));
    const VF e = ExpV(d, hn::Sub(hn::Load(d, buf), s));
    hn::Store(e, d, buf);
    std::memcpy(out + i, buf, (n - i) * sizeof(float));
    acc.Add(hn::IfThenElseZero(hn::FirstN(d, n - i), e));  // the padding adds nothing
  }
  HWY_ALIGN float sums[hn::MaxLanes(d)], comps[hn::MaxLanes(d)], plain[hn::MaxLanes(d)];
  hn::Store(acc.sum, d, sums);
  hn::Store(acc.comp, d, comps);
  hn::Store(acc.plain, d, plain);
  double total = 0, plain_total = 0;  // N lanes: reducing in double adds no error to speak of
  for (std::size_t k = 0; k < N; ++k) {
    total += static_cast<double>(sums[k]) - static_cast<double>(comps[k]);
    plain_total += plain[k];
  }
  // An infinite or NaN term (or a float32 overflow of the sum) decides the result.
  return static_cast<float>(std::isfinite(plain_total) ? total : plain_total);
}

float MaxOfImpl(const float* x, std::size_t n) {
  if (n == 0) return -std::numeric_limits<float>::infinity();
  const DF d;
  const std::size_t N = hn::Lanes(d);
  VF m = hn::Set(d, x[0]);
  auto ok = hn::Eq(m, m);  // all true: no NaN so far (Max is not NaN-propagating)
  std::size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF v = hn::LoadU(d, x + i);
    ok = hn::And(ok, hn::Eq(v, v));
    m = hn::Max(m, v);
  }
  if (i < n) {
    HWY_ALIGN float buf[hn::MaxLanes(d)];
    for (std::size_t k = 0; k < N; ++k) buf[k] = x[0];  // padding with x[0] is neutral
    std::memcpy(buf, x + i, (n - i) * sizeof(float));
    const VF v = hn::Load(d, buf);
    ok = hn::And(ok, hn::Eq(v, v));
    m = hn::Max(m, v);
  }
  if (!hn::AllTrue(d, ok) || std::isnan(x[0])) {
    for (std::size_t k = 0; k < n; ++k)
      if (std::isnan(x[k])) return x[k];
  }
  HWY_ALIGN float lanes[hn::MaxLanes(d)];
  hn::Store(m, d, lanes);
  float best = lanes[0];
  for (std::size_t k = 1; k < N; ++k) best = lanes[k] > best ? lanes[k] : best;
  return best;
}

}  // namespace fpguard::ops::vmath::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::ops::vmath {

HWY_EXPORT(ApplyImpl);
HWY_EXPORT(ApplyExactImpl);
HWY_EXPORT(ExpShiftedSumImpl);
HWY_EXPORT(MaxOfImpl);

void apply(Fn f, const float* in, float* out, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(ApplyImpl)(static_cast<int>(f), in, out, n);
}

void apply_exact(Exact f, const float* in, float* out, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(ApplyExactImpl)(static_cast<int>(f), in, out, n);
}

float exp_shifted_sum(const float* in, float shift, float* out, std::size_t n) {
  return HWY_DYNAMIC_DISPATCH(ExpShiftedSumImpl)(in, shift, out, n);
}

float max_of(const float* x, std::size_t n) {
  return HWY_DYNAMIC_DISPATCH(MaxOfImpl)(x, n);
}

}  // namespace fpguard::ops::vmath
#endif
