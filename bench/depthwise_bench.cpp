// The direct depthwise convolution kernel (ops/depthwise.hpp) plane by plane on one thread,
// against the scalar loop of the same sums, on the layers of MobileNetV3 and DBNet that
// bench/README.md names (session 15): C planes of H x H, a K x K kernel of stride S, pads
// K / 2. Bytes processed: the input and output planes once (memory speed is BM_memcpy's).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/depthwise.hpp"

namespace {

namespace dw = fpguard::ops::depthwise;

struct Layer {
  std::int64_t c, h, k, s;
};

enum class Way { scalar, plane, block };

void BM_depthwise(benchmark::State& state, Layer l, Way way) {
  const std::int64_t pad = l.k / 2, out = (l.h + 2 * pad - l.k) / l.s + 1;
  const dw::Plane p{.in_h = l.h,
                    .in_w = l.h,
                    .pad_top = pad,
                    .pad_left = pad,
                    .out_h = out,
                    .out_w = out,
                    .kernel_h = l.k,
                    .kernel_w = l.k,
                    .stride_h = l.s,
                    .stride_w = l.s,
                    .dil_h = 1,
                    .dil_w = 1};
  const auto isize = l.h * l.h, osize = out * out, ksize = l.k * l.k;
  std::vector<float> x(static_cast<std::size_t>(l.c * isize)),
      w(static_cast<std::size_t>(l.c * ksize)), b(static_cast<std::size_t>(l.c)),
      y(static_cast<std::size_t>(l.c * osize)),
      scratch(std::max(dw::scratch_floats(p), dw::block_scratch_floats(p)));
  const auto lanes = static_cast<std::int64_t>(dw::block_channels());
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (auto* v : {&x, &w, &b})
    for (float& f : *v) f = normal(rng);
  for (auto _ : state) {
    std::int64_t c = 0;
    if (way == Way::block)
      for (; c + lanes <= l.c; c += lanes)
        dw::channel_block(p, lanes, 0, out, x.data() + c * isize, isize, w.data() + c * ksize,
                          &b[static_cast<std::size_t>(c)], y.data() + c * osize, osize, nullptr,
                          scratch.data());
    for (; c < l.c; ++c) {
      const float *in = x.data() + c * isize, *wc = w.data() + c * ksize;
      float* o = y.data() + c * osize;
      if (way != Way::scalar) {
        dw::plane(p, in, wc, &b[static_cast<std::size_t>(c)], nullptr, o, scratch.data());
        continue;
      }
      for (std::int64_t oh = 0; oh < out; ++oh)
        for (std::int64_t ow = 0; ow < out; ++ow) {
          float acc = 0.0f;
          for (std::int64_t i = 0; i < l.k; ++i)
            for (std::int64_t j = 0; j < l.k; ++j) {
              const auto ih = oh * l.s - pad + i, iw = ow * l.s - pad + j;
              const bool inside = ih >= 0 && ih < l.h && iw >= 0 && iw < l.h;
              acc += wc[i * l.k + j] * (inside ? in[ih * l.h + iw] : 0.0f);
            }
          o[oh * out + ow] = acc + b[static_cast<std::size_t>(c)];
        }
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * l.c * (isize + osize) *
                          4);
}

#define FPG_DEPTHWISE_BENCH(name, ...)                                                           \
  BENCHMARK_CAPTURE(BM_depthwise, name / kernel, Layer{__VA_ARGS__}, Way::plane)->UseRealTime(); \
  BENCHMARK_CAPTURE(BM_depthwise, name / block, Layer{__VA_ARGS__}, Way::block)->UseRealTime();  \
  BENCHMARK_CAPTURE(BM_depthwise, name / scalar, Layer{__VA_ARGS__}, Way::scalar)->UseRealTime()

FPG_DEPTHWISE_BENCH(672x14_k3s1, 672, 14, 3, 1);
FPG_DEPTHWISE_BENCH(16x112_k3s1, 16, 112, 3, 1);
FPG_DEPTHWISE_BENCH(64x112_k3s2, 64, 112, 3, 2);
FPG_DEPTHWISE_BENCH(72x160_k3s1, 72, 160, 3, 1);
FPG_DEPTHWISE_BENCH(64x320_k3s2, 64, 320, 3, 2);
FPG_DEPTHWISE_BENCH(120x28_k5s1, 120, 28, 5, 1);
FPG_DEPTHWISE_BENCH(72x56_k5s2, 72, 56, 5, 2);
FPG_DEPTHWISE_BENCH(960x7_k5s1, 960, 7, 5, 1);
FPG_DEPTHWISE_BENCH(672x14_k5s2, 672, 14, 5, 2);
FPG_DEPTHWISE_BENCH(240x28_k3s2, 240, 28, 3, 2);
FPG_DEPTHWISE_BENCH(72x56_k3s1, 72, 56, 3, 1);
FPG_DEPTHWISE_BENCH(96x28_k3s1, 96, 28, 3, 1);
FPG_DEPTHWISE_BENCH(96x32_k3s1, 96, 32, 3, 1);
FPG_DEPTHWISE_BENCH(96x40_k3s1, 96, 40, 3, 1);

}  // namespace
