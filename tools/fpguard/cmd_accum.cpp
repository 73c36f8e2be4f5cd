// `fpguard accum`: when a running sum in a format stops growing, and how naive, pairwise
// and Kahan sums of n terms compare.
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

struct AccumArgs {
  std::string formats;
  double value = 1.0, start = 0.0;
  std::uint64_t n = 0;
  bool all = false, json = false;
};

using Json = nlohmann::ordered_json;

Json number(double v) {
  return std::isfinite(v) ? Json(v) : Json(nullptr);
}
Json count(const std::optional<std::uint64_t>& c) {
  return c ? Json(*c) : Json(nullptr);
}

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return "inf";
  return fmt::format("{:.4g}", v);
}

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
  struct Done {
    Format format;
    std::optional<AccumRow> row;
    std::string skipped;
  };
  std::vector<Done> done;
  for (const auto& f : formats) {
    try {
      done.push_back({f, accum_limits(f, o), ""});
    } catch (const Error& e) {
      if (!a.all) throw;  // one format: a bad value is an error; --all: a skipped row
      done.push_back({f, std::nullopt, where_of(e) + ": " + e.problem()});
    }
  }
  auto rows = Json::array();
  const char* row = "{:<16} {:>11} {:>11} {:>12} {:>11} {:>9} {:>10} {:>10} {:>10}\n";
  if (!a.json) {
    std::cout << "S_0 = start, S_k = fl(S_(k-1) + value) in the format: stagnates at k when "
                 "S_k + value rounds back to S_k.\n";
    std::cout << fmt::format(fmt::runtime(row), "format", "value", "start", "stagnates_at",
                             "exact_upto", "n", "naive", "pairwise", "kahan");
  }
  for (const auto& d : done) {
    if (!d.row) {
      if (a.json)
        rows.push_back(Json{{"format", d.format.name}, {"skipped", d.skipped}});
      else
        std::cout << fmt::format("{:<16} (skipped: {})\n", d.format.name, d.skipped);
      continue;
    }
    const AccumRow& r = *d.row;
    if (a.json) {
      Json j;
      j["format"] = r.format;
      j["value"] = r.value;
      j["start"] = r.start;
      j["stagnation_count"] = count(r.stagnation_count);
      j["overflow_count"] = count(r.overflow_count);
      j["exact_count"] = r.exact_count;
      j["n"] = r.n;
      j["naive_rel_error"] = number(r.naive_rel_error);
      j["pairwise_rel_error"] = number(r.pairwise_rel_error);
      j["kahan_rel_error"] = number(r.kahan_rel_error);
      rows.push_back(j);
      continue;
    }
    const std::string stag = r.stagnation_count
                                 ? std::to_string(*r.stagnation_count)
                                 : fmt::format("ovf@{}", r.overflow_count.value_or(0));
    std::cout << fmt::format(fmt::runtime(row), r.format, num(r.value), num(r.start), stag,
                             r.exact_count, r.n, num(r.naive_rel_error), num(r.pairwise_rel_error),
                             num(r.kahan_rel_error));
  }
  if (a.json) {
    Json out;
    out["schema_version"] = 1;
    out["rows"] = rows;
    std::cout << out.dump(2) << "\n";
  }
}

}  // namespace

void add_accum(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "accum", "When a running sum stops growing; naive vs pairwise vs Kahan sums in a format");
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
