// ops/vmath: the vectorised float32 exp, log, tanh, erf and sigmoid are within 4 ULP of the
// double-precision C library rounded to float32 (4 * 2^-149 for subnormal results) on every
// Highway target compiled in: a strided sweep of all 2^32 bit patterns plus exhaustive
// passes over the regions where the kernels switch or underflow (the exhaustive 2^32 sweep
// is tests/vmath_exhaustive_test.cpp). Then the special values, the tails and in-place
// operation, exp_shifted_sum and max_of.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "vmath_check.hpp"

namespace fpguard::test::vmath {
namespace {

namespace vm = fpguard::ops::vmath;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMin = std::numeric_limits<float>::min();            // smallest normal
constexpr float kDenorm = std::numeric_limits<float>::denorm_min();  // 2^-149
constexpr float kMax = std::numeric_limits<float>::max();

// Every bit pattern start + k * stride below 2^32 (both signs, NaNs and infinities too).
void sweep_strided(Checker& c, std::uint32_t stride, std::uint32_t start = 0) {
  std::vector<float> in;
  in.reserve(1 << 16);
  for (std::uint64_t u = start; u < (std::uint64_t{1} << 32); u += stride) {
    in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(u)));
    if (in.size() == in.capacity()) {
      c.check(in);
      in.clear();
    }
  }
  if (!in.empty()) c.check(in);
}

// Every float in [lo, hi] (lo <= hi, same sign) and, with both_signs, its negation.
void sweep_range(Checker& c, float lo, float hi, bool both_signs) {
  ASSERT_TRUE(lo <= hi && std::signbit(lo) == std::signbit(hi));
  std::vector<float> in;
  in.reserve(1 << 16);
  for (float x = lo;; x = std::nextafter(x, kInf)) {
    in.push_back(x);
    if (both_signs) in.push_back(-x);
    if (in.size() + 2 > in.capacity() || x == hi) {
      c.check(in);
      in.clear();
    }
    if (x == hi) break;
  }
}

// The stride is odd, so every exponent and both signs are sampled (1.7e7 inputs).
constexpr std::uint32_t kStride = 251;

TEST(VmathSweep, Exp) {
  TargetGuard guard;
  Checker c(Fn::exp);
  sweep_strided(c, kStride);
  sweep_range(c, 87.0f, 104.0f, true);  // subnormal results, underflow to 0, overflow
  sweep_range(c, 0.3f, 0.4f, true);     // the reduction's first switch, ln(2)/2
  std::cout << c.summary();
  c.expect_within(kMaxUlp, "sweep");
}

TEST(VmathSweep, Log) {
  TargetGuard guard;
  Checker c(Fn::log);
  sweep_strided(c, kStride);
  sweep_range(c, 0.99f, 1.01f, false);   // log(x) ~ x - 1: relative accuracy near 1
  sweep_range(c, 0.70f, 0.71f, false);   // the reduction's switch at sqrt(2)/2
  sweep_range(c, 1.41f, 1.42f, false);   // and at sqrt(2)
  sweep_range(c, kDenorm, kMin, false);  // every subnormal (scaled before the reduction)
  std::cout << c.summary();
  c.expect_within(kMaxUlp, "sweep");
}

TEST(VmathSweep, Tanh) {
  TargetGuard guard;
  Checker c(Fn::tanh);
  sweep_strided(c, kStride);
  sweep_range(c, 0.5f, 0.625f, true);  // the polynomial / exp switch at 0.5625
  sweep_range(c, 8.5f, 10.0f, false);  // saturation to 1 (tanh rounds to 1 above 9.01)
  std::cout << c.summary();
  c.expect_within(kMaxUlp, "sweep");
}

TEST(VmathSweep, Erf) {
  TargetGuard guard;
  Checker c(Fn::erf);
  sweep_strided(c, kStride);
  sweep_range(c, 0.5f, 4.0f, false);  // both kernels, the switch at 0.875, saturation at 3.92
  std::cout << c.summary();
  c.expect_within(kMaxUlp, "sweep");
}

TEST(VmathSweep, Sigmoid) {
  TargetGuard guard;
  Checker c(Fn::sigmoid);
  sweep_strided(c, kStride);
  sweep_range(c, -104.0f, -87.0f, false);  // subnormal results and underflow to 0
  sweep_range(c, -1.0f, -0.5f, false);     // e / (1 + e): the worst of the division errors
  sweep_range(c, 16.0f, 18.0f, false);     // rounding to 1
  std::cout << c.summary();
  c.expect_within(kMaxUlp, "sweep");
}

float one(Fn f, float x) {
  float y;
  vm::apply(f, &x, &y, 1);
  return y;
}

