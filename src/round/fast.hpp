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
};

std::optional<FastParams> fast_params(const Format& f, const RoundOptions& o);
void round_fast(const float* in, float* out, std::size_t n, const FastParams& p);
// encode() into IEEE binary16 (FastParams::ieee_half) by the CPU's conversion: the bit
// patterns of the float32 values rounded to nearest-even, NaN as +qNaN 0x7e00. False
// (nothing written) where the CPU has no such conversion.
bool half_bits(const float* in, std::uint16_t* out, std::size_t n);

// OCP MX quantize-dequantize (round_scaled's fast path, scaled_simd.cpp): `rows` rows of
// `n` values, blocks of `bs` along each; the element rounds with `p` (nearest-even,
// saturating), the scale exponent is floor(log2 amax) - emax clamped to [lo, hi]. Adds to c.
struct MxParams {
  FastParams p;
  int emax = 0, lo = 0, hi = 0;
  float thr = 0;  // the element's overflow threshold (saturation count), inclusive or not
  bool inclusive = false;
};
void mx_round_fast(const float* in, float* out, std::size_t rows, std::size_t n, std::size_t bs,
                   const MxParams& m, ScaledCounts& c);
// The same for blocks along a strided axis: `width` blocks side by side, block j holding
// the `len` values in[j + k * stride], k < len (one SIMD lane per block).
void mx_round_columns(const float* in, float* out, std::size_t len, std::size_t stride,
                      std::size_t width, const MxParams& m, ScaledCounts& c);

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
};
void two_level_round_fast(const float* in, float* out, std::size_t rows, std::size_t n,
                          std::size_t bs, const TwoLevelParams& t, ScaledCounts& c);
void two_level_round_columns(const float* in, float* out, std::size_t len, std::size_t stride,
                             std::size_t width, const TwoLevelParams& t, ScaledCounts& c);

}  // namespace fpguard::detail
