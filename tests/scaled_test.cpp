// Scaled formats: the table and spellings (src/format/scaled.cpp), the quantizer's counts,
// layout and errors (src/round/scaled.cpp) and scaled_stats' counts taken while quantizing. Values
// and codes are compared bit for bit with the NumPy reference in tests/reference/mx_test.py; here
// are the properties a reference cannot see: what is counted, the error cases, aliasing.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/format.hpp"
#include "fpguard/round.hpp"
#include "fpguard/stats.hpp"
#include "round/fast.hpp"

namespace fpguard {
namespace {

void expect_error(std::string_view name, const std::string& what) {
  try {
    (void)parse_scaled_format(name);
    ADD_FAILURE() << name << " parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(ScaledFormat, TableFollowsTheSpecifications) {
  const ScaledFormat mx = parse_scaled_format("mxfp8_e4m3");
  EXPECT_EQ(mx.element, parse_format("float8_e4m3fn"));
  EXPECT_EQ(mx.scale, parse_format("float8_e8m0fnu"));
  EXPECT_EQ(mx.block_size, 32);
  EXPECT_EQ(mx.rule, ScaleRule::power_of_two);
  // emax_elem of OCP MX v1.0 table 1: the exponent of each element's largest normal.
  EXPECT_EQ(parse_scaled_format("mxfp8_e5m2").element.emax(), 15);
  EXPECT_EQ(parse_scaled_format("mxfp6_e3m2").element.emax(), 4);
  EXPECT_EQ(parse_scaled_format("mxfp6_e2m3").element.emax(), 2);
  EXPECT_EQ(parse_scaled_format("mxfp4_e2m1").element.emax(), 2);
  const ScaledFormat i8 = parse_scaled_format("mxint8");
  EXPECT_EQ(i8.element.emax(), 0);
  EXPECT_EQ(i8.element.max(), 127.0 / 64);
  EXPECT_EQ(i8.element.smallest_subnormal(), 1.0 / 64);
  EXPECT_TRUE(i8.integer_elements);
  const ScaledFormat nv = parse_scaled_format("nvfp4");
  EXPECT_EQ(nv.block_size, 16);
  EXPECT_EQ(nv.rule, ScaleRule::two_level);
  EXPECT_EQ(nv.scale, parse_format("float8_e4m3fn"));
  EXPECT_EQ(parse_scaled_format("fp8").name, "tensor:float8_e4m3fn");
  EXPECT_EQ(parse_scaled_format("MXFP4").name, "mxfp4_e2m1");
  EXPECT_EQ(parse_scaled_format("channel:e5m2").name, "channel:float8_e5m2");
  EXPECT_EQ(parse_scaled_format("channel:e5m2").scope, ScaleScope::channel);
}

TEST(ScaledFormat, CustomSpellings) {
  EXPECT_EQ(parse_scaled_format("block:e4m3:e8m0:32").name, "mxfp8_e4m3");
  EXPECT_EQ(parse_scaled_format("block:fp4:e4m3:16").name, "nvfp4");
  const ScaledFormat b = parse_scaled_format("block:float8_e4m3fn:e8m0:16");
  EXPECT_EQ(b.name, "block:float8_e4m3fn:float8_e8m0fnu:16");
  EXPECT_EQ(b.block_size, 16);
  EXPECT_EQ(parse_scaled_format("block:bf16:e8m0:65536").block_size, 65536);
  EXPECT_EQ(parse_scaled_format("tensor:float16").rule, ScaleRule::amax);
  EXPECT_FALSE(find_scaled_format("float16").has_value());
  EXPECT_FALSE(find_scaled_format("e4m3").has_value());
}

TEST(ScaledFormat, BadSpellingsThrowWithAReason) {
  expect_error("block:e4m3:e8m0:0", "from 1 to 65536");
  expect_error("block:e4m3:e8m0:65537", "from 1 to 65536");
  expect_error("block:e4m3:e8m0:3x", "from 1 to 65536");
  expect_error("block:e4m3:float16:32", "must be float8_e8m0fnu");
  expect_error("block:e4m3:e5m2:32", "must be float8_e8m0fnu");
  expect_error("block:e8m0:e8m0:32", "must be signed");
  expect_error("block:float32:e8m0:32", "at most 16 bits");
  expect_error("block:e4m3:e8m0", "block:ELEMENT:SCALE:SIZE");
  expect_error("tensor:flaot8", "unknown element format");
  expect_error("mxfp8_e4m4", "did you mean 'mxfp8_e4m3'?");
  // A scaled format where a scalar one is expected names what it is.
  try {
    (void)parse_format("mxfp4_e2m1");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a scaled format"), std::string::npos);
  }
}

// The precision of run and check: one parser for the CLI and Python.
TEST(Precision, ScalarOrScaledWithTheOtherOpsFormat) {
  const Precision f = parse_precision("fp16", "nvfp4");  // other: ignored for a scalar one
  EXPECT_EQ(f.format.name, "float16");
  EXPECT_FALSE(f.scaled.has_value());
  const Precision mx = parse_precision("mxfp8_e4m3", "float16");
  EXPECT_EQ(mx.format.name, "float16");
  EXPECT_EQ(mx.name(), "mxfp8_e4m3");
  EXPECT_EQ(parse_precision("fp8", "bf16").scaled->name, "tensor:float8_e4m3fn");
  EXPECT_EQ(std::get<ScaledFormat>(parse_any_format("nvfp4")).block_size, 16);
  EXPECT_EQ(std::get<Format>(parse_any_format("e4m3")).name, "float8_e4m3fn");
}

TEST(Precision, RefusalsNameTheOptionNotAFlag) {
  const auto option_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.option() + " " + e.value() + ": " + e.problem();
    }
    return std::string("no error");
  };
  EXPECT_EQ(option_of([] {
              parse_precision("nvfp4", "mxfp4_e2m1");
            }).rfind("other_precision mxfp4_e2m1: a scaled format", 0),
            0u);
  EXPECT_EQ(option_of([] {
              parse_precision("nvfp4", "fp32");
            }).rfind("other_precision fp32: not emulated", 0),
            0u);
  try {
    (void)parse_any_format("nvfp5");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "format 'nvfp5': unknown format; did you mean 'nvfp4'?");
  }
}

