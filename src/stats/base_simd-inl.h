// The per-vector summary of a float32 tensor (counts, extremes, exponent fields) and its
// exponent histogram, as a Highway "-inl" header: included once per SIMD target by the
// .cpp files that use it (stats/stats_simd.cpp for stats(), analysis/compare_simd.cpp for
// the check's reference tensors, summarised in the pass that compares them).
#if defined(FPGUARD_STATS_BASE_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FPGUARD_STATS_BASE_SIMD_INL_H_
#undef FPGUARD_STATS_BASE_SIMD_INL_H_
#else
#define FPGUARD_STATS_BASE_SIMD_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "stats/kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace fpguard::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Counts a mask into an int32 vector (true lanes are -1 as integers).
template <class DI, class M>
HWY_INLINE hn::Vec<DI> Count(DI di, hn::Vec<DI> acc, M m) {
  return hn::Sub(acc, hn::VecFromMask(di, hn::RebindMask(di, m)));
}

template <class DI>
HWY_INLINE std::uint64_t Total(DI di, hn::Vec<DI> v) {
  return static_cast<std::uint64_t>(hn::GetLane(hn::SumOfLanes(di, v)));
}

#if HWY_TARGET != HWY_SCALAR
// Chunks whose nonzero finite values span at most this many binades count them by
// comparing the exponent bytes with each field (a vector of 64 bytes at a time): cheaper
// than one scalar increment per value when few fields occur, as in most tensors.
constexpr int kNarrowFields = 24;

// Adds the float32 subnormals among x[0, end) to the histogram; returns how many.
HWY_INLINE std::uint64_t SubnormalHistogram(const float* HWY_RESTRICT x, std::size_t end,
                                            BaseAcc& a) {
  std::uint64_t n = 0;
  for (std::size_t k = 0; k < end; ++k) {
    const float av = std::fabs(x[k]);
    if (av != 0 && av < std::numeric_limits<float>::min()) {
      ++a.hist[static_cast<std::size_t>(floor_log2(av) - kHistOffset)];
      ++n;
    }
  }
  return n;
}

// acc + 1 in the lanes of m (a mask of lanes of acc's width): a masked add where masks are
// registers of their own (AVX-512: 2 instructions per compare and count), acc - (m as 0
// or -1) elsewhere (AVX2: 2 instructions, where the masked add is a compare, an add and a
// blend).
template <class D, class M>
HWY_INLINE hn::Vec<D> CountIf(D d, hn::Vec<D> acc, M m) {
#if HWY_TARGET <= HWY_AVX3
  return hn::IfThenElse(hn::RebindMask(d, m), hn::Add(acc, hn::Set(d, 1)), acc);
#else
  return hn::Sub(acc, hn::VecFromMask(d, hn::RebindMask(d, m)));
#endif
}

