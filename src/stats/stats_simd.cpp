// Highway kernels for stats() on float32 chunks (see stats/kernels.hpp for the scalar
// versions, which serve float64 input and the last few elements of a chunk). Compiled
// once per SIMD target and chosen at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stats/stats_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <utility>

#include "fpguard/error.hpp"
#include "stats/kernels.hpp"
// Per-target inline kernels: included once per target by foreach_target.
#include "round/round_simd-inl.h"
#include "stats/base_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fpguard::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// Sums float lanes into two double accumulators.
template <class DF, class DD>
HWY_INLINE void AddWide(DF df, DD dd, hn::Vec<DF> v, hn::Vec<DD>& lo, hn::Vec<DD>& hi) {
  lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(v)));
  hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(hn::Half<DF>(), v)));
  (void)df;
}
#endif

#if HWY_TARGET != HWY_SCALAR
// The per-format error summary of a chunk, in vector registers; `Add` takes one vector
// of inputs x and their rounded values r. Vectors whose lanes are all finite normal
// values of the format within its range (no overflow, underflow or subnormal can apply,
// and the relative error is at most 2^-(m+1), under the precision-loss threshold
// 2^-(m+1)/2: the common case, with less to do) are summed by FusedGroup itself.
template <class DF>
struct FormatVecs {
  using DI = hn::RebindToSigned<DF>;
  using DD = hn::Repartition<double, DF>;
  using VF = hn::Vec<DF>;
  DF df;
  DI di;
  DD dd;
  VF fmax, limit, smallest_normal, loss, zero, band;
  VF max_abs, max_rel, thr, fsum;
  hn::Vec<DD> s_lo, s_hi;
  hn::Vec<DI> c_ovf, c_unf, c_sub, c_lost, c_rel;
  std::size_t in_range_vectors = 0, below_vectors = 0;

  // a: the summary so far, whose maximum relative error (a float) starts the lanes' maxima.
  FormatVecs(const FormatPlan& p, const FormatAcc& a)
      : fmax(hn::Set(df, std::numeric_limits<float>::max())),
        limit(hn::Set(df, p.overflow_f)),
        smallest_normal(hn::Set(df, static_cast<float>(p.smallest_normal))),
        loss(hn::Set(df, static_cast<float>(p.precision_loss_rel))),
        zero(hn::Zero(df)),
        band(hn::Set(df, 1.0f - 0x1p-20f)),
        max_abs(zero),
        max_rel(hn::Set(df, static_cast<float>(a.max_rel_error))),
        thr(hn::Mul(max_rel, band)),
        fsum(zero),
        s_lo(hn::Zero(dd)),
        s_hi(hn::Zero(dd)),
        c_ovf(hn::Zero(di)),
        c_unf(c_ovf),
        c_sub(c_ovf),
        c_lost(c_ovf),
        c_rel(c_ovf) {}

  // After a block of in-range vectors whose relative errors were taken as err * inv
  // (inv = 1/|x| rounded, within 2 ulps of the quotient) and whose lanes' largest such
  // product is `bmax`: the maximum must be the exact quotient err / |x| in float, so the
  // block is divided again only when a lane may have beaten its lane's maximum:
  // err * inv >= q (1 - 1.5 2^-23) for the exact quotient q, so any q over the maximum M
  // gives err * inv > M (1 - 2^-20). Whether that may be so:
  HWY_INLINE bool MayBeatMax(VF bmax) const { return !hn::AllFalse(df, hn::Gt(bmax, thr)); }
  HWY_INLINE void AddExact(VF err, VF ax) { max_rel = hn::Max(max_rel, hn::Div(err, ax)); }
  HWY_INLINE void UpdateThreshold() { thr = hn::Mul(max_rel, band); }

  // Whether every lane of |x| = ax overflows (finite, beyond the format's range): then
  // counts them, and there is no error to take (Errors would give 0 in every lane).
  HWY_INLINE bool AllOverflow(VF ax) {
    const auto beyond = hn::Ge(ax, limit);
    if (!hn::AllTrue(df, hn::And(beyond, hn::Le(ax, fmax)))) return false;
    c_ovf = hn::Add(c_ovf, hn::Set(di, 1));
    return true;
  }

  // One vector not wholly in the format's normal range: counts it, and returns the
  // rounding errors of its lanes (0 where the value overflows or is not finite) and their
  // relative errors (the exact quotients; 0 also where x is 0), for the caller's maximum
  // and sum.
  HWY_INLINE void Errors(VF xv, VF rv, VF& err, VF& rel) {
    const auto ax = hn::Abs(xv), ar = hn::Abs(rv);
    const auto finite = hn::Le(ax, fmax);
    const auto beyond = hn::Ge(ax, limit);
    const auto ovf = hn::And(finite, hn::Or(beyond, hn::Not(hn::Le(ar, fmax))));
    c_ovf = Count(di, c_ovf, ovf);
    const auto valid = hn::AndNot(ovf, finite);
    err = hn::IfThenElseZero(valid, hn::Abs(hn::Sub(rv, xv)));
    const auto nz = hn::And(valid, hn::Ne(ax, zero));
    c_rel = Count(di, c_rel, nz);
    // (No lane with a relative error: 0 is every lane's, without dividing.)
    rel = zero;
    if (hn::AllFalse(df, nz)) return;
    rel = hn::IfThenElseZero(nz, hn::Div(err, ax));
    max_rel = hn::Max(max_rel, rel);
    thr = hn::Mul(max_rel, band);
    const auto r_zero = hn::Eq(ar, zero);
    c_unf = Count(di, c_unf, hn::And(nz, r_zero));
    c_sub = Count(di, c_sub, hn::And(hn::AndNot(r_zero, nz), hn::Lt(ar, smallest_normal)));
    c_lost = Count(di, c_lost, hn::Gt(rel, loss));
  }