TEST(ScaledFormat, FInfo) {
  const ScaledInfo i = finfo(parse_scaled_format("mxfp8_e4m3"));
  EXPECT_EQ(i.bits_per_value, 8.25);
  EXPECT_EQ(i.max, 448 * std::ldexp(1.0, 127));
  EXPECT_EQ(i.smallest_positive, std::ldexp(1.0, -9 - 127));
  EXPECT_DOUBLE_EQ(i.block_range_bits, std::log2(448 * 512.0));
  const ScaledInfo nv = finfo(parse_scaled_format("nvfp4"));
  EXPECT_EQ(nv.bits_per_value, 4.5);
  EXPECT_EQ(nv.max, 6 * 448.0);
  EXPECT_EQ(nv.smallest_positive, 0.5 * std::ldexp(1.0, -9));
}

TEST(RoundScaled, CountsSaturationUnderflowAndNaNBlocks) {
  // One block of 32 whose outlier 1e4 sets the scale 2^(13 - 2) for mxfp4: the small
  // neighbours (below 2^10) flush to zero.
  std::vector<float> x(64, 1.0f);
  x[0] = 1e4f;
  x[40] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y(x.size());
  const ScaledCounts c =
      round_scaled(x, y, {.shape = {64}, .axis = 0}, parse_scaled_format("mxfp4_e2m1"));
  EXPECT_EQ(c.values, 64u);
  EXPECT_EQ(c.scales, 2u);
  EXPECT_EQ(c.nan_scales, 1u);
  EXPECT_EQ(c.nan, 1u);
  EXPECT_EQ(c.underflow, 31u);
  EXPECT_EQ(y[0], 8192.0f);  // 1e4 / 2^11 = 4.88 -> 4 (nearest-even on E2M1's 4, 6)
  EXPECT_EQ(c.saturated, 0u);
  for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(y[i]));
  // E2M1 saturation: 7.9 x 2^k in a block rounds past 6, to 6.
  std::vector<float> s = {7.9f, 1.0f};
  std::vector<float> t(2);
  const ScaledCounts cs = round_scaled(s, t, {.shape = {2}}, parse_scaled_format("mxfp4_e2m1"));
  EXPECT_EQ(t[0], 6.0f);
  EXPECT_EQ(cs.saturated, 1u);
  EXPECT_EQ(cs.saturated_scales, 1u);
}

