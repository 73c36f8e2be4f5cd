// Rounding: boundary cases of every named format in every rounding mode and option, with
// float64 and float32 carriers, scalar and array paths; stochastic rounding; the SIMD fast
// path against the generic one on every compiled Highway target; encode/decode patterns.
#include "fpguard/round.hpp"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "test_util.hpp"

namespace fpguard {
namespace {

using test::bits;
using test::hex;
using test::kInf;
using test::kNaN;
using test::named;
using test::options;
using test::Same;

using LD = long double;  // x87 extended: holds every tie point of every format exactly
constexpr LD kLNaN = std::numeric_limits<LD>::quiet_NaN();

// One input and its expected result in each of nearest-even, toward-zero, up, down.
struct Case {
  LD x;
  std::array<LD, 4> want;
};

bool fits_double(LD x) {
  return !std::isfinite(x) || static_cast<LD>(static_cast<double>(x)) == x;
}
bool fits_float(LD x) {
  return !std::isfinite(x) || static_cast<LD>(static_cast<float>(x)) == x;
}

// Boundary cases of a signed format, built from its (separately tested) limits and the
// rounding rules. Every case is added with its mirror image -x.
class Cases {
 public:
  Cases(const Format& f, bool saturate) : f_(f) {
    const bool saturating = saturate || f.always_saturates();
    const LD M = f.max();
    overflow_ = f.has_inf() ? (saturate ? M : INFINITY) : (saturating ? M : kLNaN);
    infinite_ = f.has_inf() ? INFINITY : (saturating ? M : kLNaN);
    build();
  }
  const std::vector<Case>& list() const { return list_; }

 private:
  LD neg(LD v) const {
    if (std::isnan(v)) return kLNaN;
    if (v == 0 && !f_.has_negative_zero()) return 0;
    return -v;
  }
  void add(LD x, std::array<LD, 4> w) {
    if (!fits_double(x)) return;  // e.g. ties of float64 itself
    list_.push_back({x, w});
    list_.push_back({std::isnan(x) ? -x : neg(x), {neg(w[0]), neg(w[1]), neg(w[3]), neg(w[2])}});
  }
  // A tie point and its nearest neighbours in both carriers.
  void around(LD tie, std::array<LD, 4> below, std::array<LD, 4> at, std::array<LD, 4> above) {
    if (!fits_double(tie)) return;
    add(tie, at);
    add(std::nextafter(static_cast<double>(tie), 0.0), below);
    add(std::nextafter(static_cast<double>(tie), kInf), above);
    if (!fits_float(tie)) return;
    add(std::nextafter(static_cast<float>(tie), 0.0f), below);
    add(std::nextafter(static_cast<float>(tie), INFINITY), above);
  }
  void build() {
    const int m = f_.mantissa_bits;
    const LD M = f_.max(), N = f_.smallest_normal(), s = f_.smallest_subnormal(), e = f_.eps();
    const LD u = std::ldexp(LD{1}, f_.emax() - m);  // spacing just below max
    const LD O = overflow_, I = infinite_;
    // fn formats give the all-ones mantissa of the top binade to NaN: their max ends in 0
    // (float8_e4m3fn: 0x7E, mantissa 110). Every other max has an all-ones mantissa.
    const bool max_even = f_.nan == NanEncoding::fn;
    add(0, {0, 0, 0, 0});
    add(kLNaN, {kLNaN, kLNaN, kLNaN, kLNaN});
    add(INFINITY, {I, I, I, I});
    add(1, {1, 1, 1, 1});
    add(M, {M, M, M, M});
    add(N, {N, N, N, N});
    add(s, {s, s, s, s});
    add(N - s, {N - s, N - s, N - s, N - s});
    add(1 + e / 4, {1, 1, 1 + e, 1});
    around(1 + e / 2, {1, 1, 1 + e, 1}, {1, 1, 1 + e, 1}, {1 + e, 1, 1 + e, 1});
    around(1 + 3 * e / 2, {1 + e, 1 + e, 1 + 2 * e, 1 + e}, {1 + 2 * e, 1 + e, 1 + 2 * e, 1 + e},
           {1 + 2 * e, 1 + e, 1 + 2 * e, 1 + e});
    if (m <= 38) {
      // Double-rounding traps: via float32 these would become ties and round the other way.
      add(1 + e / 2 + std::ldexp(LD{1}, -40), {1 + e, 1, 1 + e, 1});
      add(1 + 3 * e / 2 - std::ldexp(LD{1}, -40), {1 + e, 1 + e, 1 + 2 * e, 1 + e});
    }
    around(M + u / 2, {M, M, O, M}, {max_even ? M : O, M, O, M}, {O, M, O, M});
    add(M + u, {O, M, O, M});
    if (LD huge = 0x1p1000L; huge > M) add(huge, {O, M, O, M});
    around(s / 2, {0, 0, s, 0}, {0, 0, s, 0}, {s, 0, s, 0});
    around(3 * s / 2, {s, s, 2 * s, s}, {2 * s, s, 2 * s, s}, {2 * s, s, 2 * s, s});
    around(N - s / 2, {N - s, N - s, N, N - s}, {N, N - s, N, N - s}, {N, N - s, N, N - s});
    for (LD tiny : {0x1p-100L, 0x1p-149L, 0x1p-1074L})  // 2^-149: float32's smallest
      if (tiny < s / 2) add(tiny, {0, 0, s, 0});
  }

