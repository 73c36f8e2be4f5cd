// Highway kernels for stats() on float32 chunks (see stats/kernels.hpp for the scalar
// versions, which serve float64 input and the last few elements of a chunk). Compiled
// once per SIMD target and chosen at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stats/stats_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "fpguard/error.hpp"
#include "stats/kernels.hpp"
// Per-target inline kernels: included once per target by foreach_target.
#include "round/round_simd-inl.h"

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
// Sums float lanes into two double accumulators.
template <class DF, class DD>
HWY_INLINE void AddWide(DF df, DD dd, hn::Vec<DF> v, hn::Vec<DD>& lo, hn::Vec<DD>& hi) {
  lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(v)));
  hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(hn::Half<DF>(), v)));
  (void)df;
}
#endif

// Processes the first n - n % Lanes elements; returns how many it did. (The single-lane
// HWY_SCALAR target does nothing: the scalar kernels take the whole chunk.)
std::size_t ChunkBaseF32(const float* HWY_RESTRICT x, std::size_t n, BaseAcc& a, Moments& m) {
#if HWY_TARGET == HWY_SCALAR
  (void)x, (void)n, (void)a, (void)m;
  return 0;
#else
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Repartition<double, decltype(df)> dd;
  const std::size_t N = hn::Lanes(df);
  const std::size_t end = n - n % N;
  if (end == 0) return 0;
  const auto inf = hn::Set(df, std::numeric_limits<float>::infinity());
  const auto fmax = hn::Set(df, std::numeric_limits<float>::max());
  const auto zero = hn::Zero(df);
  auto lo = inf, hi = hn::Neg(inf), minabs = inf;
  auto c_fin = hn::Zero(di), c_nan = c_fin, c_pinf = c_fin, c_ninf = c_fin, c_zero = c_fin;
  auto s_lo = hn::Zero(dd), s_hi = s_lo;
  for (std::size_t i = 0; i < end; i += N) {
    const auto v = hn::LoadU(df, x + i);
    const auto av = hn::Abs(v);
    const auto finite = hn::Le(av, fmax);
    const auto is_zero = hn::Eq(v, zero);
    c_zero = Count(di, c_zero, is_zero);
    if (HWY_LIKELY(hn::AllTrue(df, finite))) {
      minabs = hn::Min(minabs, hn::IfThenElse(is_zero, inf, av));
      lo = hn::Min(lo, v);
      hi = hn::Max(hi, v);
      AddWide(df, dd, v, s_lo, s_hi);
      continue;
    }
    // Rare: a vector with NaN or inf lanes.
    c_fin = Count(di, c_fin, hn::Not(finite));
    c_nan = Count(di, c_nan, hn::IsNaN(v));  // (Ne is an ordered compare: false for NaN)
    c_pinf = Count(di, c_pinf, hn::Eq(v, inf));
    c_ninf = Count(di, c_ninf, hn::Eq(v, hn::Neg(inf)));
    // (x86 min/max return the second operand when one is NaN: keep NaN out of them.)
    minabs = hn::Min(minabs, hn::IfThenElse(hn::AndNot(is_zero, finite), av, inf));
    lo = hn::Min(lo, hn::IfThenElse(finite, v, inf));
    hi = hn::Max(hi, hn::IfThenElse(finite, v, hn::Neg(inf)));
    AddWide(df, dd, hn::IfThenElseZero(finite, v), s_lo, s_hi);
  }
  // c_fin counted the non-finite lanes.
  c_fin = hn::Sub(hn::Set(di, static_cast<std::int32_t>(end / N)), c_fin);
  const std::uint64_t finite = Total(di, c_fin);
  a.finite += finite;
  a.nan += Total(di, c_nan);
  a.posinf += Total(di, c_pinf);
  a.neginf += Total(di, c_ninf);
  const std::uint64_t zeros = Total(di, c_zero);
  a.zeros += zeros;
  a.min = std::min(a.min, static_cast<double>(hn::GetLane(hn::MinOfLanes(df, lo))));
  a.max = std::max(a.max, static_cast<double>(hn::GetLane(hn::MaxOfLanes(df, hi))));
  a.min_abs_nonzero =
      std::min(a.min_abs_nonzero, static_cast<double>(hn::GetLane(hn::MinOfLanes(df, minabs))));

  // Exponent histogram from the exponent field; field 0 holds zeros and subnormals,
  // which are rare, so they are sorted out only when present.
  std::uint32_t h[4][256] = {};
  std::size_t field0 = 0;
  for (std::size_t i = 0; i + 4 <= end; i += 4) {
    std::uint32_t b[4];
    std::memcpy(b, x + i, sizeof b);
    ++h[0][(b[0] >> 23) & 0xff];
    ++h[1][(b[1] >> 23) & 0xff];
    ++h[2][(b[2] >> 23) & 0xff];
    ++h[3][(b[3] >> 23) & 0xff];
  }
  for (int e = 1; e < 255; ++e) {
    const std::uint32_t c = h[0][e] + h[1][e] + h[2][e] + h[3][e];
    if (c) a.hist[static_cast<std::size_t>(e - 127 - kHistOffset)] += c;
  }
  field0 = h[0][0] + h[1][0] + h[2][0] + h[3][0];
  if (field0 > zeros) {
    for (std::size_t i = 0; i < end; ++i) {
      const float av = std::fabs(x[i]);
      if (av != 0 && av < std::numeric_limits<float>::min())
        ++a.hist[static_cast<std::size_t>(floor_log2(av) - kHistOffset)];
    }
  }

  m.n = finite;
  if (finite == 0) return end;
  m.mean = (hn::GetLane(hn::SumOfLanes(dd, s_lo)) + hn::GetLane(hn::SumOfLanes(dd, s_hi))) /
           static_cast<double>(finite);
  const auto mean = hn::Set(dd, m.mean);
  auto m2_lo = hn::Zero(dd), m2_hi = m2_lo;
  for (std::size_t i = 0; i < end; i += N) {
    const auto v = hn::LoadU(df, x + i);
    const auto finite_mask = hn::Le(hn::Abs(v), fmax);
    const auto vf = hn::IfThenElse(finite_mask, v, hn::Set(df, static_cast<float>(m.mean)));
    // Non-finite lanes are replaced by (float)mean; their tiny deviation is removed below.
    const auto d_lo = hn::Sub(hn::PromoteTo(dd, hn::LowerHalf(vf)), mean);
    const auto d_hi = hn::Sub(hn::PromoteTo(dd, hn::UpperHalf(hn::Half<decltype(df)>(), vf)), mean);
    m2_lo = hn::MulAdd(d_lo, d_lo, m2_lo);
    m2_hi = hn::MulAdd(d_hi, d_hi, m2_hi);
  }
  const double fill = static_cast<double>(static_cast<float>(m.mean)) - m.mean;
  m.m2 = hn::GetLane(hn::SumOfLanes(dd, m2_lo)) + hn::GetLane(hn::SumOfLanes(dd, m2_hi)) -
         static_cast<double>(end - finite) * fill * fill;
  return end;
#endif
}