TEST(RoundScaled, InPlaceEqualsOutOfPlaceAndCodesFollowTheValues) {
  std::vector<float> x(3 * 5 * 7);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(static_cast<float>(i)) * std::ldexp(1.0f, static_cast<int>(i % 13));
  for (const char* name : {"mxfp6_e2m3", "nvfp4", "channel:float8_e4m3fn", "block:e5m2:e8m0:3"}) {
    const ScaledFormat f = parse_scaled_format(name);
    for (int axis : {0, 1, 2, -1}) {
      const ScaledLayout l{.shape = {3, 5, 7}, .axis = axis};
      std::vector<float> out(x.size()), in_place = x;
      ScaledCodes codes;
      (void)round_scaled(x, out, l, f, {}, &codes);
      (void)round_scaled(in_place, in_place, l, f);
      EXPECT_EQ(out, in_place) << name << " axis " << axis;
      ASSERT_EQ(codes.codes.size(), x.size());
      // Each value's code decodes to the value over its scale, wherever the axis runs.
      if (f.rule != ScaleRule::power_of_two) continue;
      for (std::size_t i = 0; i < x.size(); ++i) {
        EXPECT_EQ(decode(codes.codes[i], f.element) == 0, out[i] == 0) << name << " " << i;
      }
    }
  }
}

TEST(RoundScaled, CalibratedAmaxReplacesTheTensorsOwn) {
  const std::vector<float> x = {1.0f, -2.0f, 0.5f};
  std::vector<float> y(3);
  // amax 4 calibrated: scale 4/448, so -2 is exactly -224 x scale; 8 would saturate.
  (void)round_scaled(x, y, {.shape = {3}}, parse_scaled_format("fp8"), {.amax = 4.0});
  const float scale = 4.0f / 448.0f;
  EXPECT_EQ(y[1], -224.0f * scale);
  const std::vector<float> big = {8.0f};
  std::vector<float> z(1);
  const ScaledCounts c =
      round_scaled(big, z, {.shape = {1}}, parse_scaled_format("fp8"), {.amax = 4.0});
  EXPECT_EQ(c.saturated, 1u);
  EXPECT_EQ(z[0], 448.0f * scale);
  // NVFP4's tensor scale follows the calibrated amax: s_t = 2688 / 2688 = 1.
  ScaledCodes codes;
  (void)round_scaled(x, y, {.shape = {3}}, parse_scaled_format("nvfp4"), {.amax = 2688.0}, &codes);
  EXPECT_EQ(codes.tensor_scale, 1.0);
}

// Values across float32's whole range (subnormals, all-zero and NaN/inf blocks, maxima at
// and one ulp under powers of two), as a [37, 333] array; the same corners down its columns
// seen as [333, 37].
constexpr std::size_t kRows = 37, kCols = 333;  // 333 = 10 blocks of 32 + 13

// Calls f(threads) with 1, 2 and 3 threads on every SIMD target this CPU runs (the only
// supported one during the call, named in the trace).
template <class F>
void on_each_target(F&& f) {
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets())
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(hwy::TargetName(target));
      hwy::SetSupportedTargetsForTest(target);
      f(threads);
      hwy::SetSupportedTargetsForTest(0);
    }
}

