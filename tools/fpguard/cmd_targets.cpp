// `fpguard targets`: which formats each accelerator generation runs natively.
#include <iostream>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/report.hpp"

namespace fpguard::cli {

namespace {

struct TargetsArgs {
  std::string name, format;
  bool json = false;
};

void run(const TargetsArgs& a) {
  report::TargetTable t;
  if (!a.name.empty())
    t.targets.push_back(find_target(a.name));
  else
    t.targets = targets();
  const auto scaled = a.format.empty() ? std::nullopt : find_scaled_format(a.format);
  if (!a.format.empty() && !scaled) t.format = parse_format(a.format);
  if (scaled && !a.json)  // JSON: every target lists its scaled_formats
    return report::render(std::cout, t.targets, *scaled,
                          report::Terminal::detect(report::ColorMode::automatic, true));
  if (a.json)
    std::cout << report::to_json(t).dump(2) << "\n";
  else if (!a.name.empty() && !t.format)
    report::render_detail(std::cout, t.targets.front());
  else
    report::render(std::cout, t, report::Terminal::detect(report::ColorMode::automatic, true));
}

}  // namespace

void add_targets(CLI::App& app) {
  auto* cmd = app.add_subcommand("targets", "Formats each accelerator runs natively");
  auto a = std::make_shared<TargetsArgs>();
  cmd->add_option("name", a->name, "A target (sm_86, h100, cdna3, sapphire-rapids, ...)");
  cmd->add_option("--format", a->format,
                  "Show whether each target runs this format (scalar or scaled) natively");
  cmd->add_flag("--json", a->json, "Print JSON (schema in docs/experiments.md)");
  cmd->footer(
      "Examples:\n  fpguard targets\n  fpguard targets sm_86\n"
      "  fpguard targets --format float8_e4m3fnuz\n  fpguard targets --format nvfp4");
  cmd->callback([a] { run(*a); });
}

}  // namespace fpguard::cli
