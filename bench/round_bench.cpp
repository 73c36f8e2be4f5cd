// Rounding throughput per format and mode, against memcpy of the same bytes in the same
// run (the baseline every ratio in bench/README.md is taken against). Single thread
// unless the name says /threads:auto.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "fpguard/round.hpp"

namespace {

constexpr std::size_t kSmall = 4 << 10;   // 4 KiB: in L1
constexpr std::size_t kLarge = 64 << 20;  // 64 MiB: far beyond the last-level cache

// Two kinds of data (the benchmark argument after the size):
//  0 "typical": N(0, 1), like weights and normalised activations;
//  1 "wide":    N(0, 1) * 2^k, k uniform in [-20, 20], so that a good share of lanes
//               overflow or fall into the subnormal range of the 8/6/4-bit formats
//               (the kernels' slow lanes).
const std::vector<float>& input(std::size_t bytes, int kind = 0) {
  static std::vector<float> cache[2][2];
  auto& v = cache[bytes == kSmall ? 0 : 1][kind];
  if (v.empty()) {
    v.resize(bytes / sizeof(float));
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> ex(-20, 20);
    for (auto& x : v) x = kind == 0 ? nd(rng) : std::ldexp(nd(rng), ex(rng));
  }
  return v;
}

void BM_memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto& in = input(bytes);
  std::vector<float> out(in.size());
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_memcpy)->Arg(kSmall)->Arg(kLarge);

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
#define FPG_ROUND_BENCH(name, fmt, mode, generic, threads)                    \
  BENCHMARK_CAPTURE(BM_round, name, fmt, mode, generic, threads)              \
      ->ArgNames({"bytes", "wide"})                                           \
      ->ArgsProduct({{kSmall, kLarge}, {0, 1}})                               \
      ->UseRealTime()

FPG_ROUND_BENCH(float16/nearest_even, "float16", R::nearest_even, false, 1);
FPG_ROUND_BENCH(bfloat16/nearest_even, "bfloat16", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float8_e4m3fn/nearest_even, "float8_e4m3fn", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float8_e5m2/nearest_even, "float8_e5m2", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float8_e4m3fnuz/nearest_even, "float8_e4m3fnuz", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float6_e2m3fn/nearest_even, "float6_e2m3fn", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float6_e3m2fn/nearest_even, "float6_e3m2fn", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float4_e2m1fn/nearest_even, "float4_e2m1fn", R::nearest_even, false, 1);
FPG_ROUND_BENCH(float16/toward_zero, "float16", R::toward_zero, false, 1);
FPG_ROUND_BENCH(bfloat16/toward_zero, "bfloat16", R::toward_zero, false, 1);
FPG_ROUND_BENCH(float8_e4m3fn/toward_zero, "float8_e4m3fn", R::toward_zero, false, 1);
FPG_ROUND_BENCH(float4_e2m1fn/toward_zero, "float4_e2m1fn", R::toward_zero, false, 1);
// The exact generic path, which serves every other mode and format.
FPG_ROUND_BENCH(float16/generic_nearest_even, "float16", R::nearest_even, true, 1);
FPG_ROUND_BENCH(float8_e4m3fn/generic_stochastic, "float8_e4m3fn", R::stochastic, true, 1);
// Multithreaded (all cores).
FPG_ROUND_BENCH(float16/nearest_even/threads:auto, "float16", R::nearest_even, false, 0);

}  // namespace

BENCHMARK_MAIN();