std::vector<float> corner_values() {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> ex(-150, 127);
  const std::size_t rows = kRows, n = kCols;
  std::vector<float> x(rows * n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int e = ex(rng);
    x[i] = std::ldexp(nd(rng), e / (1 + static_cast<int>(i / n % 4)));  // rows of narrower range
  }
  for (std::size_t i = 0; i < 64; ++i) x[2 * n + i] = 0;  // zero blocks
  x[3 * n + 5] = std::numeric_limits<float>::quiet_NaN();
  x[4 * n + 40] = -std::numeric_limits<float>::infinity();
  x[5 * n] = 2.0f;
  x[5 * n + 33] = std::nextafter(4.0f, 0.0f);
  for (std::size_t i = 0; i < n; ++i) x[6 * n + i] = std::ldexp(nd(rng), -140);  // subnormals
  const auto column = [&](std::size_t j, auto value) {
    for (std::size_t k = 0; k < 64; ++k) x[k * rows + j] = value(k);
  };
  column(1, [](std::size_t) { return 0.0f; });
  column(2, [&](std::size_t) { return std::ldexp(nd(rng), -140); });
  column(3, [&](std::size_t k) { return k == 3 ? 2.0f : std::ldexp(nd(rng), -3); });
  column(4, [&](std::size_t k) {
    return k == 40 ? std::nextafter(4.0f, 0.0f) : std::ldexp(nd(rng), -3);
  });
  x[7 * rows + 5] = std::numeric_limits<float>::infinity();
  x[40 * rows + 6] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

// Layouts of corner_values: blocks along a contiguous axis and along strided ones.
std::vector<ScaledLayout> corner_layouts() {
  const auto dim = [](std::size_t v) { return static_cast<std::int64_t>(v); };
  const std::size_t rows = kRows, n = kCols;
  return {{.shape = {dim(rows), dim(n)}},
          {.shape = {dim(n), dim(rows)}, .axis = 0},        // stride 37: a vector and a tail
          {.shape = {dim(rows), 9, dim(rows)}, .axis = 1},  // one short block per column
          {.shape = {dim(rows * rows), 9}, .axis = 0},      // stride 9: transposed (fast_narrow)
          {.shape = {3, dim(rows * n / 3)}, .axis = 0},     // one 3-value block per column
          {.shape = {dim(rows), dim(n), 1}, .axis = 1}};    // stride 1 through the strided shape
}

// Block formats with their calibrated amax: two-level formats also with one far under the
// tensor's, so that their block scales saturate at E4M3's 448 (and its tensor scale is then
// the calibrated one).
std::vector<std::pair<const char*, std::optional<double>>> corner_formats() {
  return {{"mxfp8_e4m3", {}},
          {"mxfp8_e5m2", {}},
          {"mxfp6_e3m2", {}},
          {"mxfp6_e2m3", {}},
          {"mxfp4_e2m1", {}},
          {"mxint8", {}},
          {"block:e4m3:e8m0:7", {}},
          {"block:bf16:e8m0:32", {}},
          {"nvfp4", {}},
          {"nvfp4", 1.0},
          {"nvfp4", 1e10},
          {"block:e4m3:e4m3:7", 1e-3},
          {"block:float4_e2m1fn:e4m3:32", {}}};
}

// Calls fn(name, format, layout, calibrated amax) for every corner format and layout,
// traced.
template <class F>
void for_each_corner(F&& fn) {
  for (const auto& [name, amax] : corner_formats())
    for (const ScaledLayout& l : corner_layouts()) {
      SCOPED_TRACE(std::string(name) + " axis " + std::to_string(l.axis) + " of rank " +
                   std::to_string(l.shape.size()) + (amax ? " calibrated" : ""));
      fn(name, parse_scaled_format(name), l, amax);
    }
}

// Whether got and want hold the same bits (NaN: any NaN), else the first place they differ.
::testing::AssertionResult same_bits(const std::vector<float>& got,
                                     const std::vector<float>& want) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]) &&
        !(std::isnan(got[i]) && std::isnan(want[i])))
      return ::testing::AssertionFailure() << "at " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

// Every count of `got` equals `want`'s.
void expect_same_counts(const ScaledCounts& got, const ScaledCounts& want) {
  EXPECT_EQ(got.values, want.values);
  EXPECT_EQ(got.changed, want.changed);
  EXPECT_EQ(got.saturated, want.saturated);
  EXPECT_EQ(got.underflow, want.underflow);
  EXPECT_EQ(got.nan, want.nan);
  EXPECT_EQ(got.scales, want.scales);
  EXPECT_EQ(got.nan_scales, want.nan_scales);
  EXPECT_EQ(got.saturated_scales, want.saturated_scales);
}

// The fast paths (MX and two-level blocks along a contiguous axis, and along a strided one:
// one block per SIMD lane) equal the generic path bit for bit, counts included: the corner
// values, short last blocks, strides shorter and longer than a vector, every compiled SIMD
// target, several thread counts.
TEST(RoundScaled, FastPathEqualsGenericBitForBit) {
  const std::vector<float> x = corner_values();
  for_each_corner([&](const char* name, const ScaledFormat& f, const ScaledLayout& l,
                      std::optional<double> amax) {
    const bool custom_fine = std::string_view(name) == "block:bf16:e8m0:32";  // 2^-133
    EXPECT_EQ(has_fast_path(f, l), !custom_fine);
    std::vector<float> want(x.size());
    const ScaledCounts cw = round_scaled(x, want, l, f, {.amax = amax, .generic = true});
    on_each_target([&](int threads) {
      std::vector<float> got(x.size());
      const ScaledCounts cg = round_scaled(x, got, l, f, {.amax = amax, .threads = threads});
      ASSERT_TRUE(same_bits(got, want));
      expect_same_counts(cg, cw);
    });
  });
}

