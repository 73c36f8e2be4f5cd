// Per-chunk kernels of stats(): internal header. Written once, for float and double,
// in plain loops the compiler vectorises; the exponent histogram reads the bits.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "fpguard/format.hpp"
#include "fpguard/round.hpp"
#include "fpguard/stats.hpp"
#include "fpguard/tensor.hpp"
#include "round/fast.hpp"

namespace fpguard::detail {

// Histogram bins cover floor(log2 |x|) for every finite non-zero double.
inline constexpr int kHistOffset = -1074;
inline constexpr std::size_t kHistBins = 1023 - kHistOffset + 1;
// The longest chunk stats() hands the float32 kernels.
inline constexpr std::size_t kMaxChunk = 4096;

struct Moments {
  std::uint64_t n = 0;
  double mean = 0, m2 = 0;  // m2 = sum of squared deviations from the mean
};

struct BaseAcc {
  std::uint64_t nan = 0, posinf = 0, neginf = 0, zeros = 0, finite = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double min_abs_nonzero = std::numeric_limits<double>::infinity();
  std::array<std::uint64_t, kHistBins> hist{};
};

struct FormatAcc {
  std::uint64_t overflow = 0, underflow = 0, subnormal = 0, precision_loss = 0;
  double max_abs_error = 0, max_rel_error = 0, sum_rel_error = 0;
  std::uint64_t rel_count = 0;
};

// What chunk_format needs to know of a format, computed once.
struct FormatPlan {
  std::optional<FastParams> fast;  // the SIMD rounding path, when the format has one
  // The overflow threshold as float and double values: |x| >= them overflows (round.hpp).
  float overflow_f = 0;
  double overflow_d = 0;
  double smallest_normal = 0;
  double precision_loss_rel = 0;  // relative error past which half the bits are lost
};

inline FormatPlan make_plan(const Format& f) {
  FormatPlan p;
  p.fast = fast_params(f, RoundOptions{});
  p.overflow_f = overflow_from<float>(f);
  p.overflow_d = overflow_from<double>(f);
  p.smallest_normal = f.smallest_normal();
  p.precision_loss_rel = std::exp2(-0.5 * f.precision_bits());
  return p;
}

inline int floor_log2(float a) {  // a finite, > 0
  const std::uint32_t b = std::bit_cast<std::uint32_t>(a);
  const int e = static_cast<int>(b >> 23);
  return e ? e - 127 : 31 - std::countl_zero(b) - 149;
}
inline int floor_log2(double a) {
  const std::uint64_t b = std::bit_cast<std::uint64_t>(a);
  const int e = static_cast<int>(b >> 52);
  return e ? e - 1023 : 63 - std::countl_zero(b) - 1074;
}

template <class T>
Moments chunk_base(std::span<const T> x, BaseAcc& a) {
  T lo = std::numeric_limits<T>::infinity(), hi = -lo, minabs = lo;
  double sum = 0;
  std::uint64_t finite = 0, zeros = 0;
  for (const T v : x) {
    const T av = std::fabs(v);
    if (av <= std::numeric_limits<T>::max()) {  // finite (NaN compares false)
      ++finite;
      sum += static_cast<double>(v);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      if (v == 0) {
        ++zeros;
      } else {
        minabs = std::min(minabs, av);
        ++a.hist[static_cast<std::size_t>(floor_log2(av) - kHistOffset)];
      }
    } else if (std::isnan(v)) {
      ++a.nan;
    } else if (v > 0) {
      ++a.posinf;
    } else {
      ++a.neginf;
    }
  }
  a.finite += finite;
  a.zeros += zeros;
  a.min = std::min(a.min, static_cast<double>(lo));
  a.max = std::max(a.max, static_cast<double>(hi));
  a.min_abs_nonzero = std::min(a.min_abs_nonzero, static_cast<double>(minabs));
  Moments m;
  m.n = finite;
  if (finite == 0) return m;
  m.mean = sum / static_cast<double>(finite);
  double m2 = 0;  // second pass over the chunk (in L1): deviations from the chunk mean
  for (const T v : x) {
    if (std::fabs(v) <= std::numeric_limits<T>::max()) {
      const double d = static_cast<double>(v) - m.mean;
      m2 += d * d;
    }
  }
  m.m2 = m2;
  return m;
}

// x: the chunk; r: x rounded to nearest-even into the format.
template <class T>
void chunk_format(std::span<const T> x, std::span<const T> r, const FormatPlan& p, FormatAcc& a) {
  const T from =
      std::is_same_v<T, float> ? static_cast<T>(p.overflow_f) : static_cast<T>(p.overflow_d);
  const T smallest_normal = static_cast<T>(p.smallest_normal);
  const T loss = static_cast<T>(p.precision_loss_rel);
  T max_abs = 0, max_rel = 0;
  double sum_rel = 0;
  std::uint64_t overflow = 0, underflow = 0, subnormal = 0, lost = 0, rel_count = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const T ax = std::fabs(x[i]);
    if (!(ax <= std::numeric_limits<T>::max())) continue;  // NaN, inf: counted elsewhere
    const T ar = std::fabs(r[i]);
    if (ax >= from || !(ar <= std::numeric_limits<T>::max())) {
      ++overflow;
      continue;
    }
    // Exact: r is 0 or within a factor of two of x with the same sign (Sterbenz).
    const T err = std::fabs(r[i] - x[i]);
    max_abs = std::max(max_abs, err);
    if (ax == 0) continue;
    const T rel = err / ax;
    max_rel = std::max(max_rel, rel);
    sum_rel += static_cast<double>(rel);
    ++rel_count;
    if (ar == 0)
      ++underflow;
    else if (ar < smallest_normal)
      ++subnormal;
    if (rel > loss) ++lost;
  }
  a.overflow += overflow;
  a.underflow += underflow;
  a.subnormal += subnormal;
  a.precision_loss += lost;
  a.max_abs_error = std::max(a.max_abs_error, static_cast<double>(max_abs));
  a.max_rel_error = std::max(a.max_rel_error, static_cast<double>(max_rel));
  a.sum_rel_error += sum_rel;
  a.rel_count += rel_count;
}

