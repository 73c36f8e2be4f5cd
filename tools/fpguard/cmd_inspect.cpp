// `fpguard inspect`: statistics and per-format safety findings of tensors in files.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/stats.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::cli {

namespace {

struct InspectArgs {
  std::vector<std::string> files;
  std::string formats = "float16,bfloat16,float8_e4m3fn,float8_e5m2";
  double margin = 0.5;
  bool json = false, histogram = false, strict = false;
  int threads = 0;
};

std::vector<Format> parse_format_list(const std::string& list) {
  std::vector<Format> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(parse_format(item));
  if (out.empty()) throw Error("--formats", "no format given");
  return out;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string pow2_string(double scale) {
  int e = 0;
  std::frexp(scale, &e);
  return fmt::format("2^{}", e - 1);
}

std::string num(double v) {
  return std::isnan(v) ? "-" : fmt::format("{:.6g}", v);
}

void print_text(const std::string& name, const Tensor& t, const Stats& s, bool histogram) {
  const TensorStats& ts = s.tensor;
  std::cout << fmt::format(
      "{}  {} {}  count {}  nan {}  +inf {}  -inf {}  zeros {}\n"
      "  min {}  max {}  absmax {}  min|x|>0 {}  mean {}  std {}\n",
      name, to_string(t.dtype()), shape_string(t.shape()), ts.count, ts.nan, ts.posinf, ts.neginf,
      ts.zeros, num(ts.min), num(ts.max), num(ts.absmax), num(ts.min_abs_nonzero), num(ts.mean),
      num(ts.std));
  const char* row = "  {:<16} {:<10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>12} {:>12}\n";
  std::cout << fmt::format(fmt::runtime(row), "format", "verdict", "overflow", "underflow",
                           "subnormal", "headroom", "scale", "scale_sq", "max_rel_err",
                           "mean_rel_err");
  for (const auto& f : s.formats)
    std::cout << fmt::format(fmt::runtime(row), f.format.name, to_string(f.verdict), f.overflow,
                             f.underflow, f.subnormal,
                             std::isfinite(f.headroom_bits) ? fmt::format("{:.2f}", f.headroom_bits)
                                                            : std::string("inf"),
                             pow2_string(f.scale), pow2_string(f.scale_for_square),
                             num(f.max_rel_error), num(f.mean_rel_error));
  if (histogram && !ts.exponent_histogram.empty()) {
    std::uint64_t peak = 0;
    for (const auto& [e, c] : ts.exponent_histogram) peak = std::max(peak, c);
    std::cout << "  exponent histogram (floor(log2|x|): count)\n";
    for (const auto& [e, c] : ts.exponent_histogram) {
      const auto bar = static_cast<std::size_t>(
          std::ceil(40.0 * static_cast<double>(c) / static_cast<double>(peak)));
      std::cout << fmt::format("  {:>6} {:>12} {}\n", e, c, std::string(bar, '#'));
    }
  }
}

nlohmann::ordered_json to_json(const std::string& name, const Tensor& t, const Stats& s) {
  const TensorStats& ts = s.tensor;
  nlohmann::ordered_json j;
  j["name"] = name;
  j["dtype"] = std::string(to_string(t.dtype()));
  j["shape"] = t.shape();
  j["count"] = ts.count;
  j["nan"] = ts.nan;
  j["posinf"] = ts.posinf;
  j["neginf"] = ts.neginf;
  j["zeros"] = ts.zeros;
  j["min"] = json_number(ts.min);
  j["max"] = json_number(ts.max);
  j["absmax"] = json_number(ts.absmax);
  j["min_abs_nonzero"] = json_number(ts.min_abs_nonzero);
  j["mean"] = json_number(ts.mean);
  j["std"] = json_number(ts.std);
  auto hist = nlohmann::ordered_json::object();
  for (const auto& [e, c] : ts.exponent_histogram) hist[std::to_string(e)] = c;
  j["exponent_histogram"] = hist;
  auto formats = nlohmann::ordered_json::object();
  for (const auto& f : s.formats) {
    nlohmann::ordered_json fj;
    fj["overflow"] = f.overflow;
    fj["underflow"] = f.underflow;
    fj["subnormal"] = f.subnormal;
    fj["max_abs_error"] = json_number(f.max_abs_error);
    fj["max_rel_error"] = json_number(f.max_rel_error);
    fj["mean_rel_error"] = json_number(f.mean_rel_error);
    fj["headroom_bits"] = json_number(f.headroom_bits);
    fj["scale"] = f.scale;
    fj["scale_for_square"] = f.scale_for_square;
    fj["precision_loss"] = f.precision_loss;
    fj["verdict"] = std::string(to_string(f.verdict));
    formats[f.format.name] = fj;
  }
  j["formats"] = formats;
  return j;
}

void run(const InspectArgs& a) {
  const std::vector<Format> formats = parse_format_list(a.formats);
  if (!(a.margin > 0 && a.margin <= 1)) throw Error("--margin", "must be in (0, 1]");
  StatsOptions o;
  o.margin = a.margin;
  o.threads = a.threads;
  auto tensors = nlohmann::ordered_json::array();
  bool all_ok = true;
  for (const auto& file : a.files) {
    for (const auto& nt : read_tensors(file)) {
      if (nt.tensor.dtype() == DType::string)
        throw Error(file + ": " + nt.name, "a string tensor has no numeric values to inspect");
      const Stats s = stats(nt.tensor, formats, o);
      for (const auto& f : s.formats) all_ok = all_ok && f.verdict == Verdict::ok;
      if (a.json)
        tensors.push_back(to_json(nt.name, nt.tensor, s));
      else
        print_text(nt.name, nt.tensor, s, a.histogram);
    }
  }
  if (a.json) {
    nlohmann::ordered_json out;
    out["schema_version"] = 1;
    out["tensors"] = tensors;
    std::cout << out.dump(2) << "\n";
  }
  if (a.strict && !all_ok) exit_code = 1;
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect", "Statistics of tensors and how they fare in each format (overflow, ...)");
  auto a = std::make_shared<InspectArgs>();
  cmd->add_option("files", a->files, ".npy, .npz, ONNX TensorProto .pb, or a directory of them")
      ->required();
  cmd->add_option("--formats", a->formats,
                  "Comma-separated formats (default float16,bfloat16,float8_e4m3fn,float8_e5m2)");
  cmd->add_option("--margin", a->margin,
                  "Scale so that absmax lands at or under margin x format max (default 0.5)");
  cmd->add_option("--threads", a->threads, "Threads (default: all cores)");
  cmd->add_flag("--json", a->json, "Print JSON (schema in docs/inspect.md)");
  cmd->add_flag("--histogram", a->histogram, "Print the exponent histogram of each tensor");
  cmd->add_flag("--strict", a->strict, "Exit 1 if any verdict is not ok");
  cmd->footer(
      "Examples:\n  fpguard inspect activations.npy\n"
      "  fpguard inspect grads.npz --formats fp16,bf16 --strict\n"
      "  fpguard inspect test_data_set_0/ --json --histogram");
  cmd->callback([a] { run(*a); });
}

}  // namespace fpguard::cli