  // Errors for lanes all finite, nonzero and without overflow, as magnitudes: ax = |x|, ar
  // its rounded magnitude (EachFormat<true>'s vectors without zeros): the same counts and
  // errors.
  HWY_INLINE void BelowErrors(VF ax, VF ar, VF& err, VF& rel) {
    err = hn::Abs(hn::Sub(ar, ax));
    rel = hn::Div(err, ax);
    max_rel = hn::Max(max_rel, rel);
    thr = hn::Mul(max_rel, band);
    const auto r_zero = hn::Eq(ar, zero);
    c_unf = Count(di, c_unf, r_zero);
    c_sub = Count(di, c_sub, hn::AndNot(r_zero, hn::Lt(ar, smallest_normal)));
    c_lost = Count(di, c_lost, hn::Gt(rel, loss));
    ++below_vectors;
  }

  HWY_INLINE void Add(VF xv, VF rv) {
    VF err, rel;
    Errors(xv, rv, err, rel);
    max_abs = hn::Max(max_abs, err);
    fsum = hn::Add(fsum, rel);
  }

  // Moves the float partial sums (at most kBlock terms a lane) into the double sums.
  HWY_INLINE void Flush() {
    AddWide(df, dd, fsum, s_lo, s_hi);
    fsum = zero;
  }

  void Finish(FormatAcc& a) {
    Flush();
    a.overflow += Total(di, c_ovf);
    a.underflow += Total(di, c_unf);
    a.subnormal += Total(di, c_sub);
    a.precision_loss += Total(di, c_lost);
    a.rel_count += Total(di, c_rel) + (in_range_vectors + below_vectors) * hn::Lanes(df);
    a.max_abs_error =
        std::max(a.max_abs_error, static_cast<double>(hn::GetLane(hn::MaxOfLanes(df, max_abs))));
    a.max_rel_error =
        std::max(a.max_rel_error, static_cast<double>(hn::GetLane(hn::MaxOfLanes(df, max_rel))));
    a.sum_rel_error +=
        hn::GetLane(hn::SumOfLanes(dd, s_lo)) + hn::GetLane(hn::SumOfLanes(dd, s_hi));
  }
};

#endif

// Vectors whose relative errors are summed in float before the double sum: 8 terms of at
// most 2^-(m+1) (in range) or 1 each keep the partial sums within 2^-21 relative.
constexpr std::size_t kBlock = 8;

