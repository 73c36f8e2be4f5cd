// The precision experiments: parsing, the GEMM fast paths against the exact emulation
// (bit for bit), the emulation against an independent scalar model, the truth, the
// orderings theory demands, the bounds, the accumulation limits (fast walk against a
// step-by-step simulation and known values) and the target table's facts.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>

#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/round.hpp"

namespace fpguard {
namespace {

using Kind = AccumulationOrder::Kind;

Format F(const char* name) {
  return parse_format(name);
}

// Expects `fn` to throw fpguard::Error whose where() and problem() contain the needles.
template <class Fn>
void expect_error(Fn fn, const std::string& where, const std::string& what) {
  try {
    fn();
    ADD_FAILURE() << "no Error thrown (expected " << where << ": " << what << ")";
  } catch (const Error& e) {
    EXPECT_NE(e.where().find(where), std::string::npos) << e.what();
    EXPECT_NE(e.problem().find(what), std::string::npos) << e.what();
  }
}

std::vector<double> random_matrix(std::size_t n, std::uint64_t seed, const Format& f,
                                  double scale = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, scale);
  std::vector<double> x(n * n);
  for (auto& v : x) v = nd(rng);
  round(std::span<const double>(x), std::span<double>(x), f);
  return x;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b, std::string* where) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint64_t>(a[i]) != std::bit_cast<std::uint64_t>(b[i])) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "element %zu: %a vs %a", i, a[i], b[i]);
      *where = buf;
      return false;
    }
  return true;
}

// ---- parsing --------------------------------------------------------------------------

TEST(Parse, AccumulationOrders) {
  EXPECT_EQ(parse_accumulation_order("auto"), std::nullopt);
  EXPECT_EQ(parse_accumulation_order("library")->kind, Kind::library);
  EXPECT_EQ(parse_accumulation_order("sequential")->kind, Kind::sequential);
  EXPECT_EQ(parse_accumulation_order("pairwise")->kind, Kind::pairwise);
  const auto b = parse_accumulation_order("blocked:32");
  EXPECT_EQ(b->kind, Kind::blocked);
  EXPECT_EQ(b->block, 32);
  EXPECT_EQ(to_string(*b), "blocked:32");
  expect_error([] { parse_accumulation_order("blocked:0"); }, "accumulation", "K must be");
  expect_error([] { parse_accumulation_order("blocked:-3"); }, "accumulation", "K must be");
  expect_error([] { parse_accumulation_order("blocked:x"); }, "accumulation", "K must be");
  expect_error([] { parse_accumulation_order("blocked"); }, "accumulation", "blocked:K");
  expect_error([] { parse_accumulation_order("sequental"); }, "accumulation",
               "did you mean 'sequential'");
  expect_error([] { parse_accumulation_order("blokced:4"); }, "accumulation",
               "did you mean 'blocked:K'");
}

TEST(Parse, Distributions) {
  EXPECT_EQ(parse_distribution("normal").kind, Distribution::Kind::normal);
  const auto u = parse_distribution("uniform:-2:0.5");
  EXPECT_EQ(u.kind, Distribution::Kind::uniform);
  EXPECT_EQ(u.lo, -2);
  EXPECT_EQ(u.hi, 0.5);
  expect_error([] { parse_distribution("uniform:1:1"); }, "distribution", "LO must be below HI");
  expect_error([] { parse_distribution("uniform:a:1"); }, "distribution", "uniform:LO:HI");
  expect_error([] { parse_distribution("uniform:0:inf"); }, "distribution", "finite");
  expect_error([] { parse_distribution("normall"); }, "distribution", "did you mean 'normal'");
}

TEST(Parse, Sizes) {
  EXPECT_EQ(parse_sizes("128,256,1"), (std::vector<std::int64_t>{128, 256, 1}));
  expect_error([] { parse_sizes("12x"); }, "sizes", "'12x' is not a positive integer");
  expect_error([] { parse_sizes("0"); }, "sizes", "not a positive integer");
  expect_error([] { parse_sizes("-4"); }, "sizes", "not a positive integer");
  expect_error([] { parse_sizes("128,"); }, "sizes", "not a positive integer");
  expect_error([] { parse_sizes(""); }, "sizes", "not a positive integer");
  // 10^7 x 10^7 doubles: far more memory than any machine has.
  expect_error([] { parse_sizes("10000000"); }, "sizes", "of memory");
  expect_error([] { parse_sizes("99999999999999999999"); }, "sizes", "not a positive integer");
}

TEST(Setup, Defaults) {
  const auto s = make_gemm_setup(F("fp16"), F("fp32"), std::nullopt, std::nullopt);
  EXPECT_EQ(s.accumulate.name, "float32");
  EXPECT_EQ(s.output.name, "float16");
  EXPECT_EQ(s.order.kind, Kind::library);
  // Low-precision accumulation is emulated, sequential by default.
  const auto h = make_gemm_setup(F("fp16"), std::nullopt, F("fp32"), std::nullopt);
  EXPECT_EQ(h.accumulate.name, "float16");
  EXPECT_EQ(h.output.name, "float32");
  EXPECT_EQ(h.order.kind, Kind::sequential);
  // float64 inputs accumulate in float64 whatever is asked.
  const auto d = make_gemm_setup(F("fp64"), F("fp32"), std::nullopt, std::nullopt);
  EXPECT_EQ(d.accumulate.name, "float64");
  EXPECT_EQ(d.order.kind, Kind::sequential);
}