// Adds to `a` how many of the fields e[0, end) equal f, for every f in [f_lo, f_hi] (f_lo
// >= 1), where `normal` of them lie in that range: f_hi's count is what the others leave.
// The others are compared in groups of 8 keys, each with a vector of byte counters
// (bounded by kBlockVectors additions), the fields loaded once per group.
HWY_INLINE void NarrowHistogram(const std::uint8_t* HWY_RESTRICT e, std::size_t end, int f_lo,
                                int f_hi, std::uint64_t normal, BaseAcc& a) {
  const hn::ScalableTag<std::uint8_t> d8;
  const hn::Repartition<std::uint64_t, decltype(d8)> d64;
  using V8 = hn::Vec<decltype(d8)>;
  constexpr std::size_t kGroup = 8, kBlockVectors = 255;
  const std::size_t n8 = hn::Lanes(d8), end8 = end - end % n8;
  const auto nk = static_cast<std::size_t>(f_hi - f_lo);  // f_lo..f_hi - 1
  const auto bin = [&](std::size_t k) {
    return static_cast<std::size_t>(f_lo + static_cast<int>(k) - 127 - kHistOffset);
  };
  // 255 (inf and NaN, absent here) pads the last group.
  std::array<std::uint8_t, (kNarrowFields + kGroup) / kGroup * kGroup> keys;
  keys.fill(255);
  for (std::size_t k = 0; k < nk; ++k) keys[k] = static_cast<std::uint8_t>(f_lo + k);
  std::array<std::uint64_t, keys.size()> counts{};
  for (std::size_t g = 0; g < nk; g += kGroup) {
    V8 key[kGroup];
    for (std::size_t j = 0; j < kGroup; ++j) key[j] = hn::Set(d8, keys[g + j]);
    for (std::size_t b = 0; b < end8; b += kBlockVectors * n8) {
      V8 acc[kGroup];
      for (std::size_t j = 0; j < kGroup; ++j) acc[j] = hn::Zero(d8);
      for (std::size_t i = b; i < std::min(end8, b + kBlockVectors * n8); i += n8) {
        const V8 v = hn::LoadU(d8, e + i);
        for (std::size_t j = 0; j < kGroup; ++j) acc[j] = CountIf(d8, acc[j], hn::Eq(v, key[j]));
      }
      for (std::size_t j = 0; j < kGroup; ++j)
        counts[g + j] += hn::GetLane(hn::SumOfLanes(d64, hn::SumsOf8(acc[j])));
    }
  }
  for (std::size_t i = end8; i < end; ++i)
    for (std::size_t k = 0; k < nk; ++k) counts[k] += e[i] == keys[k];
  std::uint64_t rest = normal;
  for (std::size_t k = 0; k < nk; ++k) {
    a.hist[bin(k)] += counts[k];
    rest -= counts[k];
  }
  a.hist[bin(nk)] += rest;
}

// The exponent histogram from the exponent fields `e` of x's values. When they are all
// finite, `fields` is the fields of the smallest nonzero |value| (0: a subnormal) and of
// the largest, the second > 0; otherwise {0, 0}. Field 0 holds zeros and float32
// subnormals, which are rare, so they are sorted out only when present.
HWY_INLINE void Histogram(const float* HWY_RESTRICT x, const std::uint8_t* HWY_RESTRICT e,
                          std::size_t end, std::uint64_t zeros, std::pair<int, int> fields,
                          BaseAcc& a) {
  const int f_lo = std::max(1, fields.first), f_hi = fields.second;
  if (f_hi > 0 && f_hi - f_lo < kNarrowFields) {
    const std::uint64_t subnormals = fields.first == 0 ? SubnormalHistogram(x, end, a) : 0;
    NarrowHistogram(e, end, f_lo, f_hi, end - zeros - subnormals, a);
    return;
  }
  std::uint32_t h[4][256] = {};
  std::size_t i = 0;
  for (; i + 4 <= end; i += 4) {
    ++h[0][e[i]];
    ++h[1][e[i + 1]];
    ++h[2][e[i + 2]];
    ++h[3][e[i + 3]];
  }
  for (; i < end; ++i) ++h[0][e[i]];
  for (int k = 1; k < 255; ++k) {
    const std::uint32_t c = h[0][k] + h[1][k] + h[2][k] + h[3][k];
    if (c) a.hist[static_cast<std::size_t>(k - 127 - kHistOffset)] += c;
  }
  if (h[0][0] + h[1][0] + h[2][0] + h[3][0] > zeros) SubnormalHistogram(x, end, a);
}

// The summary of one chunk (at most kMaxChunk values), a vector at a time: counts of
// zeros, NaN and infinities, the extremes of the finite values, and (when asked) their
// exponent fields for the histogram.
template <class DF>
struct BaseVecs {
  using DI = hn::RebindToSigned<DF>;
  using VF = hn::Vec<DF>;
  DF df;
  DI di;
  VF inf, fmax, zero;
  VF lo, hi, minabs;
  hn::Vec<DI> c_zero;
  std::size_t vectors = 0;
  // Counted as integers, not vectors: only vectors with NaN or inf lanes change them, and
  // four vectors that the loop carries but rarely touches were copied between stack
  // slots on every vector (GCC, AVX2).
  std::size_t nonfinite = 0, nan = 0, posinf = 0, neginf = 0;
  // The exponent fields, for the histogram (kMaxChunk bytes, the caller's: kept out of
  // this struct so that its vectors stay in registers).
  std::uint8_t* HWY_RESTRICT exps;
  // What Finish found of the values added.
  ChunkRange range;