// The chunk's summary, and 1/|x| of every element into `inv` (shared by the per-format
// passes). The moments are sums of d = x - K in double, K the chunk's first finite value
// (shifted data: the sum of squares then loses nothing to a large mean); when the sum of
// squares is more than 16 times the deviations' (K far out in the chunk's distribution),
// the chunk takes a second pass about its mean instead.
// kD: what it adds beyond the counts and extremes (Distribution).
// Processes the first n - n % Lanes elements; returns how many it did.
#if HWY_TARGET != HWY_SCALAR
template <Distribution kD>
std::size_t ChunkBase(const float* HWY_RESTRICT x, std::size_t n, BaseAcc& a, Moments& m,
                      float* HWY_RESTRICT inv, ChunkRange& range) {
  const hn::ScalableTag<float> df;
  const hn::Repartition<double, decltype(df)> dd;
  const hn::Half<decltype(df)> dh;
  const std::size_t N = hn::Lanes(df);
  const std::size_t end = n - n % N;
  if (end == 0) return 0;
  float k_shift = 0;
  for (std::size_t i = 0; i < end; ++i) {
    if (std::fabs(x[i]) <= std::numeric_limits<float>::max()) {
      k_shift = x[i];
      break;
    }
  }
  FPG_CHECK(end <= kMaxChunk);
  alignas(64) std::uint8_t exps[kMaxChunk];
  BaseVecs<decltype(df)> base(exps);
  const auto one = hn::Set(df, 1.0f);
  const auto fmax = base.fmax;
  const auto kf = hn::Set(df, k_shift);
  const auto kd = hn::Set(dd, static_cast<double>(k_shift));
  auto s1_lo = hn::Zero(dd), s1_hi = s1_lo, s2_lo = s1_lo, s2_hi = s1_lo;
  for (std::size_t i = 0; i < end; i += N) {
    // This pass brings the chunk in from memory: ask for it a little ahead.
    __builtin_prefetch(x + i + 512);
    const auto v = hn::LoadU(df, x + i);
    const auto av = hn::Abs(v);
    // (0 where x is 0: the formats' passes multiply a zero error by it.)
    if (inv) hn::StoreU(hn::IfThenZeroElse(hn::Eq(v, base.zero), hn::Div(one, av)), df, inv + i);
    [[maybe_unused]] const bool all_finite = base.template Add<kD == Distribution::full>(v, av, i);
    if constexpr (kD != Distribution::none) {
      // Non-finite lanes contribute d = 0.
      const auto vf = all_finite ? v : hn::IfThenElse(hn::Le(av, fmax), v, kf);
      const auto d_lo = hn::Sub(hn::PromoteTo(dd, hn::LowerHalf(dh, vf)), kd);
      const auto d_hi = hn::Sub(hn::PromoteTo(dd, hn::UpperHalf(dh, vf)), kd);
      s1_lo = hn::Add(s1_lo, d_lo);
      s1_hi = hn::Add(s1_hi, d_hi);
      s2_lo = hn::MulAdd(d_lo, d_lo, s2_lo);
      s2_hi = hn::MulAdd(d_hi, d_hi, s2_hi);
    }
  }
  const std::uint64_t finite = base.template Finish<kD == Distribution::full>(x, a);
  range = base.range;
  if constexpr (kD == Distribution::none) return end;

  m.n = finite;
  if (finite == 0) return end;
  const double nf = static_cast<double>(finite);
  const double s1 = hn::GetLane(hn::SumOfLanes(dd, s1_lo)) + hn::GetLane(hn::SumOfLanes(dd, s1_hi));
  const double s2 = hn::GetLane(hn::SumOfLanes(dd, s2_lo)) + hn::GetLane(hn::SumOfLanes(dd, s2_hi));
  m.mean = static_cast<double>(k_shift) + s1 / nf;
  m.m2 = s2 - s1 * (s1 / nf);
  if (m.m2 >= s2 * (1.0 / 16)) return end;
  // Second pass about the mean.
  const auto mean = hn::Set(dd, m.mean);
  auto m2_lo = hn::Zero(dd), m2_hi = m2_lo;
  for (std::size_t i = 0; i < end; i += N) {
    const auto v = hn::LoadU(df, x + i);
    const auto finite_mask = hn::Le(hn::Abs(v), fmax);
    const auto vf = hn::IfThenElse(finite_mask, v, hn::Set(df, static_cast<float>(m.mean)));
    // Non-finite lanes are replaced by (float)mean; their tiny deviation is removed below.
    const auto e_lo = hn::Sub(hn::PromoteTo(dd, hn::LowerHalf(dh, vf)), mean);
    const auto e_hi = hn::Sub(hn::PromoteTo(dd, hn::UpperHalf(dh, vf)), mean);
    m2_lo = hn::MulAdd(e_lo, e_lo, m2_lo);
    m2_hi = hn::MulAdd(e_hi, e_hi, m2_hi);
  }
  const double fill = static_cast<double>(static_cast<float>(m.mean)) - m.mean;
  m.m2 = hn::GetLane(hn::SumOfLanes(dd, m2_lo)) + hn::GetLane(hn::SumOfLanes(dd, m2_hi)) -
         static_cast<double>(end - finite) * fill * fill;
  return end;
}
#endif

std::size_t ChunkBaseF32(const float* HWY_RESTRICT x, std::size_t n, BaseAcc& a, Moments& m,
                         float* HWY_RESTRICT inv, Distribution d, ChunkRange& range) {
#if HWY_TARGET == HWY_SCALAR
  (void)x, (void)n, (void)a, (void)m, (void)inv, (void)d, (void)range;
  return 0;
#else
  switch (d) {
    case Distribution::none:
      return ChunkBase<Distribution::none>(x, n, a, m, inv, range);
    case Distribution::moments:
      return ChunkBase<Distribution::moments>(x, n, a, m, inv, range);
    default:
      return ChunkBase<Distribution::full>(x, n, a, m, inv, range);
  }
#endif
}

#if HWY_TARGET != HWY_SCALAR
// Up to this many formats share one pass over a chunk (their running vectors in registers).
constexpr std::size_t kFusedGroup = 3;

template <std::size_t K, class T, class F, std::size_t... I>
std::array<T, K> ArrayOf(F make, std::index_sequence<I...>) {
  return {make(I)...};
}

// The largest magnitude of the in-range path: the format's max, and at most 2^126, where
// 1/|x| is a normal float.
inline float InRangeMax(const FastParams& p) {
  return std::min(p.max, 0x1p126f);
}

// The magnitudes inside every one of the formats f[0, count)'s in-range paths, as bits
// [lo, lo + span]; none pass when there are none.
inline std::pair<std::uint32_t, std::uint32_t> CommonRange(const FusedFormat* f,
                                                           std::size_t count) {
  std::uint32_t lo = 0, hi = ~0u;
  for (std::size_t k = 0; k < count; ++k) {
    lo = std::max(lo, std::bit_cast<std::uint32_t>(f[k].rp->smallest_normal));
    hi = std::min(hi, std::bit_cast<std::uint32_t>(InRangeMax(*f[k].rp)));
  }
  return lo <= hi ? std::pair{lo, hi - lo} : std::pair{~0u, 0u};
}

