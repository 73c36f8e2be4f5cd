// stats() over 64 MiB of float32 with three formats requested (the numbers
// `fpguard inspect` reports). bench/numpy_stats.py measures NumPy computing the same
// counts in the same run of bench/run.
#include <benchmark/benchmark.h>

#include "common.hpp"
#include "fpguard/stats.hpp"

namespace {

// threads: 0 for all; histogram: StatsOptions::histogram (`inspect` takes it only with
// --histogram, --json or --html).
void BM_stats(benchmark::State& state, int threads, bool histogram) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto& in = fpguard::bench::input(bytes, static_cast<int>(state.range(1)));
  const std::vector<fpguard::Format> formats = {fpguard::parse_format("float16"),
                                                fpguard::parse_format("bfloat16"),
                                                fpguard::parse_format("float8_e4m3fn")};
  fpguard::StatsOptions o;
  o.threads = threads;
  o.histogram = histogram;
  for (auto _ : state)
    benchmark::DoNotOptimize(fpguard::stats(std::span<const float>(in), formats, o));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

BENCHMARK_CAPTURE(BM_stats, 3formats, 1, true)
    ->ArgNames({"bytes", "wide"})
    ->ArgsProduct({{fpguard::bench::kLarge}, {0, 1}})
    ->UseRealTime();
// A ReLU's outputs (bench::input kind 2): half the lanes exactly 0.
BENCHMARK_CAPTURE(BM_stats, 3formats / relu, 1, true)
    ->ArgNames({"bytes", "data"})
    ->Args({fpguard::bench::kLarge, 2})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_stats, 3formats / threads
                  : auto, 0, true) -> ArgNames({"bytes", "wide"})
    -> ArgsProduct({{fpguard::bench::kLarge}, {0, 1}}) -> UseRealTime();
// What `inspect` computes by default: no exponent histogram.
BENCHMARK_CAPTURE(BM_stats, 3formats / no histogram, 1, false)
    ->ArgNames({"bytes", "data"})
    ->ArgsProduct({{fpguard::bench::kLarge}, {0, 1, 2}})
    ->UseRealTime();

}  // namespace
