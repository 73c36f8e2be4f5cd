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
#include "targets.hpp"
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

using test::TargetGuard;

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

// encode() into float16 from float32 arrays takes the SIMD conversion (F16C where the CPU
// has it); it agrees with the scalar generic encode on every target and tail length.
TEST(RoundFast, HalfBitsMatchGenericEncodeOnEveryTarget) {
  TargetGuard guard;
  const Format f16 = named("float16");
  const auto pool = probe_values(f16, 1 + 64 + 20000, 5);
  auto values = dense_values(f16);
  values.insert(values.end(), pool.begin() + 1, pool.end());
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (std::size_t n = 0; n <= 64; ++n) {
      const std::vector<float> in(pool.begin() + 1, pool.begin() + 1 + n);
      std::vector<std::uint16_t> got(n);
      encode(std::span<const float>(in), std::span<std::uint16_t>(got), f16);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(got[i], encode(static_cast<double>(in[i]), f16)) << "x = " << hex(in[i]);
    }
    std::vector<std::uint16_t> got(values.size());
    encode(std::span<const float>(values), std::span<std::uint16_t>(got), f16);
    for (std::size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(got[i], encode(static_cast<double>(values[i]), f16)) << "x = " << hex(values[i]);
  }
}

// The fused round-and-count gives round()'s values and count_rounding()'s counts, in
// place too; rounded piece by piece with first_index, stochastic rounding gives the
// whole array's results.
TEST(RoundArray, RoundAndCountIsRoundThenCount) {
  const auto same_counts = [](const RoundCounts& a, const RoundCounts& b) {
    return a.values == b.values && a.changed == b.changed && a.overflow == b.overflow &&
           a.underflow == b.underflow && a.nan == b.nan;
  };
  for (const char* name : {"float16", "bfloat16", "float8_e4m3fn", "float4_e2m1fn", "float32"}) {
    const Format f = named(name);
    SCOPED_TRACE(name);
    const auto in = probe_values(f, 150000, 3);  // several blocks, on two threads
    for (RoundOptions o : option_sets()) {
      SCOPED_TRACE(describe(o));
      o.threads = 2;
      std::vector<float> want(in.size()), got(in.size());
      round(std::span<const float>(in), std::span<float>(want), f, o);
      const RoundCounts c =
          round_and_count(std::span<const float>(in), std::span<float>(got), f, o);
      ASSERT_TRUE(same_bits(got, want, in));
      EXPECT_TRUE(same_counts(c, count_rounding(std::span<const float>(in),
                                                std::span<const float>(want), f, 0, o.rounding)));
      std::vector<float> inplace = in;
      const RoundCounts ci =
          round_and_count(std::span<const float>(inplace), std::span<float>(inplace), f, o);
      ASSERT_TRUE(same_bits(inplace, want, in));
      EXPECT_TRUE(same_counts(ci, c));
      // In two pieces, the second starting at element 70001.
      std::vector<float> pieces(in.size());
      const std::size_t cut = 70001;
      RoundOptions second = o;
      second.first_index = cut;
      round_and_count(std::span<const float>(in).first(cut), std::span<float>(pieces).first(cut), f,
                      o);
      round_and_count(std::span<const float>(in).subspan(cut),
                      std::span<float>(pieces).subspan(cut), f, second);
      ASSERT_TRUE(same_bits(pieces, want, in));
      // float64 arrays: the same counts as for the same values in float32.
      std::vector<double> din(in.begin(), in.end()), dout(in.size());
      const RoundCounts cd =
          round_and_count(std::span<const double>(din), std::span<double>(dout), f, o);
      std::vector<double> dwant(in.size());
      round(std::span<const double>(din), std::span<double>(dwant), f, o);
      EXPECT_EQ(std::memcmp(dout.data(), dwant.data(), dout.size() * sizeof(double)), 0);
      EXPECT_TRUE(
          same_counts(cd, count_rounding(std::span<const double>(din),
                                         std::span<const double>(dwant), f, 0, o.rounding)));
    }
  }
}

}  // namespace
}  // namespace fpguard
