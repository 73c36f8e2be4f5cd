// safe_divide / safe_rsqrt edge cases with exact expectations, and LossScaler: scripted
// sequences, the JSON state, and a step-by-step comparison with torch's GradScaler
// algorithm (tests/reference/grad_scaler_trace.py, run with FPGUARD_TEST_PYTHON).
#include "fpguard/safety.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fpguard/error.hpp"
#include "fpguard/loss_scaler.hpp"
#include "test_util.hpp"

namespace fpguard {
namespace {

using test::hex;
using test::named;
using test::Same;

constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr double kInfD = std::numeric_limits<double>::infinity();
const float kNaNF = std::numeric_limits<float>::quiet_NaN();
const double kNaND = std::numeric_limits<double>::quiet_NaN();

// Bit-exact, except that any NaN matches a NaN.
template <class T>
::testing::AssertionResult SameOrNaN(T got, T want) {
  if (std::isnan(want)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << hex(got) << ", want NaN";
  }
  return Same(got, want);
}

template <class T>
struct Row {
  T a, b, want;
};

template <class T>
std::size_t expected_nonfinite(const std::vector<Row<T>>& rows) {
  std::size_t n = 0;
  for (const auto& r : rows) n += !std::isfinite(r.want);
  return n;
}

template <class T, class... Fmt>
void check_divide(const std::vector<Row<T>>& rows, double eps_scale, const Fmt&... f) {
  std::vector<T> a, b, out(rows.size());
  for (const auto& r : rows) a.push_back(r.a), b.push_back(r.b);
  const std::size_t n =
      safe_divide(std::span<const T>(a), std::span<const T>(b), std::span<T>(out), eps_scale, f...);
  for (std::size_t i = 0; i < rows.size(); ++i)
    EXPECT_TRUE(SameOrNaN(out[i], rows[i].want))
        << "a = " << hex(rows[i].a) << ", b = " << hex(rows[i].b);
  EXPECT_EQ(n, expected_nonfinite(rows));
}

// ---- safe_divide --------------------------------------------------------------------

TEST(SafeDivide, Float32Defaults) {
  // eps = finfo(float32).tiny = 2^-126 = 1.1754944e-38
  check_divide<float>(
      {
          {1, +0.0f, 0x1p126f},        // +0 -> +eps: 8.507059e37
          {1, -0.0f, -0x1p126f},       // -0 -> -eps
          {-1, -0.0f, 0x1p126f},       //
          {0, +0.0f, +0.0f},           // 0 / eps
          {-0.0f, -0.0f, +0.0f},       // -0 / -eps
          {1, 0x1p-130f, 0x1p126f},    // subnormal denominator: raised to eps, sign kept
          {1, -0x1p-130f, -0x1p126f},  //
          {1, 0x1p-149f, 0x1p126f},    // smallest subnormal
          {1, 0x1p-126f, 0x1p126f},    // |b| == eps: unchanged
          {1, 0x1.000002p-126f, 0x1.fffffcp125f},  // just above eps: unchanged
          {6, 3, 2},                               // ordinary
          {1, 0.5f, 2},                            //
          {4, +0.0f, kInfF},                       // 4 / 2^-126 = 2^128 overflows
          {-4, +0.0f, -kInfF},                     //
          {0x1.fffffep127f, 2, 0x1.fffffep126f},   // max / 2
          {1, kInfF, +0.0f},                       // inf denominators stay inf
          {1, -kInfF, -0.0f},                      //
          {kInfF, kInfF, kNaNF},                   // inf / inf
          {kInfF, 2, kInfF},                       //
          {1, kNaNF, kNaNF},                       // NaN propagates
          {kNaNF, 0.0f, kNaNF},                    //
          {kNaNF, 2, kNaNF},                       //
      },
      1.0);
}

TEST(SafeDivide, EpsScale) {
  // eps = 4 * 2^-126 = 2^-124
  check_divide<float>({{1, 0.0f, 0x1p124f}, {1, -0x1p-125f, -0x1p124f}, {1, 0x1p-124f, 0x1p124f}},
                      4.0);
  // eps = 2^-127 (subnormal, still positive)
  check_divide<float>({{1, 0.0f, 0x1p127f}, {1, 0x1p-126f, 0x1p126f}}, 0.5);
}

TEST(SafeDivide, Float16FormatInFloat) {
  // eps = finfo(float16).tiny = 2^-14 = 6.1035156e-05
  check_divide<float>(
      {
          {1, 0.0f, 16384},                 // 2^14
          {1, -0.0f, -16384},               //
          {1, 1e-5f, 16384},                // below eps
          {1, -0x1p-15f, -16384},           //
          {1, 0x1p-13f, 8192},              // above eps: unchanged
          {65504, 0.0f, 65504.0f * 16384},  // 1.0732208e9: finite in the float carrier
      },
      1.0, named("float16"));
}

TEST(SafeDivide, Float64) {
  // eps = 2^-1022 = 2.2250738585072014e-308
  check_divide<double>(
      {
          {1, 0.0, 0x1p1022},
          {1, -0.0, -0x1p1022},
          {1, 0x1p-1074, 0x1p1022},  // smallest subnormal
          {3, 0x1p-1022, 0x1.8p1023},
          {4, 0.0, kInfD},  // 2^1024 overflows
          {1, kNaND, kNaND},
          {1, -kInfD, -0.0},
          {10, 4, 2.5},
      },
      1.0);
  // A double carrier for a float32 computation: eps = 2^-126, and 4 / eps is finite here.
  check_divide<double>({{1, 0.0, 0x1p126}, {4, -0.0, -0x1p128}, {1, 0x1p-130, 0x1p126}}, 1.0,
                       named("float32"));
}

TEST(SafeDivide, OutMayAliasInput) {
  std::vector<float> a = {1, 2, 3}, b = {0.0f, -0.0f, 2};
  safe_divide(a, b, a);
  EXPECT_TRUE(Same(a[0], 0x1p126f));
  EXPECT_TRUE(Same(a[1], -0x1p127f));
  EXPECT_TRUE(Same(a[2], 1.5f));
  std::vector<float> c = {4}, d = {0.5f};
  safe_divide(c, d, d);
  EXPECT_TRUE(Same(d[0], 8.0f));
}

TEST(SafeDivide, Empty) {
  std::vector<float> e;
  EXPECT_EQ(safe_divide(e, e, e), 0u);
}

TEST(SafeDivide, BadEpsIsAnError) {
  std::vector<float> a = {1}, b = {0}, out(1);
  for (double s : {0.0, -1.0, kNaND, kInfD}) {
    try {
      safe_divide(a, b, out, s);
      ADD_FAILURE() << "no Error for eps_scale " << s;
    } catch (const Error& e) {
      EXPECT_EQ(e.where(), "safe_divide");
      EXPECT_NE(e.problem().find("eps_scale"), std::string::npos) << e.what();
    }
  }
  // float64's tiny (2^-1022) is 0 in a float carrier: no protection, so refused.
  EXPECT_THROW(safe_divide(a, b, out, 1.0, named("float64")), Error);
  // ... and so is one that overflows the carrier.
  EXPECT_THROW(safe_divide(a, b, out, 1e300, named("float32")), Error);
}

TEST(SafeDivideDeathTest, SizeMismatchIsABug) {
  std::vector<float> a = {1, 2}, b = {1}, out(2);
  EXPECT_DEATH(safe_divide(a, b, out), "FPG_CHECK");
  std::vector<float> b2 = {1, 2}, out1(1);
  EXPECT_DEATH(safe_divide(a, b2, out1), "FPG_CHECK");
}

// ---- safe_rsqrt ---------------------------------------------------------------------

template <class T, class... Fmt>
void check_rsqrt(const std::vector<std::pair<T, T>>& rows, double eps_scale, const Fmt&... f) {
  std::vector<T> x, out(rows.size());
  std::size_t want_nonfinite = 0;
  for (const auto& [in, want] : rows) x.push_back(in), want_nonfinite += !std::isfinite(want);
  const std::size_t n = safe_rsqrt(std::span<const T>(x), std::span<T>(out), eps_scale, f...);
  for (std::size_t i = 0; i < rows.size(); ++i)
    EXPECT_TRUE(SameOrNaN(out[i], rows[i].second)) << "x = " << hex(rows[i].first);
  EXPECT_EQ(n, want_nonfinite);
}

TEST(SafeRsqrt, Float32Defaults) {
  // eps = 2^-126; 1/sqrt(eps) = 2^63 = 9.223372e18
  check_rsqrt<float>(
      {
          {0.0f, 0x1p63f},
          {-0.0f, 0x1p63f},  // -0 is zero, not negative
          {0x1p-149f, 0x1p63f},
          {0x1p-130f, 0x1p63f},
          {0x1p-126f, 0x1p63f},  // x == eps
          {0x1p-124f, 0x1p62f},  // above eps: unchanged
          {4, 0.5f},
          {0.25f, 2},
          {0x1p100f, 0x1p-50f},
          {2, 1.0f / std::sqrt(2.0f)},  // 0.70710677: division by a rounded sqrt
          {kInfF, 0.0f},
          {-1, kNaNF},  // negative: NaN
          {-0x1p-149f, kNaNF},
          {-kInfF, kNaNF},
          {kNaNF, kNaNF},
      },
      1.0);
}

TEST(SafeRsqrt, FormatsAndScale) {
  // float16: eps = 2^-14 -> 2^7
  check_rsqrt<float>({{0.0f, 128}, {1e-6f, 128}, {0x1p-12f, 64}, {-2, kNaNF}}, 1.0,
                     named("float16"));
  // bfloat16 has float32's exponent range: same eps
  check_rsqrt<float>({{0.0f, 0x1p63f}}, 1.0, named("bfloat16"));
  // eps = 4 * 2^-126 = 2^-124 -> 2^62
  check_rsqrt<float>({{0.0f, 0x1p62f}}, 4.0);
  // float64: eps = 2^-1022 -> 2^511
  check_rsqrt<double>({{0.0, 0x1p511},
                       {-0.0, 0x1p511},
                       {0x1p-1074, 0x1p511},
                       {4, 0.5},
                       {-1e-300, kNaND},
                       {kInfD, 0.0}},
                      1.0);
  check_rsqrt<double>({{0.0, 0x1p7}}, 1.0, named("float16"));
}

TEST(SafeRsqrt, ErrorsAndBugs) {
  std::vector<float> x = {0}, out(1);
  EXPECT_THROW(safe_rsqrt(x, out, 0.0), Error);
  EXPECT_THROW(safe_rsqrt(x, out, 1.0, named("float64")), Error);
  std::vector<float> two(2);
  EXPECT_DEATH(safe_rsqrt(x, two), "FPG_CHECK");
}

// ---- LossScaler: scripted ---------------------------------------------------------------

LossScaler::Options opts(double init, double growth, double backoff, int interval,
                         bool enabled = true) {
  LossScaler::Options o;
  o.init_scale = init;
  o.growth_factor = growth;
  o.backoff_factor = backoff;
  o.growth_interval = interval;
  o.enabled = enabled;
  return o;
}

TEST(LossScaler, Defaults) {
  LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_EQ(s.growth_factor(), 2.0);
  EXPECT_EQ(s.backoff_factor(), 0.5);
  EXPECT_EQ(s.growth_interval(), 2000);
  EXPECT_TRUE(s.enabled());
}

TEST(LossScaler, GrowthAfterIntervalAndBackoff) {
  LossScaler s;
  for (int i = 1; i < 2000; ++i) {
    s.update(false);
    ASSERT_EQ(s.growth_tracker(), i);
    ASSERT_EQ(s.scale(), 65536.0);
  }
  s.update(false);  // the 2000th clean step
  EXPECT_EQ(s.scale(), 131072.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  s.update(true);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  for (int i = 0; i < 1999; ++i) s.update(false);
  s.update(true);  // one step short of growth: the tracker restarts
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, Interval3Script) {
  LossScaler s(opts(1024, 2, 0.5, 3));
  const char* script = "cccicciicccccc";
  const std::pair<double, int> want[] = {{1024, 1}, {1024, 2}, {2048, 0}, {1024, 0}, {1024, 1},
                                         {1024, 2}, {512, 0},  {256, 0},  {256, 1},  {256, 2},
                                         {512, 0},  {512, 1},  {512, 2},  {1024, 0}};
  for (int i = 0; script[i]; ++i) {
    s.update(script[i] == 'i');
    EXPECT_EQ(s.scale(), want[i].first) << "step " << i;
    EXPECT_EQ(s.growth_tracker(), want[i].second) << "step " << i;
  }
}

TEST(LossScaler, ScaleIsFloat32) {
  // 0.1 -> 0x1.99999ap-4 = 0.10000000149011612
  LossScaler s(opts(0.1, 2, 0.5, 2000));
  EXPECT_EQ(s.scale(), static_cast<double>(0.1f));
  // The CUDA kernel: float(double(scale) * 1.1) = 3.29999995 (0x1.a66666p+1); torch's
  // CPU tensor arithmetic (scale * 1.1 on a float tensor) would give 3.30000019.
  LossScaler g(opts(3, 1.1, 0.3, 1));
  g.update(false);
  EXPECT_EQ(g.scale(), 0x1.a66666p+1);
  EXPECT_EQ(g.scale(), static_cast<double>(static_cast<float>(3.0 * 1.1)));
  EXPECT_NE(g.scale(), static_cast<double>(3.0f * static_cast<float>(1.1)));
}

TEST(LossScaler, GrowthIsNotCapped) {
  // torch 1.13: the scale may grow to inf, and a backoff leaves it inf.
  LossScaler s(opts(0x1p126, 2, 0.5, 1));
  s.update(false);
  EXPECT_EQ(s.scale(), 0x1p127);
  s.update(false);
  EXPECT_EQ(s.scale(), kInfD);
  s.update(true);
  EXPECT_EQ(s.scale(), kInfD);
}

TEST(LossScaler, BackoffUnderflowsToZero) {
  LossScaler s(opts(0x1p-148, 2, 0.5, 10));
  s.update(true);
  EXPECT_EQ(s.scale(), 0x1p-149);
  s.update(true);  // 2^-150 ties to even: 0
  EXPECT_EQ(s.scale(), 0.0);
}

TEST(LossScaler, UpdateNewScale) {
  LossScaler s;
  s.update(false);
  s.update(false);
  s.update(3.0);
  EXPECT_EQ(s.scale(), 3.0);
  EXPECT_EQ(s.growth_tracker(), 2);  // untouched
  s.update(0.1);
  EXPECT_EQ(s.scale(), static_cast<double>(0.1f));
  s.update(1e-50);  // underflows to 0, as fill_ does
  EXPECT_EQ(s.scale(), 0.0);
  s.update(kInfD);  // torch's fill_ takes inf
  EXPECT_EQ(s.scale(), kInfD);
  s.update(2.0);
  EXPECT_THROW(s.update(1e39), Error);  // "cannot be converted to type float without overflow"
  EXPECT_THROW(s.update(-3.4028235e38), Error);
  EXPECT_EQ(s.scale(), 2.0);
  s.update(static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(s.scale(), static_cast<double>(std::numeric_limits<float>::max()));
}

TEST(LossScaler, ScaleLoss) {
  LossScaler s(opts(3, 2, 0.5, 10));
  EXPECT_EQ(s.scale_loss(0.1), 0.1 * 3.0);
  EXPECT_TRUE(Same(s.scale_loss(0.1f), 0.1f * 3.0f));
  EXPECT_EQ(LossScaler().scale_loss(1.5), 98304.0);
}

TEST(LossScaler, UnscaleAndCheck) {
  LossScaler s;  // 65536: inv_scale = 2^-16
  std::vector<float> g = {65536, -131072, 1, 0.0f, -0.0f};
  EXPECT_FALSE(s.unscale_and_check(g));
  EXPECT_TRUE(Same(g[0], 1.0f));
  EXPECT_TRUE(Same(g[1], -2.0f));
  EXPECT_TRUE(Same(g[2], 0x1p-16f));
  EXPECT_TRUE(Same(g[3], 0.0f));
  EXPECT_TRUE(Same(g[4], -0.0f));

  // Several arrays share found_inf, and every array is unscaled, even after an inf.
  std::vector<float> a = {65536}, b = {kInfF, 65536}, c = {131072};
  EXPECT_TRUE(s.unscale_and_check({a, b, c}));
  EXPECT_TRUE(Same(a[0], 1.0f));
  EXPECT_TRUE(Same(b[0], kInfF));
  EXPECT_TRUE(Same(b[1], 1.0f));
  EXPECT_TRUE(Same(c[0], 2.0f));

  std::vector<float> n = {kNaNF};
  std::vector<std::span<float>> list = {n, a};
  EXPECT_TRUE(s.unscale_and_check(std::span<const std::span<float>>(list)));
  EXPECT_TRUE(std::isnan(n[0]));

  // The check is on the input: a finite gradient that overflows when unscaled does not
  // count (scale 2^-20 multiplies by 2^20).
  LossScaler small(opts(0x1p-20, 2, 0.5, 10));
  std::vector<float> big = {3e38f};
  EXPECT_FALSE(small.unscale_and_check(big));
  EXPECT_EQ(big[0], kInfF);
}

TEST(LossScaler, UnscaleRoundsLikeTorch) {
  // scale 3: inv_scale = float(1/3) = 0x1.555556p-2, and g * inv_scale is rounded in
  // float32. For g = 7 that gives 0x1.2aaaacp+1 = 2.33333349, while the correctly rounded
  // 7/3 (float(7 * (1.0 / 3)) in double) is 0x1.2aaaaap+1 = 2.33333325: torch's way.
  LossScaler s(opts(3, 2, 0.5, 10));
  const float inv = static_cast<float>(1.0 / 3.0);
  EXPECT_TRUE(Same(inv, 0x1.555556p-2f));
  std::vector<float> g = {3, 7, 0.1f, 1e4f};
  s.unscale_and_check(g);
  EXPECT_TRUE(Same(g[0], 1.0f));  // 3 * inv = 1 + 2^-25 exactly, rounds to 1
  EXPECT_TRUE(Same(g[1], 0x1.2aaaacp+1f));
  EXPECT_FALSE(Same(g[1], static_cast<float>(7.0 * (1.0 / 3.0))));
  EXPECT_TRUE(Same(g[2], 0.1f * inv));
  EXPECT_TRUE(Same(g[3], 0x1.a0aaacp+11f));  // 3333.3335, not 3333.3333 (0x1.a0aaaap+11)
  // double gradients: double arithmetic with the same float inv_scale
  std::vector<double> d = {3, 7};
  s.unscale_and_check(d);
  EXPECT_TRUE(Same(d[0], 3.0 * static_cast<double>(inv)));  // 1.0000000298023224
  EXPECT_TRUE(Same(d[0], 0x1.0000008p0));
  EXPECT_TRUE(Same(d[1], 7.0 * static_cast<double>(inv)));
}

TEST(LossScaler, DoubleGradientsBeyondFloatCountAsInf) {
  LossScaler s;
  std::vector<double> d = {1e300, 65536};
  EXPECT_TRUE(s.unscale_and_check(d));  // CUDA's isfinite((float)g)
  EXPECT_TRUE(Same(d[0], 1e300 * 0x1p-16));
  EXPECT_TRUE(Same(d[1], 1.0));
  std::vector<double> e = {3e38, 1e-310};  // below float32 max; a double subnormal
  EXPECT_FALSE(s.unscale_and_check(e));
  std::vector<double> x = {1}, y = {kNaND};
  EXPECT_TRUE(s.unscale_and_check({x, y}));
}

TEST(LossScaler, Disabled) {
  LossScaler s(opts(1024, 2, 0.5, 1, false));
  EXPECT_FALSE(s.enabled());
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_EQ(s.scale_loss(2.5), 2.5);
  std::vector<float> g = {kInfF, 4};
  EXPECT_FALSE(s.unscale_and_check(g));  // GradScaler.step does not check when disabled
  EXPECT_TRUE(Same(g[1], 4.0f));
  s.update(false);
  s.update(true);
  s.update(7.0);
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  const auto j = nlohmann::json::parse(s.to_json());
  EXPECT_EQ(j["enabled"], false);
  EXPECT_EQ(j["scale"], 1024.0);
  EXPECT_FALSE(LossScaler::from_json(s.to_json()).enabled());
}

TEST(LossScaler, InvalidOptions) {
  auto bad = [](const LossScaler::Options& o, const char* word) {
    try {
      LossScaler s(o);
      ADD_FAILURE() << "no Error for " << word;
    } catch (const Error& e) {
      EXPECT_EQ(e.where(), "LossScaler");
      EXPECT_NE(e.problem().find(word), std::string::npos) << e.what();
    }
  };
  bad(opts(65536, 1.0, 0.5, 2000), "growth_factor");
  bad(opts(65536, kInfD, 0.5, 2000), "growth_factor");
  bad(opts(65536, 2.0, 1.0, 2000), "backoff_factor");
  bad(opts(65536, 2.0, 0.0, 2000), "backoff_factor");
  bad(opts(65536, 2.0, 0.5, 0), "growth_interval");
  bad(opts(0, 2.0, 0.5, 2000), "init_scale");
  bad(opts(1e39, 2.0, 0.5, 2000), "init_scale");
  bad(opts(-1, 2.0, 0.5, 2000), "init_scale");
}

// ---- LossScaler: JSON state ---------------------------------------------------------------

TEST(LossScaler, JsonRoundTrip) {
  LossScaler s(opts(1000.3, 1.1, 0.3, 3));
  for (const char* c = "ccicc"; *c; ++c) s.update(*c == 'i');
  const auto j = nlohmann::json::parse(s.to_json());
  EXPECT_EQ(j.size(), 6u);
  EXPECT_EQ(j["scale"].get<double>(), s.scale());
  EXPECT_EQ(j["growth_factor"].get<double>(), 1.1);
  EXPECT_EQ(j["backoff_factor"].get<double>(), 0.3);
  EXPECT_EQ(j["growth_interval"].get<int>(), 3);
  EXPECT_EQ(j["growth_tracker"].get<int>(), 2);
  EXPECT_EQ(j["enabled"].get<bool>(), true);

  LossScaler r = LossScaler::from_json(s.to_json());
  EXPECT_EQ(r.to_json(), s.to_json());
  for (const char* c = "ccciccccccii"; *c; ++c) {
    s.update(*c == 'i');
    r.update(*c == 'i');
    EXPECT_EQ(r.scale(), s.scale());
    EXPECT_EQ(r.growth_tracker(), s.growth_tracker());
  }
}

TEST(LossScaler, JsonFromTorchStateDict) {
  // json.dumps(GradScaler().state_dict()) after 17 clean steps and one backoff
  LossScaler s =
      LossScaler::from_json(R"({"scale": 32768.0, "growth_factor": 2.0, "backoff_factor": 0.5,)"
                            R"( "growth_interval": 2000, "_growth_tracker": 17})");
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.growth_tracker(), 17);
  EXPECT_TRUE(s.enabled());
}

TEST(LossScaler, BadJsonNamesTheField) {
  const std::string good = R"({"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,)"
                           R"( "growth_interval": 2000, "growth_tracker": 5, "enabled": true})";
  ASSERT_EQ(LossScaler::from_json(good).growth_tracker(), 5);
  auto with = [&](const std::string& key, const nlohmann::json& value) {
    auto j = nlohmann::json::parse(good);
    if (value.is_discarded())
      j.erase(key);
    else
      j[key] = value;
    return j.dump();
  };
  auto expect_error = [](const std::string& json, const std::string& needle) {
    try {
      LossScaler::from_json(json);
      ADD_FAILURE() << "no Error for " << json;
    } catch (const Error& e) {
      EXPECT_EQ(e.where(), "LossScaler state");
      EXPECT_NE(e.problem().find(needle), std::string::npos) << e.what();
    }
  };
  const auto missing = nlohmann::json(nlohmann::json::value_t::discarded);
  for (const char* f :
       {"scale", "growth_factor", "backoff_factor", "growth_interval", "growth_tracker"})
    expect_error(with(f, missing), std::string("'") + f + "' is missing");
  expect_error(with("scale", "big"), "'scale' must be a number");
  expect_error(with("scale", nullptr), "'scale' must be a number");
  expect_error(with("scale", 0.0), "'scale'");
  expect_error(with("scale", 1e39), "'scale'");
  expect_error(with("growth_factor", 1.0), "'growth_factor' must be > 1.0");
  expect_error(with("backoff_factor", 1.5), "'backoff_factor'");
  expect_error(with("growth_interval", 2000.5), "'growth_interval' must be an integer");
  expect_error(with("growth_interval", 3000000000ll), "'growth_interval' is out of range");
  expect_error(with("growth_interval", 0), "'growth_interval' must be >= 1");
  expect_error(with("growth_tracker", 2000), "'growth_tracker' must be >= 0 and < growth_interval");
  expect_error(with("growth_tracker", -1), "'growth_tracker'");
  expect_error(with("growth_tracker", "5"), "'growth_tracker' must be an integer");
  expect_error(with("enabled", "yes"), "'enabled' must be true or false");
  expect_error("{", "not valid JSON");
  expect_error("[1, 2]", "must be a JSON object");
}

// ---- LossScaler against torch's GradScaler algorithm ------------------------------------

std::string run_reference() {
  char path[] = "/tmp/fpguard_grad_scaler_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return {};
  close(fd);
  const std::string cmd =
      std::string("'") + FPG_TEST_PYTHON + "' '" + FPG_GRAD_SCALER_TRACE + "' --out '" + path + "'";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  if (rc != 0) {
    ADD_FAILURE() << cmd << " exited with " << rc;
    return {};
  }
  return text;
}

float f32(std::uint64_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b));
}
double f64(std::uint64_t b) {
  return std::bit_cast<double>(b);
}

class TorchReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto j = nlohmann::json::parse(run_reference(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) doc_ = new nlohmann::json(std::move(j));
  }
  static void TearDownTestSuite() {
    delete doc_;
    doc_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(doc_, nullptr); }
  static nlohmann::json* doc_;
};
nlohmann::json* TorchReference::doc_ = nullptr;

TEST_F(TorchReference, UpdateTraces) {
  const auto& traces = (*doc_)["traces"];
  ASSERT_GE(traces.size(), 9u);
  std::size_t steps = 0;
  for (const auto& t : traces) {
    SCOPED_TRACE(t["name"].get<std::string>());
    LossScaler s(opts(t["init_scale"].get<double>(), t["growth_factor"].get<double>(),
                      t["backoff_factor"].get<double>(), t["growth_interval"].get<int>()));
    const auto& script = t["steps"];
    const auto& want = t["expected"];
    ASSERT_EQ(script.size(), want.size());
    for (std::size_t i = 0; i < script.size(); ++i, ++steps) {
      if (script[i].is_object())
        s.update(f64(script[i]["set"].get<std::uint64_t>()));
      else
        s.update(script[i].get<std::string>() == "inf");
      const float want_scale = f32(want[i][0].get<std::uint64_t>());
      ASSERT_TRUE(Same(static_cast<float>(s.scale()), want_scale)) << "step " << i;
      ASSERT_EQ(s.growth_tracker(), want[i][1].get<int>()) << "step " << i;
    }
  }
  EXPECT_GT(steps, 19000u);  // the 2000-step runs are there
  std::cout << "[ reference ] " << steps << " update steps; "
            << (*doc_)["update_method"].get<std::string>() << "\n";
}

