// Helpers shared by the unit tests: bit-exact comparison of carrier values (so that
// -0 vs +0 and NaN payloads count as differences) with hex-float failure messages.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>

#include "fpguard/round.hpp"

namespace fpguard {
// gtest prints parameters of parametrised tests through this.
inline void PrintTo(const Format& f, std::ostream* os) {
  *os << f.name;
}
}  // namespace fpguard

namespace fpguard::test {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
// The canonical quiet NaN every rounding path must return.
inline constexpr std::uint64_t kQNaN64 = 0x7ff8000000000000ull;
inline constexpr std::uint32_t kQNaN32 = 0x7fc00000u;
inline const double kNaN = std::bit_cast<double>(kQNaN64);

inline std::uint64_t bits(double x) {
  return std::bit_cast<std::uint64_t>(x);
}
inline std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

inline std::string hex(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (%.17g, bits 0x%016llx)", x, x,
                static_cast<unsigned long long>(bits(x)));
  return buf;
}
inline std::string hex(float x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (%.9g, bits 0x%08x)", static_cast<double>(x),
                static_cast<double>(x), bits(x));
  return buf;
}

// Equal bit patterns: distinguishes -0 from +0 and requires NaN to be the canonical one.
template <class T>
::testing::AssertionResult Same(T got, T want) {
  if (bits(got) == bits(want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << hex(got) << ", want " << hex(want);
}

inline const Format& named(std::string_view name) {
  for (const auto& f : named_formats())
    if (f.name == name) return f;
  ADD_FAILURE() << "no named format " << name;
  return named_formats().front();
}

// Whether finite x rounds past f's max when the exponent is unbounded (IEEE 754's
// overflow): x rounded in `mode` to f's significant bits at its own binade exceeds max.
// What "overflows" means for every format, saturating ones (FP6/FP4, whose round() never
// leaves the range) included. Without mantissa bits, a tie between 2^e and 2^(e+1) goes
// to the even exponent code (2^e's is e + bias).
inline bool rounds_past_max(long double x, const Format& f,
                            Rounding mode = Rounding::nearest_even) {
  const long double a = std::fabs(x), max = f.max();
  if (!(a > max)) return false;
  // The magnitude's direction: away from zero (ceil) or toward it (floor), or nearest.
  const bool away = mode == Rounding::up ? x > 0 : x < 0;
  const bool directed = mode == Rounding::up || mode == Rounding::down;
  const int e = std::ilogb(a);
  if (f.mantissa_bits == 0) {
    const long double q = std::ldexp(a, -e);  // in [1, 2)
    bool up = q > 1.5L || (q == 1.5L && ((e + f.bias) & 1));
    if (mode == Rounding::toward_zero || (directed && !away)) up = false;
    if (directed && away) up = q > 1;
    return std::ldexp(1.0L, up ? e + 1 : e) > max;
  }
  const long double ulp = std::ldexp(1.0L, e - f.mantissa_bits), q = a / ulp;
  long double r = std::nearbyint(q);
  if (mode == Rounding::toward_zero || (directed && !away)) r = std::floor(q);
  if (directed && away) r = std::ceil(q);
  return r * ulp > max;
}

inline RoundOptions options(Rounding r, bool saturate = false, bool flush = false) {
  RoundOptions o;
  o.rounding = r;
  o.saturate = saturate;
  o.flush_subnormals = flush;
  return o;
}

inline constexpr Rounding kDirectedAndNearest[] = {Rounding::nearest_even, Rounding::toward_zero,
                                                   Rounding::up, Rounding::down};

}  // namespace fpguard::test
