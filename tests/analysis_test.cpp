// The analysis layer on crafted graphs: an overflow at node k is reported at k only, a
// NaN from 0/0 at the division, an accuracy loss at a large-K MatMul (not at what
// feeds it or what follows), an out-of-range constant as an origin of its own, a
// precision boundary from a float32 node; comparisons against hand-computed values;
// rules turned off by id; lockstep sessions equal a plain run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "analysis/compare.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/model.hpp"
#include "fpguard/rewrite.hpp"
#include "fpguard/round.hpp"
#include "fpguard/stats.hpp"
#include "graph_util.hpp"
#include "test_util.hpp"

namespace fpguard::analysis {
namespace {

using test::floats;
using test::scalar;
using Builder = test::GraphBuilder;

CheckOptions fp16() {
  CheckOptions o;
  o.precision = parse_format("float16");
  o.threads = 1;
  return o;
}

std::vector<std::string> origin_nodes(const Diagnosis& d, OriginKind k) {
  std::vector<std::string> out;
  for (const auto& o : d.origins)
    if (o.kind == k) out.push_back(o.node);
  return out;
}

TEST(Compare, CountsAndErrorsByHand) {
  const Format f = parse_format("float16");
  const std::vector<float> r = {1e5f, 2.0f, 1e-9f, 3e-6f, 4.0f, NAN, 1.0f};
  const std::vector<float> v = {INFINITY, 2.5f, 0.0f, 2.980232e-6f, 4.0f, 1.0f, NAN};
  const Comparison c = compare(r, v, f);
  EXPECT_EQ(c.count, 6u);  // the NaN reference is not compared
  EXPECT_EQ(c.overflow, 1u);
  EXPECT_EQ(c.nan, 1u);
  EXPECT_EQ(c.underflow, 1u);
  EXPECT_EQ(c.subnormal, 1u);  // 2.98e-6 < 6.1e-5, fp16's smallest normal
  EXPECT_EQ(c.finite, 4u);
  EXPECT_DOUBLE_EQ(c.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(c.max_rel, 0.25);
  // Errors over the four finite pairs.
  const double x[] = {2, 1e-9, 3e-6, 4}, y[] = {2.5, 0, 2.980232e-6, 4};
  double dot = 0, xx = 0, yy = 0, dd = 0;
  for (int i = 0; i < 4; ++i) {
    const double xi = static_cast<float>(x[i]), yi = static_cast<float>(y[i]);
    dot += xi * yi, xx += xi * xi, yy += yi * yi, dd += (yi - xi) * (yi - xi);
  }
  EXPECT_NEAR(c.cosine(), dot / std::sqrt(xx * yy), 1e-15);
  EXPECT_NEAR(c.snr_db(), 10 * std::log10(xx / dd), 1e-12);
  EXPECT_NEAR(c.nrmse(), std::sqrt(dd / xx), 1e-15);
}

// The SIMD kernel against the scalar definition, element by element, on arrays with
// every special case sprinkled in (and lengths that leave tails).
TEST(Compare, SimdEqualsScalar) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 1);
  std::uniform_int_distribution<int> ex(-30, 20);
  // Special values in about 1 of 5 elements (most vectors take the scalar path), or in
  // about 1 of 5000 (most take the SIMD arithmetic).
  for (const int spread : {40, 20000})
    for (const char* name : {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"}) {
      std::uniform_int_distribution<int> pick(0, spread);
      const Format f = parse_format(name);
      for (std::size_t n : {1u, 15u, 16u, 17u, 1000u, 100003u}) {
        std::vector<float> r(n), v(n);
        for (std::size_t i = 0; i < n; ++i) {
          r[i] = std::ldexp(nd(rng), ex(rng));
          v[i] = r[i] * (1 + 1e-3f * nd(rng));
          switch (pick(rng)) {
            case 0:
              v[i] = INFINITY;
              break;
            case 1:
              v[i] = NAN;
              break;
            case 2:
              v[i] = 0;
              break;
            case 3:
              r[i] = NAN;
              break;
            case 4:
              r[i] = -INFINITY;
              break;
            case 5:
              r[i] = static_cast<float>(2 * f.max()), v[i] = static_cast<float>(f.max());
              break;
            case 6:
              v[i] = static_cast<float>(f.smallest_normal() / 4);
              break;
            case 7:
              r[i] = 0;
              break;
            default:
              break;
          }
        }
        // A second run: the first one's values, some perturbed further.
        std::vector<float> w = v;
        for (std::size_t i = 0; i < n; ++i)
          if (pick(rng) < spread / 2) w[i] = r[i] * (1 + 1e-2f * nd(rng));
        const CompareParams p{f.max(), f.smallest_normal(), f.has_subnormals};
        Comparison want, want_w;
        for (std::size_t i = 0; i < n; ++i) compare_one(r[i], v[i], p, want);
        for (std::size_t i = 0; i < n; ++i) compare_one(r[i], w[i], p, want_w);
        const auto both = compare(r, {std::span<const float>(v), std::span<const float>(w)}, f);
        ASSERT_EQ(both.size(), 2u);
        // The scale-relative error: the floor from r's largest finite |value|.
        double absmax = 0;
        for (const float x : r)
          if (std::isfinite(x)) absmax = std::max(absmax, std::fabs(static_cast<double>(x)));
        CompareParams ps = p;
        ps.floor = std::max(std::ldexp(absmax, -kScaleFloorBits), f.smallest_normal());
        Comparison want_s;
        for (std::size_t i = 0; i < n; ++i) compare_one(r[i], v[i], ps, want_s);
        const Comparison scaled = compare(r, v, f, true);
        EXPECT_EQ(scaled.max_scaled, want_s.max_scaled);
        EXPECT_EQ(scaled.max_rel, want.max_rel);
        EXPECT_EQ(want.max_scaled, 0);  // not asked for
        for (const auto& [got, want] :
             {std::pair{compare(r, v, f), want}, {both[0], want}, {both[1], want_w}}) {
          SCOPED_TRACE(std::string(name) + " n=" + std::to_string(n));
          EXPECT_EQ(got.count, want.count);
          EXPECT_EQ(got.finite, want.finite);
          EXPECT_EQ(got.overflow, want.overflow);
          EXPECT_EQ(got.nan, want.nan);
          EXPECT_EQ(got.underflow, want.underflow);
          EXPECT_EQ(got.subnormal, want.subnormal);
          EXPECT_EQ(got.max_abs, want.max_abs);
          EXPECT_EQ(got.max_rel, want.max_rel);
          for (auto [g, w] : {std::pair{got.sum_rel, want.sum_rel},
                              {got.dot, want.dot},
                              {got.vv, want.vv},
                              {got.rr, want.rr},
                              {got.dd, want.dd}})
            EXPECT_NEAR(g, w, 1e-12 * std::fabs(w));
        }
      }
    }
}

// The reference's statistics from the comparison pass against stats() of the same
// values, exactly (counts, extremes, exponent histogram), on arrays with zeros, float32
// subnormals, infinities and NaN sprinkled in, narrow and wide exponent spreads, and
// lengths that leave tails and span several blocks.
TEST(Compare, ReferenceStatsEqualStats) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 1);
  const Format f = parse_format("float16");
  for (const int wide : {0, 1})
    for (const int spread : {40, 20000})
      for (std::size_t n : {1u, 17u, 4095u, 4097u, 70001u}) {
        std::uniform_int_distribution<int> pick(0, spread), ex(wide ? -140 : -3, wide ? 60 : 3);
        std::vector<float> r(n), v(n);
        for (std::size_t i = 0; i < n; ++i) {
          r[i] = std::ldexp(nd(rng), ex(rng));
          switch (pick(rng)) {
            case 0:
              r[i] = 0;
              break;
            case 1:
              r[i] = NAN;
              break;
            case 2:
              r[i] = -INFINITY;
              break;
            case 3:
              r[i] = INFINITY;
              break;
            case 4:
              r[i] = 0x1p-140f;  // a float32 subnormal
              break;
            default:
              break;
          }
          v[i] = r[i] * 1.001f;
        }
        TensorStats got;
        compare(r, {std::span<const float>(v), std::span<const float>(v)}, f, &got);
        const TensorStats want = stats(std::span<const float>(r), {}).tensor;
        SCOPED_TRACE("n=" + std::to_string(n) + " wide=" + std::to_string(wide) +
                     " spread=" + std::to_string(spread));
        EXPECT_EQ(got.count, want.count);
        EXPECT_EQ(got.nan, want.nan);
        EXPECT_EQ(got.posinf, want.posinf);
        EXPECT_EQ(got.neginf, want.neginf);
        EXPECT_EQ(got.zeros, want.zeros);
        for (auto [g, w] : {std::pair{got.min, want.min},
                            {got.max, want.max},
                            {got.absmax, want.absmax},
                            {got.min_abs_nonzero, want.min_abs_nonzero}})
          EXPECT_TRUE(g == w || (std::isnan(g) && std::isnan(w))) << g << " vs " << w;
        EXPECT_EQ(got.exponent_histogram, want.exponent_histogram);
        EXPECT_TRUE(std::isnan(got.mean) && std::isnan(got.std));
      }
}