TEST_F(TorchReference, SetScale) {
  for (const auto& c : (*doc_)["set_scale"]) {
    const double v = f64(c["value"].get<std::uint64_t>());
    LossScaler s;
    if (c["scale"].is_null()) {
      EXPECT_THROW(s.update(v), Error) << hex(v);
    } else {
      s.update(v);
      EXPECT_TRUE(Same(static_cast<float>(s.scale()), f32(c["scale"].get<std::uint64_t>())))
          << hex(v);
    }
  }
}

template <class T>
void check_unscale(const nlohmann::json& c, T (*decode)(std::uint64_t)) {
  LossScaler s;
  s.update(static_cast<double>(f32(c["scale"].get<std::uint64_t>())));
  std::vector<std::vector<T>> grads;
  for (const auto& g : c["grads"]) {
    grads.emplace_back();
    for (const auto& b : g) grads.back().push_back(decode(b.get<std::uint64_t>()));
  }
  std::vector<std::span<T>> spans(grads.begin(), grads.end());
  const bool found = s.unscale_and_check(std::span<const std::span<T>>(spans));
  EXPECT_EQ(found, c["found_inf"].get<bool>());
  const auto& want = c["expected"];
  ASSERT_EQ(want.size(), grads.size());
  for (std::size_t k = 0; k < grads.size(); ++k) {
    ASSERT_EQ(want[k].size(), grads[k].size());
    for (std::size_t i = 0; i < grads[k].size(); ++i)
      EXPECT_TRUE(SameOrNaN(grads[k][i], decode(want[k][i].get<std::uint64_t>())))
          << "array " << k << " element " << i;
  }
}

TEST_F(TorchReference, Unscale) {
  const auto& cases = (*doc_)["unscale"];
  ASSERT_GE(cases.size(), 12u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    if (c["dtype"] == "float32")
      check_unscale<float>(c, f32);
    else
      check_unscale<double>(c, f64);
  }
  std::cout << "[ reference ] " << cases.size() << " unscale cases; "
            << (*doc_)["unscale_method"].get<std::string>() << "\n";
}

}  // namespace
}  // namespace fpguard