  const Format& f_;
  LD overflow_, infinite_;
  std::vector<Case> list_;
};

// round() of x through every entry point that accepts it: double and float scalars,
// double and float arrays (the float array takes the fast path where there is one), and an
// ArrayRounder (not stochastic), out of place and in place.
void expect_round(const Format& f, const RoundOptions& o, LD x_ld, LD want_ld) {
  ASSERT_TRUE(fits_double(x_ld)) << "test input is not a float64 value";
  const double x = static_cast<double>(x_ld);
  const double want = std::isnan(want_ld) ? kNaN : static_cast<double>(want_ld);
  SCOPED_TRACE("x = " + hex(x));
  EXPECT_TRUE(Same(round(x, f, o), want)) << "double scalar";
  std::vector<double> din{x}, dout(1);
  round(din, dout, f, o);
  EXPECT_TRUE(Same(dout[0], want)) << "double array";
  if (!fits_float(x_ld)) return;
  const float xf = static_cast<float>(x), wf = static_cast<float>(want);
  EXPECT_TRUE(Same(round(xf, f, o), wf)) << "float scalar";
  std::vector<float> fin{xf}, fout(1);
  round(fin, fout, f, o);
  EXPECT_TRUE(Same(fout[0], wf)) << "float array";
  if (o.rounding == Rounding::stochastic) return;
  const ArrayRounder rounder(f, o);
  float r = 0, in_place = xf;
  rounder(&xf, &r, 1);
  rounder(&in_place, &in_place, 1);
  EXPECT_TRUE(Same(r, wf)) << "ArrayRounder";
  EXPECT_TRUE(Same(in_place, wf)) << "ArrayRounder in place";
}

class RoundBoundaries : public ::testing::TestWithParam<Format> {};

TEST_P(RoundBoundaries, EveryModeAndOption) {
  const Format& f = GetParam();
  for (bool saturate : {false, true}) {
    for (bool flush : {false, true}) {
      const Cases cases(f, saturate);
      for (const Case& c : cases.list()) {
        for (int mode = 0; mode < 4; ++mode) {
          const Rounding r = test::kDirectedAndNearest[mode];
          SCOPED_TRACE(std::string(to_string(r)) + (saturate ? " saturate" : "") +
                       (flush ? " flush" : ""));
          LD want = c.want[mode];
          if (flush && std::fabs(want) < f.smallest_normal())  // results, not inputs, flush
            want = std::signbit(want) && f.has_negative_zero() ? -0.0L : 0.0L;
          expect_round(f, options(r, saturate, flush), c.x, want);
        }
      }
    }
  }
}

std::vector<Format> signed_formats() {
  std::vector<Format> v;
  for (const auto& f : named_formats())
    if (f.is_signed) v.push_back(f);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Named, RoundBoundaries, ::testing::ValuesIn(signed_formats()),
                         [](const auto& info) { return info.param.name; });
// Custom formats with at least one mantissa bit follow the same rules.
INSTANTIATE_TEST_SUITE_P(Custom, RoundBoundaries,
                         ::testing::Values(parse_format("e5m7"), parse_format("e6m9"),
                                           parse_format("e3m4fnuz"), parse_format("e3m2fn"),
                                           parse_format("e2m1"), parse_format("e11m40")),
                         [](const auto& info) { return info.param.name; });

// The thresholds the statistics and check's constant scan compare with instead of
// rounding (round.hpp), on each side of them in both carriers, against round() (zero) and
// rounding with an unbounded exponent (rounds_past_max; for formats that do not saturate,
// round() gives inf or NaN exactly there): the largest magnitude that rounds to zero, and
// the smallest that overflows.
class RoundThresholds : public ::testing::TestWithParam<Format> {};

template <class T>
void expect_thresholds(const Format& f) {
  const T inf = std::numeric_limits<T>::infinity();
  const double zero = underflow_threshold(f);
  if (static_cast<double>(static_cast<T>(zero)) == zero && zero > 0) {
    for (const T sign : {T{1}, T{-1}}) {
      const T at = sign * static_cast<T>(zero), past = std::nextafter(at, sign * inf);
      EXPECT_EQ(round(at, f), 0) << f.name << " " << at;
      EXPECT_NE(round(past, f), 0) << f.name << " " << past;
    }
  }
  const OverflowThreshold over = overflow_threshold(f);
  const auto value = static_cast<T>(over.value);
  if (static_cast<double>(value) == over.value && std::isfinite(value)) {
    for (const T sign : {T{1}, T{-1}}) {
      const T at = sign * value, below = std::nextafter(at, T{0}),
              above = std::nextafter(at, sign * inf);
      EXPECT_FALSE(test::rounds_past_max(below, f)) << f.name << " " << below;
      EXPECT_EQ(test::rounds_past_max(at, f), over.inclusive) << f.name << " " << at;
      EXPECT_TRUE(test::rounds_past_max(above, f)) << f.name << " " << above;
      if (!f.always_saturates()) {
        EXPECT_TRUE(std::isfinite(round(below, f))) << f.name << " " << below;
        EXPECT_EQ(!std::isfinite(round(at, f)), over.inclusive) << f.name << " " << at;
        EXPECT_FALSE(std::isfinite(round(above, f))) << f.name << " " << above;
      }
    }
  }
}

// The same thresholds as carrier values: the first T that overflows and the last that
// rounds to zero, each beside a neighbour that does not.
template <class T>
void expect_carrier_thresholds(const Format& f) {
  const T inf = std::numeric_limits<T>::infinity(), from = overflow_from<T>(f);
  if (std::isfinite(from)) {
    EXPECT_TRUE(test::rounds_past_max(from, f)) << f.name << " " << from;
    EXPECT_FALSE(test::rounds_past_max(std::nextafter(from, T{0}), f)) << f.name << " " << from;
  } else {
    EXPECT_FALSE(test::rounds_past_max(std::numeric_limits<T>::max(), f)) << f.name;
  }
  const T zero = zero_up_to<T>(f);
  if (zero > 0) {
    EXPECT_EQ(round(zero, f), 0) << f.name << " " << zero;
    EXPECT_NE(round(std::nextafter(zero, inf), f), 0) << f.name << " " << zero;
  } else {
    EXPECT_NE(round(std::numeric_limits<T>::denorm_min(), f), 0) << f.name;
  }
}

TEST_P(RoundThresholds, AreWhereRoundingChanges) {
  const Format& f = GetParam();
  EXPECT_GT(overflow_threshold(f).value, f.max());
  expect_thresholds<double>(f);
  expect_thresholds<float>(f);
  expect_carrier_thresholds<double>(f);
  expect_carrier_thresholds<float>(f);
}

INSTANTIATE_TEST_SUITE_P(Named, RoundThresholds, ::testing::ValuesIn(signed_formats()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Custom, RoundThresholds,
                         ::testing::Values(parse_format("e5m7"), parse_format("e3m4fnuz"),
                                           parse_format("e2m0fn"), parse_format("e4m0fn"),
                                           parse_format("e2m1")),
                         [](const auto& info) { return info.param.name; });

TEST(RoundThresholds, E8M0HasNoZero) {
  const Format e8m0 = parse_format("float8_e8m0fnu");
  EXPECT_EQ(underflow_threshold(e8m0), 0);
  EXPECT_EQ(round(0x1p-127f, e8m0), 0x1p-127f);  // its smallest value: nothing rounds to 0
  EXPECT_EQ(round(0x1p-140f, e8m0), 0x1p-127f);
}

// count_rounding's overflow is IEEE 754's in each deterministic mode: x past max once
// rounded with an unbounded exponent (rounds_past_max), whether round() then gives inf,
// NaN or max (truncated, saturated); not every x above max (float16: 65519 rounds to
// max). Every named format, values on both sides of max, of its step above and of the
// tie between them, both signs, both carriers, with and without saturation.
TEST(Round, CountsOverflowAsIEEE) {
  for (const Format& f : named_formats()) {
    if (!f.is_signed) continue;  // (E8M0: every x <= 0 becomes NaN)
    const long double M = f.max(), u = std::ldexp(1.0L, f.emax() - f.mantissa_bits);
    std::vector<double> xs;
    for (const long double v : {M, M + u / 2, M + u, M + 3 * u / 2, 2 * M, 4 * M})
      for (const double x : {static_cast<double>(v), std::nextafter(static_cast<double>(v), 0.0),
                             std::nextafter(static_cast<double>(v), kInf)})
        if (std::isfinite(x)) xs.insert(xs.end(), {x, -x});
    for (const Rounding mode : test::kDirectedAndNearest)
      for (const bool saturate : {false, true}) {
        RoundOptions o;
        o.rounding = mode;
        o.saturate = saturate;
        for (const double x : xs) {
          const bool want = test::rounds_past_max(x, f, mode);
          const std::vector<double> in{x};
          std::vector<double> out(1);
          round(std::span<const double>(in), std::span<double>(out), f, o);
          EXPECT_EQ(
              count_rounding(std::span<const double>(in), std::span<const double>(out), f, 1, mode)
                  .overflow,
              want ? 1u : 0u)
              << f.name << " " << to_string(mode) << " " << hex(x) << " saturate " << saturate;
          const auto xf = static_cast<float>(x);
          if (static_cast<double>(xf) != x || !std::isfinite(xf)) continue;
          const std::vector<float> fin{xf};
          std::vector<float> fout(1);
          EXPECT_EQ(
              round_and_count(std::span<const float>(fin), std::span<float>(fout), f, o).overflow,
              want ? 1u : 0u)
              << f.name << " " << to_string(mode) << " " << hex(xf) << " saturate " << saturate;
        }
      }
  }
}

// Without mantissa bits, "even" is the exponent code, and zero (code 0) is even.
// What rounding did, counted: each case by hand for float16 (max 65504, overflow from
// 65520; smallest subnormal 2^-24, so 2^-26 rounds to zero).
TEST(Round, CountsWhatRoundingDid) {
  const Format f16 = parse_format("float16");
  const float inf = INFINITY, nan = NAN;
  const std::vector<float> x = {1.0f, 1.0f / 3, 70000.0f, -1e6f,   std::ldexp(1.0f, -26),
                                0.0f, nan,      inf,      65504.0f};
  for (const bool saturate : {false, true}) {
    RoundOptions o;
    o.saturate = saturate;
    std::vector<float> r(x.size());
    round(std::span<const float>(x), std::span<float>(r), f16, o);
    const RoundCounts c = count_rounding(std::span<const float>(x), std::span<const float>(r), f16);
    EXPECT_EQ(c.values, 9u);
    EXPECT_EQ(c.nan, 1u);
    EXPECT_EQ(c.overflow, 2u) << "70000 and -1e6, to inf or saturated to max";
    EXPECT_EQ(c.underflow, 1u) << "2^-26";
    EXPECT_EQ(c.changed, 4u) << "1/3, 70000, -1e6, 2^-26 (NaN stays NaN, inf and max stay)";
    // The same in double, and threaded over a long array: the counts add up.
    std::vector<double> xd(x.begin(), x.end()), rd(x.size());
    round(std::span<const double>(xd), std::span<double>(rd), f16, o);
    const RoundCounts cd =
        count_rounding(std::span<const double>(xd), std::span<const double>(rd), f16);
    EXPECT_EQ(cd.changed, c.changed);
    EXPECT_EQ(cd.overflow, c.overflow);
    std::vector<float> big, rbig;
    for (int k = 0; k < 20000; ++k) big.insert(big.end(), x.begin(), x.end());
    rbig.resize(big.size());
    round(std::span<const float>(big), std::span<float>(rbig), f16, o);
    const RoundCounts cb =
        count_rounding(std::span<const float>(big), std::span<const float>(rbig), f16, 4);
    EXPECT_EQ(cb.values, 20000u * 9);
    EXPECT_EQ(cb.changed, 20000u * 4);
    EXPECT_EQ(cb.overflow, 20000u * 2);
    EXPECT_EQ(cb.underflow, 20000u);
    EXPECT_EQ(cb.nan, 20000u);
  }
}

TEST(Round, SignedFormatsWithoutMantissaBits) {
  const auto ne = options(Rounding::nearest_even);
  const Format e2 = parse_format("e2m0fn");  // values 0, 1, 2 (codes 0-2); 3 is NaN
  expect_round(e2, ne, 0.5L, 0.0L);          // tie between 0 (code 0) and 1 (code 1)
  expect_round(e2, ne, -0.5L, -0.0L);
  expect_round(e2, ne, 0x1.0000000000001p-1L, 1.0L);
  expect_round(e2, ne, 1.5L, 2.0L);  // tie between 1 (code 1) and 2 (code 2)
  expect_round(e2, ne, 3.0L, 2.0L);  // tie between max 2 (code 2) and 4
  expect_round(e2, ne, 3.5L, kNaN);
  expect_round(e2, options(Rounding::nearest_even, true), 3.5L, 2.0L);
  const Format e4 = parse_format("e4m0fn");  // 0 and 2^-6 .. 2^7 (codes 1-14)
  expect_round(e4, ne, 0x1p-7L, 0.0L);       // tie between 0 and 2^-6 (code 1)
  expect_round(e4, ne, 0x1.8p-6L, 0x1p-5L);  // tie between 2^-6 (code 1) and 2^-5
  expect_round(e4, ne, 1.5L, 2.0L);          // 1 is code 7
  expect_round(e4, ne, 3.0L, 2.0L);          // 2 is code 8
  expect_round(e4, ne, 192.0L, 128.0L);      // max 128 is code 14
  expect_round(e4, ne, 0x1.0000000000001p-7L, 0x1p-6L);
  expect_round(e4, options(Rounding::up), 0x1p-20L, 0x1p-6L);
}

// The same rules spelled out for float16, bfloat16 and FP8 with literal values.
TEST(Round, Float16Literals) {
  const Format& h = named("float16");
  const auto ne = options(Rounding::nearest_even);
  expect_round(h, ne, 0x1.ffep+15L, kInf);                    // 65520: tie, odd max -> inf
  expect_round(h, ne, 0x1.ffdffffffffffp+15L, 0x1.ffcp+15L);  // just below -> 65504
  expect_round(h, ne, 65519.99, 0x1.ffcp+15L);                // 65504
  expect_round(h, options(Rounding::toward_zero), 0x1p20L, 0x1.ffcp+15L);
  expect_round(h, options(Rounding::up), 65504.5L, kInf);
  expect_round(h, options(Rounding::up), -65504.5L, -0x1.ffcp+15L);
  expect_round(h, options(Rounding::down), -65504.5L, -kInf);
  expect_round(h, options(Rounding::nearest_even, true), 0x1p20L, 0x1.ffcp+15L);
  expect_round(h, options(Rounding::nearest_even, true), -kInf, -kInf);  // inf stays inf
  // 1 + 2^-11 + 2^-40 -> 1 + 2^-10 = 1.0009765625 (no double rounding through float32)
  expect_round(h, ne, 0x1.00200001p+0L, 0x1.004p+0L);
  expect_round(h, ne, 0x1.002p+0L, 1.0L);         // 1 + 2^-11: tie to even
  expect_round(h, ne, 0x1.006p+0L, 0x1.008p+0L);  // 1 + 3*2^-11 -> 1 + 2^-9
  expect_round(h, ne, 0x1p-25L, 0.0L);            // half the smallest subnormal
  expect_round(h, ne, -0x1p-25L, -0.0L);
  expect_round(h, ne, 0x1.0000000000001p-25L, 0x1p-24L);  // 5.96e-8
  expect_round(h, ne, 0x1.8p-24L, 0x1p-23L);              // 1.5 quanta: tie to even
  expect_round(h, options(Rounding::nearest_even, false, true), 0x1p-15L, 0.0L);  // flushed
  expect_round(h, options(Rounding::nearest_even, false, true), -0x1p-15L, -0.0L);
  expect_round(h, options(Rounding::nearest_even, false, true), 0x1p-14L, 0x1p-14L);
}

TEST(Round, Fp8AndBf16Literals) {
  const auto ne = options(Rounding::nearest_even);
  const Format& b = named("bfloat16");
  expect_round(b, ne, 0x1.01p+0L, 1.0L);                // 1 + 2^-8: tie to even
  expect_round(b, ne, 0x1.0100000001p+0L, 0x1.02p+0L);  // 1 + 2^-8 + 2^-40 -> 1 + 2^-7
  const Format& e4 = named("float8_e4m3fn");
  expect_round(e4, ne, 464.0L, 448.0L);  // tie between 448 (even) and 480 (the NaN code)
  expect_round(e4, ne, 464.5L, kNaN);
  expect_round(e4, ne, kInf, kNaN);
  expect_round(e4, options(Rounding::nearest_even, true), kInf, 448.0L);
  expect_round(e4, options(Rounding::nearest_even, true), -kInf, -448.0L);
  const Format& fnuz = named("float8_e4m3fnuz");
  expect_round(fnuz, ne, -0x1p-12L, 0.0L);  // no -0: a tiny negative rounds to +0
  expect_round(fnuz, ne, -0.0L, 0.0L);
  expect_round(fnuz, ne, 248.0L, kNaN);  // 240 + half ulp, odd max -> overflow -> NaN
  const Format& e5 = named("float8_e5m2");
  expect_round(e5, ne, 61440.0L, kInf);  // 57344 + 4096: tie, odd max -> inf
  const Format& fp4 = named("float4_e2m1fn");
  expect_round(fp4, ne, kInf, 6.0L);  // no inf: saturates by definition
  expect_round(fp4, ne, -100.0L, -6.0L);
  expect_round(fp4, ne, 0.25L, 0.0L);  // tie to even (0)
  expect_round(fp4, ne, 2.5L, 2.0L);   // tie between 2 (even) and 3
  expect_round(fp4, ne, 5.0L, 4.0L);   // tie between 4 (even) and 6
}

// E8M0 has no sign, no zero and no mantissa: ties go to the even exponent code.
TEST(Round, E8M0) {
  const Format& f = named("float8_e8m0fnu");
  const LD top = 0x1p127L, bottom = 0x1p-127L;
  const std::vector<Case> cases = {
      {1, {1, 1, 1, 1}},
      {top, {top, top, top, top}},
      {bottom, {bottom, bottom, bottom, bottom}},
      {0, {kLNaN, kLNaN, kLNaN, kLNaN}},
      {-0.0L, {kLNaN, kLNaN, kLNaN, kLNaN}},
      {-1, {kLNaN, kLNaN, kLNaN, kLNaN}},
      {-INFINITY, {kLNaN, kLNaN, kLNaN, kLNaN}},
      {kLNaN, {kLNaN, kLNaN, kLNaN, kLNaN}},
      {INFINITY, {kLNaN, kLNaN, kLNaN, kLNaN}},
      {1.5L, {2, 1, 2, 1}},            // 1 is code 0x7F (odd): the tie goes up to 2 (0x80)
      {3, {2, 2, 4, 2}},               // 2 is code 0x80 (even): the tie stays at 2
      {6, {8, 4, 8, 4}},               // 4 is 0x81 (odd)
      {0.75L, {0.5L, 0.5L, 1, 0.5L}},  // 0.5 is 0x7E (even)
      {0x1.8000000000001p+1L, {4, 2, 4, 2}},
      {0x1.7ffffffffffffp+1L, {2, 2, 4, 2}},
      {1.25L, {1, 1, 2, 1}},
      {0x1.8p127L, {top, top, kLNaN, top}},  // tie: 0xFE is even
      {0x1.cp127L, {kLNaN, top, kLNaN, top}},
      {0x1p-128L, {bottom, bottom, bottom, bottom}},  // nothing below the smallest value
      {0x1p-1000L, {bottom, bottom, bottom, bottom}},
  };
  for (const Case& c : cases)
    for (int mode = 0; mode < 4; ++mode)
      for (bool flush : {false, true})
        expect_round(f, options(test::kDirectedAndNearest[mode], false, flush), c.x, c.want[mode]);
  expect_round(f, options(Rounding::up, true), 0x1.cp127L, top);
  expect_round(f, options(Rounding::nearest_even, true), INFINITY, top);
}

TEST(Round, NaNInputsGiveTheCanonicalQuietNaN) {
  const std::uint64_t nans64[] = {0x7ff0000000000001ull, 0xfff8000000000000ull,
                                  0x7fffffffffffffffull, 0xfff0000000000001ull};
  const std::uint32_t nans32[] = {0x7f800001u, 0xffc00000u, 0xff800001u, 0x7fffffffu};
  for (const Format& f : named_formats()) {
    for (Rounding r : {Rounding::nearest_even, Rounding::toward_zero, Rounding::up, Rounding::down,
                       Rounding::stochastic}) {
      for (bool saturate : {false, true}) {
        SCOPED_TRACE(f.name + " " + std::string(to_string(r)));
        const auto o = options(r, saturate);
        for (auto b : nans64)
          EXPECT_EQ(test::bits(round(std::bit_cast<double>(b), f, o)), test::kQNaN64);
        std::vector<float> in, out(std::size(nans32));
        for (auto b : nans32) in.push_back(std::bit_cast<float>(b));
        round(in, out, f, o);
        for (float v : out) EXPECT_EQ(test::bits(v), test::kQNaN32);
        for (float v : in) EXPECT_EQ(test::bits(round(v, f, o)), test::kQNaN32);
      }
    }
  }
}

// ---- stochastic ----------------------------------------------------------------------

std::vector<double> stochastic(double x, std::size_t n, const Format& f, std::uint64_t seed,
                               int threads = 0) {
  RoundOptions o = options(Rounding::stochastic);
  o.seed = seed;
  o.threads = threads;
  std::vector<double> in(n, x), out(n);
  round(in, out, f, o);
  return out;
}

TEST(Stochastic, ReproducibleAndSeeded) {
  const Format& b = named("bfloat16");
  const double x = 0x1.01p+0;  // 1 + 2^-8, halfway between 1 and 1 + 2^-7
  const auto a1 = stochastic(x, 10000, b, 42), a2 = stochastic(x, 10000, b, 42);
  const auto c = stochastic(x, 10000, b, 43);
  EXPECT_EQ(a1, a2);
  EXPECT_NE(a1, c);
  RoundOptions o = options(Rounding::stochastic);
  o.seed = 42;
  for (std::size_t i = 0; i < 100; ++i) EXPECT_TRUE(Same(round(x, b, o, i), a1[i]));
  EXPECT_TRUE(Same(round(static_cast<float>(x), b, o, 7), static_cast<float>(a1[7])));
}

// The share of results rounded up must match the position of x between its neighbours.
void expect_unbiased(const Format& f, double x, double lo, double hi) {
  SCOPED_TRACE(f.name + " x = " + hex(x));
  const std::size_t n = 1000000;
  const auto out = stochastic(x, n, f, 12345);
  std::size_t ups = 0, both = 0;  // both: element i and i + 1 rounded up
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(bits(out[i]) == bits(lo) || bits(out[i]) == bits(hi)) << hex(out[i]);
    ups += bits(out[i]) == bits(hi);
    both += i > 0 && bits(out[i]) == bits(hi) && bits(out[i - 1]) == bits(hi);
  }
  const double want = (x - lo) / (hi - lo);
  EXPECT_NEAR(static_cast<double>(ups) / n, want, 0.01 * want);
  // Draws of neighbouring elements are independent.
  EXPECT_NEAR(static_cast<double>(both) / (n - 1), want * want, 0.02 * want * want);
}

TEST(Stochastic, Unbiased) {
  const Format& b = named("bfloat16");
  expect_unbiased(b, 0x1.008p+0, 1.0, 0x1.02p+0);     // 1/4 of the way
  expect_unbiased(b, 0x1.018p+0, 1.0, 0x1.02p+0);     // 3/4
  expect_unbiased(b, -0x1.008p+0, -1.0, -0x1.02p+0);  // away from zero: 1/4
  const Format& h = named("float16");
  expect_unbiased(h, 0x1p-26, 0.0, 0x1p-24);                         // subnormal range: 1/4
  expect_unbiased(h, 0x1.00233p+0, 0x1.000p+0, 0x1.004p+0);          // 0.5498...
  expect_unbiased(named("float8_e4m3fn"), 0x1.1p+0, 1.0, 0x1.2p+0);  // 1.0625: 1/2
  expect_unbiased(named("float4_e2m1fn"), 3.4, 3.0, 4.0);            // 0.4
}

TEST(Stochastic, ThreadCountDoesNotChangeResults) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-300.0, 300.0);
  std::vector<double> in(1000000);
  for (auto& v : in) v = dist(rng);
  for (const char* name : {"bfloat16", "float8_e4m3fn", "float8_e5m2fnuz"}) {
    RoundOptions o = options(Rounding::stochastic);
    o.seed = 99;
    std::vector<double> one(in.size()), two(in.size());
    o.threads = 1;
    round(in, one, named(name), o);
    o.threads = 2;
    round(in, two, named(name), o);
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(double))) << name;
  }
}

