// Shared by tests/vmath_test.cpp (strided and regional sweeps) and the exhaustive sweep in
// tests/vmath_exhaustive_test.cpp: the double-precision references, the ULP distance, and a
// checker that runs a batch of inputs through vmath on every Highway target compiled in
// and records the worst error per target.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "ops/vmath.hpp"
#include "targets.hpp"

namespace fpguard::test::vmath {

using fpguard::ops::vmath::Fn;

inline constexpr Fn kAllFns[] = {Fn::exp, Fn::log, Fn::tanh, Fn::erf, Fn::sigmoid};
inline constexpr std::int64_t kMaxUlp = 4;

inline const char* name(Fn f) {
  switch (f) {
    case Fn::exp:
      return "exp";
    case Fn::log:
      return "log";
    case Fn::tanh:
      return "tanh";
    case Fn::erf:
      return "erf";
    case Fn::sigmoid:
      return "sigmoid";
  }
  return "?";
}

// The reference: the C library's double function, rounded to float32.
inline float reference(Fn f, float xf) {
  const double x = xf;
  switch (f) {
    case Fn::exp:
      return static_cast<float>(std::exp(x));
    case Fn::log:
      return static_cast<float>(std::log(x));
    case Fn::tanh:
      return static_cast<float>(std::tanh(x));
    case Fn::erf:
      return static_cast<float>(std::erf(x));
    case Fn::sigmoid: {
      if (std::isnan(x)) return static_cast<float>(x);
      const double e = std::exp(-std::fabs(x));  // exact to ~2^-52 in both halves
      return static_cast<float>((x < 0 ? e : 1.0) / (1.0 + e));
    }
  }
  return 0;
}

// Position on the number line in units of float32 spacing: consecutive floats differ by
// 1, -0 and +0 coincide, and the subnormal spacing 2^-149 is one unit, so that a
// distance of 4 is "4 ULP" for normal results and "4 * 2^-149" for subnormal ones.
inline std::int64_t ordinal(float x) {
  const auto i = std::bit_cast<std::int32_t>(x);
  return i >= 0 ? std::int64_t{i} : -std::int64_t{i & 0x7fffffff};
}

// ULP distance of got from want; NaN must match NaN and infinities must be exact (-1 for
// such a mismatch, reported as "infinitely wrong").
inline std::int64_t ulp_distance(float got, float want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got) ? 0 : -1;
  if (std::isinf(want) || std::isinf(got)) return got == want ? 0 : -1;
  const std::int64_t d = ordinal(got) - ordinal(want);
  return d < 0 ? -d : d;
}

inline std::string describe(float x) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "%a (%.9g)", static_cast<double>(x), static_cast<double>(x));
  return buf;
}

struct Worst {
  std::int64_t ulp = 0;  // -1: a NaN or infinity mismatch (always the worst)
  float x = 0, got = 0, want = 0;
  std::uint64_t count = 0;
  bool worse_than(std::int64_t u) const { return ulp >= 0 && (u < 0 || u > ulp); }
};

using fpguard::test::on_every_target;
using fpguard::test::TargetGuard;

// Runs batches of inputs through apply(f) on every target (or only on the one run-time
// dispatch picks on this machine: the first, Highway listing the best target first),
// against one reference pass.
class Checker {
 public:
  explicit Checker(Fn f, bool all_targets = true)
      : f_(f), targets_(hwy::SupportedAndGeneratedTargets()) {
    if (!all_targets) targets_.resize(1);
    worst_.resize(targets_.size());
  }

  void check(const std::vector<float>& in) {
    want_.resize(in.size());
    got_.resize(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) want_[i] = reference(f_, in[i]);
    for (std::size_t t = 0; t < targets_.size(); ++t) {
      hwy::SetSupportedTargetsForTest(targets_[t]);
      fpguard::ops::vmath::apply(f_, in.data(), got_.data(), in.size());
      Worst& w = worst_[t];
      w.count += in.size();
      for (std::size_t i = 0; i < in.size(); ++i) {
        const std::int64_t u = ulp_distance(got_[i], want_[i]);
        if (u != 0 && w.worse_than(u)) w = Worst{u, in[i], got_[i], want_[i], w.count};
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }

  // One failure per target over the limit, naming the worst input.
  void expect_within(std::int64_t max_ulp, const char* what) const {
    for (std::size_t t = 0; t < targets_.size(); ++t) {
      const Worst& w = worst_[t];
      EXPECT_TRUE(w.ulp >= 0 && w.ulp <= max_ulp)
          << name(f_) << " " << what << " on " << hwy::TargetName(targets_[t]) << ": "
          << (w.ulp < 0 ? std::string("NaN/inf mismatch") : std::to_string(w.ulp) + " ULP")
          << " at x = " << describe(w.x) << ": got " << describe(w.got) << ", want "
          << describe(w.want);
    }
  }

  std::string summary() const {
    std::string s;
    for (std::size_t t = 0; t < targets_.size(); ++t) {
      const Worst& w = worst_[t];
      s += std::string(name(f_)) + " " + hwy::TargetName(targets_[t]) + ": max " +
           std::to_string(w.ulp) + " ULP at x = " + describe(w.x) + " (got " + describe(w.got) +
           ", want " + describe(w.want) + ")\n";
    }
    return s;
  }

 private:
  Fn f_;
  std::vector<std::int64_t> targets_;
  std::vector<Worst> worst_;
  std::vector<float> want_, got_;
};

}  // namespace fpguard::test::vmath