TEST(Setup, Refusals) {
  const AccumulationOrder lib{Kind::library, 0};
  expect_error([&] { make_gemm_setup(F("fp16"), F("fp16"), std::nullopt, lib); },
               "accumulation library", "accumulates in float32");
  expect_error([&] { make_gemm_setup(F("fp64"), std::nullopt, std::nullopt, lib); },
               "accumulation library", "accumulates in float32");
  expect_error([] { make_gemm_setup(F("e8m0"), F("fp32"), std::nullopt, std::nullopt); },
               "float8_e8m0fnu", "no sign");
  expect_error([] { make_gemm_setup(F("fp16"), F("e11m51"), std::nullopt, std::nullopt); },
               "accumulate e11m51", "not modelled");
}

// ---- the GEMM paths -------------------------------------------------------------------

struct FastCase {
  const char* input;
  const char* accumulate;
  AccumulationOrder order;
};

// The vectorised float32/float64 kernels and the float-carrier emulation compute exactly
// what the (double) emulation defines, for sizes that exercise every tail (rows mod 4,
// columns mod the vector length, k beyond one 256-step panel).
TEST(Gemm, FastPathsMatchEmulationBitForBit) {
  const FastCase cases[] = {
      {"float16", "float32", {Kind::sequential, 0}},
      {"float32", "float32", {Kind::sequential, 0}},
      {"float16", "float32", {Kind::blocked, 1}},
      {"bfloat16", "float32", {Kind::blocked, 7}},
      {"float32", "float32", {Kind::blocked, 64}},
      {"float64", "float64", {Kind::sequential, 0}},
      {"float64", "float64", {Kind::blocked, 16}},
      {"float16", "float64", {Kind::sequential, 0}},
      // float carriers for low-precision accumulation
      {"float16", "float16", {Kind::sequential, 0}},
      {"float16", "float16", {Kind::pairwise, 0}},
      {"bfloat16", "bfloat16", {Kind::blocked, 8}},
      {"float16", "bfloat16", {Kind::pairwise, 0}},
      {"float8_e4m3fn", "float8_e4m3fn", {Kind::sequential, 0}},
      {"float8_e5m2", "float16", {Kind::blocked, 3}},
  };
  for (const auto& c : cases)
    for (std::size_t n : {1, 3, 5, 17, 33, 70, 261}) {
      if (n == 261 && c.order.kind == Kind::blocked && c.order.block < 16) continue;  // time
      const Format in = F(c.input), acc = F(c.accumulate);
      const auto a = random_matrix(n, 1 + n, in), b = random_matrix(n, 2 + n, in);
      std::vector<double> fast(n * n), slow(n * n);
      const auto sn = static_cast<std::int64_t>(n);
      gemm_accumulate(a, b, fast, sn, acc, c.order);
      gemm_accumulate_generic(a, b, slow, sn, acc, c.order);
      std::string where;
      EXPECT_TRUE(same_bits(fast, slow, &where))
          << c.input << " in " << c.accumulate << " " << to_string(c.order) << " n=" << n << ": "
          << where;
    }
}

// The emulation against a scalar model written here: inputs are multiples of 1/8 below 4
// in magnitude, so every exact partial sum is a double and round(s + a*b) is the exact
// fl(s + ab) of the model.
TEST(Gemm, EmulationMatchesScalarModel) {
  const std::size_t n = 11;
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> di(-31, 31);
  std::vector<double> a(n * n), b(n * n);
  for (auto& v : a) v = di(rng) / 8.0;
  for (auto& v : b) v = di(rng) / 8.0;
  for (const char* accname : {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "e3m2"}) {
    const Format acc = F(accname);
    auto fl = [&](double x) { return round(x, acc); };
    const Format outer = acc.precision_bits() >= 24 ? acc : F("float32");
    for (const AccumulationOrder order :
         {AccumulationOrder{Kind::sequential, 0}, AccumulationOrder{Kind::pairwise, 0},
          AccumulationOrder{Kind::blocked, 4}, AccumulationOrder{Kind::blocked, 100}}) {
      std::vector<double> got(n * n), want(n * n);
      gemm_accumulate(a, b, got, static_cast<std::int64_t>(n), acc, order);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          std::vector<double> p(n);
          for (std::size_t k = 0; k < n; ++k) p[k] = a[i * n + k] * b[k * n + j];
          double s = 0;
          if (order.kind == Kind::sequential) {
            for (double x : p) s = fl(s + x);
          } else if (order.kind == Kind::blocked) {
            for (std::size_t k0 = 0; k0 < n; k0 += static_cast<std::size_t>(order.block)) {
              double chunk = 0;
              for (std::size_t k = k0; k < std::min(n, k0 + static_cast<std::size_t>(order.block));
                   ++k)
                chunk = fl(chunk + p[k]);
              s = round(s + chunk, outer);
            }
          } else {  // n = 11 = 8 + 2 + 1: ((tree of 8) + ((p8 + p9) + p10))
            auto pair = [&](std::size_t k) { return fl(p[k] + p[k + 1]); };
            const double t8 = fl(fl(pair(0) + pair(2)) + fl(pair(4) + pair(6)));
            s = fl(t8 + fl(pair(8) + p[10]));
          }
          want[i * n + j] = s;
        }
      std::string where;
      EXPECT_TRUE(same_bits(got, want, &where))
          << accname << " " << to_string(order) << ": " << where;
    }
  }
}

