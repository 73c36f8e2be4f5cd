// ops/vmath throughput against a scalar loop over the C library's float functions, on 1M
// floats (4 MiB) of N(0, 4) (|x| for log), single thread.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "ops/vmath.hpp"

namespace {

namespace vm = fpguard::ops::vmath;
using vm::Fn;

constexpr std::size_t kCount = std::size_t{1} << 20;

const std::vector<float>& inputs(Fn f) {
  static std::vector<float> normal, positive;
  if (normal.empty()) {
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    normal.resize(kCount);
    positive.resize(kCount);
    for (std::size_t i = 0; i < kCount; ++i) {
      normal[i] = nd(rng);
      positive[i] = std::fabs(normal[i]);
    }
  }
  return f == Fn::log ? positive : normal;
}

float scalar(Fn f, float x) {
  switch (f) {
    case Fn::exp:
      return std::exp(x);
    case Fn::log:
      return std::log(x);
    case Fn::tanh:
      return std::tanh(x);
    case Fn::erf:
      return std::erf(x);
    case Fn::sigmoid:
      return 1.0f / (1.0f + std::exp(-x));
  }
  return x;
}

void BM_vmath(benchmark::State& state, Fn f, bool simd) {
  const auto& in = inputs(f);
  std::vector<float> out(in.size());
  for (auto _ : state) {
    if (simd) {
      vm::apply(f, in.data(), out.data(), in.size());
    } else {
      for (std::size_t i = 0; i < in.size(); ++i) out[i] = scalar(f, in[i]);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * in.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * in.size() * 4));
}

void BM_vmath_softmax(benchmark::State& state, bool simd) {
  const auto& in = inputs(Fn::exp);
  std::vector<float> out(in.size());
  for (auto _ : state) {
    float sum;
    if (simd) {
      sum = vm::exp_shifted_sum(in.data(), vm::max_of(in.data(), in.size()), out.data(), in.size());
    } else {
      float m = in[0];
      for (float x : in) m = std::fmax(m, x);
      double s = 0;
      for (std::size_t i = 0; i < in.size(); ++i) s += out[i] = std::exp(in[i] - m);
      sum = static_cast<float>(s);
    }
    benchmark::DoNotOptimize(sum);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * in.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * in.size() * 4));
}

#define FPG_VMATH_BENCH(fn)                                            \
  BENCHMARK_CAPTURE(BM_vmath, fn / simd, Fn::fn, true)->UseRealTime(); \
  BENCHMARK_CAPTURE(BM_vmath, fn / std_scalar, Fn::fn, false)->UseRealTime()

FPG_VMATH_BENCH(exp);
FPG_VMATH_BENCH(log);
FPG_VMATH_BENCH(tanh);
FPG_VMATH_BENCH(erf);
FPG_VMATH_BENCH(sigmoid);
BENCHMARK_CAPTURE(BM_vmath_softmax, simd, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_vmath_softmax, std_scalar, false)->UseRealTime();

}  // namespace