// Bit-exact (so -0 differs from +0; any NaN matches any NaN).
::testing::AssertionResult Exactly(Fn f, float x, float want) {
  const float got = one(f, x);
  if (std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want) ||
      (std::isnan(got) && std::isnan(want)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << name(f) << "(" << describe(x) << ") = " << describe(got) << ", want " << describe(want);
}

::testing::AssertionResult Near(Fn f, float x) {
  const float got = one(f, x), want = reference(f, x);
  const std::int64_t u = ulp_distance(got, want);
  if (u >= 0 && u <= kMaxUlp) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << name(f) << "(" << describe(x) << ") = " << describe(got) << ", want " << describe(want);
}

TEST(VmathSpecial, NaNInNaNOut) {
  const float nans[] = {kNaN, -kNaN, std::bit_cast<float>(0x7f800001u),
                        std::bit_cast<float>(0xffc12345u)};
  on_every_target([&] {
    for (Fn f : kAllFns)
      for (float x : nans) EXPECT_TRUE(std::isnan(one(f, x))) << name(f);
  });
}

TEST(VmathSpecial, Exp) {
  on_every_target([] {
    EXPECT_TRUE(Exactly(Fn::exp, -kInf, 0.0f));
    EXPECT_TRUE(Exactly(Fn::exp, kInf, kInf));
    EXPECT_TRUE(Exactly(Fn::exp, 0.0f, 1.0f));
    EXPECT_TRUE(Exactly(Fn::exp, -0.0f, 1.0f));
    EXPECT_TRUE(Exactly(Fn::exp, -kMax, 0.0f));
    EXPECT_TRUE(Exactly(Fn::exp, -104.0f, 0.0f));
    EXPECT_TRUE(Exactly(Fn::exp, -200.0f, 0.0f));
    EXPECT_TRUE(Exactly(Fn::exp, kMax, kInf));
    EXPECT_TRUE(Exactly(Fn::exp, 88.73f, kInf));
    EXPECT_TRUE(Exactly(Fn::exp, 89.0f, kInf));
    EXPECT_TRUE(Exactly(Fn::exp, 1000.0f, kInf));
    for (float x : {88.72f, 88.7228f, -87.0f, -88.0f, -100.0f, -103.0f, -103.9f, kDenorm, -kDenorm})
      EXPECT_TRUE(Near(Fn::exp, x));
    EXPECT_GT(one(Fn::exp, -103.0f), 0.0f);  // subnormal, not flushed
  });
}

TEST(VmathSpecial, Log) {
  on_every_target([] {
    EXPECT_TRUE(Exactly(Fn::log, 0.0f, -kInf));
    EXPECT_TRUE(Exactly(Fn::log, -0.0f, -kInf));
    EXPECT_TRUE(Exactly(Fn::log, kInf, kInf));
    EXPECT_TRUE(Exactly(Fn::log, 1.0f, 0.0f));
    for (float x : {-kDenorm, -1.0f, -kInf, -kMax}) EXPECT_TRUE(std::isnan(one(Fn::log, x)));
    for (float x : {kDenorm, 3 * kDenorm, kMin / 3, std::nextafter(kMin, 0.0f), kMin, kMax,
                    std::nextafter(1.0f, 0.0f), std::nextafter(1.0f, 2.0f), 2.0f, 0.5f})
      EXPECT_TRUE(Near(Fn::log, x));
  });
}

TEST(VmathSpecial, Tanh) {
  on_every_target([] {
    EXPECT_TRUE(Exactly(Fn::tanh, kInf, 1.0f));
    EXPECT_TRUE(Exactly(Fn::tanh, -kInf, -1.0f));
    EXPECT_TRUE(Exactly(Fn::tanh, 0.0f, 0.0f));
    EXPECT_TRUE(Exactly(Fn::tanh, -0.0f, -0.0f));
    EXPECT_TRUE(Exactly(Fn::tanh, 20.0f, 1.0f));
    EXPECT_TRUE(Exactly(Fn::tanh, -kMax, -1.0f));
    // Tiny x: tanh(x) = x to float32 precision (|x| < 2^-12), subnormals included.
    for (float x : {kDenorm, -kDenorm, kMin, -kMin, 1e-30f, -1e-30f, 1e-5f, 2e-4f})
      EXPECT_TRUE(Exactly(Fn::tanh, x, x));
  });
}

TEST(VmathSpecial, Erf) {
  on_every_target([] {
    EXPECT_TRUE(Exactly(Fn::erf, kInf, 1.0f));
    EXPECT_TRUE(Exactly(Fn::erf, -kInf, -1.0f));
    EXPECT_TRUE(Exactly(Fn::erf, 0.0f, 0.0f));
    EXPECT_TRUE(Exactly(Fn::erf, -0.0f, -0.0f));
    EXPECT_TRUE(Exactly(Fn::erf, 4.0f, 1.0f));
    EXPECT_TRUE(Exactly(Fn::erf, -kMax, -1.0f));
    for (float x : {kDenorm, -kDenorm, kMin, 1e-30f, 0.875f, std::nextafter(0.875f, 0.0f), 3.92f})
      EXPECT_TRUE(Near(Fn::erf, x));
    // Odd, bit for bit.
    std::vector<float> pos, neg, ep, en;
    for (float x = 1e-6f; x < 8; x *= 1.01f) pos.push_back(x), neg.push_back(-x);
    ep.resize(pos.size()), en.resize(pos.size());
    vm::apply(Fn::erf, pos.data(), ep.data(), pos.size());
    vm::apply(Fn::erf, neg.data(), en.data(), neg.size());
    for (std::size_t i = 0; i < pos.size(); ++i) ASSERT_EQ(en[i], -ep[i]) << describe(pos[i]);
  });
}

TEST(VmathSpecial, Sigmoid) {
  on_every_target([] {
    EXPECT_TRUE(Exactly(Fn::sigmoid, -kInf, 0.0f));
    EXPECT_TRUE(Exactly(Fn::sigmoid, kInf, 1.0f));
    EXPECT_TRUE(Exactly(Fn::sigmoid, 0.0f, 0.5f));
    EXPECT_TRUE(Exactly(Fn::sigmoid, -0.0f, 0.5f));
    EXPECT_TRUE(Exactly(Fn::sigmoid, kMax, 1.0f));
    EXPECT_TRUE(Exactly(Fn::sigmoid, -kMax, 0.0f));
    EXPECT_TRUE(Exactly(Fn::sigmoid, 1e30f, 1.0f));
    EXPECT_TRUE(Exactly(Fn::sigmoid, -1e30f, 0.0f));
    EXPECT_TRUE(Exactly(Fn::sigmoid, -200.0f, 0.0f));
    // Small results keep exp's relative accuracy (and are not flushed while representable).
    for (float x : {-20.0f, -50.0f, -87.0f, -88.5f, -100.0f, -103.0f, 20.0f, 1e-30f})
      EXPECT_TRUE(Near(Fn::sigmoid, x));
    EXPECT_GT(one(Fn::sigmoid, -100.0f), 0.0f);
    EXPECT_GT(one(Fn::sigmoid, -103.0f), 0.0f);
  });
}

std::vector<float> random_inputs(std::size_t n, std::uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Every n from 0 to 40 (all tail lengths of every target), out of place and in place: the
// first n outputs are the element-wise results, nothing past n is written.
TEST(VmathApply, TailsAndInPlace) {
  constexpr float kGuard = -12345.0f;
  on_every_target([&] {
    for (Fn f : kAllFns) {
      SCOPED_TRACE(name(f));
      const auto src = random_inputs(40, 7, f == Fn::log ? 0.0f : -12.0f, 12.0f);
      for (std::size_t n = 0; n <= 40; ++n) {
        std::vector<float> out(n + 8, kGuard);
        vm::apply(f, src.data(), out.data(), n);
        std::vector<float> inplace(src.begin(), src.begin() + n);
        inplace.resize(n + 8, kGuard);
        vm::apply(f, inplace.data(), inplace.data(), n);
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(out[i], one(f, src[i])) << "n = " << n << ", i = " << i;
          ASSERT_EQ(inplace[i], out[i]) << "n = " << n << ", i = " << i;
          ASSERT_TRUE(Near(f, src[i]));
        }
        for (std::size_t i = n; i < n + 8; ++i) {
          ASSERT_EQ(out[i], kGuard) << "n = " << n << ": wrote past the end";
          ASSERT_EQ(inplace[i], kGuard) << "n = " << n << ": wrote past the end";
        }
      }
    }
  });
}

// The piecewise functions against the executor's scalar formulas, bit for bit (NaN
// payloads and signed zeros included), on every target: every 257th bit pattern of the
// float32 range, the values where their pieces meet, and lengths 0-40 (every tail).
TEST(VmathExact, HardSwishAndReluAreTheScalarFormulasBitForBit) {
  const auto hard_swish = [](float x) { return x * std::clamp(x / 6.0f + 0.5f, 0.0f, 1.0f); };
  const auto relu = [](float x) {
    return x > 0 ? x : (x == 0 ? 0.0f : (std::isnan(x) ? x : 0.0f));
  };
  std::vector<float> in = {0.0f,
                           -0.0f,
                           3.0f,
                           -3.0f,
                           2.9999998f,
                           3.0000002f,
                           -2.9999998f,
                           -3.0000002f,
                           kInf,
                           -kInf,
                           kNaN,
                           -kNaN,
                           kDenorm,
                           -kDenorm,
                           kMax,
                           -kMax,
                           std::bit_cast<float>(0x7f800001u),
                           std::bit_cast<float>(0xffc12345u)};
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 257)
    in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(u)));
  std::vector<float> out(in.size());
  on_every_target([&] {
    for (const auto& [f, scalar, what] :
         {std::tuple{vm::Exact::hard_swish, +hard_swish, "hard_swish"},
          std::tuple{vm::Exact::relu, +relu, "relu"}}) {
      vm::apply_exact(f, in.data(), out.data(), in.size());
      for (std::size_t i = 0; i < in.size(); ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(scalar(in[i])))
            << what << " at x = " << describe(in[i]);
      for (std::size_t n = 0; n <= 40; ++n) {
        std::vector<float> part(n + 8, -12345.0f);
        vm::apply_exact(f, in.data(), part.data(), n);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(part[i]), std::bit_cast<std::uint32_t>(out[i]));
        for (std::size_t i = n; i < n + 8; ++i) ASSERT_EQ(part[i], -12345.0f) << "wrote past n";
      }
    }
  });
}

