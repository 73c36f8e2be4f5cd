// Internal: the vector kernels of linear Resize (src/ops/bilinear.cpp), which the Resize
// kernel (src/ops/resize.cpp) runs row by row.
#pragma once

#include <cstdint>

namespace fpguard::ops::bilinear {

// The two source rows of an output row, each expanded to the output's columns: a0[x] and
// a1[x] are the first row at output x's two column taps, b0[x] and b1[x] the second row's
// (as double); wy0 and wy1 the rows' weights, w0[x] and w1[x] the columns'.
struct Taps {
  const double *a0, *a1, *b0, *b1;
  double wy0, wy1;
  const double *w0, *w1;
};

// dst[x] = 0 + wy0 w0[x] a0[x] + wy0 w1[x] a1[x] + wy1 w0[x] b0[x] + wy1 w1[x] b1[x] for x
// in [0, n): each weight product rounded, then times the input and rounded, each term
// added in that order and rounded (double), the sum rounded once to float. Vectorised
// along the row (Highway, one build per SIMD target chosen at run time), with Mul and Add
// (never fused): the scalar loop's sums, bit for bit, on every target.
void row(const Taps& t, std::int64_t n, float* dst);
void row(const Taps& t, std::int64_t n, double* dst);

// A source row expanded to the output's n columns: e0[x] = src[c0[x]] and e1[x] =
// src[c1[x]], as double (exactly).
void expand(const float* src, const std::int32_t* c0, const std::int32_t* c1, std::int64_t n,
            double* e0, double* e1);
void expand(const double* src, const std::int32_t* c0, const std::int32_t* c1, std::int64_t n,
            double* e0, double* e1);

}  // namespace fpguard::ops::bilinear
