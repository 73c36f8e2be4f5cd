// Vectorised float32 math for the executor's elementwise kernels (Highway, one build per
// SIMD target, chosen at run time). Every function is within 4 ULP of the correctly
// rounded result for every float32 input (subnormal results: within 4 * 2^-149), and
// treats the special values as the C library does: see src/ops/vmath.cpp for the error
// analysis and tests/vmath_test.cpp for the sweeps that check it on every target.
#pragma once

#include <cstddef>

namespace fpguard::ops::vmath {

enum class Fn { exp, log, tanh, erf, sigmoid };

// out[i] = f(in[i]) for i < n; out may equal in (in place). Float32 only.
void apply(Fn f, const float* in, float* out, std::size_t n);

// out[i] = exp(in[i] - shift) (the difference rounded to float32 first); returns the sum
// of the out[i], accumulated in float32 lanes (compensated) and then reduced. The core of
// Softmax. out may equal in.
float exp_shifted_sum(const float* in, float shift, float* out, std::size_t n);

// The maximum of x[0..n) (n >= 1; -inf for n == 0), NaN if any element is NaN (the first
// one, payload and sign kept).
float max_of(const float* x, std::size_t n);

// Piecewise functions, bit for bit their scalar formulas in the executor (the same
// operations, each rounded the same way; NaNs pass through as there):
//   hard_swish: out[i] = x * clamp(x / 6 + 0.5, 0, 1)   (HardSwish)
//   relu:       out[i] = x > 0 or x is NaN ? x : +0       (Relu)
// out may equal in.
enum class Exact { hard_swish, relu };
void apply_exact(Exact f, const float* in, float* out, std::size_t n);

}  // namespace fpguard::ops::vmath
