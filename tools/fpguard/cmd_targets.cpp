// `fpguard targets`: which formats each accelerator generation runs natively.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"

namespace fpguard::cli {

namespace {

struct TargetsArgs {
  std::string name, format;
  bool json = false;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "-" : s;
}

nlohmann::ordered_json to_json(const Target& t) {
  nlohmann::ordered_json j;
  j["name"] = t.name;
  j["aliases"] = t.aliases;
  j["vendor"] = t.vendor;
  j["products"] = t.products;
  j["matrix_formats"] = t.matrix_formats;
  j["vector_formats"] = t.vector_formats;
  j["integer_formats"] = t.integer_formats;
  j["recommended"] = t.recommended;
  j["fastest"] = t.fastest;
  j["notes"] = t.notes;
  j["sources"] = t.sources;
  return j;
}

void run(const TargetsArgs& a) {
  std::vector<const Target*> list;
  if (!a.name.empty())
    list.push_back(&find_target(a.name));
  else
    for (const auto& t : targets()) list.push_back(&t);
  std::optional<Format> f;
  if (!a.format.empty()) f = parse_format(a.format);

  if (a.json) {
    auto arr = nlohmann::ordered_json::array();
    for (const auto* t : list) {
      auto j = to_json(*t);
      if (f) {
        j["format"] = f->name;
        j["runs"] = runs_in_matrix_units(*t, *f) ? "matrix"
                    : runs_natively(*t, *f)      ? "vector"
                                                 : "no";
      }
      arr.push_back(j);
    }
    nlohmann::ordered_json out;
    out["schema_version"] = 1;
    out["targets"] = arr;
    std::cout << out.dump(2) << "\n";
    return;
  }
  if (!a.name.empty() && !f) {
    const Target& t = *list[0];
    std::cout << fmt::format(
        "{} ({}: {})\n  aliases:       {}\n  matrix units:  {}\n  vector units:  {}\n"
        "  integer:       {}\n  recommended:   {}\n  fastest:       {}\n  notes:         {}\n"
        "  sources:       {}\n",
        t.name, t.vendor, t.products, join(t.aliases), join(t.matrix_formats),
        join(t.vector_formats), join(t.integer_formats), t.recommended, t.fastest, t.notes,
        t.sources);
    return;
  }
  if (f) {
    std::cout << fmt::format("{:<16} {:<7} {}\n", "target", "runs", f->name);
    for (const auto* t : list)
      std::cout << fmt::format("{:<16} {:<7} {}\n", t->name,
                               runs_in_matrix_units(*t, *f) ? "matrix"
                               : runs_natively(*t, *f)      ? "vector"
                                                            : "no",
                               t->products);
    return;
  }
  const char* row = "{:<16} {:<7} {:<15} {:<15} {}\n";
  std::cout << fmt::format(fmt::runtime(row), "target", "vendor", "recommended", "fastest",
                           "matrix-unit formats");
  for (const auto* t : list)
    std::cout << fmt::format(fmt::runtime(row), t->name, t->vendor, t->recommended, t->fastest,
                             join(t->matrix_formats));
}

}  // namespace

void add_targets(CLI::App& app) {
  auto* cmd = app.add_subcommand("targets", "Formats each accelerator runs natively");
  auto a = std::make_shared<TargetsArgs>();
  cmd->add_option("name", a->name, "A target (sm_86, h100, cdna3, sapphire-rapids, ...)");
  cmd->add_option("--format", a->format, "Show whether each target runs this format natively");
  cmd->add_flag("--json", a->json, "Print JSON (schema in docs/experiments.md)");
  cmd->footer(
      "Examples:\n  fpguard targets\n  fpguard targets sm_86\n"
      "  fpguard targets --format float8_e4m3fnuz");
  cmd->callback([a] { run(*a); });
}

}  // namespace fpguard::cli
