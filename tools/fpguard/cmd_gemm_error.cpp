// `fpguard gemm-error`: how far a matrix product in a low-precision format is from the
// truth, per size and format, next to the classical error bounds.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"

namespace fpguard::cli {

namespace {

struct GemmErrorArgs {
  std::string sizes = "128,256,512,1024";
  std::string formats = "fp16,bf16,tf32,float8_e4m3fn,float8_e5m2,fp32";
  std::string accumulate = "fp32", accumulation = "auto", output = "same";
  std::string distribution = "normal";
  int samples = 1, threads = 0;
  std::uint64_t seed = 0;
  bool json = false;
};

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return "inf";
  return fmt::format("{:.3g}", v);
}

void run(const GemmErrorArgs& a) {
  GemmErrorOptions o;
  o.sizes = parse_sizes(a.sizes);
  std::stringstream ss(a.formats);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) o.formats.push_back(parse_format(item));
  if (o.formats.empty()) throw Error("--formats", "no format given");
  o.accumulate = parse_format_or_same(a.accumulate);
  o.output = parse_format_or_same(a.output);
  o.order = parse_accumulation_order(a.accumulation);
  o.distribution = parse_distribution(a.distribution);
  if (a.samples < 1) throw Error("--samples", "must be at least 1");
  o.samples = a.samples;
  o.seed = a.seed;
  o.threads = a.threads;
  const auto rows = gemm_error(o);

  if (a.json) {
    auto arr = nlohmann::ordered_json::array();
    for (const auto& r : rows) {
      nlohmann::ordered_json j;
      j["size"] = r.size;
      j["format"] = r.format;
      j["accumulate"] = r.accumulate;
      j["accumulation"] = r.accumulation;
      j["output"] = r.output;
      j["samples"] = r.samples;
      j["mean_abs_error"] = json_number(r.mean_abs_error);
      j["max_abs_error"] = json_number(r.max_abs_error);
      j["max_rel_error"] = json_number(r.max_rel_error);
      j["normwise_error"] = json_number(r.normwise_error);
      j["input_rounding_error"] = json_number(r.input_rounding_error);
      j["bound_deterministic"] = json_number(r.bound_deterministic);
      j["bound_probabilistic"] = json_number(r.bound_probabilistic);
      j["rel_floor"] = json_number(r.rel_floor);
      j["overflow"] = r.overflow;
      j["bound_violations"] = r.bound_violations ? nlohmann::ordered_json(*r.bound_violations)
                                                 : nlohmann::ordered_json(nullptr);
      arr.push_back(j);
    }
    nlohmann::ordered_json out;
    out["schema_version"] = 1;
    out["distribution"] = to_string(o.distribution);
    out["seed"] = o.seed;
    out["rows"] = arr;
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format(
      "A, B: n x n, entries {}, {} sample{}, seed {}. Errors of C against the truth from the "
      "rounded inputs; input = input-rounding error; bounds normwise.\n",
      to_string(o.distribution), o.samples, o.samples == 1 ? "" : "s", o.seed);
  const char* row = "{:>6} {:<15} {:<10} {:<11} {:<15} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n";
  std::cout << fmt::format(fmt::runtime(row), "n", "format", "accumulate", "order", "output",
                           "mean_abs", "max_abs", "max_rel", "normwise", "input", "bound_det",
                           "bound_prob");
  for (const auto& r : rows) {
    std::string note;
    if (r.overflow) note = fmt::format("  ({} outputs overflowed)", r.overflow);
    if (r.bound_violations && *r.bound_violations)
      note += fmt::format("  ({} elements above the bound: please report)", *r.bound_violations);
    std::cout << fmt::format(
        fmt::runtime(row), r.size, r.format, r.accumulate, r.accumulation, r.output,
        num(r.mean_abs_error), num(r.max_abs_error), num(r.max_rel_error), num(r.normwise_error),
        num(r.input_rounding_error), num(r.bound_deterministic), num(r.bound_probabilistic));
    if (!note.empty()) std::cout << note << "\n";
  }
}

}  // namespace

void add_gemm_error(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "gemm-error", "Error of an n x n matrix product in low precision, against exact truth");
  auto a = std::make_shared<GemmErrorArgs>();
  cmd->add_option("--sizes", a->sizes, "Comma-separated n (default 128,256,512,1024)");
  cmd->add_option("--formats", a->formats,
                  "Input formats (default fp16,bf16,tf32,float8_e4m3fn,float8_e5m2,fp32)");
  cmd->add_option("--accumulate", a->accumulate,
                  "Accumulation format: fp32 (default), fp16, bf16, any format, or same");
  cmd->add_option("--accumulation", a->accumulation,
                  "auto (default: library for fp32, else sequential), library, sequential, "
                  "pairwise, blocked:K");
  cmd->add_option("--output", a->output, "Format C is rounded to: same (default) or a format");
  cmd->add_option("--distribution", a->distribution, "normal (default) or uniform:LO:HI");
  cmd->add_option("--samples", a->samples, "Matrix pairs per size (default 1)");
  cmd->add_option("--seed", a->seed, "Seed (default 0)");
  cmd->add_option("--threads", a->threads, "Threads (default: all cores)");
  cmd->add_flag("--json", a->json, "Print JSON (schema in docs/experiments.md)");
  cmd->footer(
      "Examples:\n  fpguard gemm-error --sizes 256,1024 --formats fp16,bf16\n"
      "  fpguard gemm-error --formats fp16 --accumulate fp16 --sizes 64,256,1024\n"
      "  fpguard gemm-error --formats float8_e4m3fn --accumulate e8m13 --accumulation "
      "blocked:128 --output fp32\n"
      "See docs/experiments.md for every field, the truth and the bounds.");
  cmd->callback([a] { run(*a); });
}

}  // namespace fpguard::cli
