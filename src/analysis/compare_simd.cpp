// Highway kernel of analysis::compare() on float32 carriers: whole vectors of finite
// values in SIMD (double accumulators for the sums), anything else lane by lane through
// compare_one. Compiled once per SIMD target and chosen at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "analysis/compare_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "analysis/compare.hpp"

HWY_BEFORE_NAMESPACE();
namespace fpguard::analysis::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

std::size_t CompareF32(const float* HWY_RESTRICT r, const float* HWY_RESTRICT v, std::size_t n,
                       const CompareParams& p, Comparison& c) {
#if HWY_TARGET == HWY_SCALAR
  (void)r, (void)v, (void)n, (void)p, (void)c;
  return 0;
#else
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Repartition<double, decltype(df)> dd;
  const hn::Half<decltype(df)> dh;
  const std::size_t N = hn::Lanes(df);
  const std::size_t end = n - n % N;
  // The float compares below are exact only when max and tiny are floats (custom formats
  // whose limits are not take the scalar path).
  const bool exact = static_cast<double>(static_cast<float>(p.max)) == p.max &&
                     static_cast<double>(static_cast<float>(p.tiny)) == p.tiny;
  if (end == 0 || !exact) return 0;
  const auto fmax = hn::Set(df, static_cast<float>(p.max));
  const auto ftiny = hn::Set(df, static_cast<float>(p.tiny));
  const auto dtiny = hn::Set(dd, p.tiny);
  const auto zero = hn::Zero(df);
  auto max_abs = hn::Zero(dd), max_rel = max_abs, sum_rel = max_abs;
  auto dot = max_abs, vv = max_abs, rr = max_abs, d2 = max_abs;
  auto c_sat = hn::Zero(di), c_under = c_sat, c_sub = c_sat;
  std::size_t lanes_done = 0;
  // Counts a mask into int32 lanes (true lanes are -1).
  auto count = [&](hn::Vec<decltype(di)>& acc, auto m) {
    acc = hn::Sub(acc, hn::VecFromMask(di, hn::RebindMask(di, m)));
  };
  auto flush = [&] {
    c.overflow += static_cast<std::uint64_t>(hn::GetLane(hn::SumOfLanes(di, c_sat)));
    c.underflow += static_cast<std::uint64_t>(hn::GetLane(hn::SumOfLanes(di, c_under)));
    c.subnormal += static_cast<std::uint64_t>(hn::GetLane(hn::SumOfLanes(di, c_sub)));
    c_sat = c_under = c_sub = hn::Zero(di);
  };
  auto half = [&](hn::Vec<decltype(dd)> x, hn::Vec<decltype(dd)> y) {
    const auto d = hn::Sub(y, x);
    const auto ad = hn::Abs(d);
    const auto rel = hn::Div(ad, hn::Max(hn::Abs(x), dtiny));
    max_abs = hn::Max(max_abs, ad);
    max_rel = hn::Max(max_rel, rel);
    sum_rel = hn::Add(sum_rel, rel);
    dot = hn::Add(dot, hn::Mul(x, y));
    vv = hn::Add(vv, hn::Mul(y, y));
    rr = hn::Add(rr, hn::Mul(x, x));
    d2 = hn::Add(d2, hn::Mul(d, d));
  };
  for (std::size_t i = 0; i < end; i += N) {
    const auto x = hn::LoadU(df, r + i);
    const auto y = hn::LoadU(df, v + i);
    if (!hn::AllTrue(df, hn::And(hn::IsFinite(x), hn::IsFinite(y)))) {
      for (std::size_t k = 0; k < N; ++k) compare_one(r[i + k], v[i + k], p, c);
      continue;
    }
    const auto ax = hn::Abs(x), ay = hn::Abs(y);
    count(c_sat, hn::And(hn::Gt(ax, fmax), hn::Ge(ay, fmax)));  // saturated
    const auto yzero = hn::Eq(y, zero);
    count(c_under, hn::AndNot(hn::Eq(x, zero), yzero));
    if (p.subnormals) count(c_sub, hn::AndNot(yzero, hn::Lt(ay, ftiny)));
    half(hn::PromoteTo(dd, hn::LowerHalf(dh, x)), hn::PromoteTo(dd, hn::LowerHalf(dh, y)));
    half(hn::PromoteTo(dd, hn::UpperHalf(dh, x)), hn::PromoteTo(dd, hn::UpperHalf(dh, y)));
    lanes_done += N;
    if ((i / N) % (1u << 20) == (1u << 20) - 1) flush();  // int32 lane counts stay small
  }
  flush();
  c.count += lanes_done;
  c.finite += lanes_done;
  c.max_abs = std::max(c.max_abs, hn::GetLane(hn::MaxOfLanes(dd, max_abs)));
  c.max_rel = std::max(c.max_rel, hn::GetLane(hn::MaxOfLanes(dd, max_rel)));
  c.sum_rel += hn::GetLane(hn::SumOfLanes(dd, sum_rel));
  c.dot += hn::GetLane(hn::SumOfLanes(dd, dot));
  c.vv += hn::GetLane(hn::SumOfLanes(dd, vv));
  c.rr += hn::GetLane(hn::SumOfLanes(dd, rr));
  c.dd += hn::GetLane(hn::SumOfLanes(dd, d2));
  return end;
#endif
}

}  // namespace fpguard::analysis::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::analysis {

HWY_EXPORT(CompareF32);

std::size_t compare_simd(const float* r, const float* v, std::size_t n, const CompareParams& p,
                         Comparison& c) {
  return HWY_DYNAMIC_DISPATCH(CompareF32)(r, v, n, p, c);
}

}  // namespace fpguard::analysis
#endif