  // (Written out: an implicit constructor would not be compiled for the SIMD target.)
  explicit BaseVecs(std::uint8_t* HWY_RESTRICT exponent_fields)
      : inf(hn::Set(df, std::numeric_limits<float>::infinity())),
        fmax(hn::Set(df, std::numeric_limits<float>::max())),
        zero(hn::Zero(df)),
        lo(inf),
        hi(hn::Neg(inf)),
        minabs(inf),
        c_zero(hn::Zero(di)),
        exps(exponent_fields) {}

  // v, |v| = av; `at` is v's offset in the chunk (for its exponent fields, with
  // kFields). Returns whether every lane is finite.
  template <bool kFields>
  HWY_INLINE bool Add(VF v, VF av, std::size_t at) {
    if constexpr (kFields) {
      const hn::Rebind<std::uint8_t, DF> d8;
      // (At most 255 after the shift: truncating is demoting, in fewer instructions.)
      const hn::RebindToUnsigned<DF> du;
      hn::StoreU(hn::TruncateTo(d8, hn::ShiftRight<23>(hn::BitCast(du, av))), d8, exps + at);
    }
    ++vectors;
    const auto finite = hn::Le(av, fmax);
    const auto is_zero = hn::Eq(v, zero);
    c_zero = Count(di, c_zero, is_zero);
    if (HWY_LIKELY(hn::AllTrue(df, finite))) {
      minabs = hn::Min(minabs, hn::IfThenElse(is_zero, inf, av));
      lo = hn::Min(lo, v);
      hi = hn::Max(hi, v);
      return true;
    }
    // Rare: a vector with NaN or inf lanes.
    nonfinite += hn::CountTrue(df, hn::Not(finite));
    nan += hn::CountTrue(df, hn::IsNaN(v));  // (Ne is an ordered compare: false for NaN)
    posinf += hn::CountTrue(df, hn::Eq(v, inf));
    neginf += hn::CountTrue(df, hn::Eq(v, hn::Neg(inf)));
    // (x86 min/max return the second operand when one is NaN: keep NaN out of them.)
    minabs = hn::Min(minabs, hn::IfThenElse(hn::AndNot(is_zero, finite), av, inf));
    lo = hn::Min(lo, hn::IfThenElse(finite, v, inf));
    hi = hn::Max(hi, hn::IfThenElse(finite, v, hn::Neg(inf)));
    return false;
  }

  // Adds the chunk x (its first `vectors` vectors, all added) to `a`, with its exponent
  // histogram when kFields; returns the number of finite values.
  template <bool kFields>
  HWY_INLINE std::uint64_t Finish(const float* HWY_RESTRICT x, BaseAcc& a) {
    const std::size_t end = vectors * hn::Lanes(df);
    const std::uint64_t finite = end - nonfinite;
    const std::uint64_t zeros = Total(di, c_zero);
    a.finite += finite;
    a.nan += nan;
    a.posinf += posinf;
    a.neginf += neginf;
    a.zeros += zeros;
    const float lo_s = hn::GetLane(hn::MinOfLanes(df, lo));
    const float hi_s = hn::GetLane(hn::MaxOfLanes(df, hi));
    const float minabs_s = hn::GetLane(hn::MinOfLanes(df, minabs));
    a.min = std::min(a.min, static_cast<double>(lo_s));
    a.max = std::max(a.max, static_cast<double>(hi_s));
    a.min_abs_nonzero = std::min(a.min_abs_nonzero, static_cast<double>(minabs_s));
    range = {.all_finite = nonfinite == 0,
             .max_abs = std::max(-lo_s, hi_s),
             .min_abs_nonzero = minabs_s,
             .zeros = zeros};
    if constexpr (kFields) {
      // The exponent fields of the nonzero values, when every value is finite.
      std::pair<int, int> fields{0, 0};
      if (finite == end && zeros < end) {
        const auto field = [](float v) {
          return static_cast<int>(std::bit_cast<std::uint32_t>(v) >> 23);
        };
        fields = {field(minabs_s), field(range.max_abs)};
      }
      Histogram(x, exps, end, zeros, fields, a);
    }
    return finite;
  }
};
#endif

}  // namespace fpguard::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FPGUARD_STATS_BASE_SIMD_INL_H_
