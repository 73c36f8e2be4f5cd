// Highway implementation of the fast paths of round_scaled (round/fast.hpp). OCP MX along
// a contiguous axis: one block at a time, in registers. The block's largest magnitude from
// its bit patterns (an integer max), its power-of-two scale, then per vector x * 2^-e,
// RoundVec (the element rounding of round_fast, saturating), times 2^e, and the counts as
// mask popcounts. One pass over memory. Whole blocks free of NaN and inf (a whole number
// of vectors: nearly all of them) take a leaner copy of that path: FiniteRounder
// (round_simd-inl.h) without range tests, the counts as popcounts; the other blocks round
// with MxRounder (RoundVec's arithmetic for finite lanes, no branch). Along a strided
// axis: one block per lane, the same arithmetic with per-lane scales. Two-level (NVFP4)
// blocks likewise, with their E4M3 block scale rounded by RoundVec. On request the same
// pass also counts what each block's scale did (BlockCounts: flushed, swamped, clipped
// values), for scaled_stats, which needs no values then (an output of nullptr is not
// written). Compiled once per SIMD target, chosen at run time.
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
  if (valid >= hn::Lanes(df)) return hn::StoreU(v, df, y);  // (valid <= Lanes: all of them)
  HWY_ALIGN float buf[hn::MaxLanes(df)];
  hn::Store(v, df, buf);
  std::memcpy(y, buf, valid * sizeof(float));
}

// Lanes [0, valid) from p, the rest zero (zeros change no maximum).
template <class D>
HWY_INLINE hn::Vec<D> LoadLive(D df, const float* p, size_t valid) {
  if (valid == hn::Lanes(df)) return hn::LoadU(df, p);
  HWY_ALIGN float buf[hn::MaxLanes(df)] = {};
  std::memcpy(buf, p, valid * sizeof(float));
  return hn::Load(df, buf);
}

// The largest magnitude bits of a block along a contiguous axis, in every lane.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> BlockTop(D df, const float* x, size_t n) {
  const hn::RebindToUnsigned<D> du;
  const auto abs_mask = hn::Set(du, 0x7fffffffu);
  auto top = hn::Zero(du);
  ForEachVec(df, x, n, [&](auto v, size_t, size_t) {
    top = hn::Max(top, hn::And(hn::BitCast(du, v), abs_mask));
  });
  return hn::MaxOfLanes(du, top);
}

// The same per lane for `valid` blocks along a strided axis: lane j's block is
// x[j + k * stride], k < len.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> ColumnsTop(D df, const float* x, size_t len,
                                                       size_t stride, size_t valid) {
  const hn::RebindToUnsigned<D> du;
  const auto abs_mask = hn::Set(du, 0x7fffffffu);
  auto top = hn::Zero(du);
  for (size_t k = 0; k < len; ++k)
    top = hn::Max(top, hn::And(hn::BitCast(du, LoadLive(df, x + k * stride, valid)), abs_mask));
  return top;
}

// Counts of one block run, as ScaledCounts' per-value fields.
struct ValueCounts {
  size_t saturated = 0, underflow = 0, changed = 0, nan = 0;
  void add_to(ScaledCounts& c) const {
    c.saturated += saturated;
    c.underflow += underflow;
    c.changed += changed;
    c.nan += nan;
  }
};

// Block counts (BlockCounts) per lane: of the values on lanes `ok` (live lanes of finite
// blocks), the non-zero ones and those that became zero (lane counts as int32 vectors), and
// those clipped past `top` (the largest magnitude each lane's block decodes to) into
// clipped[lane]. A clipped value lies beyond top / (1 - loss): lanes at most `near` times
// top (a bound just below that, so that float32's rounding of the product cannot exclude
// one, see ClipFactor) are not clipped, which leaves the block maxima that rounded down
// (about a quarter of the vectors in OCP MX blocks) out of the scalar test. The rare rest
// (a value beyond it, or a top too small for the product to be exact) takes the test in
// double, as scaled_stats' walk does it. That bound per lane (Cut) is set up once per block
// or vector of blocks: one compare per vector then picks the lanes for the test.
template <class D>
struct LaneTally {
  using VI = hn::Vec<hn::RebindToSigned<D>>;
  VI nonzero, zeroed;
  hn::Vec<D> near;
  double loss;
  std::uint32_t clipped[hn::MaxLanes(D())] = {};
  LaneTally(D df, double half_bits_lost)
      : nonzero(hn::Zero(hn::RebindToSigned<D>())),
        zeroed(hn::Zero(hn::RebindToSigned<D>())),
        near(hn::Set(df, ClipFactor(half_bits_lost))),
        loss(half_bits_lost) {}

  // A float32 factor below 1 / (1 - loss) by more than float32's and double's rounding
  // can make up: |v| <= fl(top * factor) (top normal) implies |v| - top <= loss * |v| in
  // double, i.e. not clipped_past. 1 (no lane excluded) when loss is not in (0, 1).
  static float ClipFactor(double loss) {
    if (!(loss > 0 && loss < 1)) return 1.0f;
    const float f = static_cast<float>(1 / (1 - loss) * (1 - 0x1p-20));
    return std::nextafter(f, 0.0f);
  }