// |v - r| / max(|r|, 2^-10 absmax(r)): errors of near-zero references are measured
// against the tensor's scale, where the pointwise relative error explodes.
TEST(Compare, ScaledErrorByHand) {
  const Format f = parse_format("float32");
  const std::vector<float> r = {1024, 1, 0.25f, 0, INFINITY};
  const std::vector<float> v = {1025, 1.5f, 0.5f, 0.5f, 7};
  // floor = 1024 / 2^10 = 1: the errors 1/1024, 0.5/1, 0.25/1, 0.5/1 (inf not compared).
  const Comparison c = compare(r, v, f, true);
  EXPECT_EQ(c.max_scaled, 0.5);
  EXPECT_EQ(c.max_rel, 0.5 / f.smallest_normal());  // the zero reference's
  EXPECT_EQ(compare(r, v, f).max_scaled, 0);        // measured only when asked for
  const std::vector<double> r64(r.begin(), r.end());
  EXPECT_EQ(compare(std::span<const double>(r64), v, f, true).max_scaled, 0.5);
  // An all-zero reference: the floor is the format's tiny.
  const std::vector<float> z = {0, 0}, w = {0x1p-126f, 0};
  EXPECT_EQ(compare(z, w, f, true).max_scaled, 1);
}

TEST(Compare, FormatsWithoutInfOverflowToNaN) {
  const Format e4m3 = parse_format("float8_e4m3fn");
  const Comparison c =
      compare(std::vector<float>{1000.0f, 0.0f}, std::vector<float>{NAN, NAN}, e4m3);
  EXPECT_EQ(c.overflow, 1u);  // the reference is beyond 448: an overflow
  EXPECT_EQ(c.nan, 1u);       // 0 -> NaN is not
  EXPECT_TRUE(std::isnan(c.cosine()));
}

// x * 1000 (fits) -> * 100 (1e5 > 65504 for |x| > 0.655) -> + 1 -> Relu.
std::pair<Builder, Tensor> overflow_chain() {
  Builder b({8});
  b.init("c1000", scalar(1000)).init("c100", scalar(100)).init("one", scalar(1));
  b.node("scale", "Mul", {"x", "c1000"}, "a")
      .node("boom", "Mul", {"a", "c100"}, "b")
      .node("shift", "Add", {"b", "one"}, "c")
      .node("act", "Relu", {"c"}, "y")
      .output("y");
  return {b, floats({8}, {0.1f, -0.2f, 0.3f, 0.9f, -0.9f, 0.5f, 0.01f, 0.7f})};
}

// The second Mul only is the origin.
TEST(Origins, OverflowAtNodeKIsReportedAtKOnly) {
  const auto [b, x] = overflow_chain();
  const Diagnosis d = check(b.m, {{{"x", x}}}, fp16());
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(origin_nodes(d, OriginKind::overflow), std::vector<std::string>{"boom"});
  EXPECT_EQ(d.origins.size(), 1u);
  // |x| * 1e5 > 65504 for |x| > 0.655: 0.9, -0.9 and 0.7.
  const auto& boom = d.nodes[1];
  ASSERT_EQ(boom.name, "boom");
  EXPECT_EQ(boom.outputs[0].local.overflow, 3u);
  EXPECT_EQ(boom.outputs[0].propagated.overflow, 3u);
  EXPECT_NEAR(boom.outputs[0].ref_absmax, 0.9f * 1000.0f * 100.0f, 1e-3 * 90000);
  EXPECT_LT(boom.outputs[0].headroom_bits, 0);
  // Downstream nodes see the overflow but are symptoms: inputs non-finite when rounded.
  EXPECT_TRUE(d.nodes[2].inputs_nonfinite);
  EXPECT_EQ(d.nodes[2].outputs[0].local.overflow, 0u);
  EXPECT_GT(d.nodes[2].outputs[0].propagated.overflow, 0u);
  // The output fails: non-finite where the reference is finite (Relu keeps +inf).
  ASSERT_EQ(d.outputs.size(), 1u);
  EXPECT_FALSE(d.outputs[0].pass);
  EXPECT_EQ(d.outputs[0].nonfinite, 2u);  // 0.9 and 0.7 (the -0.9 one is Relu'd to 0)
  // Keeping the origin (and what reads its out-of-range output) fixes it.
  bool found = false;
  for (const auto& f : d.origins[0].fixes)
    found = found || (f.kind == FixKind::keep_fp32 && f.nodes == d.origins[0].keep_fp32 &&
                      f.nodes.size() >= 2 && f.nodes[0] == "boom" && f.nodes[1] == "shift");
  EXPECT_TRUE(found);
  CheckOptions keep = fp16();
  keep.keep_fp32 = {"boom", "shift", "act"};
  EXPECT_TRUE(check(b.m, {{{"x", x}}}, keep).pass);
}

