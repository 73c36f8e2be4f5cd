// Internal to the analysis layer: the element comparison behind analysis::compare(), one
// scalar definition (compare_one) shared by the scalar tail and the SIMD kernel
// (compare_simd.cpp), which handles vectors whose lanes are all finite and passes any
// other vector to compare_one lane by lane.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "fpguard/analysis.hpp"
#include "stats/kernels.hpp"

namespace fpguard::analysis {

struct CompareParams {
  double max = 0;   // the format's largest finite value
  double tiny = 0;  // its smallest normal (the floor of relative errors)
  bool subnormals = true;
  // The scale-relative error's floor, max(2^-10 absmax(r), tiny); 0: not measured.
  double floor = 0;
};

// 1 / max(|x|, tiny), the relative error's divisor, as a float division (a float32
// reference's |x| and a format's tiny are floats): the SIMD kernel divides 16 lanes at a
// time this way, once for every run it compares with x, and gets the same bits. A
// relative error is then within 2^-24 of the quotient. (Float64 references beyond
// float's range divide in double.)
inline double reciprocal_floor(double ax, double tiny) {
  const double f = std::max(ax, tiny);
  if (f > std::numeric_limits<float>::max()) return 1.0 / f;
  return static_cast<double>(1.0f / static_cast<float>(f));
}

inline void compare_one(double x, double y, const CompareParams& p, Comparison& c) {
  if (!std::isfinite(x)) return;
  ++c.count;
  const double ax = std::fabs(x);
  if (std::isnan(y)) {
    // Formats without inf (FP8 E4M3, ...) turn an overflow into NaN.
    ++(ax > p.max ? c.overflow : c.nan);
    return;
  }
  if (std::isinf(y)) {
    ++c.overflow;
    return;
  }
  const double ay = std::fabs(y);
  if (ax > p.max && ay >= p.max) ++c.overflow;  // saturated
  if (y == 0 && x != 0)
    ++c.underflow;
  else if (y != 0 && ay < p.tiny && p.subnormals)
    ++c.subnormal;
  const double d = y - x, ad = std::fabs(d);
  const double rel = ad * reciprocal_floor(ax, p.tiny);
  c.max_abs = std::max(c.max_abs, ad);
  c.max_rel = std::max(c.max_rel, rel);
  if (p.floor > 0) c.max_scaled = std::max(c.max_scaled, ad * reciprocal_floor(ax, p.floor));
  c.sum_rel += rel;
  c.dot += x * y;
  c.vv += y * y;
  c.rr += x * x;
  c.dd += d * d;
  ++c.finite;
}

// Compares r with vs[j] (j < k, k = 1 or 2; params ps[j] into cs[j]) over the first
// n - n % (lanes) elements in one pass; returns how many it did (0: none, e.g. a format
// whose limits are not floats, or runs with different relative-error floors or scale
// floors). With `ref`, those elements of r are summarised into it too (stats() without
// the moments).
std::size_t compare_simd(const float* r, const float* const* vs, std::size_t k, std::size_t n,
                         const CompareParams* ps, Comparison* cs, detail::BaseAcc* ref = nullptr);

// What check needs of a constant, in one pass without rounding (ConstantScan): counts,
// extremes over the finite values (+inf and -inf while there is none), and the sums of
// squares of the finite values, of the non-zero ones at most `zero_max` in magnitude (they
// round to zero) and of those at least `overflow_min` (they round past the range), each
// lane of a vector its own running sums.
struct ScanCounts {
  std::uint64_t nan = 0, posinf = 0, neginf = 0, underflow = 0, overflow = 0;
  double min = std::numeric_limits<double>::infinity(),
         max = -std::numeric_limits<double>::infinity(),
         min_abs_nonzero = std::numeric_limits<double>::infinity();
  double sums[3] = {0, 0, 0};
};
// Over the first n - n % (lanes) values of x, into c; returns how many it did.
std::size_t constant_scan_simd(const float* x, std::size_t n, float zero_max, float overflow_min,
                               ScanCounts& c);

}  // namespace fpguard::analysis