  // Per lane, the magnitude past which a value of the lane's block (top: its decoded
  // maximum) may be clipped: top, or top * near where that product is exact (top at least
  // 2^-100); +inf on lanes not `ok` or of a zero top (no value clipped).
  template <class V = hn::Vec<D>>
  HWY_INLINE V Cut(D df, V top, hn::Mask<D> ok) const {
    const auto cut =
        hn::IfThenElse(hn::Lt(top, hn::Set(df, 0x1p-100f)), top, hn::Max(top, hn::Mul(top, near)));
    const auto any = hn::And(hn::Gt(top, hn::Zero(df)), ok);
    return hn::IfThenElse(any, cut, hn::Set(df, std::numeric_limits<float>::infinity()));
  }

  // `cut`: Cut(df, top, ok') for lanes ok' holding at least the lanes `ok`.
  template <class V = hn::Vec<D>>
  HWY_INLINE void Add(D df, V v, V out, V top, V cut, hn::Mask<D> ok) {
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto abs_mask = hn::Set(du, 0x7fffffffu);
    const auto nz = hn::And(
        hn::RebindMask(df, hn::Ne(hn::And(hn::BitCast(du, v), abs_mask), hn::Zero(du))), ok);
    const auto zero_y =
        hn::RebindMask(df, hn::Eq(hn::And(hn::BitCast(du, out), abs_mask), hn::Zero(du)));
    nonzero = hn::Sub(nonzero, hn::BitCast(di, hn::VecFromMask(df, nz)));
    zeroed = hn::Sub(zeroed, hn::BitCast(di, hn::VecFromMask(df, hn::And(nz, zero_y))));
    const auto candidate = hn::And(hn::Gt(hn::Abs(v), cut), ok);
    if (HWY_LIKELY(hn::AllFalse(df, candidate))) return;
    HWY_ALIGN float xs[hn::MaxLanes(df)], tops[hn::MaxLanes(df)];
    HWY_ALIGN std::int32_t is[hn::MaxLanes(df)];
    hn::Store(v, df, xs);
    hn::Store(top, df, tops);
    hn::Store(hn::BitCast(di, hn::VecFromMask(df, candidate)), di, is);
    for (size_t j = 0; j < hn::Lanes(df); ++j)
      if (is[j])
        clipped[j] += clipped_past(std::abs(static_cast<double>(xs[j])), tops[j], loss) ? 1 : 0;
  }

  // Lanes [0, blocks) as that many blocks, or (blocks == 0) every lane as one block.
  void AddTo(D df, BlockCounts& b, size_t blocks) const {
    const hn::RebindToSigned<D> di;
    HWY_ALIGN std::int32_t nz[hn::MaxLanes(df)], zd[hn::MaxLanes(df)];
    hn::Store(nonzero, di, nz);
    hn::Store(zeroed, di, zd);
    if (blocks > 0) {
      for (size_t j = 0; j < blocks; ++j)
        b.add_block(static_cast<std::uint64_t>(nz[j]), static_cast<std::uint64_t>(zd[j]),
                    clipped[j]);
      return;
    }
    std::uint64_t n = 0, z = 0, c = 0;
    for (size_t j = 0; j < hn::Lanes(df); ++j) {
      n += static_cast<std::uint64_t>(nz[j]);
      z += static_cast<std::uint64_t>(zd[j]);
      c += clipped[j];
    }
    b.add_block(n, z, c);
  }
};

// Adds what quantizing v into out did on the `live` lanes; `over`: the live lanes whose
// value saturated. A NaN staying NaN is no change.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void CountValues(D df, V v, V out, hn::Mask<D> over, hn::Mask<D> live, ValueCounts& n) {
  const hn::RebindToUnsigned<D> du;
  const auto abs_mask = hn::Set(du, 0x7fffffffu);
  const auto xb = hn::BitCast(du, v), yb = hn::BitCast(du, out);
  const auto nonzero_x = hn::RebindMask(df, hn::Ne(hn::And(xb, abs_mask), hn::Zero(du)));
  const auto zero_y = hn::RebindMask(df, hn::Eq(hn::And(yb, abs_mask), hn::Zero(du)));
  n.saturated += hn::CountTrue(df, over);
  n.underflow += hn::CountTrue(df, hn::And(hn::And(nonzero_x, zero_y), live));
  const auto differs = hn::AndNot(hn::IsNaN(v), hn::RebindMask(df, hn::Ne(xb, yb)));
  n.changed += hn::CountTrue(df, hn::And(differs, live));
  n.nan += hn::CountTrue(df, hn::AndNot(hn::IsFinite(v), live));
}

void NanBlock(const float* x, float* y, size_t n, ScaledCounts& c) {
  for (size_t j = 0; j < n; ++j) {
    c.nan += !std::isfinite(x[j]);
    c.changed += !std::isnan(x[j]);
    if (y) y[j] = std::numeric_limits<float>::quiet_NaN();
  }
  ++c.nan_scales;
}

