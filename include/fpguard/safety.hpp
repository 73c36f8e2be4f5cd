// Safe elementwise operations: division and reciprocal square root that cannot divide
// by zero, because the denominator is kept at least eps = eps_scale * finfo(f).tiny
// (the smallest normal of the format f the computation stands for) away from zero. They
// are what people write by hand as `a / (b + eps)` and `rsqrt(x + eps)`, with the sign of
// a zero denominator honoured and the few remaining non-finite results counted instead of
// silently produced (docs/safety.md).
//
// Convention for safe_divide: b' = copysign(max(|b|, eps), b), so +0 -> +eps and
// -0 -> -eps, and tiny |b| < eps keeps its sign; NaN stays NaN and +-inf stays +-inf.
// (b + eps * sign(b) is wrong: sign(0) = 0 leaves a zero denominator unprotected.)
// The division is plain carrier arithmetic (float or double), not rounded to f: a result
// can still overflow to inf when |a| / eps exceeds the carrier's max, which is why both
// functions return the number of non-finite outputs.
//
// Convention for safe_rsqrt: 1 / sqrt(max(x, eps)); x < 0 gives NaN (a negative input
// is a domain error, not something to clamp away), -0 counts as zero (-> 1/sqrt(eps)),
// +inf gives +0, NaN stays NaN.
//
// Spans must have equal sizes (a mismatch is a caller bug: FPG_CHECK); `out` may be the
// same array as an input. eps_scale must be finite and > 0, and eps must not round to
// zero in the carrier (float overloads with a float64 format and eps_scale 1 would):
// otherwise fpguard::Error.
#pragma once

#include <cstddef>
#include <span>

#include "fpguard/format.hpp"

namespace fpguard {

// out = a / b', eps from float32 (float overloads) or float64 (double overloads).
// Returns how many outputs are NaN or +-inf (from NaN/inf inputs or from overflow).
std::size_t safe_divide(std::span<const float> a, std::span<const float> b, std::span<float> out,
                        double eps_scale = 1.0);
std::size_t safe_divide(std::span<const double> a, std::span<const double> b, std::span<double> out,
                        double eps_scale = 1.0);
// As above, with eps = eps_scale * finfo(f).tiny: f is the format the division stands for
// (e.g. float16 for an fp16 kernel carried in float).
std::size_t safe_divide(std::span<const float> a, std::span<const float> b, std::span<float> out,
                        double eps_scale, const Format& f);
std::size_t safe_divide(std::span<const double> a, std::span<const double> b, std::span<double> out,
                        double eps_scale, const Format& f);

// out = 1 / sqrt(max(x, eps)), computed as a division by a square root in the carrier
// (two correctly rounded operations, as torch.rsqrt on CPU). Returns how many outputs are
// NaN (negative or NaN inputs).
std::size_t safe_rsqrt(std::span<const float> x, std::span<float> out, double eps_scale = 1.0);
std::size_t safe_rsqrt(std::span<const double> x, std::span<double> out, double eps_scale = 1.0);
std::size_t safe_rsqrt(std::span<const float> x, std::span<float> out, double eps_scale,
                       const Format& f);
std::size_t safe_rsqrt(std::span<const double> x, std::span<double> out, double eps_scale,
                       const Format& f);

}  // namespace fpguard
