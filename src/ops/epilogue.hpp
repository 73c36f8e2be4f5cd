// Internal: the element-wise op a fused node applies in place to a Conv's or GEMM's outputs
// (KernelContext::epilogue), as the vector kernels (src/ops/pointwise.cpp,
// src/ops/depthwise.cpp) and the ops that fuse (ops::in_place_unary) take it.
#pragma once

#include <cstddef>
#include <functional>

namespace fpguard::ops {

// Applies the op in place to `n` floats, on up to `threads` threads.
using Epilogue = std::function<void(float* values, std::size_t n, int threads)>;

}  // namespace fpguard::ops