// RoundVec<true> of finite lanes, with its constants set up once (per block, or per
// vector of blocks side by side) and without its branch to the out-of-range sequence: an OCP
// MX block scaled by its scale holds zeros (a ReLU's half of them), subnormals and saturating
// values often enough that the branch mispredicts. The same blends as RoundOutOfRange less
// its inf/NaN ones (an MX block holding inf or NaN decodes to NaN whatever its elements
// round to), so the same bits.
template <class D>
struct MxRounder {
  using V = hn::Vec<D>;
  NormalBits<true, hn::RebindToUnsigned<D>> bits;
  V min_normal, magic, max, overflow;
  bool flush, no_negative_zero, overflow_nan;
  MxRounder(D df, const FastParams& p)
      : bits(p, p.max),
        min_normal(hn::Set(df, p.smallest_normal)),
        magic(hn::Set(df, p.magic)),
        max(hn::Set(df, p.max)),
        overflow(hn::Set(df, p.overflow_value)),
        flush(p.flush_subnormals),
        no_negative_zero(p.no_negative_zero),
        overflow_nan(std::isnan(p.overflow_value)) {}

  HWY_INLINE V Round(D df, V v) const {
    const hn::RebindToUnsigned<D> du;
    const auto sign_bit = hn::Set(du, 0x80000000u);
    const auto a = hn::AndNot(sign_bit, hn::BitCast(du, v));
    const auto af = hn::BitCast(df, a);
    // Below the normal range the FPU rounds to the quantum (ties-to-even).
    auto res = hn::IfThenElse(hn::Lt(af, min_normal), hn::Sub(hn::Add(af, magic), magic),
                              hn::BitCast(df, bits.Round(a)));
    if (flush) res = hn::IfThenZeroElse(hn::Lt(res, min_normal), res);
    res = hn::IfThenElse(hn::Gt(res, max), overflow, res);
    // Sign: none on NaN (canonical +qNaN), none on zero where the format has no -0.
    auto sign = hn::And(hn::BitCast(du, v), sign_bit);
    if (overflow_nan) sign = hn::IfThenZeroElse(hn::RebindMask(du, hn::IsNaN(res)), sign);
    if (no_negative_zero)
      sign = hn::IfThenZeroElse(hn::RebindMask(du, hn::Eq(res, hn::Zero(df))), sign);
    return hn::BitCast(df, hn::Or(hn::BitCast(du, res), sign));
  }
  // x * 2^-e rounded into the element format (saturating) times 2^e: inv = 2^-e, scale = 2^e.
  HWY_INLINE V Value(D df, V x, V inv, V scale) const {
    return hn::Mul(Round(df, hn::Mul(x, inv)), scale);
  }
};

// One block along a contiguous axis (kCount: with its counts, else its values alone). With
// b, its block counts, and of the per-value counts only the saturated ones (what the block
// counts' readers take, detail::counted_stats): changed, underflow and nan stay 0.
template <bool kCount>
void Block(const float* x, float* y, size_t n, const MxParams& m, ScaledCounts& c, BlockCounts* b) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const std::uint32_t t = hn::GetLane(BlockTop(df, x, n));
  if (t >= 0x7f800000u) return NanBlock(x, y, n, c);
  int e = m.lo;
  if (t != 0) {
    const int ex =
        t >= 0x00800000u ? static_cast<int>(t >> 23) - 127 : std::ilogb(std::bit_cast<float>(t));
    e = std::clamp(ex - m.emax, m.lo, m.hi);
  }
  const auto inv = hn::Set(df, Pow2(-e)), scale = hn::Set(df, Pow2(e));
  const MxRounder<decltype(df)> r(df, m.p);
  if constexpr (!kCount) {
    ForEachVec(df, x, n, [&](auto v, size_t at, size_t valid) {
      if (y) StoreN(df, r.Value(df, v, inv, scale), y + at, valid);
    });
    return;
  }
  const auto thr = hn::Set(df, m.thr);
  // The largest magnitude the block decodes to: its maximum's (the rounding is monotone).
  const auto top = b ? r.Value(df, hn::BitCast(df, hn::Set(du, t)), inv, scale) : hn::Zero(df);
  ValueCounts counts;
  LaneTally<decltype(df)> tally(df, m.loss);
  const auto cut = tally.Cut(df, top, hn::FirstN(df, hn::Lanes(df)));
  ForEachVec(df, x, n, [&](auto v, size_t at, size_t valid) {
    const auto q = hn::Mul(v, inv);
    const auto out = r.Value(df, v, inv, scale);
    const auto live = hn::FirstN(df, valid);
    const auto aq = hn::Abs(q);
    auto over = hn::Gt(aq, thr);
    if (m.inclusive) over = hn::Or(over, hn::Eq(aq, thr));
    if (b) {
      counts.saturated += hn::CountTrue(df, hn::And(over, live));
      tally.Add(df, v, out, top, cut, live);
    } else {
      CountValues(df, v, out, hn::And(over, live), live, counts);
    }
    if (y) StoreN(df, out, y + at, valid);
  });
  counts.add_to(c);
  c.saturated_scales += counts.saturated != 0;
  if (b) tally.AddTo(df, *b, 0);
}

// ---- whole finite blocks along a contiguous axis ------------------------------------------
// A block of a whole number of vectors holding no NaN or inf (nearly every block) needs
// none of Block's tail buffers, range tests or blends: its values round with
// FiniteRounder (branch-free), its counts are popcounts of compare masks (scalar adds, off
// the vector ports, which measured faster than counting in int32 lanes). Equal to Block
// bit for bit, values and counts.