// A block's vectors [start, end) that took the in-range path (their bits in `slow` clear)
// again, with the exact quotients, for the format's maximum relative error.
template <class Vecs, class Bits>
void RecheckBlock(const float* HWY_RESTRICT x, std::size_t start, std::size_t end,
                  std::uint32_t slow, const Bits& b, Vecs& v) {
  const hn::RebindToUnsigned<decltype(v.df)> du;
  const std::size_t N = hn::Lanes(v.df);
  for (std::size_t j = start; j < end; j += N) {
    if (slow >> ((j - start) / N) & 1) continue;
    const auto ab = hn::AndNot(hn::Set(du, 0x80000000u), hn::BitCast(du, hn::LoadU(v.df, x + j)));
    const auto ax = hn::BitCast(v.df, ab);
    // (A zero lane, in FusedClean's vectors, has a zero error: 0 / the smallest float.)
    v.AddExact(hn::Abs(hn::Sub(hn::BitCast(v.df, b.Round(ab)), ax)),
               hn::Max(ax, hn::Set(v.df, std::numeric_limits<float>::denorm_min())));
  }
  v.UpdateThreshold();
}

// The running vectors of K formats' in-range path (FusedGroup keeps them in registers):
// each format's largest rounding error, float sum of relative errors of the block so far,
// and the block's largest err * 1/|x|.
template <class DF, std::size_t K>
struct Running {
  using VF = hn::Vec<DF>;
  VF max_abs[K], fsum[K], bmax[K];

  // One vector (|x| = ax, as bits ab; iv = 1/|x|) inside format k's normal range.
  template <class Bits, class VU>
  HWY_INLINE void AddInRange(std::size_t k, const Bits& b, VU ab, VF ax, VF iv) {
    const DF df;
    const auto err = hn::Abs(hn::Sub(hn::BitCast(df, b.Round(ab)), ax));
    const auto rel = hn::Mul(err, iv);
    max_abs[k] = hn::Max(max_abs[k], err);
    fsum[k] = hn::Add(fsum[k], rel);
    bmax[k] = hn::Max(bmax[k], rel);
  }
};

// A vector outside some format's normal range, each format's way: the formats it is in
// range of take their in-range path; for each other format it sets `bit` in slow[k], and
// FormatVecs counts its lanes and takes their errors (exact quotients). kBelow: every
// lane is at most every format's in-range maximum (N(0, 1) data with a lane under
// float8's smallest normal, ReLU outputs with zeros: most such vectors), so the lanes
// below a format's smallest normal are rounded to its subnormal quantum (ties to even, 0
// to 0) and the rest by its normal rounding: RoundOutOfRange's result for such
// magnitudes, whose errors are the signed values' (formats that flush subnormals never
// come here: FusedGroup).
template <bool kBelow, std::size_t K, class DF, class Bits>
HWY_INLINE void EachFormat(Running<DF, K>& r, hn::Vec<DF> xv, hn::Vec<DF> iv, const Bits* b,
                           const FusedFormat* f, FormatVecs<DF>* v, std::uint32_t* slow,
                           std::uint32_t bit) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const auto ab = hn::AndNot(hn::Set(du, 0x80000000u), hn::BitCast(du, xv));
  const auto ax = hn::BitCast(df, ab);
  // (Zero lanes need Errors' masks: they have no relative error.)
  [[maybe_unused]] bool zeros = false;
  if constexpr (kBelow) zeros = !hn::AllFalse(du, hn::Eq(ab, hn::Zero(du)));
  HWY_UNROLL(4)
  for (std::size_t k = 0; k < K; ++k) {
    if (b[k].InRange(ab)) {
      ++v[k].in_range_vectors;
      r.AddInRange(k, b[k], ab, ax, iv);
      continue;
    }
    slow[k] |= bit;
    hn::Vec<DF> err, rel;
    if constexpr (kBelow) {
      const auto magic = hn::Set(df, f[k].rp->magic);
      const auto sub = hn::Sub(hn::Add(ax, magic), magic);
      const auto rv = hn::IfThenElse(hn::Lt(ax, hn::Set(df, f[k].rp->smallest_normal)), sub,
                                     hn::BitCast(df, b[k].Round(ab)));
      if (HWY_UNLIKELY(zeros))
        v[k].Errors(ax, rv, err, rel);
      else
        v[k].BelowErrors(ax, rv, err, rel);
    } else {
      if (v[k].AllOverflow(ax)) continue;  // (most vectors of wide data in float8)
      v[k].Errors(xv, RoundOutOfRange<true>(df, xv, ab, b[k].Round(ab), *f[k].rp), err, rel);
    }
    r.max_abs[k] = hn::Max(r.max_abs[k], err);
    r.fsum[k] = hn::Add(r.fsum[k], rel);
  }
}

