// One-pass tensor statistics and per-format safety findings: how a tensor's values fare
// when rounded into each requested format (overflow, underflow, subnormals, rounding
// error), how much headroom it has, and the exact power-of-two scale that would make it
// safe. This is what people otherwise write by hand in Python (check_overflow,
// compute_scale_factor, ...), computed exactly, vectorised and multithreaded.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fpguard/format.hpp"
#include "fpguard/round.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard {

struct TensorStats {
  std::uint64_t count = 0;  // all elements
  std::uint64_t nan = 0, posinf = 0, neginf = 0, zeros = 0;
  // Over the finite values (NaN when there are none). min_abs_nonzero is NaN when every
  // finite value is zero.
  double min = 0, max = 0, absmax = 0, min_abs_nonzero = 0;
  double mean = 0, std = 0;  // population std (ddof = 0, as numpy.std)
  // floor(log2 |x|) -> count, over finite non-zero values. Zeros, NaN and inf are the
  // counts above.
  std::map<int, std::uint64_t> exponent_histogram;
};

// block_underflow: scaled formats only (ScaledFormatStats), values flushed to zero by the
// scale a larger neighbour set.
enum class Verdict { ok, overflow, underflow, precision, nonfinite, block_underflow };
std::string_view to_string(Verdict v);

struct FormatStats {
  Format format;
  // Counts over the finite values, rounding to nearest-even:
  std::uint64_t overflow = 0;        // round past max (to inf, NaN, or saturated to max)
  std::uint64_t underflow = 0;       // non-zero, round to zero
  std::uint64_t subnormal = 0;       // round to a non-zero subnormal of the format
  std::uint64_t precision_loss = 0;  // keep fewer than half the format's significant bits
  // Rounding error over the finite values that do not overflow (relative: non-zero ones).
  double max_abs_error = 0, max_rel_error = 0, mean_rel_error = 0;
  double headroom_bits = 0;  // log2(format max / absmax); +inf for an all-zero tensor
  // 2^k, the largest power of two with absmax * 2^k <= margin * max (exact: scaling by it
  // adds no rounding) ...
  double scale = 1;
  // ... and with (absmax * 2^k)^2 <= margin * max, for a tensor that will be squared (a
  // Pow 2 or ReduceSumSquare consumer).
  double scale_for_square = 1;
  Verdict verdict = Verdict::ok;
};

struct StatsOptions {
  double margin = 0.5;  // fraction of the format's max the scaled absmax may reach
  int threads = 0;      // 0: automatic; 1: this thread only
  // false: no exponent histogram, mean or std (left empty / NaN), for a faster scan of
  // what remains (counts, extremes, the formats' numbers).
  bool distribution = true;
  // With the distribution: false leaves the exponent histogram out (empty), the mean and
  // std in (`inspect` shows the histogram only with --histogram, --json or --html).
  bool histogram = true;
  // The caller reads the tensor no more: a view of a file's map (a large .npy) gives its
  // pages back as each thread finishes its part (stats(const Tensor&)), in parallel,
  // instead of one serial unmap at the end. A weight other runs read would fault them in
  // again, so it is the caller's to say.
  bool release_pages = false;
};

struct Stats {
  TensorStats tensor;
  std::vector<FormatStats> formats;  // in the order requested
};

// Share of values above which a count makes the verdict (precision, underflow).
inline constexpr double kVerdictFraction = 0.01;

Stats stats(std::span<const float> x, const std::vector<Format>& formats,
            const StatsOptions& o = {});
Stats stats(std::span<const double> x, const std::vector<Format>& formats,
            const StatsOptions& o = {});
// Any dtype: float16/bfloat16 are widened to float, integers and bool to double.
Stats stats(const Tensor& t, const std::vector<Format>& formats, const StatsOptions& o = {});