// One whole block (n a multiple of the lanes); a block holding NaN or inf goes to
// NanBlock. The scale as Block takes it: the maximum's floor(log2) - emax, clamped. With b
// (check's local run) its block counts and of the per-value counts the saturated ones, as
// Block<true> takes them with b.
template <class D>
HWY_INLINE void WholeBlock(D df, const float* x, float* y, size_t n, const MxParams& m,
                           const FiniteRounder<D>& rounder, hn::Vec<D> thr, ScaledCounts& c,
                           BlockCounts* b) {
  const hn::RebindToUnsigned<D> du;
  const size_t N = hn::Lanes(df);
  auto top = hn::Zero(du);
  const auto abs_mask = hn::Set(du, 0x7fffffffu), sign_mask = hn::Set(du, 0x80000000u);
  for (size_t i = 0; i < n; i += N)
    top = hn::Max(top, hn::And(hn::BitCast(du, hn::LoadU(df, x + i)), abs_mask));
  const std::uint32_t t = hn::GetLane(hn::MaxOfLanes(du, top));
  if (HWY_UNLIKELY(t >= 0x7f800000u)) return NanBlock(x, y, n, c);
  int e = m.lo;
  if (HWY_LIKELY(t >= 0x00800000u))
    e = std::clamp(static_cast<int>(t >> 23) - 127 - m.emax, m.lo, m.hi);
  else if (t != 0)
    e = std::clamp(std::ilogb(std::bit_cast<float>(t)) - m.emax, m.lo, m.hi);
  const auto inv = hn::Set(df, Pow2(-e)), scale = hn::Set(df, Pow2(e));
  const auto value = [&](hn::Vec<D> v, hn::Vec<D>& a) {
    a = hn::Mul(hn::Abs(v), inv);  // |x * 2^-e|
    const auto sign = hn::And(hn::BitCast(du, v), sign_mask);
    return hn::Mul(rounder.Signed(df, rounder.Magnitude(df, a), sign), scale);
  };
  hn::Vec<D> a;
  size_t saturated = 0, changed = 0, underflow = 0;
  if (b) {
    const auto all = hn::FirstN(df, N);
    // The largest magnitude the block decodes to: its maximum's (the rounding is monotone).
    const auto top_out =
        hn::Mul(rounder.Magnitude(df, hn::Mul(hn::BitCast(df, hn::Set(du, t)), inv)), scale);
    LaneTally<D> tally(df, m.loss);
    const auto cut = tally.Cut(df, top_out, all);
    for (size_t i = 0; i < n; i += N) {
      const auto v = hn::LoadU(df, x + i);
      const auto out = value(v, a);
      saturated += hn::CountTrue(df, hn::Gt(a, thr));
      tally.Add(df, v, out, top_out, cut, all);
      if (y) hn::StoreU(out, df, y + i);
    }
    c.saturated += saturated;
    c.saturated_scales += saturated != 0;
    tally.AddTo(df, *b, 0);
    return;
  }
  for (size_t i = 0; i < n; i += N) {
    const auto v = hn::LoadU(df, x + i);
    const auto out = value(v, a);
    saturated += hn::CountTrue(df, hn::Gt(a, thr));
    changed +=
        hn::CountTrue(df, hn::RebindMask(df, hn::Ne(hn::BitCast(du, v), hn::BitCast(du, out))));
    underflow += hn::CountTrue(df, hn::And(hn::Ne(v, hn::Zero(df)), hn::Eq(out, hn::Zero(df))));
    if (y) hn::StoreU(out, df, y + i);
  }
  c.saturated += saturated;
  c.changed += changed;
  c.underflow += underflow;
  c.saturated_scales += saturated != 0;
}

// `count` consecutive whole blocks of `bs` values (a multiple of the lanes): their values
// and counts (with b, WholeBlock's), but `values` and `scales`, which the caller adds.
void WholeBlocks(const float* x, float* y, size_t count, size_t bs, const MxParams& m,
                 ScaledCounts& c, BlockCounts* b) {
  using D = hn::ScalableTag<float>;
  const D df;
  const FiniteRounder<D> rounder(df, m.p);
  // |q| >= thr is |q| > the float below thr.
  const auto thr = hn::Set(df, m.inclusive ? std::nextafter(m.thr, 0.0f) : m.thr);
  for (size_t k = 0; k < count; ++k)
    WholeBlock(df, x + k * bs, y ? y + k * bs : nullptr, bs, m, rounder, thr, c, b);
}

// 2^k per lane for k in [-149, 127], exactly (Pow2 of each lane): below float32's normal
// range as 2^(k+64) * 2^-64, whose product is exact.
template <class D, class VI>
HWY_INLINE hn::Vec<D> Pow2Vec(D df, VI k) {
  const hn::RebindToSigned<D> di;
  const auto normal = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(k, hn::Set(di, 127))));
  const auto raised = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(k, hn::Set(di, 127 + 64))));
  const auto tiny = hn::Mul(raised, hn::Set(df, 0x1p-64f));
  return hn::IfThenElse(hn::RebindMask(df, hn::Lt(k, hn::Set(di, -126))), tiny, normal);
}

