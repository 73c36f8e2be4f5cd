// The per-vector fast rounding kernel (see round/fast.hpp), as a Highway "-inl" header:
// included once per SIMD target by the .cpp files that use it (round_simd.cpp,
// stats/stats_simd.cpp), inside their foreach_target loop.
#if defined(FPGUARD_ROUND_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FPGUARD_ROUND_SIMD_INL_H_
#undef FPGUARD_ROUND_SIMD_INL_H_
#else
#define FPGUARD_ROUND_SIMD_INL_H_
#endif

#include <hwy/highway.h>

#include <bit>
#include <cstdint>

#include "round/fast.hpp"

HWY_BEFORE_NAMESPACE();
namespace fpguard::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The normal-range rounding of magnitudes (|x| as bits) at bit p.drop_bits, with its
// constants set up once (for loops that keep several formats' in registers), and the
// format's normal range [smallest_normal, max] as bits, for the test whether a vector lies
// in it (unsigned: NaN's bits are beyond it).
template <bool kNearestEven, class DU>
struct NormalBits {
  using VU = hn::Vec<DU>;
  DU du;
  VU keep, half_minus_one, lsb_bit, lo, span;
  int drop;
  NormalBits(const FastParams& p, float max)
      : keep(hn::Set(du, ~((1u << p.drop_bits) - 1))),
        half_minus_one(
            hn::Set(du, kNearestEven && p.drop_bits > 0 ? (1u << (p.drop_bits - 1)) - 1 : 0u)),
        lsb_bit(hn::Set(du, kNearestEven && p.drop_bits > 0 ? 1u : 0u)),
        lo(hn::Set(du, std::bit_cast<std::uint32_t>(p.smallest_normal))),
        span(hn::Set(du, std::bit_cast<std::uint32_t>(max) -
                             std::bit_cast<std::uint32_t>(p.smallest_normal))),
        drop(p.drop_bits) {}
  HWY_INLINE VU Round(VU a) const {
#if HWY_TARGET <= HWY_AVX3
    // (A test of the kept part's last bit and a masked add: one instruction fewer.)
    const auto t = hn::Add(a, half_minus_one);
    const auto odd = hn::TestBit(a, hn::ShiftLeftSame(lsb_bit, drop));
    return hn::And(hn::IfThenElse(odd, hn::Add(t, hn::Set(du, 1u)), t), keep);
#else
    const auto lsb = hn::And(hn::ShiftRightSame(a, drop), lsb_bit);
    return hn::And(hn::Add(a, hn::Add(half_minus_one, lsb)), keep);
#endif
  }
  // Whether every lane of a is in [smallest_normal, max].
  HWY_INLINE bool InRange(VU a) const {
    return hn::AllFalse(du, hn::Gt(hn::Sub(a, lo), span));
  }
};

// The normal-range rounding of magnitudes (|x| as bits, a) at bit p.drop_bits, and
// whether every lane is a normal number of the format's range, [smallest_normal, max];
// only then is the result the rounded magnitude of every lane (one test per vector).
// (NaN compares false, so it is never in range.)
template <bool kNearestEven, class DU, class VU = hn::Vec<DU>>
HWY_INLINE VU RoundNormalBits(DU /*du*/, VU a, const FastParams& p, bool& in_range) {
  const NormalBits<kNearestEven, DU> b(p, p.max);
  in_range = b.InRange(a);
  return b.Round(a);
}

// The rest of RoundVec for a vector not wholly in range: v, its magnitude bits a and
// RoundNormalBits' rn; handles subnormals, overflow, infinities, NaN and the sign.
template <bool kNearestEven, class D, class V = hn::Vec<D>,
          class VU = hn::Vec<hn::RebindToUnsigned<D>>>
HWY_INLINE V RoundOutOfRange(D df, V v, VU a, VU rn, const FastParams& p) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto sign = hn::And(hn::BitCast(du, v), hn::Set(du, 0x80000000u));
  const auto af = hn::BitCast(df, a);
  const auto ai = hn::BitCast(di, a);  // a < 2^31, so signed compares are exact
  const auto min_normal = hn::Set(df, p.smallest_normal);

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