// Damage to the outputs (NodeRecord::damage): a node's own error capped by the error of
// the outputs it reaches; unbounded for its own inf/NaN reaching broken outputs; nothing
// for a node whose inputs were already broken.
TEST(Damage, OwnErrorCappedByTheOutputsItReaches) {
  const auto [b, x] = overflow_chain();
  const Diagnosis d = check(b.m, {{{"x", x}}}, fp16());
  ASSERT_EQ(d.nodes.size(), 4u);
  EXPECT_GT(d.outputs[0].nonfinite, 0u);                              // the output breaks: no cap
  EXPECT_EQ(d.nodes[0].damage, d.nodes[0].outputs[0].local.nrmse());  // scale: its own error
  EXPECT_TRUE(std::isinf(d.nodes[1].damage));                         // boom: its own inf
  EXPECT_EQ(d.nodes[2].damage, 0);                                    // shift and act inherit it
  EXPECT_EQ(d.nodes[3].damage, 0);
  EXPECT_GT(d.nodes[2].outputs[0].propagated.overflow, 0u);  // however many inf they show

  // (x * 1.1) * 0: the first Mul rounds (an error of its own) but the output is exactly 0
  // in both runs, so it does no damage.
  Builder z({8});
  z.init("k", scalar(1.1f)).init("zero", scalar(0));
  z.node("grow", "Mul", {"x", "k"}, "a").node("kill", "Mul", {"a", "zero"}, "y").output("y");
  const Diagnosis dz = check(z.m, {{{"x", x}}}, fp16());
  EXPECT_GT(dz.nodes[0].outputs[0].local.nrmse(), 0);
  EXPECT_EQ(dz.outputs[0].rel_rms_error, 0);
  EXPECT_EQ(dz.nodes[0].damage, 0);

  // A -1e9 mask that a Softmax absorbs: the Add shows inf but does no damage of its own.
  Builder m({2, 4});
  m.init("mask", floats({2, 4}, {0, 0, -1e9f, -1e9f, 0, -1e9f, 0, -1e9f}));
  m.init("k", scalar(1.1f));
  m.node("grow", "Mul", {"x", "k"}, "g")
      .node("masked", "Add", {"g", "mask"}, "s")
      .node("probs", "Softmax", {"s"}, "y")
      .output("y");
  const Diagnosis dm = check(m.m, {{{"x", floats({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}}}, fp16());
  EXPECT_TRUE(dm.pass);
  ASSERT_EQ(dm.nodes[1].name, "masked");
  EXPECT_GT(dm.nodes[1].outputs[0].propagated.overflow, 0u);
  EXPECT_EQ(dm.nodes[1].damage, 0);
  // grow's own error, capped by the output's.
  EXPECT_EQ(dm.nodes[0].damage,
            std::min(dm.nodes[0].outputs[0].local.nrmse(), dm.outputs[0].rel_rms_error));
  EXPECT_GT(dm.nodes[0].damage, 0);
}

// The constants' shares of the L2 norm on a tensor large enough to be split over threads
// and blocks (and not a multiple of either): against sums in long double, and the same
// bits whatever the thread count.
TEST(Rules, NormShareOfALargeConstant) {
  const std::size_t n = (std::size_t{1} << 20) + 13;
  std::vector<float> w(n);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (auto& v : w) v = normal(rng);
  for (std::size_t i = 5; i < n; i += 9973) w[i] = 1e-9f;   // flush to zero in float16
  for (std::size_t i = 77; i < n; i += 65521) w[i] = 7e4f;  // beyond float16's max
  long double all = 0, under = 0, over = 0;
  for (const float v : w) {
    const long double sq = static_cast<long double>(v) * v;
    all += sq;
    if (v != 0 && std::fabs(v) <= 0x1p-25f) under += sq;  // float16 rounds these to 0
    if (std::fabs(v) >= 65520.0f) over += sq;             // and these to inf
  }
  Builder b({1});
  b.init("w", floats({static_cast<std::int64_t>(n)}, w));
  b.node("scale", "Mul", {"x", "w"}, "y").output("y");
  std::map<int, std::map<std::string, double>> share;
  for (const int threads : {1, 2}) {
    CheckOptions o = fp16();
    o.threads = threads;
    const Diagnosis d = check(b.m, {{{"x", floats({1}, {1})}}}, o);
    for (const auto& r : d.rules)
      if (r.node == "w") share[threads][r.id] = r.norm_share;
  }
  ASSERT_TRUE(share[1].count("constant-underflow") && share[1].count("constant-overflow"));
  EXPECT_NEAR(share[1]["constant-underflow"], static_cast<double>(std::sqrt(under / all)),
              1e-12 * static_cast<double>(std::sqrt(under / all)));
  EXPECT_NEAR(share[1]["constant-overflow"], static_cast<double>(std::sqrt(over / all)),
              1e-12 * static_cast<double>(std::sqrt(over / all)));
  EXPECT_EQ(share[1], share[2]);
}

// check's scan of a constant compares with the format's thresholds instead of rounding: its
// counts and extremes are what the statistics (which round every value) report, and its sums
// of squares those of the values that round() flushes and that round past max
// (rounds_past_max), value by value. Every named format, on values at and beside both thresholds,
// in both signs, with zeros, non-finite values and an odd length over several blocks (the SIMD and
// scalar paths).
TEST(Rules, ConstantScanAgreesWithRounding) {
  for (const Format& f : named_formats()) {
    const OverflowThreshold over = overflow_threshold(f);
    const auto u = static_cast<float>(underflow_threshold(f)), o = static_cast<float>(over.value);
    std::vector<float> w;
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int i = 0; i < 9001; ++i) w.push_back(normal(rng) * std::ldexp(1.0f, i % 40 - 20));
    for (const float v : {u, o, 0.0f, 1e-30f, 3e38f, std::numeric_limits<float>::denorm_min()})
      for (const float x : {v, std::nextafter(v, 0.0f), std::nextafter(v, INFINITY)})
        for (const float sign : {1.0f, -1.0f})
          for (int k = 0; k < 3; ++k) w[rng() % w.size()] = sign * x;
    w[17] = NAN, w[4100] = INFINITY, w[8191] = -INFINITY;
    Builder b({1});
    b.init("w", floats({static_cast<std::int64_t>(w.size())}, w));
    b.node("scale", "Mul", {"x", "w"}, "y").output("y");
    CheckOptions opt = fp16();
    opt.precision = f;
    opt.threads = 2;
    const CheckState st = accumulate(b.m, {{{"x", floats({1}, {1})}}}, opt);
    const auto c = std::find_if(st.constants.begin(), st.constants.end(),
                                [](const ConstantScan& s) { return s.name == "w"; });
    ASSERT_NE(c, st.constants.end()) << f.name;
    StatsOptions so;
    so.distribution = false;
    const Stats want = stats(floats({static_cast<std::int64_t>(w.size())}, w), {f}, so);
    EXPECT_EQ(c->size, want.tensor.count) << f.name;
    EXPECT_EQ(c->overflow, want.formats[0].overflow) << f.name;
    EXPECT_EQ(c->underflow, want.formats[0].underflow) << f.name;
    EXPECT_EQ(c->min, want.tensor.min) << f.name;
    EXPECT_EQ(c->max, want.tensor.max) << f.name;
    EXPECT_EQ(c->absmax, want.tensor.absmax) << f.name;
    EXPECT_EQ(c->min_abs_nonzero, want.tensor.min_abs_nonzero) << f.name;
    EXPECT_TRUE(c->nonfinite) << f.name;
    long double all = 0, under = 0, past = 0;
    for (const float x : w) {
      if (!std::isfinite(x)) continue;
      const long double sq = static_cast<long double>(x) * x;
      // (E8M0 has no sign and no zero: it rounds every x <= 0 to NaN.)
      const bool beyond = test::rounds_past_max(x, f) || (!f.is_signed && x <= 0);
      all += sq, under += x != 0 && round(x, f) == 0 ? sq : 0, past += beyond ? sq : 0;
    }
    if (c->overflow || c->underflow) {
      EXPECT_NEAR(c->sumsq, static_cast<double>(all), 1e-12 * static_cast<double>(all)) << f.name;
      EXPECT_NEAR(c->sumsq_underflow, static_cast<double>(under),
                  1e-12 * static_cast<double>(under))
          << f.name;
      EXPECT_NEAR(c->sumsq_overflow, static_cast<double>(past), 1e-12 * static_cast<double>(past))
          << f.name;
    } else {
      EXPECT_EQ(under + past, 0) << f.name;
    }
  }
}

// A rule finding is major when its margin is under 2^4 or it affects 0.1% of a tensor's
// values or of its L2 norm; minor otherwise.
TEST(Rules, SeverityFromMarginAndShare) {
  Builder b({4});
  std::vector<float> few(10000, 1.0f), many(1000, 1.0f), spike(10000, 1.0f);
  few[7] = few[4242] = 1e-9f;  // 2 of 10,000 flush in fp16 (< 2^-25): 0.02%
  many[3] = 1e-9f;             // 1 of 1,000: 0.1%
  spike[5] = 1e6f;             // 1 of 10,000 overflows, but it is most of the L2 norm
  b.init("few", floats({10000}, few)).init("many", floats({1000}, many));
  b.init("spike", floats({10000}, spike)).init("eps", scalar(1e-9f)).init("two", scalar(2));
  b.init("k", scalar(12.5f));
  b.node("sq_small", "Pow", {"x", "two"}, "p")  // |x| <= 8: 2^5 below sqrt(65504) = 255.9
      .node("big", "Mul", {"x", "k"}, "xb")     // |x| <= 100: 2^1.36 below
      .node("sq_big", "Pow", {"xb", "two"}, "q")
      .node("sum", "Add", {"p", "q"}, "y")
      .output("y");
  const Diagnosis d = check(b.m, {{{"x", floats({4}, {1, -8, 3, 0.5f})}}}, fp16());
  std::map<std::string, const RuleFinding*> by;
  for (const auto& r : d.rules) by[r.id + " " + r.node] = &r;
  ASSERT_TRUE(by.count("constant-underflow few") && by.count("constant-underflow many") &&
              by.count("constant-underflow eps") && by.count("constant-overflow spike") &&
              by.count("pow sq_small") && by.count("pow sq_big"));
  const auto* few_r = by["constant-underflow few"];
  EXPECT_TRUE(std::isnan(few_r->margin_bits));
  EXPECT_EQ(few_r->count, 2u);
  // sqrt(2 * 1e-18 / (9998 + 2e-18)), from the float32 values.
  const double tiny = static_cast<double>(1e-9f);
  EXPECT_NEAR(few_r->norm_share, std::sqrt(2 * tiny * tiny / (9998 + 2 * tiny * tiny)), 1e-20);
  EXPECT_EQ(few_r->severity, Severity::minor);
  EXPECT_EQ(by["constant-underflow many"]->severity, Severity::major);  // 0.1% of the values
  EXPECT_EQ(by["constant-underflow eps"]->severity, Severity::major);   // 1 of 1
  const auto* spike_r = by["constant-overflow spike"];
  EXPECT_NEAR(spike_r->norm_share, 1e6 / std::sqrt(1e12 + 9999), 1e-12);
  EXPECT_EQ(spike_r->severity, Severity::major);  // 0.01% of the values, ~100% of the norm
  const double limit = std::sqrt(65504.0);
  EXPECT_NEAR(by["pow sq_small"]->margin_bits, std::log2(limit / 8), 1e-4);
  EXPECT_EQ(by["pow sq_small"]->severity, Severity::minor);
  EXPECT_NEAR(by["pow sq_big"]->margin_bits, std::log2(limit / 100), 1e-4);
  EXPECT_EQ(by["pow sq_big"]->severity, Severity::major);
}

// (x * 1e-9) / (x * 2e-9): both round to zero in fp16 -> 0/0 at the Div only.
TEST(Origins, NaNFromZeroOverZeroStartsAtTheDivision) {
  Builder b({4});
  b.init("tiny1", scalar(1e-9f)).init("tiny2", scalar(2e-9f));
  b.node("num", "Mul", {"x", "tiny1"}, "n")
      .node("den", "Mul", {"x", "tiny2"}, "d")
      .node("ratio", "Div", {"n", "d"}, "q")
      .node("neg", "Neg", {"q"}, "y")
      .output("y");
  const Diagnosis d = check(b.m, {{{"x", floats({4}, {1, 2, 3, 4})}}}, fp16());
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(origin_nodes(d, OriginKind::nan), std::vector<std::string>{"ratio"});
  EXPECT_TRUE(origin_nodes(d, OriginKind::overflow).empty());
  for (const auto& o : d.origins)
    if (o.node == "ratio") {
      EXPECT_EQ(o.cause, Cause::zero_divisor);
      EXPECT_EQ(o.related, "d");
      EXPECT_FLOAT_EQ(static_cast<float>(o.min_nonzero), 2e-9f);
    }
  // The constants flush to zero in fp16: a rule finding each.
  int underflow_rules = 0;
  for (const auto& r : d.rules) underflow_rules += r.id == "constant-underflow";
  EXPECT_EQ(underflow_rules, 2);
}

// Relu(x) -> MatMul(K = 4096) with x ~ 1000 + N(0, 1) and weights +-1 that cancel: the
// rounding of x to fp16 (ULP 0.5 at 1000) swamps the small differences.
std::pair<Builder, Tensor> cancelling_matmul() {
  const std::int64_t M = 4, K = 4096, N = 8;
  Builder b({M, K});
  std::vector<float> w(K * N);
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t n = 0; n < N; ++n) w[k * N + n] = ((k + n) % 2) ? 1.0f : -1.0f;
  b.init("W", floats({K, N}, w));
  b.node("act", "Relu", {"x"}, "a").node("proj", "MatMul", {"a", "W"}, "y").output("y");
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0, 1);
  std::vector<float> xv(M * K);
  for (auto& v : xv) v = 1000 + noise(rng);
  return {b, floats({M, K}, xv)};
}