// Block's scale exponent per lane, from each lane's largest magnitude bits `top` (finite):
// floor(log2) - emax clamped to [lo, hi]; lo for an all-zero block.
template <class D, class VU>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> ScaleExponent(D df, VU top, const MxParams& m) {
  const hn::RebindToSigned<D> di;
  const auto t = hn::BitCast(di, top);  // < 2^31: signed compares are exact
  // A subnormal's bits as an integer convert exactly to float: its exponent is the
  // subnormal's floor(log2) + 149.
  const auto sub =
      hn::Sub(hn::ShiftRight<23>(hn::BitCast(di, hn::ConvertTo(df, t))), hn::Set(di, 127 + 149));
  const auto normal = hn::Sub(hn::ShiftRight<23>(t), hn::Set(di, 127));
  const auto ex = hn::IfThenElse(hn::Lt(t, hn::Set(di, 0x00800000)), sub, normal);
  const auto e =
      hn::Min(hn::Max(hn::Sub(ex, hn::Set(di, m.emax)), hn::Set(di, m.lo)), hn::Set(di, m.hi));
  return hn::IfThenElse(hn::Eq(t, hn::Zero(di)), hn::Set(di, m.lo), e);
}

// One block per lane, `valid` lanes: lane j's block is x[j + k * stride], k < len. The
// same arithmetic as Block, with the scale per lane and NaN blocks blended in; kCount and b
// as Block's (the values alone: no saturation or count per vector, and no NaN blend when no
// lane's block holds NaN or inf).
template <bool kCount>
void Columns(const float* x, float* y, size_t len, size_t stride, size_t valid, const MxParams& m,
             ScaledCounts& c, BlockCounts* b) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const auto top = ColumnsTop(df, x, len, stride, valid);
  const auto live = hn::FirstN(df, valid);
  // top < 2^31: signed compares are exact.
  const auto nan_block =
      hn::And(hn::RebindMask(df, hn::Gt(hn::BitCast(di, top), hn::Set(di, 0x7f7fffff))), live);
  const auto ok = hn::AndNot(nan_block, live);
  const auto finite_top = hn::IfThenZeroElse(hn::RebindMask(du, nan_block), top);
  const auto e = ScaleExponent(df, finite_top, m);
  const auto inv = Pow2Vec(df, hn::Neg(e)), scale = Pow2Vec(df, e);
  const auto qnan = hn::BitCast(df, hn::Set(du, 0x7fc00000u));
  const MxRounder<decltype(df)> r(df, m.p);
  if constexpr (!kCount) {
    if (!y) return;
    if (hn::AllFalse(df, nan_block))
      for (size_t k = 0; k < len; ++k)
        StoreN(df, r.Value(df, LoadLive(df, x + k * stride, valid), inv, scale), y + k * stride,
               valid);
    else
      for (size_t k = 0; k < len; ++k) {
        const auto v = LoadLive(df, x + k * stride, valid);
        StoreN(df, hn::IfThenElse(nan_block, qnan, r.Value(df, v, inv, scale)), y + k * stride,
               valid);
      }
    return;
  }
  const auto thr = hn::Set(df, m.thr);
  // Each lane's largest decoded magnitude: its maximum's (the rounding is monotone).
  const auto top_out = r.Value(df, hn::BitCast(df, finite_top), inv, scale);
  auto sat_any = hn::Zero(df);
  ValueCounts counts;
  LaneTally<decltype(df)> tally(df, m.loss);
  const auto cut = tally.Cut(df, top_out, ok);
  for (size_t k = 0; k < len; ++k) {
    const auto v = LoadLive(df, x + k * stride, valid);
    const auto q = hn::Mul(v, inv);
    const auto out = hn::IfThenElse(nan_block, qnan, r.Value(df, v, inv, scale));
    const auto aq = hn::Abs(q);
    auto over = hn::Gt(aq, thr);
    if (m.inclusive) over = hn::Or(over, hn::Eq(aq, thr));
    over = hn::And(over, ok);
    sat_any = hn::Or(sat_any, hn::VecFromMask(df, over));
    if (b) {
      counts.saturated += hn::CountTrue(df, over);
      tally.Add(df, v, out, top_out, cut, ok);
    } else {
      CountValues(df, v, out, over, live, counts);
    }
    if (y) StoreN(df, out, y + k * stride, valid);
  }
  counts.add_to(c);
  c.values += len * valid;
  c.scales += valid;
  c.nan_scales += hn::CountTrue(df, nan_block);
  c.saturated_scales += hn::CountTrue(df, hn::And(hn::MaskFromVec(sat_any), ok));
  if (b) tally.AddTo(df, *b, valid);
}

