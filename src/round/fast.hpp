// The SIMD fast path for float32 -> any format with at most float32's range and
// precision, nearest-even or toward-zero. Internal header: the public entry points are
// fpguard::round / round_fast / has_fast_path in round.hpp.
//
// The kernel is one parametrised bit trick, so a new format needs a table row, not code:
//  - normal range: round the float32 bit pattern at bit d = 23 - m (adding half-1 plus
//    the kept LSB for ties-to-even); carries ripple into the exponent exactly as they
//    should, up to +inf;
//  - below the format's smallest normal: (|x| + K) - K with K = 2^(emin - m + 23), which
//    the FPU rounds to the subnormal quantum 2^(emin - m) with ties-to-even;
//  - then overflow, inf, NaN, flush-to-zero and the sign are applied with blends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "fpguard/round.hpp"

namespace fpguard::detail {

struct FastParams {
  int drop_bits = 0;         // 23 - mantissa bits
  bool nearest_even = true;  // else toward zero
  bool flush_subnormals = false;
  bool no_negative_zero = false;  // fnuz: -0 becomes +0
  float smallest_normal = 0;      // 2^emin
  float magic = 0;                // 2^(emin - m + 23)
  float quantum = 0;              // 2^(emin - m), the subnormal spacing
  float max = 0;                  // largest finite value
  float overflow_value = 0;       // result for finite |x| > max (before the sign)
  float inf_value = 0;            // result for |x| = inf (before the sign)
  // IEEE binary16 with nearest-even rounding, overflow to inf and subnormals kept: what
  // the x86 conversion instructions (F16C) do, which round_fast then uses.
  bool ieee_half = false;
  // bfloat16 with nearest-even rounding, overflow to inf and subnormals kept: float32's
  // exponent, so round_fast rounds the bit pattern alone.
  bool ieee_bfloat16 = false;
};

std::optional<FastParams> fast_params(const Format& f, const RoundOptions& o);
void round_fast(const float* in, float* out, std::size_t n, const FastParams& p);
// encode() into IEEE binary16 (FastParams::ieee_half) by the CPU's conversion: the bit
// patterns of the float32 values rounded to nearest-even, NaN as +qNaN 0x7e00. False
// (nothing written) where the CPU has no such conversion.
bool half_bits(const float* in, std::uint16_t* out, std::size_t n);

// The code of a value exactly representable in `f` (a result of round()): encode() without
// the rounding.
std::uint64_t code_of(double v, const Format& f);

// What the scales did to the finite non-zero values of the blocks they cover, summed over
// blocks: the counts of scaled_stats (ScaledFormatStats in fpguard/stats.hpp says what each
// means). Defined once here for the two that count them: the fast path's kernels, while
// they quantize (round_scaled_counting), and scaled_stats' walk over the values.
struct BlockCounts {
  std::uint64_t nonzero = 0, flushed = 0, flushed_blocks = 0, swamped = 0, swamped_blocks = 0,
                underflow = 0, clipped = 0, clipped_blocks = 0;
  // One block: its `nonzero` finite non-zero values (none in a NaN block), of which `zeroed`
  // became zero and `clipped` were clipped (clipped_past). Zeros beside a value that stayed
  // non-zero were flushed by the scale it set; a block that became zeros underflowed.
  void add_block(std::uint64_t nonzero, std::uint64_t zeroed, std::uint64_t clipped);
  void add(const BlockCounts& b);
};
// The relative error past which half the element's bits are lost (scaled_stats' precision
// loss and the clipping margin).
double half_bits_lost(const Format& element);
// Whether a finite value of magnitude `ax` was clipped: beyond `top`, the largest magnitude
// its block decodes to, by more than `loss` (half_bits_lost) of itself.
inline bool clipped_past(double ax, double top, double loss) {
  return top > 0 && ax > top && ax - top > loss * ax;
}

// OCP MX quantize-dequantize (round_scaled's fast path, scaled_simd.cpp): `rows` rows of
// `n` values, blocks of `bs` along each; the element rounds with `p` (nearest-even,
// saturating), the scale exponent is floor(log2 amax) - emax clamped to [lo, hi]. Adds to c,
// and with `b` the block counts to *b (clipped with `loss`).
struct MxParams {
  FastParams p;
  int emax = 0, lo = 0, hi = 0;
  float thr = 0;  // the element's overflow threshold (saturation count), inclusive or not
  bool inclusive = false;
  double loss = 0;  // half_bits_lost of the element
  // Count what quantizing did (ScaledCounts, and BlockCounts where asked); false: the
  // values alone (a run's operands, whose counts nobody reads), c left as it was.
  bool count = true;
};
void mx_round_fast(const float* in, float* out, std::size_t rows, std::size_t n, std::size_t bs,
                   const MxParams& m, ScaledCounts& c, BlockCounts* b);
// The same for blocks along a strided axis: `width` blocks side by side, block j holding
// the `len` values in[j + k * stride], k < len (one SIMD lane per block).
void mx_round_columns(const float* in, float* out, std::size_t len, std::size_t stride,
                      std::size_t width, const MxParams& m, ScaledCounts& c, BlockCounts* b);

// Two-level (NVFP4) quantize-dequantize, the same two layouts: per block s_b = the scale
// format's rounding of amax / span (saturating), the element x / (s_b * s_t) rounded with
// `element` (saturating), decoded (e * s_b) * s_t; a block of s_b or s_b * s_t = 0 decodes
// to zeros, one holding NaN or inf to NaN.
struct TwoLevelParams {
  FastParams element, scale;
  float tensor_scale = 0;  // s_t
  float span = 0;          // element max * s_t, in float32
  float scale_max = 0;     // the scale format's max (saturated scales past it)
  float thr = 0;           // the element's overflow threshold, inclusive or not
  bool inclusive = false;
  double loss = 0;  // half_bits_lost of the element
};
void two_level_round_fast(const float* in, float* out, std::size_t rows, std::size_t n,
                          std::size_t bs, const TwoLevelParams& t, ScaledCounts& c, BlockCounts* b);
void two_level_round_columns(const float* in, float* out, std::size_t len, std::size_t stride,
                             std::size_t width, const TwoLevelParams& t, ScaledCounts& c,
                             BlockCounts* b);

// The largest finite |x| of `xs`, 0 when there is none (inf and NaN do not count), float32 in
// SIMD: the one tensor amax of round_scaled's tensor scales, check's statistics and scaled
// FP8's calibration.
double finite_absmax(std::span<const float> xs);
double finite_absmax(std::span<const double> xs);

// round_scaled on its fast path, the block counts added to `b` in the same pass (an empty
// `out`: the counts alone, no values written); nullopt (nothing written) where the format
// and layout have no fast path (has_fast_path). Of the ScaledCounts, those counted_stats
// reads (values, scales, nan_scales, saturated, saturated_scales): OCP MX kernels leave
// changed, underflow and nan at 0 then.
std::optional<ScaledCounts> round_scaled_counting(std::span<const float> in, std::span<float> out,
                                                  const ScaledLayout& l, const ScaledFormat& f,
                                                  const ScaledOptions& o, BlockCounts& b);
// round_scaled's values alone: the same bits, its counts not taken where the kernels can
// skip them (OCP MX blocks), for a caller that discards them.
void round_scaled_values(std::span<const float> in, std::span<float> out, const ScaledLayout& l,
                         const ScaledFormat& f, const ScaledOptions& o);

}  // namespace fpguard::detail
