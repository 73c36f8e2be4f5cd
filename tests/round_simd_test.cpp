// The array entry points of rounding: they agree with the scalar generic path element by
// element, in place too, whatever the thread count; and the SIMD fast path agrees with the
// generic path bit for bit on every Highway target compiled in, for every tail length.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "fpguard/round.hpp"
#include "test_util.hpp"

namespace fpguard {
namespace {

using test::bits;
using test::hex;
using test::named;
using test::options;

constexpr Rounding kAllModes[] = {Rounding::nearest_even, Rounding::toward_zero, Rounding::up,
                                  Rounding::down, Rounding::stochastic};

// Values that probe every branch of the kernels for format f, then random ones: random
// bit patterns (NaN payloads and float32 subnormals included) and values spread over
// the format's range.
std::vector<float> probe_values(const Format& f, std::size_t n, std::uint64_t seed) {
  const float M = static_cast<float>(f.max()), N = static_cast<float>(f.smallest_normal());
  const float s = static_cast<float>(f.smallest_subnormal()), e = static_cast<float>(f.eps());
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> special = {0.0f,
                                -0.0f,
                                inf,
                                -inf,
                                std::bit_cast<float>(0x7fc00000u),
                                std::bit_cast<float>(0xff800001u),
                                std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::denorm_min(),
                                -std::numeric_limits<float>::min(),
                                M,
                                -M,
                                std::nextafter(M, inf),
                                N,
                                -N,
                                std::nextafter(N, 0.0f),
                                s,
                                -s,
                                s / 2,
                                -s / 2,
                                1.5f * s,
                                std::nextafter(s / 2, inf),
                                1.0f,
                                1 + e / 2,
                                -(1 + e / 2),
                                1 + 1.5f * e,
                                std::nextafter(1 + e / 2, inf),
                                0.1f,
                                -3.7f};
  // Halfway above max, where float32 can hold it.
  const double tie = f.max() + std::ldexp(1.0, f.emax() - f.mantissa_bits - 1);
  if (static_cast<double>(static_cast<float>(tie)) == tie) {
    special.push_back(static_cast<float>(tie));
    special.push_back(-std::nextafter(static_cast<float>(tie), 0.0f));
  }
  std::mt19937_64 rng(seed);
  std::vector<float> v;
  for (std::size_t i = 0; i < n; ++i) {
    if (i < special.size()) {
      v.push_back(special[i]);
    } else if (rng() % 2) {
      v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
    } else {
      const int lo = std::max(-149, f.emin() - f.mantissa_bits - 2);
      const int hi = std::min(127, f.emax() + 1);
      const int k = std::uniform_int_distribution<int>(lo, hi)(rng);
      const double m = std::uniform_real_distribution<double>(-2, 2)(rng);
      v.push_back(static_cast<float>(std::ldexp(m, k)));
    }
  }
  return v;
}

// Runs of consecutive float32 bit patterns across the format's boundaries (1, the smallest
// normal, max): whole vectors of in-range lanes, and vectors that straddle a boundary.
std::vector<float> dense_values(const Format& f) {
  std::vector<float> v;
  for (double centre : {1.0, f.smallest_normal(), f.max()}) {
    const auto c = bits(static_cast<float>(centre));
    for (std::uint32_t b = c - 1500; b != c + 1500; ++b) {
      v.push_back(std::bit_cast<float>(b));
      v.push_back(-std::bit_cast<float>(b));
    }
  }
  return v;
}

::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want,
                                     const std::vector<float>& in) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (bits(got[i]) != bits(want[i]))
      return ::testing::AssertionFailure() << "at " << i << " x = " << hex(in[i]) << ": got "
                                           << hex(got[i]) << ", want " << hex(want[i]);
  return ::testing::AssertionSuccess();
}

std::vector<RoundOptions> option_sets() {
  std::vector<RoundOptions> v;
  for (Rounding r : kAllModes)
    for (bool saturate : {false, true})
      for (bool flush : {false, true}) {
        RoundOptions o = options(r, saturate, flush);
        o.seed = 17;
        v.push_back(o);
      }
  return v;
}

std::string describe(const RoundOptions& o) {
  return std::string(to_string(o.rounding)) + (o.saturate ? " saturate" : "") +
         (o.flush_subnormals ? " flush" : "");
}