// Columns for `valid` blocks none of which holds NaN or inf, rounded by FiniteRounder
// (branch-free, as WholeBlock): the values, and with b (check's local run) its block counts
// and of the per-value counts the saturated ones, as Columns<true> takes them; without b
// the values alone (Columns<false>). `top`: ColumnsTop's, finite on every lane.
template <class D>
HWY_INLINE void FiniteColumns(D df, const float* x, float* y, size_t len, size_t stride,
                              size_t valid, hn::Vec<hn::RebindToUnsigned<D>> top, const MxParams& m,
                              const FiniteRounder<D>& rounder, ScaledCounts& c, BlockCounts* b) {
  const hn::RebindToUnsigned<D> du;
  const auto e = ScaleExponent(df, top, m);
  const auto inv = Pow2Vec(df, hn::Neg(e)), scale = Pow2Vec(df, e);
  const auto sign_mask = hn::Set(du, 0x80000000u);
  const auto value = [&](hn::Vec<D> v, hn::Vec<D>& a) {
    a = hn::Mul(hn::Abs(v), inv);  // |x * 2^-e|
    return hn::Mul(
        rounder.Signed(df, rounder.Magnitude(df, a), hn::And(hn::BitCast(du, v), sign_mask)),
        scale);
  };
  hn::Vec<D> a;
  if (!b) {
    for (size_t k = 0; k < len; ++k)
      StoreN(df, value(LoadLive(df, x + k * stride, valid), a), y + k * stride, valid);
    return;
  }
  const auto ok = hn::FirstN(df, valid);
  // |q| >= thr is |q| > the float below thr.
  const auto thr = hn::Set(df, m.inclusive ? std::nextafter(m.thr, 0.0f) : m.thr);
  const auto top_out = hn::Mul(rounder.Magnitude(df, hn::Mul(hn::BitCast(df, top), inv)), scale);
  LaneTally<D> tally(df, m.loss);
  const auto cut = tally.Cut(df, top_out, ok);
  auto sat_any = hn::Zero(df);
  size_t saturated = 0;
  for (size_t k = 0; k < len; ++k) {
    const auto v = LoadLive(df, x + k * stride, valid);
    const auto out = value(v, a);
    const auto over = hn::And(hn::Gt(a, thr), ok);
    saturated += hn::CountTrue(df, over);
    sat_any = hn::Or(sat_any, hn::VecFromMask(df, over));
    tally.Add(df, v, out, top_out, cut, ok);
    if (y) StoreN(df, out, y + k * stride, valid);
  }
  c.saturated += saturated;
  c.values += len * valid;
  c.scales += valid;
  c.saturated_scales += hn::CountTrue(df, hn::MaskFromVec(sat_any));
  tally.AddTo(df, *b, valid);
}

// ---- two-level scales (NVFP4): s_b = scale_format(amax / (element max * s_t)) ----------

// Per lane, from the lane's block's largest magnitude bits `top`: NaN blocks, zero scales
// (s_b or s_b * s_t of 0: the block decodes to zeros), block scales clamped to the scale
// format's max, s_b and the divisor s_b * s_t; all in float32 as the generic path.
template <class D>
struct TwoLevelScales {
  hn::Mask<D> nan, zero, saturated;
  hn::Vec<D> s_b, divisor;
};

template <class D, class VU>
HWY_INLINE TwoLevelScales<D> TwoLevelScale(D df, VU top, const TwoLevelParams& t) {
  const hn::RebindToSigned<D> di;
  const auto nan = hn::RebindMask(df, hn::Gt(hn::BitCast(di, top), hn::Set(di, 0x7f7fffff)));
  const auto raw = hn::Div(hn::BitCast(df, top), hn::Set(df, t.span));
  // s_t = 0 gives zero scales and no saturation (raw is inf or NaN then).
  auto saturated = hn::AndNot(nan, hn::Gt(raw, hn::Set(df, t.scale_max)));
  if (t.tensor_scale == 0) saturated = hn::FirstN(df, 0);
  const auto s_b = RoundVec<true>(df, raw, t.scale);
  const auto divisor = hn::Mul(s_b, hn::Set(df, t.tensor_scale));
  auto zero = hn::Or(hn::Eq(s_b, hn::Zero(df)), hn::Eq(divisor, hn::Zero(df)));
  if (t.tensor_scale == 0) zero = hn::Not(hn::FirstN(df, 0));
  return {nan, zero, saturated, s_b, divisor};
}

// x / divisor, 0 in zero blocks.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V TwoLevelScaled(V v, const TwoLevelScales<D>& s) {
  return hn::IfThenZeroElse(s.zero, hn::Div(v, s.divisor));
}

// q = TwoLevelScaled rounded into the element format (saturating), times s_b, times s_t;
// zeros in zero blocks.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V TwoLevelValue(D df, V q, const TwoLevelScales<D>& s, const TwoLevelParams& t) {
  const auto p = RoundVec<true>(df, q, t.element);
  return hn::IfThenZeroElse(s.zero, hn::Mul(hn::Mul(p, s.s_b), hn::Set(df, t.tensor_scale)));
}

// The largest magnitude each lane's block decodes to, from its largest magnitude bits `top`
// (the rounding is monotone): 0 in zero blocks, anything in NaN ones.
template <class D, class VU>
HWY_INLINE hn::Vec<D> TwoLevelTop(D df, VU top, const TwoLevelScales<D>& s,
                                  const TwoLevelParams& t) {
  return TwoLevelValue(df, TwoLevelScaled(hn::BitCast(df, top), s), s, t);
}

