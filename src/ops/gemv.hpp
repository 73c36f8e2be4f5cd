// Internal: the product of one row by a matrix stored by rows (src/ops/gemv.cpp), which
// gemm() runs for a single row of A against a transposed B: a Linear at batch 1 (a
// classifier's Gemm), a squeeze-excitation block's 1x1 layers over a 1 x 1 plane, a
// recurrent step at batch 1.
#pragma once

#include <cstdint>

namespace fpguard::ops::gemv {

// y[j] = alpha * dot(x, b_j) (+ beta * y[j] when beta != 0) for j in [j0, j1), b_j the
// row of k floats at b + j * ldb. dot sums the products x[q] b_j[q] in the L lanes of a
// vector (lane l takes q = l, l + L, ... in increasing order, one fused multiply-add
// each, from 0), then adds the lanes (Highway's SumOfLanes): the same bits for any split of
// the columns across calls, on one SIMD target (L and the lanes' sum are the target's).
void rows(const float* x, const float* b, std::int64_t ldb, std::int64_t k, float alpha, float beta,
          float* y, std::int64_t j0, std::int64_t j1);

}  // namespace fpguard::ops::gemv
