// The 1x1 convolution kernel (ops/pointwise.hpp) on one thread, against oneDNN's sgemm
// followed by a pass adding the bias and applying the activation (what the Conv kernel
// ran before, session 16), on DBNet's and MobileNetV3's layers with few input channels:
// K -> M channels over an H x H plane, with a ReLU after. Bytes processed: the input and
// output once (memory speed is BM_memcpy's).
#include <benchmark/benchmark.h>

#include <dnnl.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/pointwise.hpp"

namespace {

namespace pw = fpguard::ops::pointwise;

struct Layer {
  std::int64_t k, m, h;
};

void BM_pointwise(benchmark::State& state, Layer l, bool kernel) {
  const std::int64_t n = l.h * l.h;
  std::vector<float> x(static_cast<std::size_t>(l.k * n)), w(static_cast<std::size_t>(l.m * l.k)),
      b(static_cast<std::size_t>(l.m)), y(static_cast<std::size_t>(l.m * n)),
      scratch(pw::scratch_floats(l.m, l.k));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (auto* v : {&x, &w, &b})
    for (float& f : *v) f = normal(rng);
  const fpguard::ops::Epilogue relu = [](float* v, std::size_t count, int) {
    for (std::size_t i = 0; i < count; ++i) v[i] = std::max(v[i], 0.0f);
  };
  const std::int64_t panel = pw::panel_columns(l.m, l.k);
  for (auto _ : state) {
    if (kernel) {
      for (std::int64_t c0 = 0; c0 < n; c0 += panel)
        pw::columns(w.data(), x.data(), b.data(), y.data(), l.m, l.k, n, c0,
                    std::min(n, c0 + panel), &relu, scratch.data());
    } else {
      dnnl_sgemm('N', 'N', l.m, n, l.k, 1.0f, w.data(), l.k, x.data(), n, 0.0f, y.data(), n);
      for (std::int64_t i = 0; i < l.m; ++i) {
        float* row = y.data() + i * n;
        for (std::int64_t j = 0; j < n; ++j) row[j] += b[static_cast<std::size_t>(i)];
        relu(row, static_cast<std::size_t>(n), 1);
      }
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * (l.k + l.m) * n * 4);
}

#define FPG_POINTWISE_BENCH(name, ...)                                                     \
  BENCHMARK_CAPTURE(BM_pointwise, name / kernel, Layer{__VA_ARGS__}, true)->UseRealTime(); \
  BENCHMARK_CAPTURE(BM_pointwise, name / onednn, Layer{__VA_ARGS__}, false)->UseRealTime()

FPG_POINTWISE_BENCH(16to64x320, 16, 64, 320);
FPG_POINTWISE_BENCH(16to16x320, 16, 16, 320);
FPG_POINTWISE_BENCH(24to72x160, 24, 72, 160);
FPG_POINTWISE_BENCH(24to96x160, 24, 96, 160);
FPG_POINTWISE_BENCH(16to64x112, 16, 64, 112);
FPG_POINTWISE_BENCH(32to128x80, 32, 128, 80);
FPG_POINTWISE_BENCH(112to672x14, 112, 672, 14);
FPG_POINTWISE_BENCH(672to112x14, 672, 112, 14);
FPG_POINTWISE_BENCH(80to480x14, 80, 480, 14);
FPG_POINTWISE_BENCH(960to160x7, 960, 160, 7);
FPG_POINTWISE_BENCH(160to960x7, 160, 960, 7);
FPG_POINTWISE_BENCH(64to256x56, 64, 256, 56);
FPG_POINTWISE_BENCH(64to64x56, 64, 64, 56);
FPG_POINTWISE_BENCH(256to64x56, 256, 64, 56);

}  // namespace