// The product must be exact and the sum rounded once (round to odd, then nearest): a
// plain double addition followed by rounding gets these wrong.
TEST(Gemm, AddRoundedAvoidsDoubleRounding) {
  // e11m40: 1 + 2^-41 is the midpoint between 1 and 1 + 2^-40. The exact sum is above it,
  // but the double sum drops the 2^-60 and lands on it (and ties to even, 1).
  const Format f = F("e11m40");
  EXPECT_EQ(round(1.0 + (0x1p-41 + 0x1p-60), f), 1.0);  // the trap
  EXPECT_EQ(add_rounded(1.0, 0x1p-41 + 0x1p-60, f), 1 + 0x1p-40);
  // In a GEMM accumulating in float32: 1 + a*b with a*b = 2^-24 (1 + 2^-36) exactly (a, b
  // float32 values). The exact sum is just above the midpoint 1 + 2^-24, so fl = 1 + 2^-23;
  // the double sum 1 + 2^-24 + 2^-60 loses the 2^-60 and ties to even, 1.
  const double a1 = 0x1p-24 * (1 + 0x1p-12), b1 = 1 - 0x1p-12 + 0x1p-24;
  ASSERT_EQ(a1 * b1, 0x1p-24 + 0x1p-60);
  EXPECT_EQ(round(1.0 + a1 * b1, F("fp32")), 1.0);  // the trap
  std::vector<double> a = {1, a1, 0, 0}, b = {1, 0, b1, 0};
  std::vector<double> c(4), fast(4);
  gemm_accumulate_generic(a, b, c, 2, F("fp32"), {Kind::sequential, 0});
  gemm_accumulate(a, b, fast, 2, F("fp32"), {Kind::sequential, 0});  // float32 FMA kernel
  EXPECT_EQ(c[0], 1 + 0x1p-23);
  EXPECT_EQ(fast[0], 1 + 0x1p-23);
}

TEST(Gemm, ReferenceIsExactWhereDoubleIsNot) {
  // Row 0 of A times column 0 of B: 1e16 + 1 - 1e16 = 1; a double dot product gives 0.
  const std::size_t n = 3;
  std::vector<double> a = {1e16, 1, -1e16, 0, 0, 0, 0, 0, 0};
  std::vector<double> b = {1, 0, 0, 1, 0, 0, 1, 0, 0};
  std::vector<double> plain(n * n), comp(n * n);
  gemm_reference(a, b, plain, 3, false);
  gemm_reference(a, b, comp, 3, true);
  EXPECT_EQ(plain[0], 0);
  EXPECT_EQ(comp[0], 1);
  // On integer matrices both are exact.
  const std::size_t m = 37;
  std::vector<double> x(m * m), y(m * m), p(m * m), q(m * m);
  for (std::size_t i = 0; i < m * m; ++i)
    x[i] = double(int(i % 17) - 8), y[i] = double(int(i % 13) - 6);
  gemm_reference(x, y, p, m, false);
  gemm_reference(x, y, q, m, true);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < m; ++j) {
      double s = 0;
      for (std::size_t k = 0; k < m; ++k) s += x[i * m + k] * y[k * m + j];
      ASSERT_EQ(p[i * m + j], s);
      ASSERT_EQ(q[i * m + j], s);
    }
}

TEST(Gemm, LibraryStaysWithinFloat32Bound) {
  const std::size_t n = 150;
  const auto a = random_matrix(n, 3, F("fp16")), b = random_matrix(n, 4, F("fp16"));
  std::vector<double> lib(n * n), ref(n * n);
  gemm_accumulate(a, b, lib, n, F("fp32"), {Kind::library, 0});
  gemm_reference(a, b, ref, n, false);
  const double g = n * 0x1p-24 / (1 - n * 0x1p-24);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double ab = 0;
      for (std::size_t k = 0; k < n; ++k) ab += std::fabs(a[i * n + k] * b[k * n + j]);
      ASSERT_LE(std::fabs(lib[i * n + j] - ref[i * n + j]), g * ab * 1.0001);
      ASSERT_EQ(lib[i * n + j], double(float(lib[i * n + j])));  // a float32 result
    }
}

// ---- the experiment: what theory demands ----------------------------------------------