// Blocks of 32 whose kinds the fast path of whole finite blocks must treat as the generic
// path does, block k of a row being of kind k % 10: Gaussian values at a random binade;
// all zeros (signed); float32 subnormals; a maximum exactly at a power of two; one ulp
// below one; a NaN; an inf; an outlier that flushes its neighbours into the element's
// subnormals and zero; few-bit values (exact ties of the element rounding); the ends of
// float32's exponents (scales clamped at 2^127, or at 2^-127 by a subnormal maximum).
std::vector<float> whole_block_values(std::size_t rows, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> ex(-30, 30), bits(-64, 64), sign(0, 1);
  std::vector<float> x(rows * n);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t block = i / 32, at = i % 32;
      const int e = ex(rng);
      float v = std::ldexp(nd(rng), e);
      switch ((block + r) % 10) {
        case 1:
          v = sign(rng) ? -0.0f : 0.0f;
          break;
        case 2:
          v = std::ldexp(nd(rng), -140);
          break;
        case 3:
          v = at == 7 ? -std::ldexp(1.0f, e) : std::ldexp(nd(rng) / 8, e);
          break;
        case 4:
          v = at == 9 ? std::nextafter(std::ldexp(1.0f, e), 0.0f) : std::ldexp(nd(rng) / 8, e);
          break;
        case 5:
          if (at == 3) v = std::numeric_limits<float>::quiet_NaN();
          break;
        case 6:
          if (at == 30) v = (sign(rng) ? -1 : 1) * std::numeric_limits<float>::infinity();
          break;
        case 7:
          v = at == 0 ? 1e4f : std::ldexp(nd(rng), -e / 2 - 8);
          break;
        case 8:
          v = std::ldexp(static_cast<float>(bits(rng)), e / 4 - 3);
          break;
        case 9:
          v = r % 2 ? std::ldexp(nd(rng), 126) : std::ldexp(nd(rng), -147);
          break;
        default:
          break;
      }
      x[r * n + i] = v;
    }
  return x;
}

// The fast path of whole finite blocks along a contiguous axis (FiniteRounder, counts in
// SIMD lanes) equals the generic path bit for bit, counts included, on every compiled SIMD
// target, in place and not: the kinds of whole_block_values, rows with and without a short
// last block, a long row cut into pieces, block sizes that are and are not whole vectors.
TEST(RoundScaled, WholeBlocksEqualGenericBitForBit) {
  const std::vector<std::pair<std::size_t, std::size_t>> shapes = {
      {29, 32 * 20 + 13}, {31, 32 * 20}, {3, 3 * 4096}, {7, 7}};
  for (const char* name : {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1",
                           "mxint8", "nvfp4", "block:float8_e4m3fnuz:e8m0:32", "block:e5m2:e8m0:16",
                           "block:e2m1:e8m0:64", "block:e4m3:e8m0:8", "block:e3m2:e8m0:12"})
    for (const auto& [rows, n] : shapes) {
      SCOPED_TRACE(std::string(name) + " [" + std::to_string(rows) + ", " + std::to_string(n) +
                   "]");
      const ScaledFormat f = parse_scaled_format(name);
      const ScaledLayout l{
          .shape = {static_cast<std::int64_t>(rows), static_cast<std::int64_t>(n)}};
      const std::vector<float> x = whole_block_values(rows, n, static_cast<std::uint32_t>(n));
      std::vector<float> want(x.size());
      const ScaledCounts cw = round_scaled(x, want, l, f, {.generic = true});
      EXPECT_GT(cw.underflow, 0u);
      EXPECT_GT(cw.nan_scales, 0u);
      for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        SCOPED_TRACE(hwy::TargetName(target));
        std::vector<float> got(x.size()), in_place = x;
        const ScaledCounts cg = round_scaled(x, got, l, f, {.threads = 1});
        (void)round_scaled(in_place, in_place, l, f, {.threads = 2});
        hwy::SetSupportedTargetsForTest(0);
        ASSERT_TRUE(same_bits(got, want));
        ASSERT_TRUE(same_bits(in_place, want));
        expect_same_counts(cg, cw);
      }
    }
}

