// Highway kernel of analysis::compare() on float32 carriers: whole vectors of finite
// values in SIMD (double accumulators for the sums), anything else lane by lane through
// compare_one; one or two runs against one reference in one pass. Compiled once per SIMD
// target and chosen at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "analysis/compare_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "analysis/compare.hpp"
// Per-target inline kernels: included once per target by foreach_target.
#include "stats/base_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fpguard::analysis::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Compares r with K runs' values vs[0..K) (K = 1 or 2) in one pass: the reference's part
// (its double value, the relative-error floor's reciprocal, the sum of its squares) is
// computed once for all of them. The runs share p.tiny and p.floor (checked); with a
// floor, the scale-relative error's reciprocal is computed once too. With kRef, r's own
// summary (counts, extremes, exponent histogram: what stats() reports) goes into *ref in
// the same pass, chunk by chunk.
template <std::size_t K, bool kRef>
std::size_t CompareK(const float* HWY_RESTRICT r, const float* const* vs, std::size_t n,
                     const CompareParams* ps, Comparison* cs, detail::BaseAcc* ref) {
#if HWY_TARGET == HWY_SCALAR
  (void)r, (void)vs, (void)n, (void)ps, (void)cs, (void)ref;
  return 0;
#else
  const hn::ScalableTag<float> df;
  const hn::Repartition<double, decltype(df)> dd;
  const hn::Half<decltype(df)> dh;
  using VD = hn::Vec<decltype(dd)>;
  const std::size_t N = hn::Lanes(df);
  const std::size_t end = n - n % N;
  if (end == 0) return 0;
  // The float compares below are exact only when max and tiny are floats (custom formats
  // whose limits are not take the scalar path).
  for (std::size_t k = 0; k < K; ++k)
    if (static_cast<double>(static_cast<float>(ps[k].max)) != ps[k].max ||
        static_cast<double>(static_cast<float>(ps[k].tiny)) != ps[k].tiny ||
        static_cast<double>(static_cast<float>(ps[k].floor)) != ps[k].floor ||
        ps[k].tiny != ps[0].tiny || ps[k].floor != ps[0].floor)
      return 0;
  const bool scaled = ps[0].floor > 0;
  const auto ffloor = hn::Set(df, static_cast<float>(ps[0].floor));
  const auto fone = hn::Set(df, 1.0f);
  const auto zero = hn::Zero(df);
  // Per run: its limits and its accumulators.
  struct Acc {
    hn::Vec<decltype(df)> fmax, ftiny;
    VD max_abs, max_rel, max_scaled, sum_rel, dot, vv, d2;
    std::uint64_t sat, under, sub;  // counted from the masks in scalar registers
  };
  Acc a[K];
  for (std::size_t k = 0; k < K; ++k) {
    a[k].fmax = hn::Set(df, static_cast<float>(ps[k].max));
    a[k].ftiny = hn::Set(df, static_cast<float>(ps[k].tiny));
    a[k].max_abs = a[k].max_rel = a[k].max_scaled = a[k].sum_rel = hn::Zero(dd);
    a[k].dot = a[k].vv = a[k].d2 = hn::Zero(dd);
    a[k].sat = a[k].under = a[k].sub = 0;
  }
  VD rr = hn::Zero(dd);
  std::size_t lanes_done = 0;

  // One half vector in double: x, its floors' reciprocals, and each run's y.
  auto half = [&](VD x, VD inv, VD inv_scale, const VD* y) {
    rr = hn::MulAdd(x, x, rr);
    for (std::size_t k = 0; k < K; ++k) {
      Acc& c = a[k];
      const auto d = hn::Sub(y[k], x);
      const auto ad = hn::Abs(d);
      const auto rel = hn::Mul(ad, inv);
      c.max_abs = hn::Max(c.max_abs, ad);
      c.max_rel = hn::Max(c.max_rel, rel);
      if (scaled) c.max_scaled = hn::Max(c.max_scaled, hn::Mul(ad, inv_scale));
      c.sum_rel = hn::Add(c.sum_rel, rel);
      c.dot = hn::MulAdd(x, y[k], c.dot);
      c.vv = hn::MulAdd(y[k], y[k], c.vv);
      c.d2 = hn::MulAdd(d, d, c.d2);
    }
  };
  for (std::size_t c0 = 0; c0 < end; c0 += detail::kMaxChunk) {
    const std::size_t c1 = std::min(end, c0 + detail::kMaxChunk);
    alignas(64) std::uint8_t exps[detail::kMaxChunk];
    [[maybe_unused]] detail::HWY_NAMESPACE::BaseVecs<decltype(df)> base(exps);
    for (std::size_t i = c0; i < c1; i += N) {
      const auto x = hn::LoadU(df, r + i);
      if constexpr (kRef) base.template Add<true>(x, hn::Abs(x), i - c0);
      hn::Vec<decltype(df)> y[K];
      auto ok = hn::IsFinite(x);
      for (std::size_t k = 0; k < K; ++k) {
        y[k] = hn::LoadU(df, vs[k] + i);
        ok = hn::And(ok, hn::IsFinite(y[k]));
      }
      if (!hn::AllTrue(df, ok)) {
        for (std::size_t k = 0; k < K; ++k)
          for (std::size_t j = 0; j < N; ++j) compare_one(r[i + j], vs[k][i + j], ps[k], cs[k]);
        continue;
      }
      const auto ax = hn::Abs(x);
      const auto xzero = hn::Eq(x, zero);
      for (std::size_t k = 0; k < K; ++k) {
        const auto ay = hn::Abs(y[k]);
        a[k].sat += hn::CountTrue(df, hn::And(hn::Gt(ax, a[k].fmax), hn::Ge(ay, a[k].fmax)));
        const auto yzero = hn::Eq(y[k], zero);
        a[k].under += hn::CountTrue(df, hn::AndNot(xzero, yzero));
        if (ps[k].subnormals)
          a[k].sub += hn::CountTrue(df, hn::AndNot(yzero, hn::Lt(ay, a[k].ftiny)));
      }
      const auto x_lo = hn::PromoteTo(dd, hn::LowerHalf(dh, x));
      const auto x_hi = hn::PromoteTo(dd, hn::UpperHalf(dh, x));
      VD y_lo[K], y_hi[K];
      for (std::size_t k = 0; k < K; ++k) {
        y_lo[k] = hn::PromoteTo(dd, hn::LowerHalf(dh, y[k]));
        y_hi[k] = hn::PromoteTo(dd, hn::UpperHalf(dh, y[k]));
      }
      // 1 / max(|x|, tiny) in float, as reciprocal_floor: one division of all lanes.
      const auto inv = hn::Div(fone, hn::Max(ax, a[0].ftiny));
      const auto inv_scale = scaled ? hn::Div(fone, hn::Max(ax, ffloor)) : zero;
      half(x_lo, hn::PromoteTo(dd, hn::LowerHalf(dh, inv)),
           hn::PromoteTo(dd, hn::LowerHalf(dh, inv_scale)), y_lo);
      half(x_hi, hn::PromoteTo(dd, hn::UpperHalf(dh, inv)),
           hn::PromoteTo(dd, hn::UpperHalf(dh, inv_scale)), y_hi);
      lanes_done += N;
    }
    if constexpr (kRef) base.template Finish<true>(r + c0, *ref);
  }
  for (std::size_t k = 0; k < K; ++k) {
    cs[k].overflow += a[k].sat;  // saturated
    cs[k].underflow += a[k].under;
    cs[k].subnormal += a[k].sub;
  }
  const double rr_sum = hn::GetLane(hn::SumOfLanes(dd, rr));
  for (std::size_t k = 0; k < K; ++k) {
    Comparison& c = cs[k];
    c.count += lanes_done;
    c.finite += lanes_done;
    c.max_abs = std::max(c.max_abs, hn::GetLane(hn::MaxOfLanes(dd, a[k].max_abs)));
    c.max_rel = std::max(c.max_rel, hn::GetLane(hn::MaxOfLanes(dd, a[k].max_rel)));
    c.max_scaled = std::max(c.max_scaled, hn::GetLane(hn::MaxOfLanes(dd, a[k].max_scaled)));
    c.sum_rel += hn::GetLane(hn::SumOfLanes(dd, a[k].sum_rel));
    c.dot += hn::GetLane(hn::SumOfLanes(dd, a[k].dot));
    c.vv += hn::GetLane(hn::SumOfLanes(dd, a[k].vv));
    c.rr += rr_sum;
    c.dd += hn::GetLane(hn::SumOfLanes(dd, a[k].d2));
  }
  return end;
#endif
}

