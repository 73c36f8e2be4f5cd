// `fpguard check` as text: the verdict first, then the origins with their fixes, the worst
// nodes and the risk rules.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <set>

#include "fpguard/report.hpp"
#include "node_numbers.hpp"

namespace fpguard::report {

namespace {

// "cosine 0.935914 < 0.999", "cosine n/a" (nothing finite in both runs). The threshold
// as given (shortest round trip: 0.9999999, not num's "1").
std::string cosine_text(double c, double min_cosine) {
  if (std::isnan(c)) return "cosine n/a";
  return "cosine " + fixed(c, 6) + (c < min_cosine ? fmt::format(" < {}", min_cosine) : "");
}

// A sequence output's elements are listed whole up to this many, else those that fail.
constexpr std::size_t kElementsShown = 8;

// One output's (or a sequence element's) line.
void render_output(std::ostream& out, const analysis::OutputVerdict& o,
                   const analysis::Diagnosis& d, const Terminal& t, const std::string& indent) {
  std::string why;
  if (o.nonfinite)
    why = fmt::format("{} non-finite values where the reference is finite; ", count(o.nonfinite));
  if (o.outside_tolerance)
    why += fmt::format("{} values outside atol/rtol; ", count(o.outside_tolerance));
  out << fmt::format(
      "{}{} {}: {}, relative RMS error {}, max scaled error {}, max abs error {}{}\n", indent,
      o.pass ? "ok  " : t.bad("FAIL"), o.name, cosine_text(o.cosine, d.min_cosine),
      num_na(o.rel_rms_error), num_na(o.max_scaled_error), num_na(o.max_abs_error),
      why.empty() ? "" : " (" + why.substr(0, why.size() - 2) + ")");
}

void render_verdict(std::ostream& out, const analysis::Diagnosis& d, const Terminal& t) {
  const std::string qualifiers = verdict_qualifiers(d);
  out << (d.pass ? t.good("PASS") : t.bad("FAIL")) << (qualifiers.empty() ? "" : " " + qualifiers)
      << "  " << d.model << " in " << d.precision
      << (d.other_precision.empty() ? "" : " (other ops in " + d.other_precision + ")")
      << (d.accumulate != "float32" ? " accumulating in " + d.accumulate : "") << " (reference "
      << (d.reference_model.empty() ? d.reference : d.reference_model + " in " + d.reference)
      << ", " << d.samples << " input set" << (d.samples > 1 ? "s" : "") << ")\n";
  for (const auto& o : d.outputs) {
    render_output(out, o, d, t, "  ");
    if (o.mismatch)
      out << "      " << t.bad("its kind or length differs") << ": "
          << describe(*o.mismatch, o.mismatched_sets) << "\n";
    // A sequence's elements: all of a short one, else those that fail.
    const bool all = o.elements.size() <= kElementsShown;
    std::size_t hidden = 0;
    for (const auto& e : o.elements)
      if (all || !e.pass)
        render_output(out, e, d, t, "      ");
      else
        ++hidden;
    if (hidden) out << fmt::format("      ({} more elements pass)\n", hidden);
  }
  if (const std::string advice = generated_advice(d.generated); !advice.empty())
    out << "  note: " << advice << "\n";
  for (const auto& n : d.notes) out << "  note: " << describe(n, d) << "\n";
}

void render_origins(std::ostream& out, const analysis::Diagnosis& d, const Terminal& t) {
  out << "\n" << t.bold("Origins (where the trouble starts):") << "\n";
  if (d.origins.empty()) {
    const std::string next = next_steps(d);
    out << "  none" << (next.empty() ? "" : ": " + next) << "\n";
  }
  for (std::size_t i = 0; i < d.origins.size(); ++i) {
    const auto& o = d.origins[i];
    out << fmt::format("  {}. [{}] {}\n", i + 1, analysis::to_string(o.kind), describe(o));
    for (const auto& f : o.fixes) out << "       fix: " << describe(f) << "\n";
  }
  if (const std::string all = describe(combine_fixes(d)); !all.empty()) out << "  " << all << "\n";
}

void render_worst(std::ostream& out, const analysis::Diagnosis& d,
                  const std::vector<detail::WorstRow>& rows, const Terminal& t) {
  std::set<std::string> origins;
  for (const auto& x : d.origins) origins.insert(x.node);
  out << "\n"
      << t.bold(fmt::format("Worst nodes (top {}, by damage to the outputs):", rows.size()))
      << "\n";
  Table table({{"node"},
               {"op"},
               {"damage", Align::right},
               {"headroom", Align::right},
               {"local inf/NaN", Align::right},
               {"local error", Align::right},
               {"prop. inf/NaN", Align::right},
               {"prop. error", Align::right}});
  for (const auto& r : rows)
    table.add({(origins.count(r.node->name) ? "* " : "  ") + r.node->name, r.node->op_type,
               detail::damage_cell(r.x.damage), bits(r.x.headroom), count(r.x.local_overflow),
               detail::error_cell(r.x.local, r.x.local_nonfinite), count(r.x.propagated_overflow),
               detail::error_cell(r.x.propagated, r.x.propagated_nonfinite)});
  table.render(out, t.width);
  out << "  (* origin; damage: the relative RMS error the node gives the outputs, estimated as "
         "its local error capped by the error of the outputs it reaches (inf/NaN: its own "
         "inf/NaN reach an output that has some); headroom: log2(format max / reference "
         "absmax); local: the node alone in the format, fed the reference's inputs; prop. "
         "(propagated): the emulated run, with what it inherits; inf/NaN: values that became "
         "inf, NaN or saturated where the reference is finite; error: relative RMS error over "
         "the values finite in both runs, \"non-finite\" counting them where none is, n/a where "
         "nothing was compared)\n";
}

void render_rules_found(std::ostream& out, const analysis::Diagnosis& d,
                        const std::set<std::string>& shown_nodes, std::size_t top,
                        const Terminal& t) {
  if (d.rules.empty()) return;
  // The major findings, those on origins and on the worst nodes first; the minor ones are
  // counted.
  std::vector<const analysis::RuleFinding*> major;
  for (const auto& r : d.rules)
    if (r.severity == analysis::Severity::major) major.push_back(&r);
  std::stable_sort(major.begin(), major.end(), [&](const auto* x, const auto* y) {
    return shown_nodes.count(x->node) > shown_nodes.count(y->node);
  });
  out << "\n"
      << t.bold("Risk rules (" + std::to_string(d.rules.size()) +
                "; turn off with --disable-rule ID):")
      << "\n";
  for (std::size_t i = 0; i < major.size(); ++i) {
    if (i == top) {
      out << fmt::format("  ... and {} more above the threshold (--json has all)\n",
                         major.size() - top);
      break;
    }
    out << fmt::format("  [{}] {}: {}\n", major[i]->id, major[i]->node, describe(*major[i]));
  }
  if (const std::size_t minor = d.rules.size() - major.size(); minor > 0)
    out << "  " << minor_findings(minor, !major.empty()) << "\n";
}

}  // namespace

void render(std::ostream& out, const analysis::Diagnosis& d, const CheckText& o,
            const Terminal& t) {
  render_verdict(out, d, t);
  render_origins(out, d, t);
  const auto rows = detail::worst_nodes(d, o.top);
  if (!rows.empty()) render_worst(out, d, rows, t);
  std::set<std::string> shown;
  for (const auto& x : d.origins) shown.insert(x.node);
  for (const auto& r : rows) shown.insert(r.node->name);
  render_rules_found(out, d, shown, o.top, t);
}

void render_side_by_side(std::ostream& out, const std::vector<analysis::Diagnosis>& ds,
                         const Terminal& t) {
  out << "\n" << std::string(78, '-') << "\n" << t.bold("Side by side:") << "\n";
  Table table(
      {{"precision"}, {"verdict"}, {"min cosine", Align::right}, {"origins", Align::right}});
  for (const auto& d : ds) {
    double c = 1;
    for (const auto& o : d.outputs)
      c = std::isnan(o.cosine) || std::isnan(c) ? NAN : std::min(c, o.cosine);
    table.add({d.precision, d.pass ? "PASS" : "FAIL", std::isnan(c) ? "n/a" : fixed(c, 6),
               std::to_string(d.origins.size())});
  }
  table.render(out, t.width);
}

Json rules_json() {
  Json r = Json::array();
  for (const auto& rule : analysis::rules())
    r.push_back({{"id", std::string(rule.id)}, {"rationale", std::string(rule.rationale)}});
  return {{"schema_version", 1}, {"rules", r}};
}

void render_rules(std::ostream& out) {
  Table table({{"id"}, {"rationale"}});
  for (const auto& rule : analysis::rules())
    table.add({std::string(rule.id), std::string(rule.rationale)});
  table.render(out, 0, "");  // rationales are read whole
}

}  // namespace fpguard::report