// ---- encode / decode -----------------------------------------------------------------

void expect_code(const char* name, double x, std::uint64_t code, bool saturate = false) {
  const Format& f = named(name);
  EXPECT_EQ(encode(x, f, options(Rounding::nearest_even, saturate)), code)
      << name << " x = " << hex(x) << std::hex << " want 0x" << code;
}

TEST(Encode, KnownPatterns) {
  expect_code("float16", 1.0, 0x3C00);
  expect_code("float16", 0x1.ffcp+15, 0x7BFF);  // 65504
  expect_code("float16", kInf, 0x7C00);
  expect_code("float16", -kInf, 0xFC00);
  expect_code("float16", kNaN, 0x7E00);
  expect_code("float16", -0.0, 0x8000);
  expect_code("float16", 0x1p-24, 0x0001);      // 5.96e-8, smallest subnormal
  expect_code("float16", 0x1.ffep+15, 0x7C00);  // 65520 rounds to inf
  expect_code("bfloat16", 1.0, 0x3F80);
  expect_code("bfloat16", -kNaN, 0x7FC0);
  expect_code("tf32", 1.0, 0x1FC00);
  expect_code("float32", 1.0, 0x3F800000);
  expect_code("float64", -1.0, 0xBFF0000000000000);
  expect_code("float64", kNaN, 0x7FF8000000000000);
  expect_code("float8_e4m3fn", 448.0, 0x7E);
  expect_code("float8_e4m3fn", -448.0, 0xFE);
  expect_code("float8_e4m3fn", kNaN, 0x7F);
  expect_code("float8_e4m3fn", kInf, 0x7F);
  expect_code("float8_e4m3fn", kInf, 0x7E, /*saturate=*/true);
  expect_code("float8_e4m3fn", 0x1p-9, 0x01);  // 0.001953125
  expect_code("float8_e4m3fnuz", kNaN, 0x80);
  expect_code("float8_e4m3fnuz", -0.0, 0x00);
  expect_code("float8_e4m3fnuz", 240.0, 0x7F);
  expect_code("float8_e5m2", 0x1.cp+15, 0x7B);  // 57344
  expect_code("float8_e5m2", kInf, 0x7C);
  expect_code("float8_e5m2", kNaN, 0x7E);
  expect_code("float8_e5m2fnuz", kNaN, 0x80);
  expect_code("float8_e5m2fnuz", -0x1.cp+15, 0xFF);
  expect_code("float6_e2m3fn", 7.5, 0x1F);
  expect_code("float6_e3m2fn", -28.0, 0x3F);
  expect_code("float4_e2m1fn", 6.0, 0x7);
  expect_code("float4_e2m1fn", -0.5, 0x9);
  expect_code("float4_e2m1fn", -0.0, 0x8);
  expect_code("float4_e2m1fn", -kInf, 0xF);
  expect_code("float4_e2m1fn", kNaN, 0x7);  // no NaN code: +max, as documented
  expect_code("float8_e8m0fnu", 1.0, 0x7F);
  expect_code("float8_e8m0fnu", kNaN, 0xFF);
  expect_code("float8_e8m0fnu", 0.0, 0xFF);
  expect_code("float8_e8m0fnu", 0x1p-127, 0x00);
  expect_code("float8_e8m0fnu", 0x1p127, 0xFE);
}