// The MatMul is the accuracy origin; the Relu (whose output is as accurate as fp16
// allows) is not.
TEST(Origins, AccuracyLossAtALargeKMatMul) {
  const auto [b, x] = cancelling_matmul();
  const Diagnosis d = check(b.m, {{{"x", x}}}, fp16());
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.outputs[0].nonfinite, 0u);
  EXPECT_LT(d.outputs[0].cosine, 0.999);
  EXPECT_EQ(origin_nodes(d, OriginKind::accuracy), std::vector<std::string>{"proj"});
  ASSERT_FALSE(d.origins.empty());
  EXPECT_GT(d.origins[0].contribution, 0.01);
  // Its damage is what it was measured to do to the outputs.
  for (const auto& n : d.nodes)
    if (n.name == "proj") {
      EXPECT_EQ(n.damage, d.origins[0].contribution);
    }
  // The rules see the reduction depth.
  bool large_k = false;
  for (const auto& r : d.rules) large_k = large_k || (r.id == "large-k" && r.node == "proj");
  EXPECT_TRUE(large_k);
  // Turning the rule off by id removes it; an unknown id is an error.
  CheckOptions off = fp16();
  off.disabled_rules = {"large-k"};
  for (const auto& r : check(b.m, {{{"x", x}}}, off).rules) EXPECT_NE(r.id, "large-k");
  off.disabled_rules = {"large_k"};
  try {
    check(b.m, {{{"x", x}}}, off);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'large-k'"), std::string::npos) << e.what();
  }
}

// The same MatMul shape with positive data accumulated in fp16: the sum stagnates
// (ULP(2048) = 2 swallows most products), so the MatMul is the accuracy origin, and only
// with --accumulate (float32 accumulation of fp16 inputs is accurate here).
TEST(Origins, Float16AccumulationIsAnAccuracyOrigin) {
  const std::int64_t M = 4, K = 4096, N = 8;
  Builder b({M, K});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::vector<float> w(K * N), xv(M * K);
  for (auto& v : w) v = u(rng);
  for (auto& v : xv) v = u(rng);
  b.init("W", floats({K, N}, w));
  b.node("act", "Relu", {"x"}, "a").node("proj", "MatMul", {"a", "W"}, "y").output("y");
  const std::vector<std::vector<NamedValue>> in = {{{"x", floats({M, K}, xv)}}};
  CheckOptions o = fp16();
  o.rtol = 0.01;
  EXPECT_TRUE(check(b.m, in, o).pass);
  o.accumulate = parse_format("float16");
  const Diagnosis d = check(b.m, in, o);
  EXPECT_EQ(d.accumulate, "float16");
  EXPECT_FALSE(d.pass);
  EXPECT_GT(d.outputs[0].outside_tolerance, 0u);
  EXPECT_EQ(origin_nodes(d, OriginKind::accuracy), std::vector<std::string>{"proj"});
}

