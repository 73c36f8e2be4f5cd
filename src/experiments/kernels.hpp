// Vectorised GEMM kernels of the experiments (Highway, chosen at run time). Internal
// header: the public entry points are gemm_reference / gemm_accumulate in experiments.hpp.
//
// Every kernel keeps, for each element of C, one chain of fused multiply-adds over k in
// increasing order (c = fma(a_ik, b_kj, c)), however it blocks the loops: so the float
// and double kernels compute exactly "sequential accumulation with exact products" in
// float32 and float64, and are tested bit for bit against the exact emulation. Targets
// without a native FMA take a scalar std::fma loop, so the result never depends on the CPU.
#pragma once

#include <cstddef>

namespace fpguard::detail {

// C[m x n] = (accumulate ? C : 0) + A[m x k] B[k x n]; row-major with leading dimensions.
void gemm_fma(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
              std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, bool accumulate);
void gemm_fma(const double* a, std::size_t lda, const double* b, std::size_t ldb, double* c,
              std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, bool accumulate);
// Ogita-Rump-Oishi Dot2 per element: (hi, lo) carry a running sum and its compensation
// (start them at zero); the dot product is hi + lo. Continues from the values given.
void gemm_dot2(const double* a, std::size_t lda, const double* b, std::size_t ldb, double* hi,
               double* lo, std::size_t ldc, std::size_t m, std::size_t n, std::size_t k);

// Round-to-odd sums for the exact emulation (see add_odd in experiments/internal.hpp):
// out[j] = odd(x[j] + y[j]) and out[j] = odd(s[j] + a * b[j]) (the product exact in T
// by the caller's guarantee). out may alias the inputs.
void add_odd_rows(const float* x, const float* y, float* out, std::size_t n);
void add_odd_rows(const double* x, const double* y, double* out, std::size_t n);
void add_odd_fma_rows(float a, const float* b, const float* s, float* out, std::size_t n);
void add_odd_fma_rows(double a, const double* b, const double* s, double* out, std::size_t n);

}  // namespace fpguard::detail
