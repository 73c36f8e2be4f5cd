// The depthwise kernels (src/ops/depthwise.cpp) against the scalar sums they promise, bit
// for bit: plane() one channel at a time, channel_block() several channels at once (the
// vector's lanes), on every SIMD target compiled in that this CPU runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "ops/depthwise.hpp"
#include "targets.hpp"

namespace {

namespace dw = fpguard::ops::depthwise;
namespace ops = fpguard::ops;

// The fused op a case applies after the bias: none, a function the kernels call on their
// outputs (doubling them), or Relu or HardSwish, which they apply to their registers
// (ops::ExactEpilogue); each as its scalar formula.
enum class Op { none, twice, relu, hard_swish };

float apply(Op op, float x) {
  switch (op) {
    case Op::none:
      return x;
    case Op::twice:
      return x * 2.0f;
    case Op::relu:
      return x > 0 || std::isnan(x) ? x : 0.0f;
    case Op::hard_swish:
      return x * std::clamp(x / 6.0f + 0.5f, 0.0f, 1.0f);
  }
  return x;
}

const char* name(Op op) {
  constexpr std::array<const char*, 4> kNames{"", ", doubled", ", Relu", ", HardSwish"};
  return kNames[static_cast<std::size_t>(op)];
}

// The epilogue of `op` (null for none); `seen` counts the outputs a called one sees.
ops::Epilogue epilogue_of(Op op, std::size_t& seen) {
  if (op == Op::relu) return ops::ExactEpilogue{fpguard::ops::vmath::Exact::relu};
  if (op == Op::hard_swish) return ops::ExactEpilogue{fpguard::ops::vmath::Exact::hard_swish};
  return [&seen](float* v, std::size_t count, int) {
    seen += count;
    for (std::size_t i = 0; i < count; ++i) v[i] *= 2.0f;
  };
}

bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// Channel c's output plane: for each output, the taps' products in order (kh, then kw; a
// tap in the padding reads 0) added to 0, then + bias[c].
std::vector<float> scalar_plane(const dw::Plane& p, const float* in, const float* w,
                                const float* bias) {
  std::vector<float> out(static_cast<std::size_t>(p.out_h * p.out_w));
  for (std::int64_t oh = 0; oh < p.out_h; ++oh)
    for (std::int64_t ow = 0; ow < p.out_w; ++ow) {
      float acc = 0.0f;
      for (std::int64_t kh = 0; kh < p.kernel_h; ++kh)
        for (std::int64_t kw = 0; kw < p.kernel_w; ++kw) {
          const auto ih = oh * p.stride_h + kh * p.dil_h - p.pad_top,
                     iw = ow * p.stride_w + kw * p.dil_w - p.pad_left;
          const bool inside = ih >= 0 && ih < p.in_h && iw >= 0 && iw < p.in_w;
          acc += w[kh * p.kernel_w + kw] * (inside ? in[ih * p.in_w + iw] : 0.0f);
        }
      out[static_cast<std::size_t>(oh * p.out_w + ow)] = bias ? acc + *bias : acc;
    }
  return out;
}

// A random geometry: kernels 1-7, strides 1-3, dilations 1-2, pads 0-3 on each side, inputs
// of 1-30 (the output at least one position).
dw::Plane random_plane(std::mt19937& rng) {
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (;;) {
    dw::Plane p{};
    p.kernel_h = pick(1, 7), p.kernel_w = pick(1, 7);
    p.stride_h = pick(1, 3), p.stride_w = pick(1, 3);
    p.dil_h = pick(1, 2), p.dil_w = pick(1, 2);
    p.pad_top = pick(0, 3), p.pad_left = pick(0, 3);
    p.in_h = pick(1, 30), p.in_w = pick(1, 30);
    const auto out = [](std::int64_t in, std::int64_t pads, std::int64_t k, std::int64_t s,
                        std::int64_t d) { return (in + pads - d * (k - 1) - 1) / s + 1; };
    const auto pads_h = p.pad_top + pick(0, 3), pads_w = p.pad_left + pick(0, 3);
    if (p.in_h + pads_h < p.dil_h * (p.kernel_h - 1) + 1 ||
        p.in_w + pads_w < p.dil_w * (p.kernel_w - 1) + 1)
      continue;
    p.out_h = out(p.in_h, pads_h, p.kernel_h, p.stride_h, p.dil_h);
    p.out_w = out(p.in_w, pads_w, p.kernel_w, p.stride_w, p.dil_w);
    return p;
  }
}

// channel_block() for `channels` channels of p against scalar_plane(), bit for bit; the
// case number picks a bias, a fused op and the output rows in one part or two.
void check_channel_block(const dw::Plane& p, std::int64_t channels, int n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0, 1);
  const bool with_bias = n % 2 == 0;
  const auto op = static_cast<Op>(n / 4 % 4);
  // All rows at once, or in two parts (as two threads run them).
  const std::int64_t split = n % 4 < 2 ? p.out_h : p.out_h / 2;
  SCOPED_TRACE(::testing::Message()
               << p.in_h << "x" << p.in_w << " kernel " << p.kernel_h << "x" << p.kernel_w
               << " stride " << p.stride_h << "," << p.stride_w << " dilation " << p.dil_h << ","
               << p.dil_w << " pads " << p.pad_top << "," << p.pad_left << " -> " << p.out_h << "x"
               << p.out_w << ", " << channels << " channels" << (with_bias ? ", bias" : "")
               << name(op) << ", rows split at " << split);
  // Planes apart by more than their size, with guards between them, so that a read or a
  // write past a plane shows.
  const std::int64_t isize = p.in_h * p.in_w, osize = p.out_h * p.out_w,
                     ksize = p.kernel_h * p.kernel_w, istride = isize + 5, ostride = osize + 7;
  std::vector<float> x(static_cast<std::size_t>(channels * istride)),
      w(static_cast<std::size_t>(channels * ksize)), b(static_cast<std::size_t>(channels));
  for (auto* v : {&x, &w, &b})
    for (float& f : *v) f = normal(rng);
  constexpr float kGuard = 12345.0f;
  std::vector<float> y(static_cast<std::size_t>(channels * ostride), kGuard),
      scratch(dw::block_scratch_floats(p));
  std::size_t seen = 0;
  const ops::Epilogue epilogue = epilogue_of(op, seen);
  for (const auto& [oh0, oh1] : {std::pair{std::int64_t{0}, split}, std::pair{split, p.out_h}})
    if (oh0 < oh1)
      dw::channel_block(p, channels, oh0, oh1, x.data(), istride, w.data(),
                        with_bias ? b.data() : nullptr, y.data(), ostride,
                        op == Op::none ? nullptr : &epilogue, scratch.data());
  EXPECT_GE(seen, op == Op::twice ? static_cast<std::size_t>(channels * osize) : 0u);
  std::size_t differ = 0, guards = 0;
  for (std::int64_t c = 0; c < channels; ++c) {
    const auto want = scalar_plane(p, x.data() + c * istride, w.data() + c * ksize,
                                   with_bias ? &b[static_cast<std::size_t>(c)] : nullptr);
    for (std::int64_t q = 0; q < ostride; ++q) {
      const float got = y[static_cast<std::size_t>(c * ostride + q)];
      if (q >= osize) {
        guards += got != kGuard;
        continue;
      }
      differ += !same_bits(got, apply(op, want[static_cast<std::size_t>(q)]));
    }
  }
  EXPECT_EQ(differ, 0u);
  EXPECT_EQ(guards, 0u);
}