// An attention mask of -1e9 becomes -inf in fp16: an origin of its own, harmless here
// because Softmax turns -inf into 0.
TEST(Origins, OutOfRangeConstantIsAnOriginOfItsOwn) {
  Builder b({2, 4});
  b.init("mask", floats({2, 4}, {0, 0, -1e9f, -1e9f, 0, -1e9f, 0, -1e9f}));
  b.node("masked", "Add", {"x", "mask"}, "s").node("probs", "Softmax", {"s"}, "y").output("y");
  const Diagnosis d = check(b.m, {{{"x", floats({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}}}, fp16());
  EXPECT_TRUE(d.pass);
  ASSERT_EQ(d.origins.size(), 1u);
  EXPECT_EQ(d.origins[0].node, "mask");
  EXPECT_EQ(d.origins[0].op_type, "initializer");
  EXPECT_EQ(d.origins[0].kind, OriginKind::overflow);
  EXPECT_EQ(d.origins[0].cause, Cause::constant);
  EXPECT_TRUE(d.origins[0].absorbed);      // the outputs stay finite
  EXPECT_LT(d.origins[0].absmax, -65504);  // the worst value, negative: it becomes -inf
}

// The outputs pass: the mask's overflow is absorbed; fail_on overflow fails it anyway.
TEST(Verdict, AbsorbedOriginsAndFailOn) {
  Builder b({2, 4});
  b.init("mask", floats({2, 4}, {0, 0, -1e9f, -1e9f, 0, -1e9f, 0, -1e9f}));
  b.node("masked", "Add", {"x", "mask"}, "s").node("probs", "Softmax", {"s"}, "y").output("y");
  const std::vector<std::vector<NamedValue>> in = {
      {{"x", floats({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}}};
  const Diagnosis d = check(b.m, in, fp16());
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.absorbed, std::vector<std::string>{"mask"});
  CheckOptions o = fp16();
  o.fail_on = parse_fail_on({"nan", "underflow"});
  EXPECT_TRUE(check(b.m, in, o).pass);  // no origin of those kinds
  o.fail_on = parse_fail_on({"overflow"});
  const Diagnosis f = check(b.m, in, o);
  EXPECT_FALSE(f.pass);
  EXPECT_TRUE(f.outputs[0].pass);  // the outputs themselves pass
  EXPECT_EQ(f.absorbed, std::vector<std::string>{"mask"});
  EXPECT_EQ(f.fail_on, std::set<OriginKind>{OriginKind::overflow});
  // A failing output absorbs nothing.
  const auto [bc, x] = overflow_chain();
  EXPECT_TRUE(check(bc.m, {{{"x", x}}}, fp16()).absorbed.empty());
}

TEST(Verdict, FailOnNamesTheUnknownWord) {
  try {
    parse_fail_on({"overflow", "overflw"});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.option(), "fail_on");
    EXPECT_EQ(e.value(), "overflw");
    EXPECT_NE(e.problem().find("did you mean 'overflow'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_fail_on({"accuracy"}), Error);
}

// Every output value overflows: no pair is finite in both runs, so no error has a value
// (NaN, never 0); the count says why.
TEST(Verdict, ErrorsOverNoFinitePairAreNaN) {
  Builder b({2});
  b.init("c", scalar(3e4f));  // exact in fp16, as 15000 is
  b.node("boom", "Mul", {"x", "c"}, "y").output("y");
  const Diagnosis d = check(b.m, {{{"x", floats({2}, {4, -8})}}}, fp16());
  ASSERT_EQ(d.outputs.size(), 1u);
  const OutputVerdict& v = d.outputs[0];
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.nonfinite, 2u);
  for (const double e :
       {v.max_abs_error, v.max_rel_error, v.max_scaled_error, v.rel_rms_error, v.cosine})
    EXPECT_TRUE(std::isnan(e)) << e;
  // One finite pair: errors are measured over it.
  const Diagnosis one = check(b.m, {{{"x", floats({2}, {4, 0.5f})}}}, fp16());
  EXPECT_EQ(one.outputs[0].nonfinite, 1u);
  EXPECT_EQ(one.outputs[0].max_abs_error, 0);
  EXPECT_EQ(one.outputs[0].rel_rms_error, 0);
}

// Recorded as given: the inputs the caller generated.
TEST(Verdict, GeneratedInputsAreRecorded) {
  Builder b({2});
  b.node("act", "Relu", {"x"}, "y").output("y");
  CheckOptions o = fp16();
  o.generated = {{.name = "x", .generator = {.a = -1, .b = 1}}};
  const Diagnosis d = check(b.m, {{{"x", floats({2}, {1, 2})}}}, o);
  ASSERT_EQ(d.generated.size(), 1u);
  EXPECT_EQ(d.generated[0].name, "x");
  EXPECT_EQ(d.generated[0].generator.b, 1);
  EXPECT_TRUE(d.pass);
}

// A node kept in float32 produces values beyond fp16: the emulated node reading them
// is the origin (the boundary overflows there).
TEST(Origins, PrecisionBoundaryFromAFloat32Node) {
  Builder b({4});
  b.init("c", scalar(1e5f));
  b.node("big", "Mul", {"x", "c"}, "a").node("half", "Sqrt", {"a"}, "y").output("y");
  CheckOptions o = fp16();
  o.keep_fp32 = {"big"};
  const Diagnosis d = check(b.m, {{{"x", floats({4}, {1, 2, 3, 4})}}}, o);
  EXPECT_EQ(origin_nodes(d, OriginKind::overflow), std::vector<std::string>{"half"});
  EXPECT_EQ(d.nodes[0].precision, "float32");
  EXPECT_EQ(d.nodes[1].boundary_inputs, std::vector<std::string>{"a"});
}

// The planner covers the overflow with the smallest float32 region that removes it (the
// origin and every node reading its out-of-range values), and counts the casts (convert's).
TEST(Plan, CoversAnOverflowWithItsRegion) {
  const auto [b, x] = overflow_chain();
  PlanOptions o;
  o.check = fp16();
  o.count_casts = rewrite::cast_counter();
  const Plan p = plan(b.m, {{{"x", x}}}, o);
  EXPECT_TRUE(p.meets);
  EXPECT_EQ(p.fp32_nodes, (std::vector<std::string>{"boom", "shift", "act"}));
  ASSERT_EQ(p.islands.size(), 1u);
  EXPECT_EQ(p.islands[0].reason.kind, KeepReason::origin);
  EXPECT_EQ(p.islands[0].reason.origin, "boom");
  EXPECT_EQ(p.islands[0].reason.origin_kind, OriginKind::overflow);
  EXPECT_EQ(p.float_nodes, 4u);
  EXPECT_EQ(p.low_nodes, 1u);
  // x -> fp16 for "scale", its output -> fp32 for "boom"; the output stays float32.
  EXPECT_EQ(p.casts, 2u);
  // The plan's configuration passes check.
  CheckOptions c = fp16();
  c.keep_fp32 = {p.fp32_nodes.begin(), p.fp32_nodes.end()};
  EXPECT_TRUE(check(b.m, {{{"x", x}}}, c).pass);
}

// An accuracy loss: check names the cancelling MatMul, but keeping it alone in float32
// does not help (its input still arrives rounded to fp16 by the Relu): the planner finds
// that the Relu must stay float32 too, and nothing else.
TEST(Plan, KeepsTheAccuracyOriginOnly) {
  const auto [b, x] = cancelling_matmul();
  PlanOptions o;
  o.check = fp16();
  const Plan p = plan(b.m, {{{"x", x}}}, o);
  EXPECT_TRUE(p.meets);
  EXPECT_EQ(p.fp32_nodes, (std::vector<std::string>{"act", "proj"}));
  // With one pass allowed, no plan is found: the best one is returned, not meeting.
  o.max_passes = 1;
  const Plan q = plan(b.m, {{{"x", x}}}, o);
  EXPECT_FALSE(q.meets);
  EXPECT_EQ(q.passes, 1u);
}

TEST(Check, IntegerOnlyModelPassesWithANote) {
  model::Model m;
  m.ir_version = 8;
  m.opsets[""] = 13;
  m.path = "ints.onnx";
  m.graph.inputs.push_back({"i", 7, true, {{3, ""}}});
  m.graph.nodes.push_back({"twice", "Add", "", {"i", "i"}, {"j"}, {}, "", {}});
  m.graph.outputs.push_back({"j", 7, false, {}});
  Tensor i(DType::int64, {3});
  const Diagnosis d = check(m, {{{"i", i}}}, fp16());
  EXPECT_TRUE(d.pass);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0].kind, NoteKind::no_float_node);
}

TEST(Check, AggregatesOverSamples) {
  Builder b({2});
  b.init("c", scalar(300));
  b.node("sq", "Mul", {"x", "c"}, "y").output("y");
  const auto s1 = floats({2}, {1, -2}), s2 = floats({2}, {100, 3});
  const Diagnosis d = check(b.m, {{{"x", s1}}, {{"x", s2}}}, fp16());
  EXPECT_EQ(d.samples, 2u);
  const auto& t = d.nodes[0].outputs[0];
  EXPECT_EQ(t.ref_min, -600);
  EXPECT_EQ(t.ref_max, 30000);
  EXPECT_EQ(t.ref_absmax, 30000);
  EXPECT_EQ(t.local.count, 4u);
  std::uint64_t hist = 0;
  for (const auto& [e, n] : t.exponent_histogram) hist += n;
  EXPECT_EQ(hist, 4u);
  EXPECT_EQ(t.exponent_histogram.at(14), 1u);  // 30000 = 1.83 * 2^14
}

// Sets read one at a time (a SetReader, each read exactly once, the first again only
// for accuracy origins) give what the same sets held in memory give; the calibration of
// scaled FP8 over them (calibrate, combined by max_amax) is what check calibrates.
TEST(Check, LazySetsEqualSetsInMemory) {
  Builder b({2, 2});
  b.init("w", floats({2, 2}, {1, -2, 3, 0.5}));
  b.node("mm", "MatMul", {"x", "w"}, "y").output("y");
  const std::vector<std::vector<NamedValue>> sets = {{{"x", floats({2, 2}, {1, 2, 3, 4})}},
                                                     {{"x", floats({2, 2}, {-70, 5, 6, 9})}},
                                                     {{"x", floats({2, 2}, {0.1f, 2, 3, 8})}}};
  std::vector<int> reads(sets.size());
  const SetReader lazy{.count = sets.size(), .read = [&](std::size_t k) {
                         ++reads[k];
                         return sets[k];
                       }};
  CheckOptions o = fp16();
  const Diagnosis eager = check(b.m, sets, o), got = check(b.m, lazy, o);
  EXPECT_EQ(got.samples, 3u);
  EXPECT_EQ(got.nodes[0].outputs[0].ref_absmax, eager.nodes[0].outputs[0].ref_absmax);
  EXPECT_EQ(got.outputs[0].cosine, eager.outputs[0].cosine);
  EXPECT_EQ(got.outputs[0].max_abs_error, eager.outputs[0].max_abs_error);
  EXPECT_EQ(reads[1], 1);
  EXPECT_EQ(reads[2], 1);
  const Precision fp8 = parse_precision("fp8", "bfloat16");
  o.precision = fp8.format;
  o.scaled = fp8.scaled;
  ActivationAmax amax =
      calibrate(b.m, {.count = 1, .read = [&](std::size_t) { return sets[0]; }}, o);
  max_amax(amax,
           calibrate(b.m, {.count = 2, .read = [&](std::size_t k) { return sets[k + 1]; }}, o));
  EXPECT_EQ(amax.at({"mm", 0}), 70);  // |x| over every set
  CheckOptions given = o;
  given.activation_amax = amax;
  const Diagnosis own = check(b.m, sets, o), with = check(b.m, lazy, given);
  EXPECT_EQ(with.outputs[0].cosine, own.outputs[0].cosine);
  EXPECT_EQ(with.outputs[0].max_abs_error, own.outputs[0].max_abs_error);
  given.activation_amax->at({"mm", 0}) = 7000;  // other scales: other numbers
  EXPECT_NE(check(b.m, sets, given).outputs[0].max_abs_error, own.outputs[0].max_abs_error);
}

// Merging comparisons adds their sums as double-doubles: any order gives the exact sum
// rounded once (values k 2^e whose exact sum an __int128 holds), where plain addition in
// those orders gives different sums.
TEST(Shard, MergedSumsAreExactInAnyOrder) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::int64_t> k(-(std::int64_t{1} << 40), std::int64_t{1} << 40);
  std::uniform_int_distribution<int> e(-20, 20);
  std::vector<Comparison> parts(2000);
  __int128 exact = 0;  // in units of 2^-20
  for (auto& c : parts) {
    const std::int64_t m = k(rng);
    const int x = e(rng);
    c.dot = std::ldexp(static_cast<double>(m), x);
    exact += static_cast<__int128>(m) << (x + 20);
  }
  const double want = std::ldexp(static_cast<double>(exact), -20);  // rounded once
  std::set<double> plain;
  for (int order = 0; order < 4; ++order) {
    std::shuffle(parts.begin(), parts.end(), rng);
    Comparison sum;
    double naive = 0;
    for (const auto& c : parts) sum.merge(c), naive += c.dot;
    EXPECT_EQ(sum.dot, want) << order;
    plain.insert(naive);
    // Merged as a tree (shards of shards), the same.
    Comparison left, right;
    for (std::size_t i = 0; i < parts.size(); ++i) (i % 3 ? left : right).merge(parts[i]);
    right.merge(left);
    EXPECT_EQ(right.dot, want) << order;
  }
  EXPECT_GT(plain.size(), 1u);  // (the test would not see an order-dependent merge otherwise)
}

// A check's state accumulated in shards (every 2nd or 3rd set), merged in any order, gives
// the state and the diagnosis of one check over all sets: accuracy origins (measured on
// set 0) and every node's numbers.
// A scaled precision's operand counts (hand-derived in graph_util.hpp's outlier_matmul):
// the origin they make, and states of disjoint sets merge into exactly one check's counts.
// outlier_matmul's operand counts in mxfp4_e2m1 over `sets` input sets of its x scaled by
// powers of two (the same blocks): per set and row, 31 ones swamped by the 64 of the first
// block; W's ones exact.
void expect_outlier_counts(const std::vector<ScaledOperandRecord>& ops, std::uint64_t sets) {
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].input, 0u);
  EXPECT_EQ(ops[0].value, "x");
  EXPECT_EQ(ops[0].format, "mxfp4_e2m1");
  EXPECT_FALSE(ops[0].weight);
  EXPECT_EQ(ops[0].nonzero, sets * 128);
  EXPECT_EQ(ops[0].blocks, sets * 4);
  EXPECT_EQ(ops[0].swamped, sets * 62);
  EXPECT_EQ(ops[0].swamped_blocks, sets * 2);
  EXPECT_EQ(ops[0].flushed, ops[0].swamped);
  EXPECT_EQ(ops[0].underflow, 0u);
  EXPECT_EQ(ops[0].saturated, 0u);
  EXPECT_EQ(ops[0].clipped, 0u);
  EXPECT_EQ(ops[1].input, 1u);
  EXPECT_EQ(ops[1].value, "W");
  EXPECT_TRUE(ops[1].weight);
  EXPECT_EQ(ops[1].nonzero, sets * 256);
  EXPECT_EQ(ops[1].blocks, sets * 8);  // W [64, 4] along K: two blocks per column
  EXPECT_EQ(ops[1].flushed, 0u);
  EXPECT_EQ(ops[1].clipped, 0u);
}

