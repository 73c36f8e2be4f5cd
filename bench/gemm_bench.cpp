// `fpguard gemm-error`'s default path for one format: float16 inputs, float32
// accumulation through oneDNN's sgemm, plus the two double GEMMs of the truth and the
// |A||B| product of the bounds — the whole of one table row, at n = 1024 and 2048.
#include <benchmark/benchmark.h>

#include "fpguard/experiments.hpp"

namespace {

void BM_gemm_error_fp16(benchmark::State& state) {
  fpguard::GemmErrorOptions o;
  o.sizes = {state.range(0)};
  o.formats = {fpguard::parse_format("float16")};
  for (auto _ : state) benchmark::DoNotOptimize(fpguard::gemm_error(o));
  state.counters["n"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_gemm_error_fp16)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

// The pieces: the float32-accumulated product alone (oneDNN), and the double truth.
void BM_gemm_accumulate_library(benchmark::State& state) {
  const auto n = state.range(0);
  const auto s = fpguard::make_gemm_setup(fpguard::parse_format("float16"), std::nullopt,
                                          std::nullopt, std::nullopt);
  const auto m = fpguard::gemm_matrices(n, s, {}, 0, 0);
  std::vector<double> c(m.c.size());
  fpguard::AccumulationOrder lib{fpguard::AccumulationOrder::Kind::library, 0};
  for (auto _ : state)
    fpguard::gemm_accumulate(m.a_rounded, m.b_rounded, c, n, fpguard::parse_format("float32"), lib);
}
BENCHMARK(BM_gemm_accumulate_library)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_gemm_reference(benchmark::State& state) {
  const auto n = state.range(0);
  const auto s = fpguard::make_gemm_setup(fpguard::parse_format("float16"), std::nullopt,
                                          std::nullopt, std::nullopt);
  const auto m = fpguard::gemm_matrices(n, s, {}, 0, 0);
  std::vector<double> c(m.c.size());
  for (auto _ : state) fpguard::gemm_reference(m.a_rounded, m.b_rounded, c, n, false);
}
BENCHMARK(BM_gemm_reference)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