Moments merge_moments(const Moments& a, const Moments& b);

// Adds b's counts, extremes and histogram to a (exact: the order does not matter).
void merge_into(BaseAcc& a, const BaseAcc& b);
// The statistics of n values summarised in `b` (the exponent histogram when asked), as
// stats() reports them, without mean and std (NaN): for callers that summarise with the
// chunk kernels themselves.
TensorStats summarize(const BaseAcc& b, std::uint64_t n, bool histogram);

// A format whose float32 rounding has a fast path, as chunk_all takes it.
struct FusedFormat {
  const FastParams* rp;
  const FormatPlan* plan;
  FormatAcc* acc;
};

// What the summary of a chunk's whole vectors found (BaseVecs, stats/base_simd-inl.h), for
// the formats' passes over the chunk.
struct ChunkRange {
  bool all_finite = false;
  float max_abs = 0;          // the largest finite |x|
  float min_abs_nonzero = 0;  // the smallest nonzero |x| (inf when none)
  std::uint64_t zeros = 0;
};

// What chunk_all adds beyond the counts and extremes: nothing, the moments (mean, std), or
// the moments and the exponent histogram (StatsOptions::distribution and ::histogram).
enum class Distribution { none, moments, full };

// float32 chunks (stats_simd.cpp): the chunk's summary into `a` (returns its moments, when
// asked) and the error summary of every format in `fmts`, each rounded to nearest-even
// with its fast path, by the way the chunk's range allows (a test per vector only where
// the chunk holds NaN, infinities or magnitudes beyond a format's range); `inv` (at least
// x.size()) is scratch space for 1/|x|, shared by the formats.
Moments chunk_all(std::span<const float> x, BaseAcc& a, std::span<const FusedFormat> fmts,
                  std::span<float> inv, Distribution d = Distribution::full);

// The SIMD version (stats_simd.cpp) for float; the scalar one above for double.
template <class T>
void chunk_format_fast(std::span<const T> x, std::span<const T> r, const FormatPlan& p,
                       FormatAcc& a);

// Calls fn with the tensor's values as a span of float or double: float32 and float64 as
// they are, float16 and bfloat16 widened to float (exactly), integers and bool to double.
template <class F>
decltype(auto) with_real_values(const Tensor& t, F&& fn) {
  if (t.dtype() == DType::float32) return fn(t.data<float>());
  if (t.dtype() == DType::float64) return fn(t.data<double>());
  if (t.dtype() == DType::float16 || t.dtype() == DType::bfloat16) {
    const Format f = parse_format(t.dtype() == DType::float16 ? "float16" : "bfloat16");
    std::vector<float> wide(t.size());
    const auto codes = t.data<std::uint16_t>();
    for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<float>(decode(codes[i], f));
    return fn(std::span<const float>(wide));
  }
  std::vector<double> wide(t.size());
  to_double(t, wide);
  return fn(std::span<const double>(wide));
}

// scaled_stats' counts alone (StatsOptions::distribution false) of a quantization of `f`
// along `axis` that took them (round_scaled_counting): its ScaledCounts and block counts.
ScaledFormatStats counted_stats(const ScaledFormat& f, int axis, const ScaledCounts& c,
                                const BlockCounts& b);

}  // namespace fpguard::detail