TEST(Scaled, KeepUnscaledRunsTheGemmInTheOtherPrecision) {
  const auto [b, x] = test::outlier_matmul();
  CheckOptions o = fp16();
  o.precision = parse_format("bfloat16");
  o.scaled = parse_scaled_format("mxfp4_e2m1");
  o.keep_unscaled = {"mm"};
  const Diagnosis d = check(b.m, {{{"x", x}}}, o);
  ASSERT_EQ(d.nodes.size(), 1u);
  EXPECT_EQ(d.nodes[0].precision, "bfloat16");
  EXPECT_TRUE(d.nodes[0].scaled_operands.empty());
  for (const auto& org : d.origins) EXPECT_NE(org.kind, OriginKind::block_underflow);
  o.keep_unscaled = {"mn"};
  EXPECT_THROW(check(b.m, {{{"x", x}}}, o), Error);
}

TEST(Shard, ScaledOperandCountsMergeExactly) {
  const auto [b, x] = test::outlier_matmul();
  CheckOptions o = fp16();
  o.precision = parse_format("bfloat16");
  o.scaled = parse_scaled_format("mxfp4_e2m1");
  std::vector<std::vector<NamedValue>> sets;
  for (int s = 0; s < 3; ++s) {  // x * 2^s: the same blocks, scaled exactly
    Tensor t = x;
    for (auto& v : t.data<float>()) v = std::ldexp(v, s);
    sets.push_back({{"x", t}});
  }
  const Diagnosis want = check(b.m, sets, o);
  ASSERT_EQ(want.nodes.size(), 1u);
  const auto& ops = want.nodes[0].scaled_operands;
  expect_outlier_counts(ops, 3);
  ASSERT_EQ(want.origins.size(), 1u);
  const auto& org = want.origins[0];
  EXPECT_EQ(org.kind, OriginKind::block_underflow);
  EXPECT_EQ(org.cause, analysis::Cause::outlier_scale);
  EXPECT_EQ(org.node, "mm");
  EXPECT_EQ(org.related, "x");
  EXPECT_EQ(org.affected, 3u * 62);
  EXPECT_EQ(org.total, 3u * 128);
  EXPECT_EQ(org.blocks_affected, 3u * 2);
  EXPECT_EQ(org.blocks, 3u * 4);
  ASSERT_GE(org.fixes.size(), 4u);
  // Cheapest first: the GEMM unscaled in the other precision, then in float32.
  EXPECT_EQ(org.fixes[0].kind, analysis::FixKind::keep_unscaled);
  EXPECT_EQ(org.fixes[0].format, "bfloat16");
  EXPECT_EQ(org.fixes[0].nodes, std::vector<std::string>{"mm"});
  EXPECT_EQ(org.fixes[1].kind, analysis::FixKind::keep_fp32);
  EXPECT_EQ(org.fixes[2].kind, analysis::FixKind::scaled_format);
  EXPECT_EQ(org.fixes[2].format, "block:float4_e2m1fn:float8_e8m0fnu:8");
  EXPECT_EQ(org.fixes[3].format, "nvfp4");
  CheckState all = accumulate(b.m, {sets[2]}, o, {2});
  merge(all, accumulate(b.m, {sets[0], sets[1]}, o, {0, 1}));
  const Diagnosis d = finish(b.m, all, o, [&] { return sets.front(); });
  EXPECT_TRUE(d.nodes[0].scaled_operands == ops);  // every field
  ASSERT_EQ(d.origins.size(), 1u);
  EXPECT_EQ(d.origins[0].affected, org.affected);
}

