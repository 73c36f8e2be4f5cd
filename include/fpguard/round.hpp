// Rounding into any Format. Values stay in float/double "carriers": the result of
// rounding is the format's value nearest to x (per the rounding mode), held in the
// input's own type, so every later computation is written once, for float and double.
// encode/decode convert between carrier values and the format's bit patterns.
//
// One exact generic path serves every format, mode and option; fast SIMD paths for
// float32 input (nearest-even and toward-zero) are specialisations behind the same
// functions, chosen at run time, and tested bit for bit against the generic path.
// Rounding never throws: bad input is impossible here, only unusual values, and each
// of those has a documented result (docs/formats.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fpguard/format.hpp"

namespace fpguard {

enum class Rounding {
  nearest_even,  // IEEE roundTiesToEven (default)
  toward_zero,   // truncation
  up,            // toward +inf
  down,          // toward -inf
  stochastic,    // up with probability (x - lo) / (hi - lo); seeded, reproducible
};
std::string_view to_string(Rounding r);
Rounding parse_rounding(std::string_view name);  // "nearest-even", ...; throws Error
const std::vector<std::string>& rounding_names();

struct RoundOptions {
  Rounding rounding = Rounding::nearest_even;
  // Finite values beyond max become +-max instead of +-inf (or NaN for formats without
  // inf). Infinite inputs stay infinite where the format has inf. FP6/FP4 always saturate.
  bool saturate = false;
  // Results below the smallest normal become zero (of the same sign where the format
  // has -0), as flush-to-zero hardware does.
  bool flush_subnormals = false;
  // Stochastic rounding: the random draw for element i depends only on (seed, i), so
  // results are reproducible whatever the thread count.
  std::uint64_t seed = 0;
  // Threads for array calls: 0 = automatic (parallel only for large arrays), 1 = this thread.
  int threads = 0;
  // Array calls on a piece of a larger array: element i draws as element first_index + i
  // (stochastic rounding), so that rounding an array piece by piece gives its results.
  std::uint64_t first_index = 0;
};

// Scalars (generic path). `index` selects the stochastic draw, as for array element i.
double round(double x, const Format& f, const RoundOptions& o = {}, std::uint64_t index = 0);
float round(float x, const Format& f, const RoundOptions& o = {}, std::uint64_t index = 0);

// Arrays; `out` may alias `in`. Sizes must match.
void round(std::span<const float> in, std::span<float> out, const Format& f,
           const RoundOptions& o = {});
void round(std::span<const double> in, std::span<double> out, const Format& f,
           const RoundOptions& o = {});

// What rounding (in `mode`) did to an array, `out` being the rounded `in`: values that
// changed (NaN staying NaN did not), overflowed (finite, and past max once rounded with an
// unbounded exponent, IEEE 754's overflow: they became inf or NaN, or max where saturated or
// truncated; float16 to nearest-even: from 65520, while 65519 rounds to max), underflowed
// (non-zero, became zero), and NaN on input. One pass, threaded.
struct RoundCounts {
  std::uint64_t values = 0, changed = 0, overflow = 0, underflow = 0, nan = 0;
};
RoundCounts count_rounding(std::span<const float> in, std::span<const float> out, const Format& f,
                           int threads = 0, Rounding mode = Rounding::nearest_even);
RoundCounts count_rounding(std::span<const double> in, std::span<const double> out, const Format& f,
                           int threads = 0, Rounding mode = Rounding::nearest_even);

// round() and count_rounding() in one pass over memory (each block counted while it is
// in cache): the data path of large arrays. `out` may alias `in`.
RoundCounts round_and_count(std::span<const float> in, std::span<float> out, const Format& f,
                            const RoundOptions& o = {});
RoundCounts round_and_count(std::span<const double> in, std::span<double> out, const Format& f,
                            const RoundOptions& o = {});

namespace detail {
struct FastParams;
}
// round() on float32 arrays prepared once for a format and options, then applied to many
// small arrays on the calling thread (RoundOptions::threads aside): the same results as
// round(). Not for stochastic rounding, whose draw depends on an element's index.
class ArrayRounder {
 public:
  ArrayRounder(const Format& f, const RoundOptions& o);
  void operator()(const float* in, float* out, std::size_t n) const;  // `out` may be `in`