// The values v (lanes `live`) quantized under scales s: TwoLevelValue, NaN in NaN blocks.
// Lanes whose value saturated are or'ed into sat_any.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V TwoLevelValues(D df, V v, const TwoLevelScales<D>& s, const TwoLevelParams& t,
                            hn::Mask<D> live, V& sat_any, ValueCounts& n) {
  const hn::RebindToUnsigned<D> du;
  const auto q = TwoLevelScaled(v, s);
  auto out = TwoLevelValue(df, q, s, t);
  out = hn::IfThenElse(s.nan, hn::BitCast(df, hn::Set(du, 0x7fc00000u)), out);
  const auto aq = hn::Abs(q);
  const auto thr = hn::Set(df, t.thr);
  auto over = hn::Gt(aq, thr);
  if (t.inclusive) over = hn::Or(over, hn::Eq(aq, thr));
  over = hn::And(hn::AndNot(s.nan, over), live);
  sat_any = hn::Or(sat_any, hn::VecFromMask(df, over));
  CountValues(df, v, out, over, live, n);
  return out;
}

// One block along a contiguous axis: its scale broadcast to every lane.
void TwoLevelBlock(const float* x, float* y, size_t n, const TwoLevelParams& t, ScaledCounts& c,
                   BlockCounts* b) {
  const hn::ScalableTag<float> df;
  const auto amax = BlockTop(df, x, n);
  const auto s = TwoLevelScale(df, amax, t);
  const auto top = b ? TwoLevelTop(df, amax, s, t) : hn::Zero(df);
  auto sat_any = hn::Zero(df);
  ValueCounts counts;
  LaneTally<decltype(df)> tally(df, t.loss);
  const auto cut = tally.Cut(df, top, hn::Not(s.nan));
  ForEachVec(df, x, n, [&](auto v, size_t at, size_t valid) {
    const auto live = hn::FirstN(df, valid);
    const auto out = TwoLevelValues(df, v, s, t, live, sat_any, counts);
    if (b) tally.Add(df, v, out, top, cut, hn::AndNot(s.nan, live));
    if (y) StoreN(df, out, y + at, valid);
  });
  counts.add_to(c);
  if (b) tally.AddTo(df, *b, 0);
  const auto lane0 = hn::FirstN(df, 1);
  const bool nan = !hn::AllFalse(df, hn::And(s.nan, lane0));
  c.nan_scales += nan;
  c.saturated_scales +=
      !nan && (counts.saturated != 0 || !hn::AllFalse(df, hn::And(s.saturated, lane0)));
}

// One block per lane along a strided axis, as Columns.
void TwoLevelColumns(const float* x, float* y, size_t len, size_t stride, size_t valid,
                     const TwoLevelParams& t, ScaledCounts& c, BlockCounts* b) {
  const hn::ScalableTag<float> df;
  const auto live = hn::FirstN(df, valid);
  const auto amax = ColumnsTop(df, x, len, stride, valid);
  const auto s = TwoLevelScale(df, amax, t);
  const auto top = TwoLevelTop(df, amax, s, t);
  const auto ok = hn::AndNot(s.nan, live);
  auto sat_any = hn::Zero(df);
  ValueCounts counts;
  LaneTally<decltype(df)> tally(df, t.loss);
  const auto cut = tally.Cut(df, top, ok);
  for (size_t k = 0; k < len; ++k) {
    const auto v = LoadLive(df, x + k * stride, valid);
    const auto out = TwoLevelValues(df, v, s, t, live, sat_any, counts);
    if (b) tally.Add(df, v, out, top, cut, ok);
    if (y) StoreN(df, out, y + k * stride, valid);
  }
  counts.add_to(c);
  if (b) tally.AddTo(df, *b, valid);
  c.values += len * valid;
  c.scales += valid;
  c.nan_scales += hn::CountTrue(df, hn::And(s.nan, live));
  const auto saturated = hn::Or(hn::MaskFromVec(sat_any), s.saturated);
  c.saturated_scales += hn::CountTrue(df, hn::AndNot(s.nan, hn::And(saturated, live)));
}

}  // namespace

std::uint32_t FiniteTopImpl(const float* x, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const auto abs_mask = hn::Set(du, 0x7fffffffu);
  const auto inf = hn::Set(di, 0x7f800000);
  auto top = hn::Zero(di);  // magnitude bits < 2^31: signed compares are exact
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto a = hn::BitCast(di, hn::And(hn::BitCast(du, hn::LoadU(df, x + i)), abs_mask));
    top = hn::Max(top, hn::IfThenElseZero(hn::Lt(a, inf), a));
  }
  auto t = static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, top)));
  for (; i < n; ++i) {
    const std::uint32_t a = std::bit_cast<std::uint32_t>(x[i]) & 0x7fffffffu;
    if (a < 0x7f800000u) t = std::max(t, a);
  }
  return t;
}

// The blocks of `rows` rows of `n` values, `bs` along each (the last of a row may be
// short): block(x, y, len) for each, counted in c (y nullptr where out is: not written).
template <class BlockFn>
HWY_INLINE void EachRowBlock(const float* in, float* out, size_t rows, size_t n, size_t bs,
                             ScaledCounts& c, const BlockFn& block) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t at = 0; at < n; at += bs) {
      const size_t len = std::min(bs, n - at);
      block(in + r * n + at, out ? out + r * n + at : nullptr, len);
      ++c.scales;
      c.values += len;
    }
}

// `width` blocks side by side, one vector of lanes at a time: columns(x, y, lanes) for each.
template <class ColumnsFn>
HWY_INLINE void EachColumnVector(const float* in, float* out, size_t width,
                                 const ColumnsFn& columns) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  for (size_t j = 0; j < width; j += N)
    columns(in + j, out ? out + j : nullptr, std::min(N, width - j));
}

