// Highway implementation of the fast path described in round/fast.hpp, compiled once per
// SIMD target and chosen at run time (HWY_DYNAMIC_DISPATCH). The per-vector kernel is in
// round/round_simd-inl.h, shared with the stats kernels.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "round/round_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "round/fast.hpp"
// Per-target inline kernels: included once per target by foreach_target.
#include "round/round_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fpguard::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out[i] = round(in[i]) a vector at a time; the tail goes through the same vector code,
// via a padded buffer.
template <class Round>
HWY_INLINE void ForEachRounded(const float* HWY_RESTRICT in, float* out, size_t n,
                               const Round& round) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(round(hn::LoadU(df, in + i)), df, out + i);
  if (i < n) {
    HWY_ALIGN float buf[hn::MaxLanes(df)] = {};
    std::memcpy(buf, in + i, (n - i) * sizeof(float));
    hn::Store(round(hn::Load(df, buf)), df, buf);
    std::memcpy(out + i, buf, (n - i) * sizeof(float));
  }
}

template <bool kNearestEven>
HWY_INLINE void RoundLoop(const float* HWY_RESTRICT in, float* out, size_t n, const FastParams& p) {
  const hn::ScalableTag<float> df;
  ForEachRounded(in, out, n, [&](auto v) { return RoundVec<kNearestEven>(df, v, p); });
}

// bfloat16 (FastParams::ieee_bfloat16): float32's exponent range, so nearest-even is the
// normal-range bit trick alone, with no subnormal or range step: add 0x7fff plus the kept
// LSB and clear the 16 dropped bits (subnormals round the same way; a carry out of the
// largest binade gives inf, the format's overflow). NaN becomes the canonical +qNaN, as
// RoundVec makes it.
void RoundBfloat16(const float* HWY_RESTRICT in, float* out, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const auto qnan = hn::BitCast(df, hn::Set(du, 0x7fc00000u));
  const auto half = hn::Set(du, 0x7fffu), one = hn::Set(du, 1u), keep = hn::Set(du, 0xffff0000u);
  ForEachRounded(in, out, n, [&](auto v) {
    const auto b = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(b), one);
    const auto r = hn::BitCast(df, hn::And(hn::Add(b, hn::Add(half, lsb)), keep));
    return hn::IfThenElse(hn::IsNaN(v), qnan, r);
  });
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && HWY_TARGET != HWY_SCALAR
// float16 through the hardware conversions (F16C: vcvtps2ph with round-to-nearest-even,
// then back), with NaN made the canonical +qNaN as RoundVec makes it.
void RoundHalfF16C(const float* HWY_RESTRICT in, float* out, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const auto qnan = hn::BitCast(df, hn::Set(hn::RebindToUnsigned<decltype(df)>(), 0x7fc00000u));
  ForEachRounded(in, out, n, [&](auto v) {
    const auto r = hn::PromoteTo(df, hn::DemoteTo(dh, v));
    return hn::IfThenElse(hn::IsNaN(v), qnan, r);
  });
}
#endif

// IEEE binary16 bit patterns of float32 values through the hardware conversion (F16C:
// vcvtps2ph, nearest-even), NaN as the canonical +qNaN 0x7e00 as encode() writes it.
// Only where the CPU converts natively: Highway's emulation on older targets loses the
// sign of -0, so those return false and the caller takes the generic path.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && HWY_TARGET != HWY_SCALAR
bool HalfBitsImpl(const float* HWY_RESTRICT in, std::uint16_t* out, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const size_t N = hn::Lanes(df);
  const auto qnan = hn::BitCast(df, hn::Set(hn::RebindToUnsigned<decltype(df)>(), 0x7fc00000u));
  auto half = [&](hn::Vec<decltype(df)> v) {
    return hn::DemoteTo(dh, hn::IfThenElse(hn::IsNaN(v), qnan, v));
  };
  auto* bits = reinterpret_cast<hwy::float16_t*>(out);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(half(hn::LoadU(df, in + i)), dh, bits + i);
  if (i < n) {
    HWY_ALIGN float buf[hn::MaxLanes(df)] = {};
    HWY_ALIGN hwy::float16_t hbuf[hn::MaxLanes(df)] = {};
    std::memcpy(buf, in + i, (n - i) * sizeof(float));
    hn::Store(half(hn::Load(df, buf)), dh, hbuf);
    std::memcpy(bits + i, hbuf, (n - i) * sizeof(std::uint16_t));
  }
  return true;
}
#else
bool HalfBitsImpl(const float*, std::uint16_t*, size_t) {
  return false;
}
#endif

void RoundFastImpl(const float* in, float* out, size_t n, const FastParams& p) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && HWY_TARGET != HWY_SCALAR
  if (p.ieee_half) return RoundHalfF16C(in, out, n);
#endif
  if (p.ieee_bfloat16) return RoundBfloat16(in, out, n);
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
HWY_EXPORT(HalfBitsImpl);

bool half_bits(const float* in, std::uint16_t* out, std::size_t n) {
  return HWY_DYNAMIC_DISPATCH(HalfBitsImpl)(in, out, n);
}

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
  p.ieee_half = f.exponent_bits == 5 && f.mantissa_bits == 10 && f.bias == 15 && f.has_inf() &&
                f.nan == NanEncoding::ieee && f.has_negative_zero() && p.nearest_even &&
                !o.saturate && !o.flush_subnormals;
  p.ieee_bfloat16 = f.exponent_bits == 8 && f.mantissa_bits == 7 && f.bias == 127 && f.has_inf() &&
                    f.nan == NanEncoding::ieee && f.has_negative_zero() && p.nearest_even &&
                    !o.saturate && !o.flush_subnormals;
  return p;
}

}  // namespace fpguard::detail
#endif