GemmErrorRow row(std::int64_t n, const char* format, std::optional<Format> acc,
                 std::optional<Format> out = std::nullopt,
                 std::optional<AccumulationOrder> order = std::nullopt, int samples = 1) {
  GemmErrorOptions o;
  o.sizes = {n};
  o.formats = {F(format)};
  o.accumulate = acc;
  o.output = out;
  o.order = order;
  o.samples = samples;
  const auto rows = gemm_error(o);
  EXPECT_EQ(rows.size(), 1u);
  return rows.at(0);
}

TEST(Theory, Float64IsExactToRoundoff) {
  for (std::int64_t n : {16, 200}) {
    const auto r = row(n, "float64", std::nullopt);
    EXPECT_EQ(r.accumulate, "float64");
    EXPECT_EQ(r.input_rounding_error, 0);  // nothing to round
    EXPECT_LE(r.normwise_error, 4 * std::sqrt(double(n)) * 0x1p-53) << n;
    EXPECT_LE(r.normwise_error, r.bound_deterministic);
    EXPECT_EQ(r.bound_violations, std::optional<std::uint64_t>(0));
  }
}

TEST(Theory, ScaledInputsStayUnderTheirInputBound) {
  GemmErrorOptions o;
  o.sizes = {64, 100};  // 100: a short last block along K
  o.formats = {parse_scaled_format("mxfp8_e4m3"), parse_scaled_format("mxfp4_e2m1"),
               parse_scaled_format("nvfp4"), parse_scaled_format("fp8"), F("fp16")};
  o.output = F("fp32");
  const auto rows = gemm_error(o);
  ASSERT_EQ(rows.size(), 10u);
  for (const auto& r : rows) {
    SCOPED_TRACE(r.format + " n=" + std::to_string(r.size));
    EXPECT_EQ(r.accumulation, "library");  // float32 inputs, float32 accumulation
    EXPECT_EQ(r.input_bound_violations, std::optional<std::uint64_t>(0));
    EXPECT_GT(r.input_rounding_error, 0);
    EXPECT_LE(r.input_rounding_error, r.input_rounding_bound);
    EXPECT_EQ(r.bound_violations, std::optional<std::uint64_t>(0));
  }
  // E2M1 elements (u = 2^-2) lose about 4x what E4M3 ones (u = 2^-4) do under the same
  // kind of scale (measured: 0.161 against 0.041 at n = 64).
  EXPECT_GT(rows.at(1).input_rounding_error, 2 * rows.at(0).input_rounding_error);
  // A scaled format's setup multiplies float32 carriers.
  const GemmSetup s = make_gemm_setup(GemmInput(parse_scaled_format("mxfp4_e2m1")), std::nullopt,
                                      std::nullopt, std::nullopt);
  EXPECT_EQ(s.input.name, "float32");
  EXPECT_EQ(s.accumulate.name, "float32");
  ASSERT_TRUE(s.scaled.has_value());
  EXPECT_EQ(s.scaled->name, "mxfp4_e2m1");
}

TEST(Theory, Bfloat16WorseThanFloat16OnNormalData) {
  GemmErrorOptions o;
  o.sizes = {256};
  o.formats = {F("fp16"), F("bf16")};
  const auto rows = gemm_error(o);
  const auto& h = rows.at(0);
  const auto& b = rows.at(1);
  // 3 fewer mantissa bits: about 8x the error, in every measure.
  EXPECT_GT(b.normwise_error, 4 * h.normwise_error);
  EXPECT_GT(b.mean_abs_error, 4 * h.mean_abs_error);
  EXPECT_GT(b.input_rounding_error, 4 * h.input_rounding_error);
  EXPECT_GT(b.max_abs_error, h.max_abs_error);
}

TEST(Theory, Float16AccumulationGrowsWithNFloat32StaysAtInputRounding) {
  std::vector<double> acc16, acc32;
  double input = 0;
  for (std::int64_t n : {32, 128, 512}) {
    const auto h = row(n, "fp16", std::nullopt, F("fp32"));  // accumulate in float16
    const auto s = row(n, "fp16", F("fp32"), F("fp32"));
    ASSERT_EQ(h.accumulate, "float16");
    ASSERT_EQ(h.accumulation, "sequential");
    acc16.push_back(h.normwise_error);
    acc32.push_back(s.normwise_error);
    input = s.input_rounding_error;
    // float32 accumulation adds nothing visible next to the inputs' rounding.
    EXPECT_LT(s.normwise_error, 0.01 * s.input_rounding_error) << n;
    EXPECT_LE(h.normwise_error, h.bound_deterministic) << n;
  }
  // float16 accumulation: error ~ sqrt(n) u for random signs (16x n: ~4x the error).
  EXPECT_GT(acc16[1], 1.5 * acc16[0]);
  EXPECT_GT(acc16[2], 1.5 * acc16[1]);
  EXPECT_GT(acc16[2], 2.5 * acc16[0]);
  EXPECT_GT(acc16[2], input);  // at n = 512 it exceeds the inputs' own rounding
  EXPECT_GT(acc16[0], 100 * acc32[0]);
  // Pairwise summation in float16 is much better than sequential.
  const auto p = row(512, "fp16", std::nullopt, F("fp32"), AccumulationOrder{Kind::pairwise, 0});
  EXPECT_LT(p.normwise_error, 0.5 * acc16[2]);
  // blocked:32 (float16 chunks, float32 between them) is in between.
  const auto k = row(512, "fp16", std::nullopt, F("fp32"), AccumulationOrder{Kind::blocked, 32});
  EXPECT_LT(k.normwise_error, 0.5 * acc16[2]);
}