double double_sum(const std::vector<float>& v, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += v[i];
  return s;
}

TEST(VmathExpShiftedSum, OutputsSumAndTails) {
  on_every_target([] {
    for (std::size_t n : {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 1000, 100000}) {
      SCOPED_TRACE("n = " + std::to_string(n));
      auto in = random_inputs(std::max<std::size_t>(n, 1), n + 1, -30.0f, 10.0f);
      in.resize(n);
      const float shift = n ? vm::max_of(in.data(), n) : 0.0f;
      std::vector<float> out(n + 4, -1.0f);
      const float sum = vm::exp_shifted_sum(in.data(), shift, out.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], one(Fn::exp, in[i] - shift)) << i;
      for (std::size_t i = n; i < n + 4; ++i) ASSERT_EQ(out[i], -1.0f) << "wrote past the end";
      const double want = double_sum(out, n);
      if (n == 0)
        EXPECT_EQ(sum, 0.0f);
      else
        EXPECT_LE(std::fabs(sum - want), 1e-6 * want) << sum << " vs " << want;
      // In place: the same outputs and sum.
      std::vector<float> io = in;
      EXPECT_EQ(vm::exp_shifted_sum(io.data(), shift, io.data(), n), sum);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(io[i], out[i]) << i;
    }
    // Large n, all terms alike: plain float32 accumulation drifts by ~1e-4 relative here.
    std::vector<float> same(1 << 20, 0.1f), out(same.size());
    const float sum = vm::exp_shifted_sum(same.data(), 0.0f, out.data(), same.size());
    const double want = static_cast<double>(one(Fn::exp, 0.1f)) * static_cast<double>(same.size());
    EXPECT_LE(std::fabs(sum - want), 1e-6 * want) << sum << " vs " << want;
    // Infinite and NaN terms reach the sum (and the padding adds no NaN to it).
    for (std::size_t n = 1; n <= 17; ++n) {
      std::vector<float> v(n, 0.0f), o(n);
      v[n - 1] = kInf;
      EXPECT_EQ(vm::exp_shifted_sum(v.data(), 0.0f, o.data(), n), kInf) << n;
      v[n - 1] = kNaN;
      EXPECT_TRUE(std::isnan(vm::exp_shifted_sum(v.data(), 0.0f, o.data(), n))) << n;
    }
  });
}