// Rounds the lanes of v; `in_range` tells whether every lane was a finite value in the
// format's normal range, [smallest_normal, max] (then no lane overflowed, underflowed or
// became subnormal).
template <bool kNearestEven, class D, class V = hn::Vec<D>>
HWY_INLINE V RoundVec(D df, V v, const FastParams& p, bool& in_range) {
  const hn::RebindToUnsigned<D> du;
  const auto sign_bit = hn::Set(du, 0x80000000u);
  const auto bits = hn::BitCast(du, v);
  const auto a = hn::AndNot(sign_bit, bits);
  const auto rn = RoundNormalBits<kNearestEven>(du, a, p, in_range);
  // Common case: the rounded bits need only the sign back.
  if (in_range) return hn::BitCast(df, hn::Or(rn, hn::And(bits, sign_bit)));
  return RoundOutOfRange<kNearestEven>(df, v, a, rn, p);
}

template <bool kNearestEven, class D, class V = hn::Vec<D>>
HWY_INLINE V RoundVec(D df, V v, const FastParams& p) {
  bool in_range;
  return RoundVec<kNearestEven>(df, v, p, in_range);
}

// RoundVec<true> (nearest-even, saturating) of finite magnitudes, without a branch: no
// lane may be inf or NaN. One magic-number add rounds both ranges: (a + K) - K with
// K = 2^(max(E, emin) + 23 - m), E the exponent of a, puts a's format quantum on K's last
// bit, which the FPU rounds to nearest-even (below the smallest normal, K is the subnormal
// rounding's magic). Clamping a to max first saturates (round(max) = max, and the
// rounding is monotone). Driven by the same FastParams row as RoundVec.
template <class D>
struct FiniteRounder {
  using V = hn::Vec<D>;
  using DU = hn::RebindToUnsigned<D>;
  using VU = hn::Vec<DU>;
  V max, min_normal;
  VU exp_mask, k_floor, k_shift;
  bool flush, no_negative_zero;

  // Whether p can be rounded so: nearest-even, saturating (overflow to max), a dropped
  // mantissa bit (K above a's binade), K within float32's exponents.
  static bool Applies(const FastParams& p) {
    if (!p.nearest_even || p.drop_bits < 1 || p.overflow_value != p.max || !(p.max > 0))
      return false;
    const auto exp_bits = [](float f) {
      return static_cast<int>(std::bit_cast<std::uint32_t>(f) >> 23);
    };
    return exp_bits(p.max) + p.drop_bits <= 254;
  }

  FiniteRounder(D df, const FastParams& p)
      : max(hn::Set(df, p.max)),
        min_normal(hn::Set(df, p.smallest_normal)),
        exp_mask(hn::Set(DU(), 0x7f800000u)),
        k_floor(hn::Set(DU(), std::bit_cast<std::uint32_t>(p.smallest_normal))),
        k_shift(hn::Set(DU(), static_cast<std::uint32_t>(p.drop_bits) << 23)),
        flush(p.flush_subnormals),
        no_negative_zero(p.no_negative_zero) {}

  // The rounded magnitude of a = |x| (finite; no sign bit).
  HWY_INLINE V Magnitude(D df, V a) const {
    const DU du;
    const auto am = hn::Min(a, max);
    const auto e = hn::Max(hn::And(hn::BitCast(du, am), exp_mask), k_floor);
    const auto k = hn::BitCast(df, hn::Add(e, k_shift));
    auto r = hn::Sub(hn::Add(am, k), k);
    if (flush) r = hn::IfThenZeroElse(hn::Lt(r, min_normal), r);
    return r;
  }

  // The magnitude r with the sign bits `sign` back (none on a zero of a format without -0).
  HWY_INLINE V Signed(D df, V r, VU sign) const {
    if (no_negative_zero)
      sign = hn::IfThenZeroElse(hn::RebindMask(DU(), hn::Eq(r, hn::Zero(df))), sign);
    return hn::BitCast(df, hn::Or(hn::BitCast(DU(), r), sign));
  }
};

}  // namespace fpguard::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FPGUARD_ROUND_SIMD_INL_H_