// The per-format error summary of a chunk, in vector registers; `Add` takes one vector
// of inputs x and their rounded values r, `AddInRange` one whose lanes are all finite
// normal values of the format within its range (no overflow, underflow or subnormal
// can apply: the common case, with less to do).
template <class DF>
struct FormatVecs {
  using DI = hn::RebindToSigned<DF>;
  using DD = hn::Repartition<double, DF>;
  using VF = hn::Vec<DF>;
  DF df;
  DI di;
  DD dd;
  VF fmax, limit, inclusive, smallest_normal, loss, zero;
  VF max_abs, max_rel;
  hn::Vec<DD> s_lo, s_hi;
  hn::Vec<DI> c_ovf, c_unf, c_sub, c_lost, c_rel;
  std::size_t in_range_vectors = 0;

  explicit FormatVecs(const FormatPlan& p)
      : fmax(hn::Set(df, std::numeric_limits<float>::max())),
        limit(hn::Set(df, static_cast<float>(p.overflow.value))),
        inclusive(hn::Set(df, p.overflow.inclusive ? 1.0f : 0.0f)),
        smallest_normal(hn::Set(df, static_cast<float>(p.smallest_normal))),
        loss(hn::Set(df, static_cast<float>(p.precision_loss_rel))),
        zero(hn::Zero(df)),
        max_abs(zero),
        max_rel(zero),
        s_lo(hn::Zero(dd)),
        s_hi(hn::Zero(dd)),
        c_ovf(hn::Zero(di)),
        c_unf(c_ovf),
        c_sub(c_ovf),
        c_lost(c_ovf),
        c_rel(c_ovf) {}

  HWY_INLINE void AddInRange(VF xv, VF rv) {
    const auto err = hn::Abs(hn::Sub(rv, xv));
    max_abs = hn::Max(max_abs, err);
    const auto rel = hn::Div(err, hn::Abs(xv));
    max_rel = hn::Max(max_rel, rel);
    AddWide(df, dd, rel, s_lo, s_hi);
    c_lost = Count(di, c_lost, hn::Gt(rel, loss));
    ++in_range_vectors;
  }

