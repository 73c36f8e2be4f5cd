// `fpguard finfo` and `fpguard iinfo`: format limits, printed as torch prints them, as a
// side-by-side table, or as JSON (both rendered by the report layer).
#include <iostream>

#include "cli.hpp"
#include "fpguard/format.hpp"
#include "fpguard/report.hpp"

namespace fpguard::cli {

namespace {

// Side-by-side tables never colour; they are fitted to the terminal's width.
report::Terminal terminal() {
  return report::Terminal::detect(report::ColorMode::never, true);
}

}  // namespace

void add_finfo(CLI::App& app) {
  auto* cmd = app.add_subcommand("finfo", "Limits of floating-point formats (as torch.finfo)");
  auto names = std::make_shared<std::vector<std::string>>();
  auto all = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  cmd->add_option("formats", *names,
                  "Format names: float16, bf16, float8_e4m3fn, e5m7, mxfp8_e4m3, nvfp4, ...");
  cmd->add_flag("--all", *all, "Every named format, side by side");
  cmd->add_flag("--json", *json, "Print a JSON array of objects");
  cmd->footer(
      "Examples:\n  fpguard finfo float16\n  fpguard finfo --all\n  fpguard finfo fp8_e4m3fn e5m7 "
      "--json\n  fpguard finfo mxfp4_e2m1 nvfp4 block:float8_e4m3fn:e8m0:16");
  cmd->callback([=] {
    std::vector<FInfo> infos;
    std::vector<ScaledInfo> scaled;  // printed after the scalar formats
    if (*all)
      for (const auto& f : named_formats()) infos.push_back(finfo(f));
    for (const auto& n : *names) {
      if (auto s = find_scaled_format(n))
        scaled.push_back(finfo(*s));
      else
        infos.push_back(finfo(parse_format(n)));
    }
    if (infos.empty() && scaled.empty()) throw CLI::ValidationError("give format names or --all");
    if (*json) {
      auto arr = report::Json::array();
      for (const auto& i : infos) arr.push_back(report::to_json(i));
      for (const auto& i : scaled) arr.push_back(report::to_json(i));
      std::cout << arr.dump(2) << "\n";
      return;
    }
    if (infos.size() == 1)
      std::cout << to_torch_string(infos[0]) << "\n";
    else if (!infos.empty())
      report::render(std::cout, infos, terminal());
    for (const auto& i : scaled) report::render(std::cout, i);
  });
}

void add_iinfo(CLI::App& app) {
  auto* cmd = app.add_subcommand("iinfo", "Limits of integer types (as torch.iinfo)");
  auto names = std::make_shared<std::vector<std::string>>();
  auto all = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  cmd->add_option("types", *names,
                  "int8, uint8, int16, uint16, int32, uint32, int64, uint64, int4, uint4");
  cmd->add_flag("--all", *all, "Every integer type, side by side");
  cmd->add_flag("--json", *json, "Print a JSON array of objects");
  cmd->footer("Examples:\n  fpguard iinfo int8\n  fpguard iinfo --all --json");
  cmd->callback([=] {
    std::vector<IInfo> infos;
    if (*all) infos = integer_types();
    for (const auto& n : *names) infos.push_back(iinfo(n));
    if (infos.empty()) throw CLI::ValidationError("give integer type names or --all");
    if (*json) {
      auto arr = report::Json::array();
      for (const auto& i : infos) arr.push_back(report::to_json(i));
      std::cout << arr.dump(2) << "\n";
    } else if (infos.size() == 1) {
      std::cout << to_torch_string(infos[0]) << "\n";
    } else {
      report::render(std::cout, infos, terminal());
    }
  });
}

}  // namespace fpguard::cli
