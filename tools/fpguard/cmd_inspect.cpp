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
  int axis = -1;
};

struct FormatList {
  std::vector<Format> scalar;
  std::vector<ScaledFormat> scaled;
};

FormatList parse_format_list(const std::string& list) {
  FormatList out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto f = parse_any_format(item);
    if (auto* scaled = std::get_if<ScaledFormat>(&f))
      out.scaled.push_back(*scaled);
    else
      out.scalar.push_back(std::get<Format>(f));
  }
  if (out.scalar.empty() && out.scaled.empty()) throw Error("--formats", "no format given");
  return out;
}

void run(const InspectArgs& a) {
  const FormatList formats = parse_format_list(a.formats);
  if (!(a.margin > 0 && a.margin <= 1)) throw Error("--margin", "must be in (0, 1]");
  const report::Terminal term =
      report::Terminal::detect(report::parse_color(a.color, "--color " + a.color), true);
  StatsOptions o;
  o.margin = a.margin;
  o.threads = a.threads;
  // The exponent histogram only where it is shown.
  o.histogram = a.histogram || a.json || !a.html.empty();
  // Nothing reads a tensor after its statistics but the scaled formats' pass.
  o.release_pages = formats.scaled.empty();
  for (const auto& file : a.files)
    if (!a.html.empty()) check_output_file(file, a.html, "--html");
  std::vector<report::InspectedTensor> seen;  // kept for --json and --html only
  bool all_ok = true;
  for (const auto& file : a.files) {
    for (auto& nt : read_tensors(file)) {
      if (nt.tensor.dtype() == DType::string)
        throw Error(file + ": " + nt.name, "a string tensor has no numeric values to inspect");
      report::InspectedTensor t{.name = nt.name,
                                .dtype = nt.tensor.dtype(),
                                .shape = nt.tensor.shape(),
                                .stats = stats(nt.tensor, formats.scalar, o)};
      for (const auto& f : formats.scaled) {
        try {
          t.scaled.push_back(scaled_stats(nt.tensor, f, a.axis, o));
        } catch (const Error& e) {  // the layout's only bad input is the axis
          throw Error(file + ": " + nt.name,
                      "--axis " + std::to_string(a.axis) + " is " + e.problem());
        }
      }
      for (const auto& f : t.stats.formats) all_ok = all_ok && f.verdict == Verdict::ok;
      for (const auto& f : t.scaled) all_ok = all_ok && f.verdict == Verdict::ok;
      if (!a.json) report::render(std::cout, t, {.histogram = a.histogram}, term);
      if (a.json || !a.html.empty()) seen.push_back(std::move(t));
    }
  }
  if (!a.json && !formats.scalar.empty()) report::render_inspect_legend(std::cout);
  if (!a.json && !formats.scaled.empty()) report::render_scaled_legend(std::cout);
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
                  "Comma-separated formats, scaled ones too (mxfp8_e4m3, nvfp4, fp8, ...; default "
                  "float16,bfloat16,float8_e4m3fn,float8_e5m2)");
  cmd->add_option("--margin", a->margin,
                  "Scale so that absmax lands at or under margin x format max (default 0.5)");
  cmd->add_option("--axis", a->axis,
                  "Axis the blocks (or channels) of scaled formats follow (default -1, the last)");
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
      "  fpguard inspect weights.npy --formats mxfp8_e4m3,mxfp4_e2m1,nvfp4 --axis 1\n"
      "  fpguard inspect test_data_set_0/ --json --histogram");
  cmd->callback([a] { run(*a); });
}

}  // namespace fpguard::cli