TEST(Theory, EveryMeasurementUnderItsDeterministicBound) {
  struct C {
    const char* format;
    std::optional<Format> acc, out;
    std::optional<AccumulationOrder> order;
  };
  const std::vector<C> cases = {
      {"fp16", F("fp32"), std::nullopt, std::nullopt},
      {"bf16", F("fp32"), std::nullopt, std::nullopt},
      {"tf32", F("fp32"), std::nullopt, std::nullopt},
      {"float8_e4m3fn", F("fp32"), std::nullopt, std::nullopt},
      {"float8_e5m2", F("fp32"), std::nullopt, std::nullopt},
      {"float8_e4m3fnuz", F("fp32"), F("fp16"), std::nullopt},
      {"fp32", F("fp32"), std::nullopt, std::nullopt},
      {"fp32", F("fp32"), std::nullopt, AccumulationOrder{Kind::pairwise, 0}},
      {"fp16", std::nullopt, std::nullopt, std::nullopt},
      {"fp16", std::nullopt, F("fp32"), AccumulationOrder{Kind::pairwise, 0}},
      {"fp16", std::nullopt, std::nullopt, AccumulationOrder{Kind::blocked, 8}},
      {"bf16", std::nullopt, F("fp32"), std::nullopt},
      {"float8_e4m3fn", F("e8m13"), F("fp32"), AccumulationOrder{Kind::blocked, 16}},
      {"float8_e5m2", std::nullopt, std::nullopt, std::nullopt},
      {"float4_e2m1fn", F("fp16"), F("fp16"), std::nullopt},
      {"fp64", std::nullopt, std::nullopt, std::nullopt},
      {"fp64", std::nullopt, std::nullopt, AccumulationOrder{Kind::pairwise, 0}},
  };
  for (const auto& c : cases)
    for (std::int64_t n : {4, 40, 130}) {
      const auto r = row(n, c.format, c.acc, c.out, c.order, 2);
      const std::string what = std::string(c.format) + " acc " + r.accumulate + " " +
                               r.accumulation + " out " + r.output + " n=" + std::to_string(n);
      ASSERT_EQ(r.overflow, 0u) << what;
      if (std::isfinite(r.bound_deterministic)) {
        EXPECT_LE(r.normwise_error, r.bound_deterministic) << what;
        ASSERT_TRUE(r.bound_violations.has_value()) << what;
        EXPECT_EQ(*r.bound_violations, 0u) << what;
      } else {
        EXPECT_FALSE(r.bound_violations.has_value()) << what;
      }
      EXPECT_GE(r.normwise_error, 0) << what;
      EXPECT_LE(r.bound_probabilistic, r.bound_deterministic) << what;
    }
}

TEST(Theory, NoBoundWhenNuReachesOne) {
  // float16 accumulation, n = 2048: n u = 1.
  const auto r = row(4, "float8_e4m3fn", std::nullopt, F("fp32"));  // e4m3: u = 1/16, n u = 1/4
  EXPECT_TRUE(std::isfinite(r.bound_deterministic));
  const auto s = row(16, "float8_e4m3fn", std::nullopt, F("fp32"));  // n u = 1
  EXPECT_TRUE(std::isinf(s.bound_deterministic));
  EXPECT_FALSE(s.bound_violations.has_value());
}

TEST(Experiment, SeededAndSharedAcrossFormats) {
  const auto s16 = make_gemm_setup(F("fp16"), F("fp32"), std::nullopt, std::nullopt);
  const auto sbf = make_gemm_setup(F("bf16"), F("fp32"), std::nullopt, std::nullopt);
  const auto m1 = gemm_matrices(20, s16, {}, 7, 0, 1);
  const auto m2 = gemm_matrices(20, sbf, {}, 7, 0, 2);
  const auto m3 = gemm_matrices(20, s16, {}, 8, 0);
  const auto m4 = gemm_matrices(20, s16, {}, 7, 1);
  EXPECT_EQ(m1.a, m2.a);  // same data for every format, whatever the thread count
  EXPECT_EQ(m1.b, m2.b);
  EXPECT_NE(m1.a, m3.a);  // another seed
  EXPECT_NE(m1.a, m4.a);  // another sample
  EXPECT_NE(m1.a, m1.b);
  // Rows are reproducible.
  const auto r1 = gemm_error_row(m1, s16);
  const auto r2 = gemm_error_row(gemm_matrices(20, s16, {}, 7, 0), s16);
  EXPECT_EQ(r1.normwise_error, r2.normwise_error);
  EXPECT_EQ(r1.max_abs_error, r2.max_abs_error);
}