TEST(Decode, KnownPatternsAndIgnoredHighBits) {
  EXPECT_TRUE(Same(decode(0x3C00, named("float16")), 1.0));
  EXPECT_TRUE(Same(decode(0x13C00, named("float16")), 1.0));  // bits above the width
  EXPECT_TRUE(Same(decode(0x7BFF, named("float16")), 0x1.ffcp+15));
  EXPECT_TRUE(Same(decode(0xFC00, named("float16")), -kInf));
  EXPECT_TRUE(std::isnan(decode(0x7C01, named("float16"))));
  EXPECT_TRUE(Same(decode(0x80, named("float8_e4m3fn")), -0.0));
  EXPECT_TRUE(std::isnan(decode(0x80, named("float8_e4m3fnuz"))));
  EXPECT_TRUE(Same(decode(0x9, named("float4_e2m1fn")), -0.5));
  EXPECT_TRUE(Same(decode(0xF, named("float4_e2m1fn")), -6.0));
  EXPECT_TRUE(Same(decode(0x00, named("float8_e8m0fnu")), 0x1p-127));
  EXPECT_TRUE(std::isnan(decode(0xFF, named("float8_e8m0fnu"))));
  EXPECT_TRUE(Same(decode(0x0000000000000001, named("float64")), 0x1p-1074));
  EXPECT_TRUE(Same(decode(0xFFF0000000000000, named("float64")), -kInf));
}