// EachFormat for the vectors it does not take inline (infinities, NaN, magnitudes beyond
// a format's range: the rare case). Out of line, on a copy of the running vectors
// in memory: the formats' counters (FormatVecs, in memory) then never compete with the
// running vectors for registers in FusedGroup's loop.
template <std::size_t K, class DF, class Bits>
HWY_NOINLINE void MixedVector(Running<DF, K>& r, hn::Vec<DF> xv, hn::Vec<DF> iv, const Bits* b,
                              const FusedFormat* f, FormatVecs<DF>* v, std::uint32_t* slow,
                              std::uint32_t bit) {
  EachFormat<false, K>(r, xv, iv, b, f, v, slow, bit);
}

// The error summaries of K formats, each rounded to nearest-even with its fast path, over
// the chunk x[0, end) (whole vectors), in one pass: each vector is loaded once and rounded
// into every format, and a vector inside every format's normal range (the common case) is
// tested once. inv: 1/|x| from ChunkBaseF32. Each format's sums take the same terms in the
// same order as a pass of its own: the same numbers.
template <std::size_t K>
void FusedGroup(const float* HWY_RESTRICT x, const float* HWY_RESTRICT inv, std::size_t end,
                const FusedFormat* f) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Repartition<double, decltype(df)> dd;
  using Bits = NormalBits<true, decltype(du)>;
  const std::size_t N = hn::Lanes(df);
  const auto seq = std::make_index_sequence<K>();
  const auto b =
      ArrayOf<K, Bits>([&](std::size_t k) { return Bits(*f[k].rp, InRangeMax(*f[k].rp)); }, seq);
  auto v = ArrayOf<K, FormatVecs<decltype(df)>>(
      [&](std::size_t k) { return FormatVecs<decltype(df)>(*f[k].plan, *f[k].acc); }, seq);
  const auto [lo, span] = CommonRange(f, K);
  const auto all_lo = hn::Set(du, lo), all_span = hn::Set(du, span);
  const auto sign_bit = hn::Set(du, 0x80000000u);
  // Vectors whose lanes are all under the in-range paths' common maximum, some below a
  // format's smallest normal or zero, take EachFormat<true> inline; formats that flush
  // subnormals leave every such vector to MixedVector.
  bool below_ok = lo != ~0u;  // (~0u: no common range, CommonRange)
  for (std::size_t k = 0; k < K; ++k) below_ok = below_ok && !f[k].rp->flush_subnormals;
  const auto below_hi = hn::Set(du, lo + span);
  Running<decltype(df), K> r;
  HWY_UNROLL(4)
  for (std::size_t k = 0; k < K; ++k) r.max_abs[k] = r.fsum[k] = r.bmax[k] = hn::Zero(df);
  std::size_t all_in = 0;
  for (std::size_t i = 0; i < end;) {
    const std::size_t start = i, block_end = std::min(end, i + kBlock * N);
    std::uint32_t slow[K] = {};  // the block's vectors (bits) not in a format's range
    for (; i < block_end; i += N) {
      // The next chunk (where the caller has one) into L2 meanwhile, for ChunkBase.
      __builtin_prefetch(x + i + kMaxChunk, 0, 2);
      const auto xv = hn::LoadU(df, x + i);
      const auto ab = hn::AndNot(sign_bit, hn::BitCast(du, xv));
      const auto iv = hn::LoadU(df, inv + i);
      if (HWY_LIKELY(hn::AllFalse(du, hn::Gt(hn::Sub(ab, all_lo), all_span)))) {
        ++all_in;
        HWY_UNROLL(4)
        for (std::size_t k = 0; k < K; ++k) r.AddInRange(k, b[k], ab, hn::BitCast(df, ab), iv);
        continue;
      }
      if (HWY_LIKELY(below_ok && hn::AllFalse(du, hn::Gt(ab, below_hi)))) {
        EachFormat<true, K>(r, xv, iv, b.data(), f, v.data(), slow, 1u << ((i - start) / N));
        continue;
      }
      Running<decltype(df), K> copy = r;  // (r itself stays in registers)
      MixedVector<K>(copy, xv, iv, b.data(), f, v.data(), slow, 1u << ((i - start) / N));
      r = copy;
    }
    HWY_UNROLL(4)
    for (std::size_t k = 0; k < K; ++k) {
      if (HWY_UNLIKELY(v[k].MayBeatMax(r.bmax[k])))
        RecheckBlock(x, start, block_end, slow[k], b[k], v[k]);
      r.bmax[k] = hn::Zero(df);
      AddWide(df, dd, r.fsum[k], v[k].s_lo, v[k].s_hi);
      r.fsum[k] = hn::Zero(df);
    }
  }
  HWY_UNROLL(4)
  for (std::size_t k = 0; k < K; ++k) {
    v[k].max_abs = r.max_abs[k];
    v[k].in_range_vectors += all_in;
    v[k].Finish(*f[k].acc);
  }
}
#endif