TEST(Experiment, UniformDistributionAndOverflow) {
  GemmErrorOptions o;
  o.sizes = {32};
  o.formats = {F("float8_e4m3fn"), F("fp16")};
  o.distribution = parse_distribution("uniform:-1000:1000");  // beyond e4m3fn's 448
  const auto rows = gemm_error(o);
  EXPECT_GT(rows[0].overflow, 0u);
  EXPECT_FALSE(rows[0].bound_violations.has_value());
  EXPECT_GT(rows[1].overflow, 0u);  // sums of 32 products of ~500^2 pass 65504
  o.distribution = parse_distribution("uniform:0:1");
  const auto ok = gemm_error(o);
  EXPECT_EQ(ok[0].overflow, 0u);
  EXPECT_EQ(ok[1].overflow, 0u);
}

TEST(Experiment, SamplesAggregate) {
  GemmErrorOptions o;
  o.sizes = {24};
  o.formats = {F("bf16")};
  o.samples = 3;
  const auto all = gemm_error(o).at(0);
  double mean = 0, mx = 0;
  for (int s = 0; s < 3; ++s) {
    const auto setup = make_gemm_setup(F("bf16"), F("fp32"), std::nullopt, std::nullopt);
    const auto r = gemm_error_row(gemm_matrices(24, setup, {}, 0, s), setup);
    mean += r.normwise_error / 3;
    mx = std::max(mx, r.max_abs_error);
  }
  EXPECT_EQ(all.samples, 3);
  EXPECT_NEAR(all.normwise_error, mean, 1e-15);
  EXPECT_EQ(all.max_abs_error, mx);
}

// ---- accumulation limits --------------------------------------------------------------

TEST(Accum, KnownStagnationCounts) {
  EXPECT_EQ(accum_limits(F("fp16")).stagnation_count, 2048u);  // 2048 + 1 -> 2048
  EXPECT_EQ(accum_limits(F("fp16")).exact_count, 2048u);
  EXPECT_EQ(accum_limits(F("bf16")).stagnation_count, 256u);
  EXPECT_EQ(accum_limits(F("tf32")).stagnation_count, 2048u);
  EXPECT_EQ(accum_limits(F("fp32")).stagnation_count, 1u << 24);
  EXPECT_EQ(accum_limits(F("fp64")).stagnation_count, std::uint64_t{1} << 53);
  EXPECT_EQ(accum_limits(F("float8_e4m3fn")).stagnation_count, 16u);
  EXPECT_EQ(accum_limits(F("float8_e5m2")).stagnation_count, 8u);
  // A weight of 1 in bf16 loses every update below half its ulp (2^-8).
  AccumOptions w;
  w.start = 1;
  w.value = 1e-3;
  EXPECT_EQ(accum_limits(F("bf16"), w).stagnation_count, 0u);
  w.value = 0.0045;  // above half an ulp: rounds to 2^-7 steps until 2 (ulp 2^-6)
  const auto r = accum_limits(F("bf16"), w);
  EXPECT_EQ(r.stagnation_count, 128u);
  EXPECT_EQ(r.exact_count, 0u);
  // Negative increments mirror positive ones.
  AccumOptions neg;
  neg.value = -1;
  EXPECT_EQ(accum_limits(F("fp16"), neg).stagnation_count, 2048u);
  // Overflow before stagnation: 100 per step in e4m3fn passes 448.
  AccumOptions big;
  big.value = 100;
  const auto o = accum_limits(F("float8_e4m3fn"), big);
  EXPECT_FALSE(o.stagnation_count.has_value());
  EXPECT_EQ(o.overflow_count, 5u);  // 100 200 288 384, then 484 -> NaN
}

TEST(Accum, ErrorsOfNTerms) {
  AccumOptions o;
  o.n = 10000;
  const auto r = accum_limits(F("fp16"), o);
  EXPECT_NEAR(r.naive_rel_error, (10000.0 - 2048) / 10000, 1e-15);  // stuck at 2048
  EXPECT_EQ(r.pairwise_rel_error, 0);  // every partial sum is an integer below 2^11 * 2^k
  EXPECT_EQ(r.kahan_rel_error, 0);
  EXPECT_EQ(accum_limits(F("fp16")).n, 10000u);  // default: 10^5 would overflow 65504
  EXPECT_EQ(accum_limits(F("fp32")).n, 100000u);
  o.n = 100000;  // overflow: 10^5 is beyond float16's max
  const auto big = accum_limits(F("fp16"), o);
  EXPECT_TRUE(std::isinf(big.pairwise_rel_error));
  EXPECT_TRUE(std::isinf(big.kahan_rel_error));
  // value 0.1: naive is poor, pairwise and Kahan are near float16's representation limit.
  AccumOptions t;
  t.value = 0.1;
  t.n = 1000;
  const auto p = accum_limits(F("fp16"), t);
  EXPECT_GT(p.naive_rel_error, 10 * p.pairwise_rel_error);
  EXPECT_LE(p.kahan_rel_error, 0x1p-11);
  EXPECT_LE(p.pairwise_rel_error, 10 * 0x1p-11);
}

