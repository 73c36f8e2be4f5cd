// Helpers shared by the unit tests: bit-exact comparison of carrier values (so that
// -0 vs +0 and NaN payloads count as differences) with hex-float failure messages.
#pragma once

#include <gtest/gtest.h>

#include <bit>
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