std::size_t CompareF32(const float* HWY_RESTRICT r, const float* const* vs, std::size_t k,
                       std::size_t n, const CompareParams* ps, Comparison* cs,
                       detail::BaseAcc* ref) {
  if (ref) {
    if (k == 1) return CompareK<1, true>(r, vs, n, ps, cs, ref);
    if (k == 2) return CompareK<2, true>(r, vs, n, ps, cs, ref);
  } else {
    if (k == 1) return CompareK<1, false>(r, vs, n, ps, cs, ref);
    if (k == 2) return CompareK<2, false>(r, vs, n, ps, cs, ref);
  }
  return 0;
}

// A constant's scan (ConstantScan), over whole vectors of x: counts, extremes and sums of
// squares (compare.hpp). Vectors of finite values, the common case, take the short way;
// the sums of values that round to zero or past the range are added only in vectors that
// hold some (adding zeros changes no bit). Squares of floats are exact in double.
std::size_t ConstantScanF32(const float* HWY_RESTRICT x, std::size_t n, float zero_max,
                            float overflow_min, ScanCounts& c) {
#if HWY_TARGET == HWY_SCALAR
  (void)x, (void)n, (void)zero_max, (void)overflow_min, (void)c;
  return 0;
#else
  const hn::ScalableTag<float> df;
  const hn::Repartition<double, decltype(df)> dd;
  const hn::Half<decltype(df)> dh;
  using VF = hn::Vec<decltype(df)>;
  const std::size_t N = hn::Lanes(df);
  const std::size_t end = n - n % N;
  const auto fmax = hn::Set(df, std::numeric_limits<float>::max());
  const auto inf = hn::Set(df, std::numeric_limits<float>::infinity());
  const auto zero = hn::Zero(df);
  const auto under = hn::Set(df, zero_max), over = hn::Set(df, overflow_min);
  VF lo = inf, hi = hn::Neg(inf), nz = inf;
  hn::Vec<decltype(dd)> acc[3][2];
  for (auto& a : acc) a[0] = a[1] = hn::Zero(dd);
  auto add = [&](hn::Vec<decltype(dd)>* a, VF v) {
    const auto l = hn::PromoteTo(dd, hn::LowerHalf(dh, v));
    const auto h = hn::PromoteTo(dd, hn::UpperHalf(dh, v));
    a[0] = hn::MulAdd(l, l, a[0]);
    a[1] = hn::MulAdd(h, h, a[1]);
  };
  for (std::size_t i = 0; i < end; i += N) {
    auto v = hn::LoadU(df, x + i);
    auto a = hn::Abs(v);
    const auto finite = hn::Le(a, fmax);
    if (!hn::AllTrue(df, finite)) {
      c.nan += hn::CountTrue(df, hn::IsNaN(v));
      c.posinf += hn::CountTrue(df, hn::Eq(v, inf));
      c.neginf += hn::CountTrue(df, hn::Eq(v, hn::Neg(inf)));
      // Non-finite lanes as zeros: they add nothing and count nowhere below, but the
      // extremes must not see them.
      lo = hn::Min(lo, hn::IfThenElse(finite, v, inf));
      hi = hn::Max(hi, hn::IfThenElse(finite, v, hn::Neg(inf)));
      v = hn::IfThenElseZero(finite, v);
      a = hn::Abs(v);
    } else {
      lo = hn::Min(lo, v);
      hi = hn::Max(hi, v);
    }
    nz = hn::Min(nz, hn::IfThenElse(hn::Eq(a, zero), inf, a));
    add(acc[0], v);
    const auto flush = hn::And(hn::Le(a, under), hn::Ne(a, zero));
    if (!hn::AllFalse(df, flush)) {
      c.underflow += hn::CountTrue(df, flush);
      add(acc[1], hn::IfThenElseZero(flush, v));
    }
    const auto past = hn::Ge(a, over);
    if (!hn::AllFalse(df, past)) {
      c.overflow += hn::CountTrue(df, past);
      add(acc[2], hn::IfThenElseZero(past, v));
    }
  }
  c.min = std::min(c.min, static_cast<double>(hn::GetLane(hn::MinOfLanes(df, lo))));
  c.max = std::max(c.max, static_cast<double>(hn::GetLane(hn::MaxOfLanes(df, hi))));
  c.min_abs_nonzero =
      std::min(c.min_abs_nonzero, static_cast<double>(hn::GetLane(hn::MinOfLanes(df, nz))));
  for (std::size_t k = 0; k < 3; ++k)
    c.sums[k] +=
        hn::GetLane(hn::SumOfLanes(dd, acc[k][0])) + hn::GetLane(hn::SumOfLanes(dd, acc[k][1]));
  return end;
#endif
}

}  // namespace fpguard::analysis::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::analysis {

HWY_EXPORT(CompareF32);
HWY_EXPORT(ConstantScanF32);

std::size_t compare_simd(const float* r, const float* const* vs, std::size_t k, std::size_t n,
                         const CompareParams* ps, Comparison* cs, detail::BaseAcc* ref) {
  return HWY_DYNAMIC_DISPATCH(CompareF32)(r, vs, k, n, ps, cs, ref);
}

std::size_t constant_scan_simd(const float* x, std::size_t n, float zero_max, float overflow_min,
                               ScanCounts& c) {
  return HWY_DYNAMIC_DISPATCH(ConstantScanF32)(x, n, zero_max, overflow_min, c);
}

}  // namespace fpguard::analysis
#endif
