// Helpers shared by the experiments' sources. Internal header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "fpguard/format.hpp"

namespace fpguard::detail {

// a + b rounded to odd at float64's 53 bits: rounding that to nearest in any format of
// at most 51 bits (odd_rounding_suffices) gives the correctly rounded a + b, which a
// plain double addition followed by a second rounding does not always do.
double add_odd(double a, double b);
bool odd_rounding_suffices(const Format& f);

bool is_float64(const Format& f);
bool is_float32(const Format& f);
// Where blocked:K adds its chunk sums: the accumulation format if it has at least
// float32's precision, else float32.
Format outer_format(const Format& acc);
// Threads for a loop over `rows` rows: `requested`, or every core when 0.
int thread_count(int requested, std::size_t rows);
// Whether every element is a float32 value (NaN counts as one).
bool all_float(std::span<const double> x);
// Whether every element has at most 26 significant bits (its products are exact in double).
bool all_narrow(std::span<const double> x);
// C = A B for n x n row-major float32 matrices, oneDNN's dnnl_sgemm.
// C = A B, row-major, A m x k, B k x n (oneDNN).
void sgemm(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k,
           std::int64_t n);

}  // namespace fpguard::detail
