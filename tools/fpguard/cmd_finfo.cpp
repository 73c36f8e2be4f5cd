// `fpguard finfo` and `fpguard iinfo`: format limits, printed as torch prints them, as a
// side-by-side table, or as JSON.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "fpguard/format.hpp"

namespace fpguard::cli {

namespace {

nlohmann::ordered_json to_json(const FInfo& i) {
  nlohmann::ordered_json j;
  j["dtype"] = i.dtype;
  j["bits"] = i.bits;
  j["eps"] = i.eps;
  j["max"] = i.max;
  j["min"] = i.min;
  j["tiny"] = i.tiny;
  j["smallest_normal"] = i.smallest_normal;
  j["smallest_subnormal"] = i.smallest_subnormal;
  j["resolution"] = i.resolution;
  j["maxexp"] = i.maxexp;
  j["minexp"] = i.minexp;
  j["exponent_bits"] = i.exponent_bits;
  j["mantissa_bits"] = i.mantissa_bits;
  j["bias"] = i.bias;
  j["precision"] = i.precision;
  j["has_inf"] = i.has_inf;
  j["nan"] = std::string(to_string(i.nan));
  j["has_subnormals"] = i.has_subnormals;
  return j;
}

void print_table(const std::vector<FInfo>& infos) {
  const char* row =
      "{:<16} {:>4} {:>3} {:>3} {:>5} {:>13} {:>13} {:>13} {:>13} {:>4} {:>5} {:>5}\n";
  std::cout << fmt::format(fmt::runtime(row), "dtype", "bits", "e", "m", "bias", "max",
                           "smallest_normal", "smallest_subn", "eps", "inf", "nan", "subn");
  for (const auto& i : infos)
    std::cout << fmt::format(
        fmt::runtime(row), i.dtype, i.bits, i.exponent_bits, i.mantissa_bits, i.bias,
        fmt::format("{:.6g}", i.max), fmt::format("{:.6g}", i.smallest_normal),
        fmt::format("{:.6g}", i.smallest_subnormal), fmt::format("{:.6g}", i.eps),
        i.has_inf ? "yes" : "no", to_string(i.nan), i.has_subnormals ? "yes" : "no");
}

}  // namespace

void add_finfo(CLI::App& app) {
  auto* cmd = app.add_subcommand("finfo", "Limits of floating-point formats (as torch.finfo)");
  auto names = std::make_shared<std::vector<std::string>>();
  auto all = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  cmd->add_option("formats", *names, "Format names: float16, bf16, float8_e4m3fn, e5m7, ...");
  cmd->add_flag("--all", *all, "Every named format, side by side");
  cmd->add_flag("--json", *json, "Print a JSON array of objects");
  cmd->footer(
      "Examples:\n  fpguard finfo float16\n  fpguard finfo --all\n  fpguard finfo fp8_e4m3fn e5m7 "
      "--json");
  cmd->callback([=] {
    std::vector<FInfo> infos;
    if (*all)
      for (const auto& f : named_formats()) infos.push_back(finfo(f));
    for (const auto& n : *names) infos.push_back(finfo(parse_format(n)));
    if (infos.empty()) throw CLI::ValidationError("give format names or --all");
    if (*json) {
      auto arr = nlohmann::ordered_json::array();
      for (const auto& i : infos) arr.push_back(to_json(i));
      std::cout << arr.dump(2) << "\n";
    } else if (infos.size() == 1) {
      std::cout << to_torch_string(infos[0]) << "\n";
    } else {
      print_table(infos);
    }
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
      auto arr = nlohmann::ordered_json::array();
      for (const auto& i : infos) {
        nlohmann::ordered_json j;
        j["dtype"] = i.dtype;
        j["bits"] = i.bits;
        j["is_signed"] = i.is_signed;
        j["min"] = i.min;
        j["max"] = i.max;
        arr.push_back(j);
      }
      std::cout << arr.dump(2) << "\n";
    } else if (infos.size() == 1) {
      std::cout << to_torch_string(infos[0]) << "\n";
    } else {
      std::cout << fmt::format("{:<8} {:>4} {:>21} {:>21}\n", "dtype", "bits", "min", "max");
      for (const auto& i : infos)
        std::cout << fmt::format("{:<8} {:>4} {:>21} {:>21}\n", i.dtype, i.bits, i.min, i.max);
    }
  });
}

}  // namespace fpguard::cli
