// Highway implementation of the OCP MX fast path of round_scaled (round/fast.hpp): one
// block at a time, in registers. The block's largest magnitude from its bit patterns (an
// integer max), its power-of-two scale, then per vector x * 2^-e, RoundVec (the element
// rounding of round_fast, saturating), times 2^e, and the counts as mask popcounts. One
// pass over memory. Compiled once per SIMD target and chosen at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "round/scaled_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "round/fast.hpp"
#include "round/round_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fpguard::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

float Pow2(int k) {  // 2^k for k in [-149, 127], exactly
  return k >= -126 ? std::bit_cast<float>(static_cast<std::uint32_t>(k + 127) << 23)
                   : std::bit_cast<float>(std::uint32_t{1} << (k + 149));
}

// The values of a block as vectors: whole ones read in place, the tail through a zeroed
// buffer (zeros change no maximum) with `valid` lanes.
template <class D, class F>
HWY_INLINE void ForEachVec(D df, const float* x, size_t n, F&& f) {
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) f(hn::LoadU(df, x + i), i, N);
  if (i < n) {
    HWY_ALIGN float buf[hn::MaxLanes(df)] = {};
    std::memcpy(buf, x + i, (n - i) * sizeof(float));
    f(hn::Load(df, buf), i, n - i);
  }
}

template <class D>
HWY_INLINE void StoreN(D df, hn::Vec<D> v, float* y, size_t valid) {
  if (valid == hn::Lanes(df)) return hn::StoreU(v, df, y);
  HWY_ALIGN float buf[hn::MaxLanes(df)];
  hn::Store(v, df, buf);
  std::memcpy(y, buf, valid * sizeof(float));
}

void NanBlock(const float* x, float* y, size_t n, ScaledCounts& c) {
  for (size_t j = 0; j < n; ++j) {
    c.nan += !std::isfinite(x[j]);
    c.changed += !std::isnan(x[j]);
    y[j] = std::numeric_limits<float>::quiet_NaN();
  }
  ++c.nan_scales;
}

void Block(const float* x, float* y, size_t n, const MxParams& m, ScaledCounts& c) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const auto abs_mask = hn::Set(du, 0x7fffffffu);
  auto top = hn::Zero(du);
  ForEachVec(df, x, n, [&](auto v, size_t, size_t) {
    top = hn::Max(top, hn::And(hn::BitCast(du, v), abs_mask));
  });
  const std::uint32_t t = hn::GetLane(hn::MaxOfLanes(du, top));
  if (t >= 0x7f800000u) return NanBlock(x, y, n, c);
  int e = m.lo;
  if (t != 0) {
    const int ex =
        t >= 0x00800000u ? static_cast<int>(t >> 23) - 127 : std::ilogb(std::bit_cast<float>(t));
    e = std::clamp(ex - m.emax, m.lo, m.hi);
  }
  const auto inv = hn::Set(df, Pow2(-e)), scale = hn::Set(df, Pow2(e));
  const auto thr = hn::Set(df, m.thr);
  size_t sat = 0, under = 0, changed = 0;
  ForEachVec(df, x, n, [&](auto v, size_t at, size_t valid) {
    const auto q = hn::Mul(v, inv);
    const auto out = hn::Mul(RoundVec<true>(df, q, m.p), scale);
    const auto live = hn::FirstN(df, valid);
    const auto aq = hn::Abs(q);
    auto over = hn::Gt(aq, thr);
    if (m.inclusive) over = hn::Or(over, hn::Eq(aq, thr));
    const auto xb = hn::BitCast(du, v), yb = hn::BitCast(du, out);
    const auto nonzero_x = hn::RebindMask(df, hn::Ne(hn::And(xb, abs_mask), hn::Zero(du)));
    const auto zero_y = hn::RebindMask(df, hn::Eq(hn::And(yb, abs_mask), hn::Zero(du)));
    sat += hn::CountTrue(df, hn::And(over, live));
    under += hn::CountTrue(df, hn::And(hn::And(nonzero_x, zero_y), live));
    changed += hn::CountTrue(df, hn::And(hn::RebindMask(df, hn::Ne(xb, yb)), live));
    StoreN(df, out, y + at, valid);
  });
  c.saturated += sat;
  c.underflow += under;
  c.changed += changed;
  c.saturated_scales += sat != 0;
}

}  // namespace

void MxRowsImpl(const float* in, float* out, size_t rows, size_t n, size_t bs, const MxParams& m,
                ScaledCounts& c) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t at = 0; at < n; at += bs) {
      const size_t len = std::min(bs, n - at);
      Block(in + r * n + at, out + r * n + at, len, m, c);
      ++c.scales;
      c.values += len;
    }
}

}  // namespace fpguard::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::detail {

HWY_EXPORT(MxRowsImpl);

void mx_round_fast(const float* in, float* out, std::size_t rows, std::size_t n, std::size_t bs,
                   const MxParams& m, ScaledCounts& c) {
  HWY_DYNAMIC_DISPATCH(MxRowsImpl)(in, out, rows, n, bs, m, c);
}

}  // namespace fpguard::detail
#endif
