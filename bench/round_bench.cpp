// Rounding throughput per format and mode. Single thread unless the name says
// /threads:auto.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "common.hpp"
#include "fpguard/round.hpp"
#include "fpguard/stats.hpp"
#include "round/fast.hpp"

namespace {

using fpguard::bench::input;
using fpguard::bench::kLarge;
using fpguard::bench::kSmall;

void BM_round(benchmark::State& state, const char* format, fpguard::Rounding mode, bool generic,
              int threads) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto& in = input(bytes, static_cast<int>(state.range(1)));
  std::vector<float> out(in.size());
  const auto f = fpguard::parse_format(format);
  fpguard::RoundOptions o;
  o.rounding = mode;
  o.threads = threads;
  for (auto _ : state) {
    if (generic)
      fpguard::round_generic(in, out, f, o);
    else
      fpguard::round(in, out, f, o);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

using R = fpguard::Rounding;
#define FPG_ROUND_BENCH(name, fmt, mode, generic, threads)       \
  BENCHMARK_CAPTURE(BM_round, name, fmt, mode, generic, threads) \
      ->ArgNames({"bytes", "wide"})                              \
      ->ArgsProduct({{kSmall, kLarge}, {0, 1}})                  \
      ->UseRealTime()

FPG_ROUND_BENCH(float16 / nearest_even, "float16", R::nearest_even, false, 1);
FPG_ROUND_BENCH(bfloat16 / nearest_even, "bfloat16", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float8_e4m3fn / nearest_even, "float8_e4m3fn", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float8_e5m2 / nearest_even, "float8_e5m2", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float8_e4m3fnuz / nearest_even, "float8_e4m3fnuz", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float6_e2m3fn / nearest_even, "float6_e2m3fn", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float6_e3m2fn / nearest_even, "float6_e3m2fn", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float4_e2m1fn / nearest_even, "float4_e2m1fn", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float16 / toward_zero, "float16", R::toward_zero, false, 1);
FPG_ROUND_BENCH(bfloat16 / toward_zero, "bfloat16", R::toward_zero, false, 1);
FPG_ROUND_BENCH(float8_e4m3fn / toward_zero, "float8_e4m3fn", R::toward_zero, false, 1);
FPG_ROUND_BENCH(float4_e2m1fn / toward_zero, "float4_e2m1fn", R::toward_zero, false, 1);
// The exact generic path, which serves every other mode and format.
FPG_ROUND_BENCH(float16 / generic_nearest_even, "float16", R::nearest_even, true, 1);
FPG_ROUND_BENCH(float8_e4m3fn / generic_stochastic, "float8_e4m3fn", R::stochastic, true, 1);
// Multithreaded (all cores).
FPG_ROUND_BENCH(float16 / nearest_even / threads : auto, "float16", R::nearest_even, false, 0);

}  // namespace

namespace {

// Quantize-dequantize into a scaled format (issue 21: MX at >= 0.5x memcpy on one thread;
// the NumPy reference, bench/numpy_mx.py, >= 20x slower). Blocks along the last axis of a
// [rows, 4096] tensor (4 KiB: one row), one thread.
void BM_round_scaled(benchmark::State& state, const char* format, bool generic) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto& in = input(bytes, static_cast<int>(state.range(1)));
  std::vector<float> out(in.size());
  const auto f = fpguard::parse_scaled_format(format);
  const auto n = static_cast<std::int64_t>(in.size());
  const std::int64_t cols = std::min<std::int64_t>(n, 4096);  // the small case: one row
  const fpguard::ScaledLayout l{.shape = {n / cols, cols}};
  const fpguard::ScaledOptions o{.threads = 1, .generic = generic};
  for (auto _ : state) {
    benchmark::DoNotOptimize(fpguard::round_scaled(in, out, l, f, o));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

#define FPG_SCALED_BENCH(name, fmt, generic)             \
  BENCHMARK_CAPTURE(BM_round_scaled, name, fmt, generic) \
      ->ArgNames({"bytes", "wide"})                      \
      ->ArgsProduct({{kSmall, kLarge}, {0, 1}})          \
      ->UseRealTime()

// check's local run: the values and the block counts of each block in one pass
// (detail::round_scaled_counting), blocks along the last axis (a MatMul's A, a transposed
// B), a [rows, 1024] tensor of N(0, 1)-like values, one thread.
void BM_round_scaled_counting(benchmark::State& state, const char* format) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto& in = input(bytes, 0);
  std::vector<float> out(in.size());
  const auto f = fpguard::parse_scaled_format(format);
  const auto n = static_cast<std::int64_t>(in.size());
  const std::int64_t cols = std::min<std::int64_t>(n, 1024);
  const fpguard::ScaledLayout l{.shape = {n / cols, cols}};
  const fpguard::ScaledOptions o{.threads = 1};
  for (auto _ : state) {
    fpguard::detail::BlockCounts b;
    benchmark::DoNotOptimize(fpguard::detail::round_scaled_counting(in, out, l, f, o, b));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK_CAPTURE(BM_round_scaled_counting, mxfp8_e4m3, "mxfp8_e4m3")
    ->ArgNames({"bytes"})
    ->Arg(kSmall)
    ->Arg(kLarge)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_round_scaled_counting, mxfp4_e2m1, "mxfp4_e2m1")
    ->ArgNames({"bytes"})
    ->Arg(kSmall)
    ->Arg(kLarge)
    ->UseRealTime();

// Blocks along the channels of a Conv activation [1, C, H, W] (axis 1: a strided axis),
// one thread, as check's emulated and local runs quantize a Conv's input.
void BM_round_scaled_channels(benchmark::State& state, const char* format) {
  const auto c = state.range(0), hw = state.range(1);
  const auto n = static_cast<std::size_t>(c * hw * hw);
  std::vector<float> in(n), out(n);
  std::uint32_t state_bits = 12345;
  for (auto& v : in) {  // N(0, 1)-like: a sum of uniforms
    float s = 0;
    for (int k = 0; k < 4; ++k) {
      state_bits = state_bits * 1664525u + 1013904223u;
      s += static_cast<float>(state_bits >> 8) * 0x1p-24f - 0.5f;
    }
    v = state.range(2) ? std::max(s * 1.7f, 0.0f) : s * 1.7f;  // ReLU's: half zeros
  }
  const auto f = fpguard::parse_scaled_format(format);
  const fpguard::ScaledLayout l{.shape = {1, c, hw, hw}, .axis = 1};
  const fpguard::ScaledOptions o{.threads = 1};
  fpguard::StatsOptions so;
  so.threads = 1;
  so.distribution = false;
  for (auto _ : state) {
    if (state.range(3))  // the block counts alone (check's statistics of an operand)
      benchmark::DoNotOptimize(fpguard::scaled_stats(std::span<const float>(in), l, f, so));
    else
      benchmark::DoNotOptimize(fpguard::round_scaled(in, out, l, f, o));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK_CAPTURE(BM_round_scaled_channels, mxfp8_e4m3, "mxfp8_e4m3")
    ->ArgNames({"c", "hw", "relu", "counts"})
    ->ArgsProduct({{32}, {112}, {0, 1}, {0, 1}})
    ->Args({128, 28, 1, 0})
    ->Args({3, 224, 0, 0})
    ->Args({32, 16, 1, 0})
    ->UseRealTime();

FPG_SCALED_BENCH(mxfp8_e4m3, "mxfp8_e4m3", false);
FPG_SCALED_BENCH(mxfp4_e2m1, "mxfp4_e2m1", false);
FPG_SCALED_BENCH(mxfp8_e4m3 / generic, "mxfp8_e4m3", true);
FPG_SCALED_BENCH(nvfp4 / generic, "nvfp4", true);

}  // namespace
