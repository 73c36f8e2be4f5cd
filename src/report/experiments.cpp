// The precision experiments (`gemm-error`, `accum`, `targets`) as JSON
// (docs/experiments.md documents every field), read back, and as text tables.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <ostream>

#include "fpguard/error.hpp"
#include "fpguard/report.hpp"
#include "json_reader.hpp"

namespace fpguard::report {

namespace {

using detail::JsonReader;

Json optional_count(const std::optional<std::uint64_t>& c) {
  return c ? Json(*c) : Json(nullptr);
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "-" : s;
}

// ---- gemm-error ----------------------------------------------------------------------

Json gemm_row_json(const GemmErrorRow& r) {
  return {{"size", r.size},
          {"format", r.format},
          {"accumulate", r.accumulate},
          {"accumulation", r.accumulation},
          {"output", r.output},
          {"samples", r.samples},
          {"mean_abs_error", number(r.mean_abs_error)},
          {"max_abs_error", number(r.max_abs_error)},
          {"max_rel_error", number(r.max_rel_error)},
          {"normwise_error", number(r.normwise_error)},
          {"input_rounding_error", number(r.input_rounding_error)},
          {"input_rounding_bound", number(r.input_rounding_bound)},
          {"bound_deterministic", number(r.bound_deterministic)},
          {"bound_probabilistic", number(r.bound_probabilistic)},
          {"rel_floor", number(r.rel_floor)},
          {"overflow", r.overflow},
          {"bound_violations", optional_count(r.bound_violations)},
          {"input_bound_violations", optional_count(r.input_bound_violations)}};
}

GemmErrorRow gemm_row_at(const JsonReader& r, const Json& j, const std::string& path) {
  GemmErrorRow row;
  row.size = r.i64(j, "size", path);
  row.format = r.str(j, "format", path);
  row.accumulate = r.str(j, "accumulate", path);
  row.accumulation = r.str(j, "accumulation", path);
  row.output = r.str(j, "output", path);
  const std::uint64_t samples = r.u64(j, "samples", path);
  if (samples < 1 || samples > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    r.fail(JsonReader::field(path, "samples"), "is not a number of samples");
  row.samples = static_cast<int>(samples);
  row.mean_abs_error = r.real(j, "mean_abs_error", path);
  row.max_abs_error = r.real(j, "max_abs_error", path);
  row.max_rel_error = r.real(j, "max_rel_error", path);
  row.normwise_error = r.real(j, "normwise_error", path);
  row.input_rounding_error = r.real(j, "input_rounding_error", path);
  row.input_rounding_bound = r.real(j, "input_rounding_bound", path, INFINITY);
  // null: no bound (n u >= 1, or C_ref == 0), which the library holds as +inf
  row.bound_deterministic = r.real(j, "bound_deterministic", path, INFINITY);
  row.bound_probabilistic = r.real(j, "bound_probabilistic", path, INFINITY);
  row.rel_floor = r.real(j, "rel_floor", path);
  row.overflow = r.u64(j, "overflow", path);
  row.bound_violations = r.opt_u64(j, "bound_violations", path);
  row.input_bound_violations = r.opt_u64(j, "input_bound_violations", path);
  return row;
}

// ---- accum ---------------------------------------------------------------------------

Json accum_row_json(const AccumRow& r) {
  return {{"format", r.format},
          {"value", r.value},
          {"start", r.start},
          {"stagnation_count", optional_count(r.stagnation_count)},
          {"overflow_count", optional_count(r.overflow_count)},
          {"exact_count", r.exact_count},
          {"n", r.n},
          {"naive_rel_error", number(r.naive_rel_error)},
          {"pairwise_rel_error", number(r.pairwise_rel_error)},
          {"kahan_rel_error", number(r.kahan_rel_error)}};
}

AccumEntry accum_entry_at(const JsonReader& r, const Json& j, const std::string& path) {
  AccumEntry e;
  e.format = r.str(j, "format", path);
  if (j.contains("skipped")) {
    e.skipped = r.str(j, "skipped", path);
    return e;
  }
  AccumRow row;
  row.format = e.format;
  row.value = r.real(j, "value", path);
  row.start = r.real(j, "start", path);
  row.stagnation_count = r.opt_u64(j, "stagnation_count", path);
  row.overflow_count = r.opt_u64(j, "overflow_count", path);
  row.exact_count = r.u64(j, "exact_count", path);
  row.n = r.u64(j, "n", path);
  // null: the sum overflowed, which the library holds as +inf
  row.naive_rel_error = r.real(j, "naive_rel_error", path, INFINITY);
  row.pairwise_rel_error = r.real(j, "pairwise_rel_error", path, INFINITY);
  row.kahan_rel_error = r.real(j, "kahan_rel_error", path, INFINITY);
  e.row = std::move(row);
  return e;
}

// ---- targets -------------------------------------------------------------------------

Json target_json(const Target& t) {
  return {{"name", t.name},
          {"aliases", t.aliases},
          {"vendor", t.vendor},
          {"products", t.products},
          {"matrix_formats", t.matrix_formats},
          {"vector_formats", t.vector_formats},
          {"integer_formats", t.integer_formats},
          {"recommended", t.recommended},
          {"fastest", t.fastest},
          {"notes", t.notes},
          {"sources", t.sources},
          {"scaled_formats", t.scaled_formats}};
}

Target target_at(const JsonReader& r, const Json& j, const std::string& path) {
  Target t;
  t.name = r.str(j, "name", path);
  t.aliases = r.strings(j, "aliases", path);
  t.vendor = r.str(j, "vendor", path);
  t.products = r.str(j, "products", path);
  t.matrix_formats = r.strings(j, "matrix_formats", path);
  t.vector_formats = r.strings(j, "vector_formats", path);
  t.integer_formats = r.strings(j, "integer_formats", path);
  t.recommended = r.str(j, "recommended", path);
  t.fastest = r.str(j, "fastest", path);
  t.notes = r.str(j, "notes", path);
  t.sources = r.str(j, "sources", path);
  // Written since the scaled formats (issue 21); older files have none.
  if (j.contains("scaled_formats")) t.scaled_formats = r.strings(j, "scaled_formats", path);
  return t;
}

// The format a targets entry was asked about ("format", with "runs" derived from it).
std::optional<Format> asked_format(const JsonReader& r, const Json& j, const Target& t,
                                   const std::string& path) {
  if (!j.contains("format")) return std::nullopt;
  const std::string name = r.str(j, "format", path);
  Format f;
  try {
    f = parse_format(name);
  } catch (const Error& e) {
    r.fail(JsonReader::field(path, "format"), "is not a format (" + e.problem() + ")");
  }
  if (r.str(j, "runs", path) != runs_where(t, f))
    r.fail(JsonReader::field(path, "runs"),
           "is not \"" + std::string(runs_where(t, f)) + "\", where the target runs " + f.name);
  return f;
}

}  // namespace

// ---- gemm-error ----------------------------------------------------------------------

Json to_json(const GemmErrorTable& t) {
  Json rows = Json::array();
  for (const auto& r : t.rows) rows.push_back(gemm_row_json(r));
  return {{"schema_version", kExperimentsSchema},
          {"distribution", to_string(t.distribution)},
          {"seed", t.seed},
          {"rows", rows}};
}

GemmErrorTable gemm_error_from_json(const Json& j, const std::string& where) {
  const JsonReader r{where};
  r.schema(j, kExperimentsSchema, "gemm-error output");
  GemmErrorTable t;
  try {
    t.distribution = parse_distribution(r.str(j, "distribution", ""));
  } catch (const Error& e) {
    r.fail("\"distribution\"", "is not a distribution (" + e.problem() + ")");
  }
  t.seed = r.u64(j, "seed", "");
  const Json& rows = r.array(j, "rows", "");
  for (std::size_t i = 0; i < rows.size(); ++i)
    t.rows.push_back(gemm_row_at(r, rows[i], detail::item("", "rows", i)));
  return t;
}

void render(std::ostream& out, const GemmErrorTable& t, const Terminal& term) {
  const int samples = t.rows.empty() ? 1 : t.rows.front().samples;
  out << fmt::format(
      "A, B: n x n, entries {}, {} sample{}, seed {}. Errors of C against the truth from the "
      "rounded inputs; input = input-rounding error, input_bound its bound; bounds normwise.\n",
      to_string(t.distribution), samples, samples == 1 ? "" : "s", t.seed);
  Table table({{"n", Align::right},
               {"format"},
               {"accumulate"},
               {"order"},
               {"output"},
               {"mean_abs", Align::right},
               {"max_abs", Align::right},
               {"max_rel", Align::right},
               {"normwise", Align::right},
               {"input", Align::right},
               {"input_bound", Align::right},
               {"bound_det", Align::right},
               {"bound_prob", Align::right}});
  std::string notes;
  for (const auto& r : t.rows) {
    table.add({std::to_string(r.size), r.format, r.accumulate, r.accumulation, r.output,
               num(r.mean_abs_error), num(r.max_abs_error), num(r.max_rel_error),
               num(r.normwise_error), num(r.input_rounding_error), num(r.input_rounding_bound),
               num(r.bound_deterministic), num(r.bound_probabilistic)});
    const std::string row = fmt::format("  n = {}, {}: ", r.size, r.format);
    if (r.overflow) notes += row + count(r.overflow) + " outputs overflowed\n";
    if (r.bound_violations && *r.bound_violations)
      notes += row +
               term.bad(count(*r.bound_violations) + " elements above the bound: please report") +
               "\n";
    if (r.input_bound_violations && *r.input_bound_violations)
      notes += row +
               term.bad(count(*r.input_bound_violations) +
                        " elements above the input-rounding bound: please report") +
               "\n";
  }
  table.render(out, term.width, "");
  out << notes;
}

// ---- accum ---------------------------------------------------------------------------

Json to_json(const std::vector<AccumEntry>& entries) {
  Json rows = Json::array();
  for (const auto& e : entries)
    rows.push_back(e.row ? accum_row_json(*e.row)
                         : Json{{"format", e.format}, {"skipped", e.skipped}});
  return {{"schema_version", kExperimentsSchema}, {"rows", rows}};
}

std::vector<AccumEntry> accum_from_json(const Json& j, const std::string& where) {
  const JsonReader r{where};
  r.schema(j, kExperimentsSchema, "accum output");
  const Json& rows = r.array(j, "rows", "");
  std::vector<AccumEntry> out;
  for (std::size_t i = 0; i < rows.size(); ++i)
    out.push_back(accum_entry_at(r, rows[i], detail::item("", "rows", i)));
  return out;
}

void render(std::ostream& out, const std::vector<AccumEntry>& entries, const Terminal& term) {
  out << "S_0 = start, S_k = fl(S_(k-1) + value) in the format: stagnates at k when S_k + value "
         "rounds back to S_k.\n";
  Table table({{"format"},
               {"value", Align::right},
               {"start", Align::right},
               {"stagnates_at", Align::right},
               {"exact_upto", Align::right},
               {"n", Align::right},
               {"naive", Align::right},
               {"pairwise", Align::right},
               {"kahan", Align::right}});
  std::string skipped;
  for (const auto& e : entries) {
    if (!e.row) {
      table.add({e.format, "-", "-", "-", "-", "-", "-", "-", "-"});
      skipped += fmt::format("{} skipped: {}\n", e.format, e.skipped);
      continue;
    }
    const AccumRow& r = *e.row;
    const std::string stag = r.stagnation_count ? count(*r.stagnation_count)
                                                : "ovf@" + count(r.overflow_count.value_or(0));
    table.add({r.format, num(r.value), num(r.start), stag, count(r.exact_count), count(r.n),
               num(r.naive_rel_error), num(r.pairwise_rel_error), num(r.kahan_rel_error)});
  }
  table.render(out, term.width, "");
  out << skipped;
}

// ---- targets -------------------------------------------------------------------------

std::string_view runs_where(const Target& t, const Format& f) {
  return runs_in_matrix_units(t, f) ? "matrix" : runs_natively(t, f) ? "vector" : "no";
}

Json to_json(const TargetTable& t) {
  Json arr = Json::array();
  for (const auto& target : t.targets) {
    Json j = target_json(target);
    if (t.format) {
      j["format"] = t.format->name;
      j["runs"] = std::string(runs_where(target, *t.format));
    }
    arr.push_back(std::move(j));
  }
  return {{"schema_version", kExperimentsSchema}, {"targets", arr}};
}

TargetTable targets_from_json(const Json& j, const std::string& where) {
  const JsonReader r{where};
  r.schema(j, kExperimentsSchema, "targets output");
  const Json& targets = r.array(j, "targets", "");
  TargetTable t;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const std::string path = detail::item("", "targets", i);
    t.targets.push_back(target_at(r, targets[i], path));
    const auto f = asked_format(r, targets[i], t.targets.back(), path);
    if (i > 0 && f.has_value() != t.format.has_value())
      r.fail(JsonReader::field(path, "format"), f ? "is unexpected" : "is missing");
    if (f && t.format && f->name != t.format->name)
      r.fail(JsonReader::field(path, "format"), "differs from the first target's");
    t.format = f;
  }
  return t;
}

void render(std::ostream& out, const TargetTable& t, const Terminal& term) {
  if (t.format) {
    Table table({{"target"}, {"runs"}, {t.format->name}});
    for (const auto& target : t.targets)
      table.add({target.name, std::string(runs_where(target, *t.format)), target.products});
    table.render(out, term.width, "");
    return;
  }
  Table table({{"target"},
               {"vendor"},
               {"recommended"},
               {"fastest"},
               {"matrix-unit formats"},
               {"block-scaled"}});
  for (const auto& target : t.targets)
    table.add({target.name, target.vendor, target.recommended, target.fastest,
               join(target.matrix_formats),
               target.scaled_formats.empty() ? "-" : join(target.scaled_formats)});
  table.render(out, term.width, "");
}

void render(std::ostream& out, const std::vector<Target>& targets, const ScaledFormat& f,
            const Terminal& term) {
  Table table({{"target"}, {"runs"}, {f.name}});
  for (const auto& target : targets)
    table.add({target.name, runs_natively(target, f) ? "matrix" : "no", target.products});
  table.render(out, term.width, "");
}

void render_detail(std::ostream& out, const Target& t) {
  out << fmt::format(
      "{} ({}: {})\n  aliases:       {}\n  matrix units:  {}\n  vector units:  {}\n"
      "  block-scaled:  {}\n  integer:       {}\n  recommended:   {}\n  fastest:       {}\n"
      "  notes:         {}\n  sources:       {}\n",
      t.name, t.vendor, t.products, join(t.aliases), join(t.matrix_formats), join(t.vector_formats),
      t.scaled_formats.empty() ? "none" : join(t.scaled_formats), join(t.integer_formats),
      t.recommended, t.fastest, t.notes, t.sources);
}

}  // namespace fpguard::report