TEST(RoundArray, FloatAndDoubleArraysMatchScalar) {
  for (const Format& f : named_formats()) {
    const auto in = probe_values(f, 5000, 11);
    const std::vector<double> din(in.begin(), in.end());
    for (const RoundOptions& o : option_sets()) {
      SCOPED_TRACE(f.name + " " + describe(o));
      std::vector<float> out(in.size()), want(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) want[i] = round(in[i], f, o, i);
      round(in, out, f, o);
      EXPECT_TRUE(same_bits(out, want, in));
      round_generic(in, out, f, o);
      EXPECT_TRUE(same_bits(out, want, in));
      std::vector<double> dout(din.size());
      round(din, dout, f, o);
      for (std::size_t i = 0; i < din.size(); ++i)
        ASSERT_EQ(bits(dout[i]), bits(round(din[i], f, o, i))) << "x = " << hex(din[i]);
    }
  }
}

TEST(RoundArray, InPlace) {
  for (const char* name : {"float16", "float8_e4m3fn", "float8_e8m0fnu"}) {
    const Format& f = named(name);
    for (const RoundOptions& o : option_sets()) {
      SCOPED_TRACE(f.name + " " + describe(o));
      const auto in = probe_values(f, 1000, 5);
      std::vector<float> want(in.size()), buf = in;
      round(in, want, f, o);
      round(buf, buf, f, o);
      EXPECT_TRUE(same_bits(buf, want, in));
      std::vector<double> dbuf(in.begin(), in.end()), dwant(in.size());
      round(std::span<const double>(dbuf), dwant, f, o);
      round(dbuf, dbuf, f, o);
      EXPECT_EQ(0, std::memcmp(dbuf.data(), dwant.data(), dbuf.size() * sizeof(double)));
    }
  }
}

TEST(RoundArray, ThreadCountDoesNotChangeResults) {
  for (const char* name : {"bfloat16", "float8_e5m2", "float8_e8m0fnu"}) {
    const Format& f = named(name);
    const auto in = probe_values(f, 1000000, 23);
    for (Rounding r : kAllModes) {
      SCOPED_TRACE(f.name + " " + std::string(to_string(r)));
      RoundOptions o = options(r);
      o.seed = 1;
      std::vector<float> one(in.size()), two(in.size());
      o.threads = 1;
      round(in, one, f, o);
      o.threads = 2;
      round(in, two, f, o);
      EXPECT_TRUE(same_bits(two, one, in));
    }
  }
}

TEST(RoundFast, EligibleFormatsAndModes) {
  std::set<std::string> fast;
  for (const Format& f : named_formats()) {
    const bool ne = has_fast_path(f, options(Rounding::nearest_even));
    EXPECT_EQ(ne, has_fast_path(f, options(Rounding::toward_zero))) << f.name;
    EXPECT_EQ(ne, has_fast_path(f, options(Rounding::nearest_even, true, true))) << f.name;
    for (Rounding r : {Rounding::up, Rounding::down, Rounding::stochastic})
      EXPECT_FALSE(has_fast_path(f, options(r))) << f.name;
    if (ne) fast.insert(f.name);
  }
  // Every signed format with subnormals, a mantissa bit and at most float32's range.
  const std::set<std::string> want = {
      "float32",         "tf32",        "float16",         "bfloat16",      "float8_e4m3fn",
      "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float6_e2m3fn", "float6_e3m2fn",
      "float4_e2m1fn"};
  EXPECT_EQ(fast, want);
}

// Restores Highway's own target choice however the test ends.
struct TargetGuard {
  ~TargetGuard() { hwy::SetSupportedTargetsForTest(0); }
};

TEST(RoundFast, MatchesGenericOnEveryTargetAndTail) {
  TargetGuard guard;
  const auto targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (std::int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    ASSERT_EQ(hwy::SupportedTargets(), target);  // the dispatcher now sees only this one
    SCOPED_TRACE(hwy::TargetName(target));
    for (const Format& f : named_formats()) {
      for (Rounding r : {Rounding::nearest_even, Rounding::toward_zero}) {
        for (bool saturate : {false, true}) {
          for (bool flush : {false, true}) {
            const RoundOptions o = options(r, saturate, flush);
            if (!has_fast_path(f, o)) continue;
            SCOPED_TRACE(f.name + " " + describe(o));
            // One element of offset makes every load unaligned; every tail length is seen.
            const auto pool = probe_values(f, 1 + 64 + 4096, 31);
            for (std::size_t n = 0; n <= 64; ++n) {
              const std::vector<float> in(pool.begin() + 1, pool.begin() + 1 + n);
              std::vector<float> fast(n), generic(n);
              round_fast(in, fast, f, o);
              round_generic(in, generic, f, o);
              ASSERT_TRUE(same_bits(fast, generic, in)) << "length " << n;
            }
            for (const auto& in :
                 {std::vector<float>(pool.begin() + 1, pool.end()), dense_values(f)}) {
              std::vector<float> fast(in.size()), generic(in.size());
              round_fast(in, fast, f, o);
              round_generic(in, generic, f, o);
              ASSERT_TRUE(same_bits(fast, generic, in));
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fpguard
