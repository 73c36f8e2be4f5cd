// The benchmark binary: memcpy, the baseline of every ratio in bench/README.md, plus the
// benchmarks registered by the other files of bench/.
#include <benchmark/benchmark.h>

#include <cstring>

#include "common.hpp"
#include "fpguard/limits.hpp"

namespace {

void BM_memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto& in = fpguard::bench::input(bytes);
  std::vector<float> out(in.size());
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_memcpy)->Arg(fpguard::bench::kSmall)->Arg(fpguard::bench::kLarge)->UseRealTime();

}  // namespace

// BENCHMARK_MAIN, with the allocator policy of the fpguard CLI (reuse_freed_memory), so
// that model benchmarks time what `fpguard run` and `fpguard check` do.
int main(int argc, char** argv) {
  fpguard::reuse_freed_memory();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