TEST(Accum, FastWalkAgreesWithSimulation) {
  const char* formats[] = {"fp16",
                           "bf16",
                           "tf32",
                           "float8_e4m3fn",
                           "float8_e4m3fnuz",
                           "float8_e5m2",
                           "float8_e5m2fnuz",
                           "float6_e2m3fn",
                           "float6_e3m2fn",
                           "float4_e2m1fn",
                           "e5m7",
                           "e3m4",
                           "e4m3fnuz"};
  const double values[] = {1, 0.1, 3, 0.7, 1e-3, -1, 5e-5, 1.5, 6e-8, 0.33, 250};
  const double starts[] = {0, 1, -5, 100, 0.25};
  for (const char* fname : formats)
    for (double v : values)
      for (double st : starts) {
        const Format f = F(fname);
        AccumOptions o;
        o.value = v;
        o.start = st;
        o.n = 777;
        AccumRow a, b;
        try {
          a = accum_limits(f, o);
        } catch (const Error&) {
          EXPECT_THROW(accum_limits_simulated(f, o), Error);
          continue;
        }
        b = accum_limits_simulated(f, o);
        const std::string what =
            std::string(fname) + " value " + std::to_string(v) + " start " + std::to_string(st);
        EXPECT_EQ(a.stagnation_count, b.stagnation_count) << what;
        EXPECT_EQ(a.overflow_count, b.overflow_count) << what;
        EXPECT_EQ(a.exact_count, b.exact_count) << what;
        EXPECT_EQ(a.naive_rel_error, b.naive_rel_error) << what;
        EXPECT_EQ(a.pairwise_rel_error, b.pairwise_rel_error) << what;
        EXPECT_EQ(a.kahan_rel_error, b.kahan_rel_error) << what;
      }
  // float32: 2^23 simulated steps from 2^23 (quick enough), and a 0.1 walk.
  for (double v : {1.0, 0.1}) {
    AccumOptions o;
    o.start = v == 1.0 ? 0x1p23 : 0x1p18;
    o.value = v;
    o.n = 10;
    const auto a = accum_limits(F("fp32"), o), b = accum_limits_simulated(F("fp32"), o);
    EXPECT_EQ(a.stagnation_count, b.stagnation_count) << v;
    EXPECT_EQ(a.exact_count, b.exact_count) << v;
  }
}

TEST(Accum, StagnationDefinition) {
  // Check the definition directly: S_k + v == S_k at k = count, and not before.
  for (const char* fname : {"fp16", "bf16", "float8_e5m2"})
    for (double v : {1.0, 0.3, 7.0}) {
      const Format f = F(fname);
      AccumOptions o;
      o.value = v;
      const auto r = accum_limits(f, o);
      ASSERT_TRUE(r.stagnation_count.has_value());
      double s = 0;
      for (std::uint64_t k = 0; k < *r.stagnation_count; ++k) {
        const double next = add_rounded(s, r.value, f);
        ASSERT_NE(next, s) << fname << " " << v << " k=" << k;
        s = next;
      }
      EXPECT_EQ(add_rounded(s, r.value, f), s) << fname << " " << v;
    }
}

TEST(Accum, Refusals) {
  expect_error([] { accum_limits(F("e8m0")); }, "float8_e8m0fnu", "no sign");
  AccumOptions o;
  o.value = 1e-10;
  expect_error([&] { accum_limits(F("fp16"), o); }, "value", "zero in float16");
  o.value = 1e6;
  expect_error([&] { accum_limits(F("fp16"), o); }, "value", "not a finite value");
  AccumOptions n;
  n.n = 2'000'000'000;
  expect_error([&] { accum_limits(F("fp16"), n); }, "n", "at most");
  for (const auto& f : accum_formats()) EXPECT_TRUE(f.is_signed) << f.name;
  EXPECT_EQ(accum_formats().size(), named_formats().size() - 1);
}

// ---- targets --------------------------------------------------------------------------

TEST(Targets, ScaledFormats) {
  for (const auto& t : targets())
    for (const auto& name : t.scaled_formats)
      EXPECT_EQ(parse_scaled_format(name).name, name) << t.name;
  const auto S = [](const char* n) { return parse_scaled_format(n); };
  EXPECT_TRUE(runs_natively(find_target("b200"), S("nvfp4")));
  EXPECT_TRUE(runs_natively(find_target("rtx5090"), S("mxfp4_e2m1")));
  EXPECT_TRUE(runs_natively(find_target("mi355x"), S("mxfp6_e2m3")));
  EXPECT_FALSE(runs_natively(find_target("mi355x"), S("nvfp4")));     // NVIDIA's
  EXPECT_FALSE(runs_natively(find_target("h100"), S("mxfp8_e4m3")));  // no block scales
  EXPECT_TRUE(runs_natively(find_target("h100"), S("fp8")));     // per-tensor: fp8 GEMM + epilogue
  EXPECT_FALSE(runs_natively(find_target("mi300x"), S("fp8")));  // fnuz fp8 only
  EXPECT_FALSE(runs_natively(find_target("a100"), S("channel:float8_e5m2")));
}