 private:
  Format format_;
  RoundOptions options_;
  std::shared_ptr<const detail::FastParams> fast_;  // null: the generic path
};

// The exact generic path for arrays, whatever fast path exists: the reference the fast
// paths are tested against.
void round_generic(std::span<const float> in, std::span<float> out, const Format& f,
                   const RoundOptions& o = {});

// Whether round() on float arrays takes a SIMD fast path for this format and options.
bool has_fast_path(const Format& f, const RoundOptions& o = {});
// The fast path itself (for tests and benchmarks); requires has_fast_path(f, o).
void round_fast(std::span<const float> in, std::span<float> out, const Format& f,
                const RoundOptions& o = {});

// The smallest magnitude that overflows when rounding to nearest-even, and whether that
// magnitude itself overflows (the tie goes up when max's last code bit is odd): |x| >
// value, or |x| == value when inclusive. For float16: 65520, inclusive.
struct OverflowThreshold {
  double value = 0;
  bool inclusive = false;
};
OverflowThreshold overflow_threshold(const Format& f);
// The largest magnitude that rounds to zero to nearest-even: |x| <= value does (half the
// smallest subnormal, whose tie goes to the even code, 0). For float16: 2^-25. Formats
// without a zero (E8M0) have none: 0.
double underflow_threshold(const Format& f);
// Both thresholds as values of a carrier T (float or double), for comparisons in T that
// decide exactly what rounding to nearest-even would: |x| >= overflow_from<T>(f) overflows
// (inf where none of T's values does), 0 < |x| <= zero_up_to<T>(f) rounds to zero.
template <class T>
T overflow_from(const Format& f);
template <class T>
T zero_up_to(const Format& f);

// Bit patterns. encode(x) is the code of round(x); a code occupies the low bits() bits
// (FP6/FP4: one code per byte). NaN goes to the format's NaN code (a positive quiet NaN
// for IEEE formats); formats without NaN encode NaN as +max (documented, as they cannot
// express it). decode accepts any code of the format's width.
std::uint64_t encode(double x, const Format& f, const RoundOptions& o = {},
                     std::uint64_t index = 0);
double decode(std::uint64_t code, const Format& f);

void encode(std::span<const float> in, std::span<std::uint8_t> out, const Format& f,
            const RoundOptions& o = {});
void encode(std::span<const float> in, std::span<std::uint16_t> out, const Format& f,
            const RoundOptions& o = {});
void encode(std::span<const double> in, std::span<std::uint8_t> out, const Format& f,
            const RoundOptions& o = {});
void encode(std::span<const double> in, std::span<std::uint16_t> out, const Format& f,
            const RoundOptions& o = {});
void encode(std::span<const double> in, std::span<std::uint32_t> out, const Format& f,
            const RoundOptions& o = {});
void encode(std::span<const double> in, std::span<std::uint64_t> out, const Format& f,
            const RoundOptions& o = {});

// ---- Scaled formats --------------------------------------------------------------------
// Quantize-dequantize into a ScaledFormat (format.hpp) as the hardware does it: each scale
// is chosen from the values it covers, each value is divided by its scale and rounded to
// nearest-even into the element format (saturating at its max), and the result is the
// element times its scale (docs/formats.md gives every rule). Scale arithmetic runs in the
// carrier's precision (float32 for float arrays), the element rounding is exact.

// Where the values lie: the tensor's shape and the axis the scales follow. Block scope:
// blocks of block_size consecutive elements along `axis` (default the last; the last block
// of a row may be short and is scaled by its own elements). Channel scope: one scale per
// index of `axis`. Tensor scope ignores `axis`. Negative axes count from the end.
struct ScaledLayout {
  std::vector<std::int64_t> shape{};
  int axis = -1;
};

// How to choose the scales, beyond the format's rule.
struct ScaledOptions {
  // A calibrated amax (static scaling: the maximum over calibration data, as TensorRT and
  // ModelOpt use for activations) instead of the tensor's own: the amax of tensor-scope
  // formats and the tensor scale s_t of two-level ones. Values beyond it saturate. Ignored
  // by block and channel scales, which always follow their own values.
  std::optional<double> amax{};
  // Threads: 0 = automatic (parallel only for large arrays), 1 = this thread.
  int threads = 0;
  // The exact generic path even where a fast path exists (the reference the fast path is
  // tested against, bit for bit).
  bool generic = false;
};

// What quantizing did, over values and over scales (blocks, channels, or the one tensor).
struct ScaledCounts {
  std::uint64_t values = 0;
  std::uint64_t changed = 0;    // value differs (NaN staying NaN does not)
  std::uint64_t saturated = 0;  // finite, beyond the element max once scaled: clamped to it
  std::uint64_t underflow = 0;  // non-zero, became zero
  std::uint64_t nan = 0;        // NaN or inf on input
  std::uint64_t scales = 0;
  std::uint64_t nan_scales = 0;        // scales set to NaN by a NaN or inf they cover
  std::uint64_t saturated_scales = 0;  // scales covering a saturated value
};

// The encoding, for `round --encode`: one code per value, and per scale its code (E8M0,
// E4M3) or, for the amax rule, its value; scales in row-major order of `scale_shape`
// (block scope: the shape with the axis' extent replaced by its number of blocks; channel
// scope: [channels]; tensor scope: []). A NaN scale's elements have code 0.
struct ScaledCodes {
  std::vector<std::uint16_t> codes;  // MXINT8: the int8's two's complement in the low byte
  std::vector<std::uint8_t> scale_codes;
  std::vector<double> scale_values;  // the scale of each, as a number
  std::vector<std::int64_t> scale_shape;
  double tensor_scale = 0;  // two_level: the float32 tensor scale s_t
};

// Quantize-dequantize `in` (of the layout's shape) into `f`; `out` may alias `in`. With
// `codes`, also the encoding. Throws fpguard::Error (where "axis") for an axis out of range
// and (where "shape") when the shape does not hold in.size() values: the only bad input.
ScaledCounts round_scaled(std::span<const float> in, std::span<float> out, const ScaledLayout& l,
                          const ScaledFormat& f, const ScaledOptions& o = {},
                          ScaledCodes* codes = nullptr);
ScaledCounts round_scaled(std::span<const double> in, std::span<double> out, const ScaledLayout& l,
                          const ScaledFormat& f, const ScaledOptions& o = {},
                          ScaledCodes* codes = nullptr);
// The values each scale covers, as round_scaled groups them: fn(indices) once per scale, in
// row-major order of the scale tensor (ScaledCodes::scale_shape), each group's indices in
// order along the axis. Throws as round_scaled does for a bad layout.
void for_each_scale_group(const ScaledLayout& l, const ScaledFormat& f, std::size_t size,
                          const std::function<void(std::span<const std::size_t>)>& fn);
// Block scope only: the same groups as strided runs, fn(first, stride, count) for the
// values first + k * stride, k < count (no index vector per block).
void for_each_scale_block(const ScaledLayout& l, const ScaledFormat& f, std::size_t size,
                          const std::function<void(std::size_t, std::size_t, std::size_t)>& fn);
// Whether round_scaled on float arrays takes its SIMD fast path for this format and layout
// (OCP MX power-of-two blocks and two-level NVFP4 ones, along any axis; without codes and
// generic).
bool has_fast_path(const ScaledFormat& f, const ScaledLayout& l);

}  // namespace fpguard