// ---- Scaled formats --------------------------------------------------------------------
// How a tensor fares quantized into a ScaledFormat (round_scaled, along an axis): what the
// shared scales do to it. A "block" is what one scale covers: an MX or NVFP4 block, one
// channel (channel scope), or the whole tensor (tensor scope).
struct ScaledFormatStats {
  ScaledFormat format;
  int axis = -1;  // the blocking (or channel) axis as asked; negative counts from the end
  std::uint64_t blocks = 0;
  std::uint64_t nan_blocks = 0;  // decoded to NaN by a NaN or inf they hold
  // Blocks with a value clamped to the element max once scaled (or, two-level, a block
  // scale clamped to the scale format's max), and the values clamped.
  std::uint64_t saturated_blocks = 0, saturated = 0;
  // Non-zero finite values that became zero while a larger value of their block did not:
  // flushed by the scale a neighbour set; and the blocks with at least one.
  std::uint64_t flushed = 0, flushed_blocks = 0;
  // Of those, the ones in blocks where at least half of the non-zero values were flushed:
  // one large value (an outlier) set the scale and swamped the block, as opposed to the
  // smallest few of an ordinary block rounding away; and those blocks.
  std::uint64_t swamped = 0, swamped_blocks = 0;
  // Non-zero finite values whose whole block became zero (the scale itself underflowed).
  std::uint64_t underflow = 0;
  // Finite non-zero values: what the counts are fractions of.
  std::uint64_t nonzero = 0;
  // Amax-rule formats (scaled FP8, one scale per tensor or channel) only, 0 for others:
  // non-zero values whose element became a non-zero subnormal of the element format (an
  // amax far above them put them below its normal range).
  std::uint64_t subnormal = 0;
  // Finite values beyond the largest magnitude their block decodes to by more than the
  // element's precision loss (below): clamped far past rounding, as a scale that saturated
  // (NVFP4's E4M3 block scale at 448, a calibrated amax below the values) clamps them. The
  // clamping OCP MX blocks do by design (at most 1 - max / 2^(emax + 1) of the value) is not
  // counted. And the blocks holding one.
  std::uint64_t clipped = 0, clipped_blocks = 0;
  // As FormatStats, over the finite non-zero values (flushed values count: error 1).
  std::uint64_t precision_loss = 0;
  double max_abs_error = 0, max_rel_error = 0, mean_rel_error = 0;
  // Block dynamic range: log2(largest / smallest non-zero magnitude) over the finite values
  // of each block that has a non-zero one; its floor -> blocks, and the largest (0 when no
  // block has a non-zero value). element_range_bits is what one scale can hold
  // (finfo(format).block_range_bits): blocks wider than it lose their smallest values.
  std::map<int, std::uint64_t> block_range_histogram;
  double max_block_range_bits = 0, element_range_bits = 0;
  // nonfinite; block_underflow (more than kVerdictFraction of the non-zero values flushed);
  // underflow (the same, by scales that underflowed); precision; ok. Scales follow the
  // values, so there is no overflow verdict: saturation shows in the counts and errors.
  Verdict verdict = Verdict::ok;
};

// `axis` (scope block or channel) as ScaledLayout::axis; threads as StatsOptions (margin does
// not apply). With StatsOptions::distribution false, the counts alone (blocks, nan_blocks,
// saturated*, flushed*, swamped*, underflow, nonzero, subnormal, clipped*; the rest is left
// at its default, verdict ok): on the fast path of round_scaled (float32, OCP MX and NVFP4
// blocks) they are taken while quantizing, in one pass. Throws fpguard::Error (where "axis")
// for an axis out of range.
ScaledFormatStats scaled_stats(std::span<const float> x, const ScaledLayout& l,
                               const ScaledFormat& f, const StatsOptions& o = {},
                               std::optional<double> amax = std::nullopt);
ScaledFormatStats scaled_stats(std::span<const double> x, const ScaledLayout& l,
                               const ScaledFormat& f, const StatsOptions& o = {},
                               std::optional<double> amax = std::nullopt);
// `amax`: a calibrated amax, as ScaledOptions::amax (the check's static activation scales).
// Any dtype, widened as stats() widens it; the layout is the tensor's shape and `axis`.
ScaledFormatStats scaled_stats(const Tensor& t, const ScaledFormat& f, int axis = -1,
                               const StatsOptions& o = {});

}  // namespace fpguard