// Operand counts by every way check takes them: the local run's own quantizing pass (x and
// W at mm_a, which quantizes them first), an earlier reader's of the same set (x at mm_b)
// and scaled_stats (W at mm_b: the weight cache's copy was made for mm_a). Each is
// outlier_matmul's hand-derived count, per node and per input set (x, then 2x: the same
// blocks).
TEST(Scaled, OperandCountsOfValuesTwoNodesRead) {
  auto [b, x] = test::outlier_matmul();
  b.m.graph.nodes[0].name = "mm_a";
  b.node("mm_b", "MatMul", {"x", "W"}, "z").output("z");
  CheckOptions o = fp16();
  o.precision = parse_format("bfloat16");
  o.scaled = parse_scaled_format("mxfp4_e2m1");
  Tensor x2 = x;
  for (auto& v : x2.data<float>()) v *= 2;
  const Diagnosis d = check(b.m, {{{"x", x}}, {{"x", x2}}}, o);
  ASSERT_EQ(d.nodes.size(), 2u);
  for (const auto& n : d.nodes) {
    SCOPED_TRACE(n.name);
    expect_outlier_counts(n.scaled_operands, 2);
  }
}

TEST(Shard, MergedStatesGiveTheDiagnosisOfOneCheck) {
  const auto made = cancelling_matmul();  // (clang 14: a lambda below captures b)
  const auto& b = made.first;
  const auto& x = made.second;
  std::vector<std::vector<NamedValue>> sets;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> scale(0.5f, 2.0f);
  for (int s = 0; s < 6; ++s) {
    Tensor t = x;
    const float f = s == 0 ? 1.0f : scale(rng);
    for (auto& v : t.data<float>()) v *= f;
    sets.push_back({{"x", t}});
  }
  const CheckOptions o = fp16();
  const Diagnosis want = check(b.m, sets, o);
  ASSERT_EQ(origin_nodes(want, OriginKind::accuracy), std::vector<std::string>{"proj"});
  for (const std::size_t n : {2, 3}) {
    std::vector<CheckState> shards;
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<std::vector<NamedValue>> mine;
      std::vector<std::size_t> idx;
      for (std::size_t s = i; s < sets.size(); s += n) mine.push_back(sets[s]), idx.push_back(s);
      shards.push_back(accumulate(b.m, mine, o, idx));
    }
    CheckState all = shards.back();  // merged last to first
    for (std::size_t i = n - 1; i-- > 0;) merge(all, shards[i]);
    EXPECT_EQ(all.sets, (std::vector<std::size_t>{0, 1, 2, 3, 4, 5}));
    bool read_first = false;
    const Diagnosis d = finish(b.m, all, o, [&] {
      read_first = true;
      return sets.front();
    });
    EXPECT_TRUE(read_first);
    EXPECT_EQ(d.samples, 6u);
    EXPECT_EQ(d.pass, want.pass);
    ASSERT_EQ(d.origins.size(), want.origins.size());
    EXPECT_EQ(d.origins[0].contribution, want.origins[0].contribution);
    EXPECT_EQ(d.outputs[0].nonfinite, want.outputs[0].nonfinite);
    EXPECT_NEAR(d.outputs[0].cosine, want.outputs[0].cosine, 1e-15);
    ASSERT_EQ(d.nodes.size(), want.nodes.size());
    for (std::size_t i = 0; i < d.nodes.size(); ++i) {
      const auto &p = d.nodes[i].outputs[0], &q = want.nodes[i].outputs[0];
      EXPECT_EQ(d.nodes[i].runs, want.nodes[i].runs);
      EXPECT_EQ(d.nodes[i].input_shapes, want.nodes[i].input_shapes);
      EXPECT_EQ(d.nodes[i].input_absmax, want.nodes[i].input_absmax);
      EXPECT_EQ(p.ref_min, q.ref_min);
      EXPECT_EQ(p.ref_max, q.ref_max);
      EXPECT_EQ(p.exponent_histogram, q.exponent_histogram);
      EXPECT_EQ(p.local.count, q.local.count);
      EXPECT_EQ(p.local.max_rel, q.local.max_rel);
      EXPECT_NEAR(p.local.dd, q.local.dd, 1e-15 * q.local.dd);
      EXPECT_NEAR(p.propagated.dot, q.propagated.dot, 1e-15 * std::fabs(q.propagated.dot));
      EXPECT_EQ(d.nodes[i].damage, want.nodes[i].damage);
    }
  }
  // From the graph alone (W [4096, 8] without values): the model itself is asked for only
  // to run the accuracy origin on set 0, and the diagnosis is the same.
  CheckState all = accumulate(b.m, sets, o);
  const model::Model graph = model::load_graph_bytes(model::save_graph_bytes(b.m), "graph");
  bool asked = false;
  const Diagnosis g = finish(
      graph, all, o,
      [&]() -> const model::Model& {
        asked = true;
        return b.m;
      },
      [&] { return sets.front(); });
  EXPECT_TRUE(asked);
  ASSERT_EQ(g.origins.size(), want.origins.size());
  EXPECT_EQ(g.origins[0].node, "proj");
  EXPECT_EQ(g.origins[0].contribution, want.origins[0].contribution);
  ASSERT_EQ(g.nodes.size(), want.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    EXPECT_EQ(g.nodes[i].damage, want.nodes[i].damage);
  // A set in two states, and a state of another graph, are refused.
  CheckState a = accumulate(b.m, {sets[0]}, o, {0});
  EXPECT_THROW(merge(a, accumulate(b.m, {sets[0]}, o, {0})), Error);
  const auto [other, y] = overflow_chain();
  EXPECT_THROW(merge(a, accumulate(other.m, {{{"x", y}}}, o, {1})), Error);
  EXPECT_THROW(finish(other.m, a, o, [&] { return sets.front(); }), Error);
  EXPECT_THROW(accumulate(b.m, {sets[0], sets[1]}, o, {1, 0}), Error);  // not ascending
}

