// Internal to the analysis layer: the element comparison behind analysis::compare(), one
// scalar definition (compare_one) shared by the scalar tail and the SIMD kernel
// (compare_simd.cpp), which handles vectors whose lanes are all finite and passes any
// other vector to compare_one lane by lane.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "fpguard/analysis.hpp"

namespace fpguard::analysis {

struct CompareParams {
  double max = 0;   // the format's largest finite value
  double tiny = 0;  // its smallest normal (the floor of relative errors)
  bool subnormals = true;
};

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
  const double rel = ad / std::max(ax, p.tiny);
  c.max_abs = std::max(c.max_abs, ad);
  c.max_rel = std::max(c.max_rel, rel);
  c.sum_rel += rel;
  c.dot += x * y;
  c.vv += y * y;
  c.rr += x * x;
  c.dd += d * d;
  ++c.finite;
}

// Compares the first n - n % (lanes) elements; returns how many it did.
std::size_t compare_simd(const float* r, const float* v, std::size_t n, const CompareParams& p,
                         Comparison& c);

}  // namespace fpguard::analysis
