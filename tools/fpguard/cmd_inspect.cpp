// `fpguard inspect`: statistics and per-format safety findings of tensors in files, rendered
// by the report layer (text or JSON).
#include <iostream>
#include <sstream>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/report.hpp"
#include "fpguard/stats.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::cli {

namespace {

struct InspectArgs {
  std::vector<std::string> files;
  std::string formats = "float16,bfloat16,float8_e4m3fn,float8_e5m2";
  double margin = 0.5;
  std::string color = "auto", html;
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

void run(const InspectArgs& a) {
  const std::vector<Format> formats = parse_format_list(a.formats);
  if (!(a.margin > 0 && a.margin <= 1)) throw Error("--margin", "must be in (0, 1]");
  const report::Terminal term =
      report::Terminal::detect(report::parse_color(a.color, "--color " + a.color), true);
  StatsOptions o;
  o.margin = a.margin;
  o.threads = a.threads;
  for (const auto& file : a.files)
    if (!a.html.empty()) check_output_file(file, a.html, "--html");
  std::vector<report::InspectedTensor> seen;  // kept for --json and --html only
  bool all_ok = true;
  for (const auto& file : a.files) {
    for (auto& nt : read_tensors(file)) {
      if (nt.tensor.dtype() == DType::string)
        throw Error(file + ": " + nt.name, "a string tensor has no numeric values to inspect");
      report::InspectedTensor t{nt.name, nt.tensor.dtype(), nt.tensor.shape(),
                                stats(nt.tensor, formats, o)};
      for (const auto& f : t.stats.formats) all_ok = all_ok && f.verdict == Verdict::ok;
      if (!a.json) report::render(std::cout, t, {.histogram = a.histogram}, term);
      if (a.json || !a.html.empty()) seen.push_back(std::move(t));
    }
  }
  if (!a.json) report::render_inspect_legend(std::cout);
  if (!a.html.empty())
    write_file_atomic(a.html, [&](std::ostream& out) { report::write_html(out, seen, {}); });
  if (a.json) std::cout << report::to_json(seen).dump(2) << "\n";
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
  cmd->add_option("--threads", a->threads, "Threads (default: the cores this process may use)");
  cmd->add_flag("--json", a->json, "Print JSON (schema in docs/inspect.md)");
  cmd->add_flag("--histogram", a->histogram, "Print the exponent histogram of each tensor");
  cmd->add_flag("--strict", a->strict, "Exit 1 if any verdict is not ok");
  cmd->add_option("--html", a->html,
                  "Write one self-contained HTML page: statistics and exponent histograms");
  cmd->add_option("--color", a->color,
                  "Colour the verdicts: auto (default; off with NO_COLOR), always, never");
  cmd->footer(
      "Examples:\n  fpguard inspect activations.npy\n"
      "  fpguard inspect grads.npz --formats fp16,bf16 --strict\n"
      "  fpguard inspect test_data_set_0/ --json --histogram");
  cmd->callback([a] { run(*a); });
}

}  // namespace fpguard::cli