// finish() of the graph alone (model::load_graph_bytes: its weights read as zeros) takes
// the constants' scans from the state: the constant rules and the overflow origins are
// those of the model, and nothing runs the model or reads a set.
TEST(Shard, FinishFromTheGraphAloneTakesTheConstantsFromTheState) {
  std::vector<float> wv(1024);
  for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = i % 7 == 0 ? 1e6f : 0.5f + i / 1024.0f;
  Builder b({1024});
  b.init("w", floats({1024}, wv)).node("scale", "Mul", {"x", "w"}, "y").output("y");
  std::vector<std::vector<NamedValue>> sets;
  for (int s = 1; s <= 3; ++s) sets.push_back({{"x", floats({1024}, std::vector<float>(1024, s))}});
  const CheckOptions o = fp16();
  const Diagnosis want = check(b.m, sets, o);
  ASSERT_FALSE(want.pass);
  ASSERT_FALSE(want.origins.empty());
  ASSERT_FALSE(want.rules.empty());
  const model::Model graph = model::load_graph_bytes(model::save_graph_bytes(b.m), "graph");
  ASSERT_EQ(graph.graph.initializers.size(), 1u);
  for (const float v : graph.graph.initializers[0].tensor.data<float>()) ASSERT_EQ(v, 0);
  const Diagnosis d = finish(
      graph, accumulate(b.m, sets, o), o,
      [&]() -> const model::Model& {
        ADD_FAILURE() << "the model was asked for";
        return b.m;
      },
      [&] {
        ADD_FAILURE() << "a set was read";
        return sets.front();
      });
  EXPECT_EQ(d.pass, want.pass);
  ASSERT_EQ(d.origins.size(), want.origins.size());
  for (std::size_t i = 0; i < d.origins.size(); ++i) {
    EXPECT_EQ(d.origins[i].node, want.origins[i].node);
    EXPECT_EQ(d.origins[i].kind, want.origins[i].kind);
    EXPECT_EQ(d.origins[i].affected, want.origins[i].affected);
    EXPECT_EQ(d.origins[i].absmax, want.origins[i].absmax);
  }
  ASSERT_EQ(d.rules.size(), want.rules.size());
  for (std::size_t i = 0; i < d.rules.size(); ++i) {
    EXPECT_EQ(d.rules[i].id, want.rules[i].id);
    EXPECT_EQ(d.rules[i].node, want.rules[i].node);
    EXPECT_EQ(d.rules[i].observed, want.rules[i].observed);
    EXPECT_EQ(d.rules[i].parameter, want.rules[i].parameter);
    EXPECT_EQ(d.rules[i].count, want.rules[i].count);
    EXPECT_EQ(d.rules[i].total, want.rules[i].total);
  }
  // Scans of another graph's constants are refused, and so is a check against an original
  // (its rules compare weights).
  CheckState other = accumulate(b.m, sets, o);
  other.constants.front().name = "v";
  EXPECT_THROW(finish(graph, other, o, nullptr, [&] { return sets.front(); }), Error);
  CheckOptions against = o;
  against.reference_model = &b.m;
  EXPECT_THROW(
      finish(graph, accumulate(b.m, sets, o), against, nullptr, [&] { return sets.front(); }),
      Error);
}

TEST(Check, KeepUnknownNodeIsAnError) {
  Builder b({2});
  b.node("act", "Relu", {"x"}, "y").output("y");
  CheckOptions o = fp16();
  o.keep_fp32 = {"acts"};
  try {
    check(b.m, {{{"x", floats({2}, {1, 2})}}}, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'act'"), std::string::npos) << e.what();
  }
}

TEST(Check, UnnamedNodesGetStableNames) {
  Builder b({2});
  b.node("", "Relu", {"x"}, "a").node("", "Neg", {"a"}, "y").output("y");
  EXPECT_EQ(display_names(b.m), (std::vector<std::string>{"Relu_0", "Neg_1"}));
  name_nodes(b.m);
  EXPECT_EQ(b.m.graph.nodes[1].name, "Neg_1");
}

// A session stepped node by node gives what Executor::run gives, and evaluate_next in a
// format equals that node run alone in the format.
TEST(Session, LockstepEqualsARun) {
  Builder b({3});
  b.init("c", scalar(3.3f));
  b.node("m", "Mul", {"x", "c"}, "a").node("e", "Exp", {"a"}, "y").output("y");
  const std::vector<NamedTensor> in = {{"x", floats({3}, {0.1f, 0.7f, 1.3f})}};
  const exec::Executor ex(b.m);
  exec::Session s(ex, in);
  const auto fp16f = parse_format("float16");
  std::vector<NamedTensor> local_first;
  while (!s.done()) {
    if (s.position() == 0) local_first = s.evaluate_next(fp16f);
    s.step();
  }
  const auto a = s.outputs(), r = ex.run(in);
  ASSERT_EQ(a.size(), 1u);
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_EQ(a[0].tensor.data<float>()[i], r[0].tensor.data<float>()[i]);
  exec::RunOptions one;
  one.policy.node_formats.emplace("m", fp16f);
  Builder only({3});
  only.m = b.m;
  only.m.graph.outputs = {{"a", 1, false, {}}};
  const auto want = exec::Executor(only.m, one).run(in);
  ASSERT_EQ(local_first.size(), 1u);
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_EQ(local_first[0].tensor.data<float>()[i], want[0].tensor.data<float>()[i]);
}

}  // namespace
}  // namespace fpguard::analysis
