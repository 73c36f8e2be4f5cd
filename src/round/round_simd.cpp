// Highway implementation of the fast path described in round/fast.hpp, compiled once per
// SIMD target and chosen at run time (HWY_DYNAMIC_DISPATCH).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "round/round_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "round/fast.hpp"

HWY_BEFORE_NAMESPACE();
namespace fpguard::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <bool kNearestEven, class D, class V = hn::Vec<D>>
HWY_INLINE V RoundVec(D df, V v, const FastParams& p) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto sign_bit = hn::Set(du, 0x80000000u);
  const auto bits = hn::BitCast(du, v);
  const auto sign = hn::And(bits, sign_bit);
  const auto a = hn::AndNot(sign_bit, bits);
  const auto af = hn::BitCast(df, a);
  const auto ai = hn::BitCast(di, a);  // a < 2^31, so signed compares are exact

  // Normal range: round the bit pattern at bit d.
  hn::Vec<decltype(du)> rn = a;
  if (p.drop_bits > 0) {
    const auto keep = hn::Set(du, ~((1u << p.drop_bits) - 1));
    if constexpr (kNearestEven) {
      const auto lsb = hn::And(hn::ShiftRightSame(a, p.drop_bits), hn::Set(du, 1u));
      const auto bias = hn::Add(hn::Set(du, (1u << (p.drop_bits - 1)) - 1), lsb);
      rn = hn::And(hn::Add(a, bias), keep);
    } else {
      rn = hn::And(a, keep);
    }
  }
  // Common case, one test per vector: every lane is a normal number of the format's
  // range, so the rounded bits need only the sign back.
  // (NaN compares false, so it takes the full path.)
  const auto min_normal = hn::Set(df, p.smallest_normal);
  const auto in_range = hn::And(hn::Ge(af, min_normal), hn::Le(af, hn::Set(df, p.max)));
  if (hn::AllTrue(df, in_range)) return hn::BitCast(df, hn::Or(rn, sign));

  // Subnormal range of the format: the FPU rounds to the quantum (ties-to-even).
  const auto magic = hn::Set(df, p.magic);
  auto sub = hn::Sub(hn::Add(af, magic), magic);
  if constexpr (!kNearestEven) {
    sub = hn::Sub(sub, hn::IfThenElseZero(hn::Gt(sub, af), hn::Set(df, p.quantum)));
  }
  auto res = hn::IfThenElse(hn::Lt(af, min_normal), sub, hn::BitCast(df, rn));
  if (p.flush_subnormals) res = hn::IfThenZeroElse(hn::Lt(res, min_normal), res);

  const auto inf_bits = hn::Set(di, 0x7f800000);
  const auto is_inf = hn::RebindMask(df, hn::Eq(ai, inf_bits));
  const auto is_nan = hn::RebindMask(df, hn::Gt(ai, inf_bits));
  res = hn::IfThenElse(hn::Gt(res, hn::Set(df, p.max)), hn::Set(df, p.overflow_value), res);
  res = hn::IfThenElse(is_inf, hn::Set(df, p.inf_value), res);
  res = hn::IfThenElse(is_nan, hn::BitCast(df, hn::Set(du, 0x7fc00000u)), res);  // canonical qNaN

  // Sign: none on NaN (canonical +qNaN), none on zero where the format has no -0.
  auto unsigned_result = hn::IsNaN(res);
  if (p.no_negative_zero) unsigned_result = hn::Or(unsigned_result, hn::Eq(res, hn::Zero(df)));
  const auto s = hn::IfThenZeroElse(hn::RebindMask(du, unsigned_result), sign);
  return hn::BitCast(df, hn::Or(hn::BitCast(du, res), s));
}

template <bool kNearestEven>
HWY_INLINE void RoundLoop(const float* HWY_RESTRICT in, float* out, size_t n,
                          const FastParams& p) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(RoundVec<kNearestEven>(df, hn::LoadU(df, in + i), p), df, out + i);
  if (i < n) {  // the tail goes through the same vector code, via a padded buffer
    HWY_ALIGN float buf[hn::MaxLanes(df)] = {};
    std::memcpy(buf, in + i, (n - i) * sizeof(float));
    hn::Store(RoundVec<kNearestEven>(df, hn::Load(df, buf), p), df, buf);
    std::memcpy(out + i, buf, (n - i) * sizeof(float));
  }
}

void RoundFastImpl(const float* in, float* out, size_t n, const FastParams& p) {
  if (p.nearest_even)
    RoundLoop<true>(in, out, n, p);
  else
    RoundLoop<false>(in, out, n, p);
}

}  // namespace fpguard::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>
#include <limits>

namespace fpguard::detail {

HWY_EXPORT(RoundFastImpl);

void round_fast(const float* in, float* out, std::size_t n, const FastParams& p) {
  HWY_DYNAMIC_DISPATCH(RoundFastImpl)(in, out, n, p);
}

std::optional<FastParams> fast_params(const Format& f, const RoundOptions& o) {
  if (o.rounding != Rounding::nearest_even && o.rounding != Rounding::toward_zero)
    return std::nullopt;
  // The bit trick needs a signed format with subnormals, a mantissa bit (ties-to-even
  // on the last mantissa bit) and float32's range at most.
  if (!f.is_signed || !f.has_subnormals || f.mantissa_bits < 1 || f.mantissa_bits > 23 ||
      f.emin() < -126 || f.max() > std::numeric_limits<float>::max())
    return std::nullopt;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float max = static_cast<float>(f.max());
  FastParams p;
  p.drop_bits = 23 - f.mantissa_bits;
  p.nearest_even = o.rounding == Rounding::nearest_even;
  p.flush_subnormals = o.flush_subnormals;
  p.no_negative_zero = !f.has_negative_zero();
  p.smallest_normal = static_cast<float>(f.smallest_normal());
  p.magic = std::ldexp(1.0f, f.emin() - f.mantissa_bits + 23);
  p.quantum = static_cast<float>(f.smallest_subnormal());
  p.max = max;
  const float saturated_or_nan = (o.saturate || f.always_saturates()) ? max : nan;
  if (!p.nearest_even)
    p.overflow_value = max;
  else
    p.overflow_value = f.has_inf() ? (o.saturate ? max : inf) : saturated_or_nan;
  p.inf_value = f.has_inf() ? inf : saturated_or_nan;
  return p;
}

}  // namespace fpguard::detail
#endif
