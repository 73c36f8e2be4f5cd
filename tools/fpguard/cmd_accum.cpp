// `fpguard accum`: when a running sum in a format stops growing, and how naive, pairwise
// and Kahan sums of n terms compare.
#include <iostream>
#include <sstream>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/report.hpp"

namespace fpguard::cli {

namespace {

struct AccumArgs {
  std::string formats;
  double value = 1.0, start = 0.0;
  std::uint64_t n = 0;
  bool all = false, json = false;
};

void run(const AccumArgs& a) {
  std::vector<Format> formats;
  if (a.all) {
    if (!a.formats.empty()) throw Error("--all", "give either --format or --all");
    formats = accum_formats();
  } else {
    std::stringstream ss(a.formats);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) formats.push_back(parse_format(item));
    if (formats.empty()) throw Error("accum", "give --format F (or a list), or --all");
  }
  AccumOptions o;
  o.value = a.value;
  o.start = a.start;
  o.n = a.n;
  // Every row first, so that an error leaves nothing on stdout.
  std::vector<report::AccumEntry> entries;
  for (const auto& f : formats) {
    try {
      entries.push_back({f.name, accum_limits(f, o), ""});
    } catch (const Error& e) {
      if (!a.all) throw;  // one format: a bad value is an error; --all: a skipped row
      entries.push_back({f.name, std::nullopt, where_of(e) + ": " + problem_of(e)});
    }
  }
  if (a.json)
    std::cout << report::to_json(entries).dump(2) << "\n";
  else
    report::render(std::cout, entries,
                   report::Terminal::detect(report::ColorMode::automatic, true));
}

}  // namespace

void add_accum(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "accum", "When a running sum stops growing; naive vs pairwise vs Kahan sums in a format");
  mark_runs_models(*cmd);
  auto a = std::make_shared<AccumArgs>();
  cmd->add_option("--format", a->formats, "Format(s), comma-separated (fp16, bf16, ...)");
  cmd->add_flag("--all", a->all, "Every named format but e8m0 (no sign or zero)");
  cmd->add_option("--value", a->value, "The increment (default 1.0), rounded into the format");
  cmd->add_option("--start", a->start,
                  "The accumulator's initial value (default 0), e.g. a weight receiving updates");
  cmd->add_option("--n", a->n,
                  "Terms of the naive/pairwise/Kahan sums (default 10^5, or the largest power "
                  "of ten whose sum the format holds)");
  cmd->add_flag("--json", a->json, "Print JSON (schema in docs/experiments.md)");
  cmd->footer(
      "Examples:\n  fpguard accum --format fp16\n  fpguard accum --all --value 0.1\n"
      "  fpguard accum --format bf16 --value 1e-3 --start 1   # weight updates lost?");
  cmd->callback([a] { run(*a); });
}

}  // namespace fpguard::cli
