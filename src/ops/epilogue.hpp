// Internal: the element-wise op a fused node applies in place to a Conv's or GEMM's outputs
// (KernelContext::epilogue), as the vector kernels (src/ops/pointwise.cpp,
// src/ops/depthwise.cpp) and the ops that fuse (ops::in_place_unary) take it.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>

#include "ops/vmath.hpp"

namespace fpguard::ops {

// Applies the op in place to `n` floats, on up to `threads` threads.
using Epilogue = std::function<void(float* values, std::size_t n, int threads)>;

// The epilogue of an op whose float32 code is one of vmath's exact functions (Relu,
// HardSwish: ops::in_place_unary makes it): a vector kernel may apply f's vector form
// (ops/vmath-inl.hpp) to its outputs in registers before storing them, instead of calling
// the epilogue on them after: the same bits, without a pass over the outputs.
struct ExactEpilogue {
  vmath::Exact f;
  void operator()(float* values, std::size_t n, int threads) const;  // (ops/elementwise.cpp)
};

// The exact function that `e` applies (an ExactEpilogue), or nullopt: none, or another op.
inline std::optional<vmath::Exact> exact_of(const Epilogue* e) {
  const auto* x = e ? e->target<ExactEpilogue>() : nullptr;
  return x ? std::optional(x->f) : std::nullopt;
}

}  // namespace fpguard::ops
