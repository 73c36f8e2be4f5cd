// `fpguard gemm-error`: how far a matrix product in a low-precision format is from the
// truth, per size and format, next to the classical error bounds.
#include <iostream>
#include <sstream>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/report.hpp"

namespace fpguard::cli {

namespace {

struct GemmErrorArgs {
  std::string sizes = "128,256,512,1024";
  std::string formats = "fp16,bf16,tf32,float8_e4m3fn,float8_e5m2,fp32";
  std::string accumulate = "fp32", accumulation = "auto", output = "same";
  std::string distribution = "normal", color = "auto";
  int samples = 1, threads = 0;
  std::uint64_t seed = 0;
  bool json = false;
};

void run(const GemmErrorArgs& a) {
  GemmErrorOptions o;
  o.sizes = parse_sizes(a.sizes);
  std::stringstream ss(a.formats);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) o.formats.push_back(parse_any_format(item));
  if (o.formats.empty()) throw Error("--formats", "no format given");
  o.accumulate = parse_format_or_same(a.accumulate);
  o.output = parse_format_or_same(a.output);
  o.order = parse_accumulation_order(a.accumulation);
  o.distribution = parse_distribution(a.distribution);
  if (a.samples < 1) throw Error("--samples", "must be at least 1");
  o.samples = a.samples;
  o.seed = a.seed;
  o.threads = a.threads;
  const report::ColorMode color = report::parse_color(a.color, "--color " + a.color);
  const report::GemmErrorTable t{o.distribution, o.seed, gemm_error(o)};
  if (a.json)
    std::cout << report::to_json(t).dump(2) << "\n";
  else
    report::render(std::cout, t, report::Terminal::detect(color, true));
}

}  // namespace

void add_gemm_error(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "gemm-error", "Error of an n x n matrix product in low precision, against exact truth");
  mark_runs_models(*cmd);
  auto a = std::make_shared<GemmErrorArgs>();
  cmd->add_option("--sizes", a->sizes, "Comma-separated n (default 128,256,512,1024)");
  cmd->add_option("--formats", a->formats,
                  "Input formats, scalar or scaled (mxfp8_e4m3, nvfp4, fp8, ...; default "
                  "fp16,bf16,tf32,float8_e4m3fn,float8_e5m2,fp32)");
  cmd->add_option("--accumulate", a->accumulate,
                  "Accumulation format: fp32 (default), fp16, bf16, any format, or same");
  cmd->add_option("--accumulation", a->accumulation,
                  "auto (default: library for fp32, else sequential), library, sequential, "
                  "pairwise, blocked:K");
  cmd->add_option("--output", a->output, "Format C is rounded to: same (default) or a format");
  cmd->add_option("--distribution", a->distribution, "normal (default) or uniform:LO:HI");
  cmd->add_option("--samples", a->samples, "Matrix pairs per size (default 1)");
  cmd->add_option("--seed", a->seed, "Seed (default 0)");
  cmd->add_option("--threads", a->threads, "Threads (default: the cores this process may use)");
  cmd->add_flag("--json", a->json, "Print JSON (schema in docs/experiments.md)");
  cmd->add_option("--color", a->color,
                  "Colour a bound violation: auto (default; off with NO_COLOR), always, never");
  cmd->footer(
      "Examples:\n  fpguard gemm-error --sizes 256,1024 --formats fp16,bf16\n"
      "  fpguard gemm-error --formats fp16 --accumulate fp16 --sizes 64,256,1024\n"
      "  fpguard gemm-error --formats float8_e4m3fn --accumulate e8m13 --accumulation "
      "blocked:128 --output fp32\n"
      "  fpguard gemm-error --formats mxfp8_e4m3,mxfp4_e2m1,nvfp4,fp8 --output fp32\n"
      "See docs/experiments.md for every field, the truth and the bounds.");
  cmd->callback([a] { run(*a); });
}

}  // namespace fpguard::cli