// The values alone (detail::round_scaled_values: an executor's operands, the kernels'
// counts skipped) are round_scaled's bits: the corner values, every layout and format, every
// SIMD target, several thread counts, and in place.
TEST(RoundScaled, ValuesAloneEqualRoundScaled) {
  const std::vector<float> x = corner_values();
  for_each_corner(
      [&](const char*, const ScaledFormat& f, const ScaledLayout& l, std::optional<double> amax) {
        std::vector<float> want(x.size());
        (void)round_scaled(x, want, l, f, {.amax = amax, .generic = true});
        on_each_target([&](int threads) {
          std::vector<float> got(x.size()), in_place = x;
          detail::round_scaled_values(x, got, l, f, {.amax = amax, .threads = threads});
          detail::round_scaled_values(in_place, in_place, l, f, {.amax = amax, .threads = threads});
          ASSERT_TRUE(same_bits(got, want));
          ASSERT_TRUE(same_bits(in_place, want));
        });
      });
}

// round_scaled's encoding (round --encode) on the fast path of MX blocks, derived from the
// values it wrote, equals the generic path's: element and scale codes, scale values and
// shape; the corner values (NaN, inf, zero and subnormal blocks, maxima at and just under a
// power of two), every layout and format, every SIMD target; `out` aliasing `in` too.
TEST(RoundScaled, FastCodesEqualGeneric) {
  const std::vector<float> x = corner_values();
  for_each_corner(
      [&](const char*, const ScaledFormat& f, const ScaledLayout& l, std::optional<double> amax) {
        std::vector<float> want(x.size());
        ScaledCodes cw;
        round_scaled(x, want, l, f, {.amax = amax, .generic = true}, &cw);
        for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
          hwy::SetSupportedTargetsForTest(target);
          SCOPED_TRACE(hwy::TargetName(target));
          std::vector<float> got(x.size()), in_place = x;
          ScaledCodes cg, ci;
          round_scaled(x, got, l, f, {.amax = amax}, &cg);
          round_scaled(in_place, in_place, l, f, {.amax = amax}, &ci);
          hwy::SetSupportedTargetsForTest(0);
          ASSERT_TRUE(same_bits(got, want));
          ASSERT_TRUE(same_bits(in_place, want));
          for (const ScaledCodes* c : {&cg, &ci}) {
            EXPECT_EQ(c->codes, cw.codes);
            EXPECT_EQ(c->scale_codes, cw.scale_codes);
            EXPECT_EQ(c->scale_shape, cw.scale_shape);
            EXPECT_EQ(c->tensor_scale, cw.tensor_scale);
            ASSERT_EQ(c->scale_values.size(), cw.scale_values.size());
            for (std::size_t i = 0; i < cw.scale_values.size(); ++i)
              EXPECT_TRUE(c->scale_values[i] == cw.scale_values[i] ||
                          (std::isnan(c->scale_values[i]) && std::isnan(cw.scale_values[i])))
                  << "scale " << i;
          }
        }
      });
}