TEST(VmathMaxOf, NaNAtEveryPosition) {
  on_every_target([] {
    const auto base = random_inputs(37, 3, -100.0f, 100.0f);
    for (std::size_t pos = 0; pos < base.size(); ++pos) {
      auto v = base;
      v[pos] = kNaN;
      EXPECT_TRUE(std::isnan(vm::max_of(v.data(), v.size()))) << "NaN at " << pos;
    }
  });
}

TEST(VmathMaxOf, EveryLengthAndPosition) {
  on_every_target([] {
    for (std::size_t n = 1; n <= 40; ++n) {
      for (std::size_t pos = 0; pos < n; ++pos) {
        auto v = random_inputs(n, n * 100 + pos, -100.0f, 100.0f);
        v[pos] = 1000.0f;
        ASSERT_EQ(vm::max_of(v.data(), n), 1000.0f) << "n = " << n << ", max at " << pos;
        for (float& x : v) x = -x;  // now a minimum there; the max is elsewhere
        float want = -kInf;
        for (float x : v) want = std::max(want, x);
        ASSERT_EQ(vm::max_of(v.data(), n), want) << "n = " << n;
      }
      std::vector<float> v(n, -kInf);
      EXPECT_EQ(vm::max_of(v.data(), n), -kInf);
      v[n - 1] = kInf;
      EXPECT_EQ(vm::max_of(v.data(), n), kInf);
    }
  });
}

}  // namespace
}  // namespace fpguard::test::vmath