#if HWY_TARGET != HWY_SCALAR
// What FusedClean's passes keep of each of their K formats: its normal-range rounding
// and error summary.
template <class DF, std::size_t K>
struct CleanFormats {
  using DU = hn::RebindToUnsigned<DF>;
  using Bits = NormalBits<true, DU>;
  std::array<Bits, K> b;
  std::array<FormatVecs<DF>, K> v;

  explicit CleanFormats(const FusedFormat* f)
      : b(ArrayOf<K, Bits>([&](std::size_t k) { return Bits(*f[k].rp, InRangeMax(*f[k].rp)); },
                           std::make_index_sequence<K>())),
        v(ArrayOf<K, FormatVecs<DF>>(
            [&](std::size_t k) { return FormatVecs<DF>(*f[k].plan, *f[k].acc); },
            std::make_index_sequence<K>())) {}
  // Adds format k's summary of `vectors` vectors, with the chunk's `zeros` lanes (they have
  // no relative error) among them, to its accumulator.
  void Finish(std::size_t k, const FusedFormat& f, std::size_t vectors, std::uint64_t zeros) {
    v[k].in_range_vectors = vectors;
    v[k].Finish(*f.acc);
    f.acc->rel_count -= zeros;
  }
};

// FusedClean's pass for formats whose nonzero lanes are all in their normal range
// (Pass::normal): the in-range path for every lane, zeros too (0 rounds to 0, and
// ChunkBase's 1/|x| is 0 there), with FusedGroup's running vectors and exact recheck of a
// block's maximum.
template <class DF, std::size_t K>
struct NormalPass : CleanFormats<DF, K> {
  using Base = CleanFormats<DF, K>;
  using Base::b, Base::v;
  Running<DF, K> r;

  explicit NormalPass(const FusedFormat* f) : Base(f) {
    HWY_UNROLL(4)
    for (std::size_t k = 0; k < K; ++k) r.max_abs[k] = r.fsum[k] = r.bmax[k] = hn::Zero(DF());
  }
  // One vector at x + i: |x| as bits ab and as floats ax.
  HWY_INLINE void Add(hn::Vec<hn::RebindToUnsigned<DF>> ab, hn::Vec<DF> ax,
                      const float* HWY_RESTRICT inv, std::size_t i) {
    const auto iv = hn::LoadU(DF(), inv + i);  // (0 where x is 0)
    HWY_UNROLL(4)
    for (std::size_t k = 0; k < K; ++k) r.AddInRange(k, b[k], ab, ax, iv);
  }
  HWY_INLINE void EndBlock(const float* HWY_RESTRICT x, std::size_t start, std::size_t end) {
    const DF df;
    HWY_UNROLL(4)
    for (std::size_t k = 0; k < K; ++k) {
      if (HWY_UNLIKELY(v[k].MayBeatMax(r.bmax[k]))) RecheckBlock(x, start, end, 0, b[k], v[k]);
      r.bmax[k] = hn::Zero(df);
      AddWide(df, hn::Repartition<double, DF>(), r.fsum[k], v[k].s_lo, v[k].s_hi);
      r.fsum[k] = hn::Zero(df);
    }
  }
  void Finish(const FusedFormat* f, std::size_t vectors, std::uint64_t zeros) {
    for (std::size_t k = 0; k < K; ++k) {
      v[k].max_abs = r.max_abs[k];
      Base::Finish(k, f[k], vectors, zeros);
    }
  }
};

// FusedClean's pass for formats with lanes under their smallest normal (Pass::below): in
// every vector those lanes are rounded to the format's subnormal quantum (as
// EachFormat<true>) and counted, and every lane's relative error is an exact quotient (0
// for a zero lane). Running: each format's largest rounding error and relative error, the
// float sum of relative errors of the block so far, and the lanes that rounded to 0 (zeros
// included), under the smallest normal (0 included) and past the precision-loss threshold.
template <class DF, std::size_t K>
struct BelowPass : CleanFormats<DF, K> {
  using Base = CleanFormats<DF, K>;
  using Base::b, Base::v;
  using DI = hn::RebindToSigned<DF>;
  using VF = hn::Vec<DF>;
  VF tiny, sn[K], magic[K], max_abs[K], max_rel[K], fsum[K];
  hn::Vec<DI> c_zero[K], c_small[K], c_lost[K];