// scaled_stats' counts alone (taken by the fast path's kernels while they quantize) equal
// those of its full walk over the values (the walk the NumPy reference checks,
// tests/reference/mx_inspect_test.py): the corner values, every layout, format, SIMD target
// and several thread counts. The corners flush, swamp, clip (NVFP4 under a calibrated amax
// saturates its block scales) and underflow.
TEST(ScaledStats, CountsWhileQuantizingEqualTheWalk) {
  const std::vector<float> x = corner_values();
  StatsOptions full;
  full.threads = 1;
  std::uint64_t flushed = 0, swamped = 0, clipped = 0, underflow = 0;
  for_each_corner(
      [&](const char*, const ScaledFormat& f, const ScaledLayout& l, std::optional<double> amax) {
        const ScaledFormatStats want = scaled_stats(x, l, f, full, amax);
        flushed += want.flushed;
        swamped += want.swamped;
        clipped += want.clipped;
        underflow += want.underflow;
        on_each_target([&](int threads) {
          StatsOptions counts;
          counts.threads = threads;
          counts.distribution = false;
          const ScaledFormatStats got = scaled_stats(x, l, f, counts, amax);
          EXPECT_EQ(got.blocks, want.blocks);
          EXPECT_EQ(got.nan_blocks, want.nan_blocks);
          EXPECT_EQ(got.saturated_blocks, want.saturated_blocks);
          EXPECT_EQ(got.saturated, want.saturated);
          EXPECT_EQ(got.flushed, want.flushed);
          EXPECT_EQ(got.flushed_blocks, want.flushed_blocks);
          EXPECT_EQ(got.swamped, want.swamped);
          EXPECT_EQ(got.swamped_blocks, want.swamped_blocks);
          EXPECT_EQ(got.underflow, want.underflow);
          EXPECT_EQ(got.nonzero, want.nonzero);
          EXPECT_EQ(got.subnormal, want.subnormal);
          EXPECT_EQ(got.clipped, want.clipped);
          EXPECT_EQ(got.clipped_blocks, want.clipped_blocks);
        });
      });
  // The corners do reach every count.
  EXPECT_GT(flushed, 0u);
  EXPECT_GT(swamped, 0u);
  EXPECT_GT(clipped, 0u);
  EXPECT_GT(underflow, 0u);
}

// The counting pass that also writes its values (check's local run: the executor's operands
// with their block counts, detail::round_scaled_counting) writes round_scaled's bits, takes
// the counts counted_stats reads as round_scaled does, and the block counts of the
// counts-only pass (which CountsWhileQuantizingEqualTheWalk holds to the walk): the corner
// values, every layout and format with a fast path, every SIMD target, several thread counts.
TEST(RoundScaled, CountingWithValuesEqualsRoundScaled) {
  const std::vector<float> x = corner_values();
  for_each_corner(
      [&](const char*, const ScaledFormat& f, const ScaledLayout& l, std::optional<double> amax) {
        if (!has_fast_path(f, l)) return;
        std::vector<float> want(x.size());
        const ScaledCounts cw = round_scaled(x, want, l, f, {.amax = amax, .generic = true});
        on_each_target([&](int threads) {
          std::vector<float> got(x.size());
          detail::BlockCounts b, b_alone;
          const ScaledOptions o{.amax = amax, .threads = threads};
          const auto cg = detail::round_scaled_counting(x, got, l, f, o, b);
          const auto alone = detail::round_scaled_counting(x, {}, l, f, o, b_alone);
          ASSERT_TRUE(cg && alone);
          ASSERT_TRUE(same_bits(got, want));
          for (const ScaledCounts* c : {&*cg, &*alone}) {
            EXPECT_EQ(c->values, cw.values);
            EXPECT_EQ(c->scales, cw.scales);
            EXPECT_EQ(c->nan_scales, cw.nan_scales);
            EXPECT_EQ(c->saturated, cw.saturated);
            EXPECT_EQ(c->saturated_scales, cw.saturated_scales);
          }
          EXPECT_EQ(b.nonzero, b_alone.nonzero);
          EXPECT_EQ(b.flushed, b_alone.flushed);
          EXPECT_EQ(b.flushed_blocks, b_alone.flushed_blocks);
          EXPECT_EQ(b.swamped, b_alone.swamped);
          EXPECT_EQ(b.swamped_blocks, b_alone.swamped_blocks);
          EXPECT_EQ(b.underflow, b_alone.underflow);
          EXPECT_EQ(b.clipped, b_alone.clipped);
          EXPECT_EQ(b.clipped_blocks, b_alone.clipped_blocks);
        });
      });
}

TEST(RoundScaled, LayoutErrorsName) {
  std::vector<float> x(6), y(6);
  const ScaledFormat f = parse_scaled_format("mxfp8_e4m3");
  EXPECT_THROW((void)round_scaled(x, y, {.shape = {2, 3}, .axis = 2}, f), Error);
  EXPECT_THROW((void)round_scaled(x, y, {.shape = {2, 3}, .axis = -3}, f), Error);
  EXPECT_THROW((void)round_scaled(x, y, {.shape = {4, 3}, .axis = 0}, f), Error);
  try {
    (void)round_scaled(x, y, {.shape = {2, 3}, .axis = 5}, f);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("axis 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fpguard