void TwoLevelRowsImpl(const float* in, float* out, size_t rows, size_t n, size_t bs,
                      const TwoLevelParams& t, ScaledCounts& c, BlockCounts* b) {
  EachRowBlock(in, out, rows, n, bs, c,
               [&](const float* x, float* y, size_t len) { TwoLevelBlock(x, y, len, t, c, b); });
}

void TwoLevelColumnsImpl(const float* in, float* out, size_t len, size_t stride, size_t width,
                         const TwoLevelParams& t, ScaledCounts& c, BlockCounts* b) {
  EachColumnVector(in, out, width, [&](const float* x, float* y, size_t lanes) {
    TwoLevelColumns(x, y, len, stride, lanes, t, c, b);
  });
}

void MxColumnsImpl(const float* in, float* out, size_t len, size_t stride, size_t width,
                   const MxParams& m, ScaledCounts& c, BlockCounts* b) {
  using D = hn::ScalableTag<float>;
  const D df;
  const auto columns = [&](const float* x, float* y, size_t lanes) {
    if (m.count)
      Columns<true>(x, y, len, stride, lanes, m, c, b);
    else
      Columns<false>(x, y, len, stride, lanes, m, c, b);
  };
  // The per-value counts of round_scaled (no block counts) take Columns' general kernel.
  if ((m.count && !b) || (!m.count && !out) || !FiniteRounder<D>::Applies(m.p))
    return EachColumnVector(in, out, width, columns);
  const FiniteRounder<D> rounder(df, m.p);
  const hn::RebindToSigned<D> di;
  EachColumnVector(in, out, width, [&](const float* x, float* y, size_t lanes) {
    const auto top = ColumnsTop(df, x, len, stride, lanes);
    // top < 2^31: signed compares are exact; a NaN or inf block takes Columns' blend.
    if (!hn::AllFalse(di, hn::Gt(hn::BitCast(di, top), hn::Set(di, 0x7f7fffff))))
      return columns(x, y, lanes);
    FiniteColumns(df, x, y, len, stride, lanes, top, m, rounder, c, m.count ? b : nullptr);
  });
}

void MxRowsImpl(const float* in, float* out, size_t rows, size_t n, size_t bs, const MxParams& m,
                ScaledCounts& c, BlockCounts* b) {
  using D = hn::ScalableTag<float>;
  const auto block = [&](const float* x, float* y, size_t len) {
    if (m.count)
      Block<true>(x, y, len, m, c, b);
    else
      Block<false>(x, y, len, m, c, b);
  };
  if (bs % hn::Lanes(D()) != 0 || !FiniteRounder<D>::Applies(m.p))
    return EachRowBlock(in, out, rows, n, bs, c, block);
  // Each row's whole blocks on the finite path (its counts cost popcounts only: taken
  // whether or not m.count asks; its block counts where m.count asks), its short last
  // block (if any) on Block's.
  const size_t whole = n / bs, tail = n % bs;
  for (size_t r = 0; r < rows; ++r) {
    const float* x = in + r * n;
    float* y = out ? out + r * n : nullptr;
    WholeBlocks(x, y, whole, bs, m, c, m.count ? b : nullptr);
    if (tail) block(x + whole * bs, y ? y + whole * bs : nullptr, tail);
    c.scales += whole + (tail != 0);
    c.values += n;
  }
}

}  // namespace fpguard::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::detail {

HWY_EXPORT(FiniteTopImpl);
HWY_EXPORT(MxRowsImpl);
HWY_EXPORT(MxColumnsImpl);
HWY_EXPORT(TwoLevelRowsImpl);
HWY_EXPORT(TwoLevelColumnsImpl);

double finite_absmax(std::span<const float> xs) {
  return std::bit_cast<float>(HWY_DYNAMIC_DISPATCH(FiniteTopImpl)(xs.data(), xs.size()));
}

void mx_round_fast(const float* in, float* out, std::size_t rows, std::size_t n, std::size_t bs,
                   const MxParams& m, ScaledCounts& c, BlockCounts* b) {
  HWY_DYNAMIC_DISPATCH(MxRowsImpl)(in, out, rows, n, bs, m, c, b);
}

void mx_round_columns(const float* in, float* out, std::size_t len, std::size_t stride,
                      std::size_t width, const MxParams& m, ScaledCounts& c, BlockCounts* b) {
  HWY_DYNAMIC_DISPATCH(MxColumnsImpl)(in, out, len, stride, width, m, c, b);
}

void two_level_round_fast(const float* in, float* out, std::size_t rows, std::size_t n,
                          std::size_t bs, const TwoLevelParams& t, ScaledCounts& c,
                          BlockCounts* b) {
  HWY_DYNAMIC_DISPATCH(TwoLevelRowsImpl)(in, out, rows, n, bs, t, c, b);
}

void two_level_round_columns(const float* in, float* out, std::size_t len, std::size_t stride,
                             std::size_t width, const TwoLevelParams& t, ScaledCounts& c,
                             BlockCounts* b) {
  HWY_DYNAMIC_DISPATCH(TwoLevelColumnsImpl)(in, out, len, stride, width, t, c, b);
}

}  // namespace fpguard::detail
#endif
