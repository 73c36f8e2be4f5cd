// `fpguard gemm-error`'s default path for one format: float16 inputs, float32
// accumulation through oneDNN's sgemm, plus the two double GEMMs of the truth and the
// |A||B| product of the bounds — the whole of one table row, at n = 1024 and 2048.
// Then the executor's products of a few rows (BM_small_gemm), without transposes
// (BM_small_gemm/plain_*), and of one row against a transposed B on the gemv kernel against
// oneDNN's sgemm (BM_row_gemv).
#include <benchmark/benchmark.h>

#include <dnnl.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "fpguard/experiments.hpp"
#include "ops/gemv.hpp"

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

// Products of a few rows, C = A B^T (B: n x k, a Linear's or a recurrent weight as ONNX
// stores it), on the pool's threads: dnnl_sgemm (what ops::gemm runs for m <= 8) against
// oneDNN's matmul primitive created per call (what it runs for more rows, and ran for
// these before). The shapes: the CRNN's LSTM step (1 x 1024 x 256), ResNet-50's and
// MobileNetV3's classifiers, the CRNN's step at batch 8, and 16 rows for the crossover.
struct SmallGemm {
  std::int64_t m, n, k;
  bool transposed_b = true;  // false: B is k x n (BM_small_gemm/plain_*, below)
};

void BM_small_gemm(benchmark::State& state, SmallGemm s, bool sgemm) {
  std::vector<float> a(static_cast<std::size_t>(s.m * s.k)), b(static_cast<std::size_t>(s.n * s.k)),
      c(static_cast<std::size_t>(s.m * s.n));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (auto* v : {&a, &b})
    for (float& f : *v) f = normal(rng);
  using dnnl::memory;
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const memory::desc ad({s.m, s.k}, memory::data_type::f32, memory::dims{s.k, 1});
  const memory::desc bd({s.k, s.n}, memory::data_type::f32,
                        s.transposed_b ? memory::dims{1, s.k} : memory::dims{s.n, 1});
  const memory::desc cd({s.m, s.n}, memory::data_type::f32, memory::dims{s.n, 1});
  for (auto _ : state) {
    if (sgemm) {
      dnnl_sgemm('N', s.transposed_b ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(),
                 s.transposed_b ? s.k : s.n, 0.0f, c.data(), s.n);
    } else {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), eng);
      const dnnl::matmul mm(pd);
      memory am(ad, eng, a.data()), bm(bd, eng, b.data()), cm(cd, eng, c.data());
      mm.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
      strm.wait();
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * s.m * s.n * s.k);
}

#define FPG_SMALL_GEMM_BENCH(name, ...)                                                        \
  BENCHMARK_CAPTURE(BM_small_gemm, name / sgemm, SmallGemm{__VA_ARGS__}, true)->UseRealTime(); \
  BENCHMARK_CAPTURE(BM_small_gemm, name / matmul, SmallGemm{__VA_ARGS__}, false)->UseRealTime()

FPG_SMALL_GEMM_BENCH(1x1024x256, 1, 1024, 256);
FPG_SMALL_GEMM_BENCH(1x1000x2048, 1, 1000, 2048);
FPG_SMALL_GEMM_BENCH(1x1280x960, 1, 1280, 960);
FPG_SMALL_GEMM_BENCH(8x1024x256, 8, 1024, 256);
FPG_SMALL_GEMM_BENCH(16x1024x256, 16, 1024, 256);

// The same for products without transposes, C = A B (B: k x n; a 1x1 convolution on NCHW,
// a transformer's Linear as exported to MatMul), which ops::gemm runs on dnnl_sgemm at any
// size: ResNet-50's, MobileNetV3's and BERT's shapes.
#define FPG_PLAIN_GEMM_BENCH(name, m, n, k)                                                 \
  BENCHMARK_CAPTURE(BM_small_gemm, plain_##name / sgemm, SmallGemm{m, n, k, false}, true)   \
      ->UseRealTime();                                                                      \
  BENCHMARK_CAPTURE(BM_small_gemm, plain_##name / matmul, SmallGemm{m, n, k, false}, false) \
      ->UseRealTime()

FPG_PLAIN_GEMM_BENCH(256x3136x64, 256, 3136, 64);
FPG_PLAIN_GEMM_BENCH(64x3136x64, 64, 3136, 64);
FPG_PLAIN_GEMM_BENCH(256x196x1024, 256, 196, 1024);
FPG_PLAIN_GEMM_BENCH(1024x196x256, 1024, 196, 256);
FPG_PLAIN_GEMM_BENCH(672x196x112, 672, 196, 112);
FPG_PLAIN_GEMM_BENCH(128x3072x768, 128, 3072, 768);
FPG_PLAIN_GEMM_BENCH(128x768x3072, 128, 768, 3072);
FPG_PLAIN_GEMM_BENCH(16x1024x256, 16, 1024, 256);

// y (1 x n) = x (1 x k) times B (n x k) transposed, on one thread: ops::gemv::rows against
// dnnl_sgemm('N', 'T'). MobileNetV3's classifier (960 -> 1280 -> 1000) and a
// squeeze-excitation block's two layers (960 -> 240 -> 960); bytes: B's, read once.
void BM_row_gemv(benchmark::State& state, std::int64_t k, std::int64_t n, bool kernel) {
  std::vector<float> x(static_cast<std::size_t>(k)), b(static_cast<std::size_t>(n * k)),
      y(static_cast<std::size_t>(n));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (auto* v : {&x, &b})
    for (float& f : *v) f = normal(rng);
  for (auto _ : state) {
    if (kernel)
      fpguard::ops::gemv::rows(x.data(), b.data(), k, k, 1.0f, 0.0f, y.data(), 0, n);
    else
      dnnl_sgemm('N', 'T', 1, n, k, 1.0f, x.data(), k, b.data(), k, 0.0f, y.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * n * k * 4);
}

#define FPG_ROW_GEMV_BENCH(name, k, n)                                      \
  BENCHMARK_CAPTURE(BM_row_gemv, name / kernel, k, n, true)->UseRealTime(); \
  BENCHMARK_CAPTURE(BM_row_gemv, name / sgemm, k, n, false)->UseRealTime()

FPG_ROW_GEMV_BENCH(960to1280, 960, 1280);
FPG_ROW_GEMV_BENCH(1280to1000, 1280, 1000);
FPG_ROW_GEMV_BENCH(960to240, 960, 240);
FPG_ROW_GEMV_BENCH(240to960, 240, 960);

}  // namespace