// Random geometries, and MobileNetV3's small planes (7 x 7 and 14 x 14, 3 x 3 and 5 x 5,
// strides 1 and 2); 1 channel, a few, all but one and all of a block; with and without a
// bias, and each kind of fused op (a function called must see every output once, before
// they are stored).
TEST(Depthwise, ChannelBlockIsTheScalarSumsBitForBit) {
  std::mt19937 rng(31);
  std::vector<dw::Plane> planes;
  for (const auto& [in, k, s] : std::vector<std::array<std::int64_t, 3>>{
           {7, 5, 1}, {14, 5, 2}, {14, 3, 1}, {28, 3, 2}, {7, 3, 1}})
    planes.push_back({.in_h = in,
                      .in_w = in,
                      .pad_top = k / 2,
                      .pad_left = k / 2,
                      .out_h = (in + 2 * (k / 2) - k) / s + 1,
                      .out_w = (in + 2 * (k / 2) - k) / s + 1,
                      .kernel_h = k,
                      .kernel_w = k,
                      .stride_h = s,
                      .stride_w = s,
                      .dil_h = 1,
                      .dil_w = 1});
  for (int i = 0; i < 300; ++i) planes.push_back(random_plane(rng));
  fpguard::test::on_every_target([&] {
    // (Without vectors it is never called: prefer_block.)
    const auto lanes = static_cast<std::int64_t>(dw::block_channels());
    if (lanes == 1) return;
    int cases = 0;
    for (const auto& p : planes)
      for (const std::int64_t channels : {std::int64_t{1}, std::int64_t{3}, lanes - 1, lanes})
        check_channel_block(p, channels, cases++, rng);
  });
}

// plane() for p against scalar_plane(), bit for bit, with the case's fused op.
void check_plane(const dw::Plane& p, std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0, 1);
  const auto op = static_cast<Op>(n % 4);
  SCOPED_TRACE(::testing::Message()
               << "case " << n << ": " << p.in_h << "x" << p.in_w << " kernel " << p.kernel_h << "x"
               << p.kernel_w << " stride " << p.stride_h << "," << p.stride_w << name(op));
  std::vector<float> x(static_cast<std::size_t>(p.in_h * p.in_w)),
      w(static_cast<std::size_t>(p.kernel_h * p.kernel_w)), scratch(dw::scratch_floats(p)),
      y(static_cast<std::size_t>(p.out_h * p.out_w));
  for (auto* v : {&x, &w})
    for (float& f : *v) f = normal(rng);
  const float bias = normal(rng);
  std::size_t seen = 0;
  const ops::Epilogue epilogue = epilogue_of(op, seen);
  dw::plane(p, x.data(), w.data(), &bias, op == Op::none ? nullptr : &epilogue, y.data(),
            scratch.data());
  EXPECT_EQ(seen, op == Op::twice ? y.size() : 0u);
  const auto want = scalar_plane(p, x.data(), w.data(), &bias);
  std::size_t differ = 0;
  for (std::size_t q = 0; q < y.size(); ++q) differ += !same_bits(y[q], apply(op, want[q]));
  EXPECT_EQ(differ, 0u);
}

// plane() on the same random geometries (strides 1 and 2 on the vector kernels, 3 on the
// scalar one), with each kind of fused op (its other tests, in exec_test.cpp, go through the
// Conv kernel, which sends it rows of 8 outputs or more only, on this machine's target).
TEST(Depthwise, PlaneIsTheScalarSumsBitForBit) {
  std::mt19937 rng(37);
  std::vector<dw::Plane> planes;
  for (int i = 0; i < 300; ++i) planes.push_back(random_plane(rng));
  fpguard::test::on_every_target([&] {
    for (std::size_t i = 0; i < planes.size(); ++i) check_plane(planes[i], i, rng);
  });
}

}  // namespace
