// Exact power-of-two scale rewriting on crafted graphs: the homogeneity degrees (RMS norm
// is of degree 0 and needs no undo; Softmax is a barrier; a graph output of degree 1 is
// multiplied back; a bias next to a scaled product is rescaled; Sqrt needs an even k),
// and the float32 function kept (outputs against the original) while the float16
// emulation stops overflowing.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/rewrite.hpp"
#include "graph_util.hpp"

namespace fpguard::rewrite {
namespace {

using test::floats;

struct Builder : test::GraphBuilder {
  explicit Builder(std::vector<std::int64_t> shape)
      : GraphBuilder(std::move(shape), "scale.onnx") {}
};

std::vector<float> run32(const model::Model& m, const Tensor& x) {
  const auto out = exec::Executor(m).run({{"x", x}});
  const auto d = out[0].tensor.data<float>();
  return {d.begin(), d.end()};
}

double nrmse(const std::vector<float>& a, const std::vector<float>& b) {
  double dd = 0, rr = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    dd += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    rr += double(a[i]) * a[i];
  }
  return std::sqrt(dd / rr);
}

// x * rsqrt(mean(x^2) + eps) with x up to 400: x^2 overflows float16.
Builder rms_norm() {
  Builder b({2, 8});
  b.init("two", floats({}, {2})).init("eps", floats({}, {1e-8f})).init("one", floats({}, {1}));
  b.node("sq", "Pow", {"x", "two"}, "p")
      .node("mean", "ReduceMean", {"p"}, "ms", {{"axes", std::vector<std::int64_t>{1}, ""}})
      .node("add", "Add", {"ms", "eps"}, "v")
      .node("root", "Sqrt", {"v"}, "r")
      .node("inv", "Div", {"one", "r"}, "i")
      .node("norm", "Mul", {"x", "i"}, "y")
      .output("y");
  return b;
}

Tensor big_input(std::int64_t n, float scale) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = scale * u(rng);
  v[3] = scale;  // the maximum is reached
  return floats({2, n / 2}, v);
}

TEST(Scale, RmsNormIsDegreeZeroAndNeedsNoUndo) {
  Builder b = rms_norm();
  const Format f16 = parse_format("float16");
  const auto s = find_scale(b.m, "x", {{"x", 400}, {"p", 160000}, {"ms", 60000}}, f16);
  ASSERT_TRUE(s.has_value());
  // x^2 up to 160000 must drop to 32752: 2^(2k) >= 4.9, k = 2.
  EXPECT_EQ(s->k, 2);
  EXPECT_TRUE(s->undo.empty());         // the result is of degree 0: nothing multiplied back
  EXPECT_TRUE(s->output_undo.empty());  // (dividing it by the scale would be the bug)
  ASSERT_EQ(s->rescale.size(), 1u);     // eps, next to mean(x^2) of degree 2: 2^-4
  EXPECT_EQ(s->rescale[0].node, "add");
  EXPECT_EQ(s->rescale[0].exponent, -4);
  const model::Model r = apply_scale(b.m, *s);
  const Tensor x = big_input(16, 400);
  EXPECT_LE(nrmse(run32(b.m, x), run32(r, x)), 1e-6);
  // In float16 the original overflows (the norm collapses), the rewrite does not.
  analysis::CheckOptions o;
  o.precision = f16;
  EXPECT_FALSE(analysis::check(b.m, {{{"x", x}}}, o).pass);
  const auto d = analysis::check(r, {{{"x", x}}}, o);
  EXPECT_TRUE(d.pass);
  for (const auto& org : d.origins) EXPECT_NE(org.kind, analysis::OriginKind::overflow);
}

TEST(Scale, BarriersAndOutputsAreMultipliedBack) {
  // x -> Mul(w) -> y1 (a graph output, degree 1); x^2 -> Softmax (no degree) -> y2.
  Builder b({1, 4});
  b.init("w", floats({}, {3})).init("two", floats({}, {2}));
  b.node("lin", "Mul", {"x", "w"}, "y1")
      .node("sq", "Pow", {"x", "two"}, "p")
      .node("sm", "Softmax", {"p"}, "y2")
      .output("y1")
      .output("y2");
  const auto s = find_scale(b.m, "x", {{"p", 1e6}}, parse_format("float16"));
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->undo.size(), 1u);
  EXPECT_EQ(s->undo[0].node, "sm");
  EXPECT_EQ(s->undo[0].exponent, 2 * s->k);
  ASSERT_EQ(s->output_undo.size(), 1u);
  EXPECT_EQ(s->output_undo[0].first, "y1");
  EXPECT_EQ(s->output_undo[0].second, s->k);
  const model::Model r = apply_scale(b.m, *s);
  const Tensor x = floats({1, 4}, {1.5f, -2, 0.25f, 3});
  const auto a = exec::Executor(b.m).run({{"x", x}}), c = exec::Executor(r).run({{"x", x}});
  for (std::size_t o = 0; o < 2; ++o)
    for (std::size_t i = 0; i < 4; ++i)
      EXPECT_FLOAT_EQ(a[o].tensor.data<float>()[i], c[o].tensor.data<float>()[i]);
}

TEST(Scale, BiasIsRescaledAndSqrtNeedsAnEvenK) {
  // MatMul(x, W) + b: the bias is rescaled with the product; Sqrt(x) halves the degree,
  // so k must be even.
  Builder b({1, 2});
  b.init("W", floats({2, 2}, {1, 2, 3, 4})).init("bias", floats({2}, {0.5f, -0.5f}));
  b.node("mm", "Gemm", {"x", "W", "bias"}, "y").output("y");
  const auto s = find_scale(b.m, "x", {{"y", 3e5}}, parse_format("float16"));
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->rescale.size(), 1u);
  EXPECT_EQ(s->rescale[0].exponent, -s->k);
  const Tensor x = floats({1, 2}, {3e4f, -1e4f});
  EXPECT_LE(nrmse(run32(b.m, x), run32(apply_scale(b.m, *s), x)), 1e-7);

  Builder q({1, 2});
  q.node("root", "Sqrt", {"x"}, "r").output("r");
  const auto t = find_scale(q.m, "x", {{"x", 1e6}}, parse_format("float16"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->k % 2, 0);  // 2^-k/2 must be a power of two
  EXPECT_EQ(t->output_undo[0].second, t->k / 2);
}

TEST(Scale, AdditionOfTwoActivationsOfOtherDegreesIsABarrier) {
  Builder b({1, 2});
  b.init("two", floats({}, {2}));
  b.node("sq", "Pow", {"x", "two"}, "p").node("mix", "Add", {"p", "x"}, "y").output("y");
  const auto s = find_scale(b.m, "x", {{"p", 1e6}}, parse_format("float16"));
  ASSERT_TRUE(s.has_value());
  // The Add mixes degrees 2 and 1: both of its inputs are multiplied back before it.
  EXPECT_EQ(s->undo.size(), 2u);
  const Tensor x = floats({1, 2}, {3, -7});
  EXPECT_EQ(run32(b.m, x), run32(apply_scale(b.m, *s), x));
  std::string why;
  EXPECT_FALSE(find_scale(b.m, "nope", {}, parse_format("float16"), &why).has_value());
  EXPECT_NE(why.find("nope"), std::string::npos);
}

}  // namespace
}  // namespace fpguard::rewrite