  HWY_INLINE void Add(VF xv, VF rv) {
    const auto ax = hn::Abs(xv), ar = hn::Abs(rv);
    const auto finite = hn::Le(ax, fmax);
    const auto beyond =
        hn::Or(hn::Gt(ax, limit), hn::And(hn::Eq(ax, limit), hn::Gt(inclusive, zero)));
    const auto ovf = hn::And(finite, hn::Or(beyond, hn::Not(hn::Le(ar, fmax))));
    c_ovf = Count(di, c_ovf, ovf);
    const auto valid = hn::AndNot(ovf, finite);
    const auto err = hn::IfThenElseZero(valid, hn::Abs(hn::Sub(rv, xv)));
    max_abs = hn::Max(max_abs, err);
    const auto nz = hn::And(valid, hn::Ne(ax, zero));
    const auto rel = hn::IfThenElseZero(nz, hn::Div(err, ax));
    max_rel = hn::Max(max_rel, rel);
    AddWide(df, dd, rel, s_lo, s_hi);
    c_rel = Count(di, c_rel, nz);
    const auto r_zero = hn::Eq(ar, zero);
    c_unf = Count(di, c_unf, hn::And(nz, r_zero));
    c_sub = Count(di, c_sub, hn::And(hn::AndNot(r_zero, nz), hn::Lt(ar, smallest_normal)));
    c_lost = Count(di, c_lost, hn::Gt(rel, loss));
  }

  void Finish(FormatAcc& a) const {
    a.overflow += Total(di, c_ovf);
    a.underflow += Total(di, c_unf);
    a.subnormal += Total(di, c_sub);
    a.precision_loss += Total(di, c_lost);
    a.rel_count += Total(di, c_rel) + in_range_vectors * hn::Lanes(df);
    a.max_abs_error =
        std::max(a.max_abs_error, static_cast<double>(hn::GetLane(hn::MaxOfLanes(df, max_abs))));
    a.max_rel_error =
        std::max(a.max_rel_error, static_cast<double>(hn::GetLane(hn::MaxOfLanes(df, max_rel))));
    a.sum_rel_error +=
        hn::GetLane(hn::SumOfLanes(dd, s_lo)) + hn::GetLane(hn::SumOfLanes(dd, s_hi));
  }
};

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
  FormatVecs<decltype(df)> v(p);
  for (std::size_t i = 0; i < end; i += N) v.Add(hn::LoadU(df, x + i), hn::LoadU(df, r + i));
  v.Finish(a);
  return end;
#endif
}

// Rounds the chunk into the format (nearest-even, fast path) and summarises the errors
// in the same pass, without storing the rounded values.
std::size_t ChunkFusedF32(const float* HWY_RESTRICT x, std::size_t n, const FastParams& rp,
                          const FormatPlan& p, FormatAcc& a) {
#if HWY_TARGET == HWY_SCALAR
  (void)x, (void)n, (void)rp, (void)p, (void)a;
  return 0;
#else
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  const std::size_t end = n - n % N;
  FormatVecs<decltype(df)> v(p);
  for (std::size_t i = 0; i < end; i += N) {
    const auto xv = hn::LoadU(df, x + i);
    bool in_range;
    const auto rv = RoundVec<true>(df, xv, rp, in_range);
    if (HWY_LIKELY(in_range))
      v.AddInRange(xv, rv);
    else
      v.Add(xv, rv);
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
HWY_EXPORT(ChunkFormatF32);
HWY_EXPORT(ChunkFusedF32);

void chunk_format_fused(std::span<const float> x, const FastParams& rp, const FormatPlan& p,
                        FormatAcc& a) {
  const std::size_t done = HWY_DYNAMIC_DISPATCH(ChunkFusedF32)(x.data(), x.size(), rp, p, a);
  const std::span<const float> tail = x.subspan(done);
  float r[64];
  FPG_CHECK(tail.size() <= 64);
  round_fast(tail.data(), r, tail.size(), rp);
  chunk_format(tail, std::span<const float>(r, tail.size()), p, a);
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
Moments chunk_base_fast<float>(std::span<const float> x, BaseAcc& a) {
  Moments m;
  const std::size_t done = HWY_DYNAMIC_DISPATCH(ChunkBaseF32)(x.data(), x.size(), a, m);
  return merge_moments(m, chunk_base(x.subspan(done), a));
}

template <>
void chunk_format_fast<float>(std::span<const float> x, std::span<const float> r,
                              const FormatPlan& p, FormatAcc& a) {
  const std::size_t done = HWY_DYNAMIC_DISPATCH(ChunkFormatF32)(x.data(), r.data(), x.size(), p, a);
  chunk_format(x.subspan(done), r.subspan(done), p, a);
}

template <>
Moments chunk_base_fast<double>(std::span<const double> x, BaseAcc& a) {
  return chunk_base(x, a);
}
template <>
void chunk_format_fast<double>(std::span<const double> x, std::span<const double> r,
                               const FormatPlan& p, FormatAcc& a) {
  chunk_format(x, r, p, a);
}

}  // namespace fpguard::detail
#endif