  explicit BelowPass(const FusedFormat* f)
      : Base(f), tiny(hn::Set(DF(), std::numeric_limits<float>::denorm_min())) {
    const DF df;
    HWY_UNROLL(4)
    for (std::size_t k = 0; k < K; ++k) {
      sn[k] = hn::Set(df, f[k].rp->smallest_normal);
      magic[k] = hn::Set(df, f[k].rp->magic);
      max_abs[k] = fsum[k] = hn::Zero(df);
      max_rel[k] = v[k].max_rel;
      c_zero[k] = c_small[k] = c_lost[k] = hn::Zero(DI());
    }
  }
  // One vector: |x| as bits ab and as floats ax.
  HWY_INLINE void Add(hn::Vec<hn::RebindToUnsigned<DF>> ab, VF ax, const float*, std::size_t) {
    const DF df;
    const DI di;
    const auto divisor = hn::Max(ax, tiny);  // (a zero lane's error is 0: 0 / tiny)
    HWY_UNROLL(4)
    for (std::size_t k = 0; k < K; ++k) {
      const auto sub = hn::Sub(hn::Add(ax, magic[k]), magic[k]);
      const auto rv = hn::IfThenElse(hn::Lt(ax, sn[k]), sub, hn::BitCast(df, b[k].Round(ab)));
      const auto err = hn::Abs(hn::Sub(rv, ax));
      const auto rel = hn::Div(err, divisor);
      max_abs[k] = hn::Max(max_abs[k], err);
      max_rel[k] = hn::Max(max_rel[k], rel);
      fsum[k] = hn::Add(fsum[k], rel);
      c_zero[k] = CountIf(di, c_zero[k], hn::Eq(rv, hn::Zero(df)));
      c_small[k] = CountIf(di, c_small[k], hn::Lt(rv, sn[k]));
      c_lost[k] = CountIf(di, c_lost[k], hn::Gt(rel, v[k].loss));
    }
  }
  HWY_INLINE void EndBlock(const float*, std::size_t, std::size_t) {
    const DF df;
    HWY_UNROLL(4)
    for (std::size_t k = 0; k < K; ++k) {
      AddWide(df, hn::Repartition<double, DF>(), fsum[k], v[k].s_lo, v[k].s_hi);
      fsum[k] = hn::Zero(df);
    }
  }
  void Finish(const FusedFormat* f, std::size_t vectors, std::uint64_t zeros) {
    for (std::size_t k = 0; k < K; ++k) {
      v[k].max_abs = max_abs[k];
      v[k].max_rel = max_rel[k];
      v[k].c_unf = c_zero[k];  // the zeros are taken off below
      v[k].c_sub = hn::Sub(c_small[k], c_zero[k]);
      v[k].c_lost = c_lost[k];
      Base::Finish(k, f[k], vectors, zeros);
      f[k].acc->underflow -= zeros;
    }
  }
};

// The error summaries of K formats, as FusedGroup's, over a chunk whose values are all
// finite and at most every format's in-range maximum, without a test per vector: Clean is
// NormalPass or BelowPass. zeros: the chunk's zero lanes. (Both passes in one loop
// measured no faster, and slower where the exponent histogram is taken too: the registers
// run out.)
template <template <class, std::size_t> class Clean, std::size_t K>
void FusedClean(const float* HWY_RESTRICT x, const float* HWY_RESTRICT inv, std::size_t end,
                const FusedFormat* f, std::uint64_t zeros) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const std::size_t N = hn::Lanes(df);
  Clean<decltype(df), K> pass(f);
  const auto sign_bit = hn::Set(du, 0x80000000u);
  for (std::size_t i = 0; i < end;) {
    const std::size_t start = i, block_end = std::min(end, i + kBlock * N);
    for (; i < block_end; i += N) {
      // The next chunk (where the caller has one) into L2 meanwhile, for ChunkBase.
      __builtin_prefetch(x + i + kMaxChunk, 0, 2);
      const auto ab = hn::AndNot(sign_bit, hn::BitCast(du, hn::LoadU(df, x + i)));
      pass.Add(ab, hn::BitCast(df, ab), inv, i);
    }
    pass.EndBlock(x, start, block_end);
  }
  pass.Finish(f, end / N, zeros);
}

// How a format's errors are taken over a chunk: every vector in its normal range (or 0),
// some lanes under its smallest normal, or a test per vector (FusedGroup: NaN or infinity
// in the chunk, magnitudes beyond the in-range path's maximum, or subnormals flushed).
enum class Pass { normal, below, tested };

// A chunk whose values' density is about even near 0 holds about smallest_normal /
// min_abs_nonzero values under the smallest normal; with fewer than kFewBelow, testing
// each vector costs less than the below pass's work on all of them (a float16 chunk of
// N(0, 1) values with one such value: bench/README.md, session 28).
constexpr float kFewBelow = 16;

inline Pass PassFor(const FastParams& p, const ChunkRange& c) {
  if (!c.all_finite || !(c.max_abs <= InRangeMax(p))) return Pass::tested;
  if (c.min_abs_nonzero >= p.smallest_normal) return Pass::normal;
  if (p.flush_subnormals || c.min_abs_nonzero * kFewBelow > p.smallest_normal) return Pass::tested;
  return Pass::below;
}

// The formats f[0, count) (count <= kFusedGroup) taking `pass` over the chunk x[0, end).
inline void RunPass(Pass pass, const float* HWY_RESTRICT x, const float* HWY_RESTRICT inv,
                    std::size_t end, const FusedFormat* f, std::size_t count, std::uint64_t zeros) {
  const auto run = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    if (pass == Pass::normal)
      FusedClean<NormalPass, K>(x, inv, end, f, zeros);
    else if (pass == Pass::below)
      FusedClean<BelowPass, K>(x, inv, end, f, zeros);
    else
      FusedGroup<K>(x, inv, end, f);
  };
  if (count == 1)
    run(std::integral_constant<std::size_t, 1>());
  else if (count == 2)
    run(std::integral_constant<std::size_t, 2>());
  else
    run(std::integral_constant<std::size_t, 3>());
}
#endif