// The array overloads agree with the scalar encode, index by index (stochastic included).
template <class In, class Code>
void expect_array_encode(const Format& f, const std::vector<In>& in, const RoundOptions& o) {
  std::vector<Code> out(in.size());
  encode(std::span<const In>(in), std::span<Code>(out), f, o);
  for (std::size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(out[i], encode(static_cast<double>(in[i]), f, o, i)) << f.name << " i=" << i;
}

TEST(Encode, ArraysMatchScalar) {
  std::mt19937_64 rng(3);
  std::vector<double> d(4096);
  for (auto& v : d)
    v = std::ldexp(std::uniform_real_distribution<double>(-2, 2)(rng),
                   std::uniform_int_distribution<int>(-30, 20)(rng));
  d[0] = kNaN, d[1] = kInf, d[2] = -kInf, d[3] = -0.0;
  const std::vector<float> fl(d.begin(), d.end());
  for (Rounding r : {Rounding::nearest_even, Rounding::down, Rounding::stochastic}) {
    RoundOptions o = options(r);
    o.seed = 5;
    expect_array_encode<float, std::uint8_t>(named("float8_e4m3fn"), fl, o);
    expect_array_encode<float, std::uint16_t>(named("bfloat16"), fl, o);
    expect_array_encode<double, std::uint8_t>(named("float4_e2m1fn"), d, o);
    expect_array_encode<double, std::uint16_t>(named("float16"), d, o);
    expect_array_encode<double, std::uint32_t>(named("tf32"), d, o);
    expect_array_encode<double, std::uint64_t>(named("float64"), d, o);
  }
}

}  // namespace
}  // namespace fpguard
