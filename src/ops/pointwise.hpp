// Internal: the vector kernel of 1x1 convolutions with few input channels
// (src/ops/pointwise.cpp), which the Conv kernel (src/ops/conv.cpp) runs on NCHW, a panel of
// output positions at a time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/epilogue.hpp"

namespace fpguard::ops::pointwise {

// The input channels (k) up to which the Conv kernel runs a 1x1 convolution here rather
// than on oneDNN's GEMM: there oneDNN's AVX2 sgemm computes the same chains as this kernel
// (DBNet's and MobileNetV3's outputs are bit for bit the same either way), so the choice
// changes no result on this machine; above it oneDNN's blocking over k may add partial sums.
constexpr std::int64_t kMaxK = 32;

// The output positions in one call of columns() at most, for m output and k input
// channels: the panel of k input rows and its m output rows fit in 192 KiB (L2).
std::int64_t panel_columns(std::int64_t m, std::int64_t k);
// The floats of scratch that columns() needs for m x k (per thread).
std::size_t scratch_floats(std::int64_t m, std::int64_t k);

// Columns [c0, c1) of y (m x n, rows n floats apart) = w (m x k) times x (k x n), with
// c1 - c0 <= panel_columns(m, k): y[i][j] is the chain of fused multiply-adds over k in
// increasing order, from 0, c = fma(w[i][q], x[q][j], c), then + bias[i] when bias is not
// null (a separate, rounded addition), then the epilogue when it is not null (on one
// thread; an ops::ExactEpilogue on the tiles' registers before they are stored). Every
// SIMD target computes those bits (targets without a fused multiply-add take a scalar
// std::fma loop).
void columns(const float* w, const float* x, const float* bias, float* y, std::int64_t m,
             std::int64_t k, std::int64_t n, std::int64_t c0, std::int64_t c1,
             const Epilogue* epilogue, float* scratch);

}  // namespace fpguard::ops::pointwise