TEST(Targets, EveryFormatNameIsCanonical) {
  for (const auto& t : targets()) {
    for (const auto* list : {&t.matrix_formats, &t.vector_formats})
      for (const auto& name : *list) EXPECT_EQ(parse_format(name).name, name) << t.name;
    EXPECT_EQ(parse_format(t.recommended).name, t.recommended) << t.name;
    EXPECT_EQ(parse_format(t.fastest).name, t.fastest) << t.name;
    EXPECT_TRUE(runs_natively(t, recommended_format(t))) << t.name;
    EXPECT_TRUE(runs_natively(t, F("float32"))) << t.name;
    EXPECT_FALSE(t.sources.empty()) << t.name;
    EXPECT_EQ(&find_target(t.name), &t);
    for (const auto& a : t.aliases) EXPECT_EQ(&find_target(a), &t) << a;
  }
  for (const char* required :
       {"sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "cdna2", "cdna3"})
    EXPECT_NO_THROW(find_target(required)) << required;
}

TEST(Targets, CommonMistakesCorrected) {
  const Format bf16 = F("bf16"), e4m3 = F("float8_e4m3fn"), e5m2 = F("float8_e5m2");
  const Format fnuz = F("float8_e4m3fnuz"), fp4 = F("float4_e2m1fn");
  // bf16 tensor cores need sm_80+.
  EXPECT_FALSE(runs_in_matrix_units(find_target("sm_70"), bf16));
  EXPECT_FALSE(runs_in_matrix_units(find_target("sm_75"), bf16));
  for (const char* t : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"})
    EXPECT_TRUE(runs_in_matrix_units(find_target(t), bf16)) << t;
  // fp8 needs sm_89+.
  for (const char* t : {"sm_70", "sm_75", "sm_80", "sm_86"}) {
    EXPECT_FALSE(runs_natively(find_target(t), e4m3)) << t;
    EXPECT_FALSE(runs_natively(find_target(t), e5m2)) << t;
  }
  for (const char* t : {"sm_89", "sm_90", "sm_100", "sm_120"}) {
    EXPECT_TRUE(runs_in_matrix_units(find_target(t), e4m3)) << t;
    EXPECT_TRUE(runs_in_matrix_units(find_target(t), e5m2)) << t;
  }
  // fnuz fp8 is AMD's (CDNA3), never NVIDIA's; CDNA3 has no OCP e4m3fn, CDNA2 no fp8.
  for (const auto& t : targets()) EXPECT_EQ(runs_natively(t, fnuz), t.name == "cdna3") << t.name;
  EXPECT_FALSE(runs_natively(find_target("cdna3"), e4m3));
  EXPECT_FALSE(runs_natively(find_target("cdna2"), e5m2));
  // fp4 only on Blackwell (sm_100, sm_120) and CDNA4.
  for (const auto& t : targets())
    EXPECT_EQ(runs_natively(t, fp4), t.name == "sm_100" || t.name == "sm_120" || t.name == "cdna4")
        << t.name;
  EXPECT_TRUE(runs_in_matrix_units(find_target("granite-rapids"), F("fp16")));
  EXPECT_FALSE(runs_in_matrix_units(find_target("sapphire-rapids"), F("fp16")));
  EXPECT_TRUE(runs_natively(find_target("sapphire-rapids"), F("fp16")));  // AVX512-FP16
  EXPECT_FALSE(runs_natively(find_target("armv8.2-fp16"), bf16));
  EXPECT_TRUE(runs_in_matrix_units(find_target("armv8.6-bf16"), bf16));  // BFMMLA
}

TEST(Targets, LookupAndRefusal) {
  EXPECT_EQ(find_target("SM_80").name, "sm_80");
  EXPECT_EQ(find_target("sm80").name, "sm_80");
  EXPECT_EQ(find_target("compute_90").name, "sm_90");
  EXPECT_EQ(find_target("sm_90a").name, "sm_90");
  EXPECT_EQ(find_target("H100").name, "sm_90");
  EXPECT_EQ(find_target("mi300x").name, "cdna3");
  expect_error([] { find_target("sm_8"); }, "target 'sm_8'", "did you mean");
  expect_error([] { find_target("quantum-tpu-9000"); }, "target 'quantum-tpu-9000'",
               "fpguard targets");
  expect_error([] { require_native(find_target("sm_75"), F("bf16")); }, "target sm_75",
               "does not compute in bfloat16");
  EXPECT_NO_THROW(require_native(find_target("sm_86"), F("bf16")));
  EXPECT_EQ(recommended_format(find_target("sm_75")).name, "float16");
  EXPECT_EQ(recommended_format(find_target("sm_86")).name, "bfloat16");
}

}  // namespace
}  // namespace fpguard
