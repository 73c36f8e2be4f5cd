// `fpguard check` against `fpguard run` on the same model and inputs: the check runs the
// model three times in lockstep (reference, emulated, local) and compares every tensor,
// so its target is <= 4x one float32 run (bench/run prints the ratio). Models: the bench
// models of bench/make_bench_models.py (built into the build tree) and examples/.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <sstream>

#include "common.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/model.hpp"
#include "fpguard/report.hpp"
#include "fpguard/round.hpp"
#include "fpguard/tensor.hpp"

namespace {

namespace fs = std::filesystem;

struct Loaded {
  fpguard::model::Model model;
  std::vector<fpguard::NamedTensor> inputs;
  std::vector<fpguard::NamedValue> values;  // the same, as check takes them
};

Loaded& load(const fs::path& dir) {
  static std::map<fs::path, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[dir];
  if (!slot) {
    slot = std::make_unique<Loaded>();
    slot->model = fpguard::model::load(dir / "model.onnx");
    fpguard::analysis::name_nodes(slot->model);
    slot->inputs = fpguard::read_tensors(dir / "inputs");
    for (const auto& t : slot->inputs) slot->values.push_back({t.name, t.tensor});
  }
  return *slot;
}

void run(benchmark::State& state, fs::path dir) {
  auto& l = load(dir);
  const fpguard::exec::Executor ex(l.model);
  for (auto _ : state) benchmark::DoNotOptimize(ex.run(l.inputs));
}

void check(benchmark::State& state, fs::path dir) {
  auto& l = load(dir);
  fpguard::analysis::CheckOptions o;
  o.precision = fpguard::parse_format("float16");
  for (auto _ : state) benchmark::DoNotOptimize(fpguard::analysis::check(l.model, {l.values}, o));
}

// The ratio itself, robust to a machine whose speed drifts (this VM's does by +-30%
// within minutes): each iteration times one run and then one check back to back, and the
// counter check_over_run is the median of those per-iteration ratios. The timed run
// follows an untimed one, so that it finds the caches as BM_model_run's repeated runs do
// (not as the check left them). The time reported is the iteration's.
void ratio(benchmark::State& state, fs::path dir) {
  auto& l = load(dir);
  const fpguard::exec::Executor ex(l.model);
  fpguard::analysis::CheckOptions o;
  o.precision = fpguard::parse_format("float16");
  std::vector<double> ratios;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ex.run(l.inputs));
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(ex.run(l.inputs));
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(fpguard::analysis::check(l.model, {l.values}, o));
    const auto t2 = std::chrono::steady_clock::now();
    ratios.push_back(std::chrono::duration<double>(t2 - t1).count() /
                     std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(ratios.begin(), ratios.end());
  if (!ratios.empty()) state.counters["check_over_run"] = ratios[ratios.size() / 2];
}

// Rendering what a check found as its HTML page against the check itself: each
// iteration times a check, then the page of that diagnosis; the counter
// render_over_check is the median of the per-iteration ratios (target: < 10%).
void render(benchmark::State& state, fs::path dir) {
  auto& l = load(dir);
  fpguard::analysis::CheckOptions o;
  o.precision = fpguard::parse_format("float16");
  std::vector<double> ratios;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto d = fpguard::analysis::check(l.model, {l.values}, o);
    const auto t1 = std::chrono::steady_clock::now();
    std::ostringstream html;
    fpguard::report::write_html(html, {d}, {});
    const auto t2 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(html.str().size());
    ratios.push_back(std::chrono::duration<double>(t2 - t1).count() /
                     std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(ratios.begin(), ratios.end());
  if (!ratios.empty()) state.counters["render_over_check"] = ratios[ratios.size() / 2];
}

// One tensor of the emulated run against its reference (analysis::compare, what the check
// does for every tensor, twice): 1 MiB stays in cache like a transformer's activation,
// 64 MiB does not. The emulated tensor is the reference rounded to float16.
void BM_compare(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  static std::map<std::size_t, std::pair<std::vector<float>, std::vector<float>>> data;
  auto& [r, v] = data[bytes];
  const auto f16 = fpguard::parse_format("float16");
  if (r.empty()) {
    const auto& big = fpguard::bench::input(fpguard::bench::kLarge);
    r.assign(big.begin(), big.begin() + static_cast<std::ptrdiff_t>(bytes / sizeof(float)));
    v.resize(r.size());
    fpguard::round(r, v, f16);
  }
  for (auto _ : state) benchmark::DoNotOptimize(fpguard::analysis::compare(r, v, f16));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_compare)->Arg(1 << 20)->Arg(fpguard::bench::kLarge)->UseRealTime();

// What the check does for every tensor: the emulated and the local run against the
// reference in one pass, with the reference's own statistics (analysis::compare with two
// runs and r_stats). The runs are the reference rounded to float16 and to bfloat16.
void BM_compare_two_runs(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  static std::map<std::size_t, std::array<std::vector<float>, 3>> data;
  auto& [r, v, w] = data[bytes];
  const auto f16 = fpguard::parse_format("float16");
  if (r.empty()) {
    const auto& big = fpguard::bench::input(fpguard::bench::kLarge);
    r.assign(big.begin(), big.begin() + static_cast<std::ptrdiff_t>(bytes / sizeof(float)));
    v.resize(r.size());
    w.resize(r.size());
    fpguard::round(r, v, f16);
    fpguard::round(r, w, fpguard::parse_format("bfloat16"));
  }
  fpguard::TensorStats st;
  for (auto _ : state)
    benchmark::DoNotOptimize(fpguard::analysis::compare(
        r, {std::span<const float>(v), std::span<const float>(w)}, f16, &st));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_compare_two_runs)->Arg(1 << 20)->Arg(fpguard::bench::kLarge)->UseRealTime();

[[maybe_unused]] const bool registered = [] {
  std::vector<fs::path> dirs;
  for (const char* root : {FPGUARD_BENCH_MODELS, FPGUARD_EXAMPLES}) {
    std::error_code ec;
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(root, ec))
      if (fs::exists(e.path() / "model.onnx")) found.push_back(e.path());
    std::sort(found.begin(), found.end());
    dirs.insert(dirs.end(), found.begin(), found.end());
  }
  for (const auto& d : dirs) {
    const std::string name = d.filename().string();
    benchmark::RegisterBenchmark(("BM_model_run/" + name).c_str(), run, d)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_model_check_fp16/" + name).c_str(), check, d)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_model_ratio/" + name).c_str(), ratio, d)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(2.0);
    benchmark::RegisterBenchmark(("BM_model_render/" + name).c_str(), render, d)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