// The error summaries of the formats f[0, count) over the chunk x[0, n), whose whole
// vectors ChunkBase summarised as `range`: each format's pass is chosen from the chunk's
// range (PassFor), and the formats taking the same pass share it, kFusedGroup at a time.
// The pass depends on the format and the chunk alone, so each format's numbers are those
// of a run with that format alone.
// Processes the first n - n % Lanes elements; returns how many it did.
std::size_t ChunkFusedF32(const float* HWY_RESTRICT x, const float* HWY_RESTRICT inv, std::size_t n,
                          const FusedFormat* f, std::size_t count, const ChunkRange& range) {
#if HWY_TARGET == HWY_SCALAR
  (void)x, (void)inv, (void)n, (void)f, (void)count, (void)range;
  return 0;
#else
  const std::size_t end = n - n % hn::Lanes(hn::ScalableTag<float>());
  for (const Pass pass : {Pass::normal, Pass::below, Pass::tested}) {
    FusedFormat group[kFusedGroup];
    std::size_t size = 0;
    for (std::size_t k = 0; k < count; ++k) {
      if (PassFor(*f[k].rp, range) != pass) continue;
      group[size++] = f[k];
      if (size == kFusedGroup) {
        RunPass(pass, x, inv, end, group, size, range.zeros);
        size = 0;
      }
    }
    if (size) RunPass(pass, x, inv, end, group, size, range.zeros);
  }
  return end;
#endif
}

// x: the chunk; r: x rounded into the format. For formats without a fast path.
std::size_t ChunkFormatF32(const float* HWY_RESTRICT x, const float* HWY_RESTRICT r, std::size_t n,
                           const FormatPlan& p, FormatAcc& a) {
#if HWY_TARGET == HWY_SCALAR
  (void)x, (void)r, (void)n, (void)p, (void)a;
  return 0;
#else
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const std::size_t end = n - n % N;
  FormatVecs<decltype(df)> v(p, a);
  for (std::size_t i = 0; i < end;) {
    const std::size_t block_end = std::min(end, i + kBlock * N);
    for (; i < block_end; i += N) v.Add(hn::LoadU(df, x + i), hn::LoadU(df, r + i));
    v.Flush();
  }
  v.Finish(a);
  return end;
#endif
}

}  // namespace fpguard::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::detail {

HWY_EXPORT(ChunkBaseF32);
HWY_EXPORT(ChunkFusedF32);
HWY_EXPORT(ChunkFormatF32);

Moments chunk_all(std::span<const float> x, BaseAcc& a, std::span<const FusedFormat> fmts,
                  std::span<float> inv, Distribution d) {
  FPG_CHECK(inv.size() >= x.size());
  Moments m;
  ChunkRange range;
  const std::size_t done = HWY_DYNAMIC_DISPATCH(ChunkBaseF32)(
      x.data(), x.size(), a, m, fmts.empty() ? nullptr : inv.data(), d, range);
  // The last few elements, or all of them on a target without vectors (HWY_SCALAR).
  const std::span<const float> tail = x.subspan(done);
  if (!fmts.empty()) HWY_DYNAMIC_DISPATCH(ChunkFusedF32)
  (x.data(), inv.data(), done, fmts.data(), fmts.size(), range);
  float r[64];
  for (std::size_t at = 0; at < tail.size(); at += std::size(r)) {
    const std::span<const float> part = tail.subspan(at, std::min(std::size(r), tail.size() - at));
    for (const FusedFormat& f : fmts) {
      round_fast(part.data(), r, part.size(), *f.rp);
      chunk_format(part, std::span<const float>(r, part.size()), *f.plan, *f.acc);
    }
  }
  return tail.empty() ? m : merge_moments(m, chunk_base(tail, a));
}

Moments merge_moments(const Moments& a, const Moments& b) {
  if (a.n == 0) return b;
  if (b.n == 0) return a;
  Moments r;
  r.n = a.n + b.n;
  const double delta = b.mean - a.mean;
  const double nb_over_n = static_cast<double>(b.n) / static_cast<double>(r.n);
  r.mean = a.mean + delta * nb_over_n;
  r.m2 = a.m2 + b.m2 + delta * delta * static_cast<double>(a.n) * nb_over_n;
  return r;
}

template <>
void chunk_format_fast<float>(std::span<const float> x, std::span<const float> r,
                              const FormatPlan& p, FormatAcc& a) {
  const std::size_t done = HWY_DYNAMIC_DISPATCH(ChunkFormatF32)(x.data(), r.data(), x.size(), p, a);
  chunk_format(x.subspan(done), r.subspan(done), p, a);
}

template <>
void chunk_format_fast<double>(std::span<const double> x, std::span<const double> r,
                               const FormatPlan& p, FormatAcc& a) {
  chunk_format(x, r, p, a);
}

}  // namespace fpguard::detail
#endif
