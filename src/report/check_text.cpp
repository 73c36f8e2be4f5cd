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

// "cosine 0.935914 < 0.999", "cosine n/a" (nothing finite in both runs).
std::string cosine_text(double c, double min_cosine) {
  if (std::isnan(c)) return "cosine n/a";
  return "cosine " + fixed(c, 6) + (c < min_cosine ? " < " + num(min_cosine) : "");
}

void render_verdict(std::ostream& out, const analysis::Diagnosis& d, const Terminal& t) {
  const std::string qualifiers = verdict_qualifiers(d);
  out << (d.pass ? t.good("PASS") : t.bad("FAIL")) << (qualifiers.empty() ? "" : " " + qualifiers)
      << "  " << d.model << " in " << d.precision
      << (d.accumulate != "float32" ? " accumulating in " + d.accumulate : "") << " (reference "
      << d.reference << ", " << d.samples << " input set" << (d.samples > 1 ? "s" : "") << ")\n";
  for (const auto& o : d.outputs) {
    std::string why;
    if (o.nonfinite)
      why = fmt::format("{} non-finite values where the reference is finite; ", count(o.nonfinite));
    if (o.outside_tolerance)
      why += fmt::format("{} values outside atol/rtol; ", count(o.outside_tolerance));
    out << fmt::format(
        "  {} {}: {}, relative RMS error {}, max scaled error {}, max abs error {}{}\n",
        o.pass ? "ok  " : t.bad("FAIL"), o.name, cosine_text(o.cosine, d.min_cosine),
        num_na(o.rel_rms_error), num_na(o.max_scaled_error), num_na(o.max_abs_error),
        why.empty() ? "" : " (" + why.substr(0, why.size() - 2) + ")");
  }
  if (const std::string advice = generated_advice(d); !advice.empty())
    out << "  note: " << advice << "\n";
  for (const auto& n : d.notes) out << "  note: " << describe(n, d) << "\n";
}

void render_origins(std::ostream& out, const analysis::Diagnosis& d, const Terminal& t) {
  out << "\n" << t.bold("Origins (where the trouble starts):") << "\n";
  if (d.origins.empty()) out << "  none\n";
  for (std::size_t i = 0; i < d.origins.size(); ++i) {
    const auto& o = d.origins[i];
    out << fmt::format("  {}. [{}] {}\n", i + 1, analysis::to_string(o.kind), describe(o));
    for (const auto& f : o.fixes) out << "       fix: " << describe(f) << "\n";
  }
}

struct Row {
  const analysis::NodeRecord* n;
  bool origin;
  detail::NodeNumbers x;
};

// The worst nodes: own trouble first, then inherited trouble, then local error.
std::vector<Row> worst_nodes(const analysis::Diagnosis& d, const std::set<std::string>& origins,
                             std::size_t top) {
  std::vector<Row> rows;
  for (const auto& n : d.nodes) {
    Row r{&n, origins.count(n.name) > 0, detail::node_numbers(n)};
    if (r.x.floating && n.emulated) rows.push_back(r);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    if (x.origin != y.origin) return x.origin;
    if (x.x.own != y.x.own) return x.x.own > y.x.own;
    if (x.x.inherited != y.x.inherited) return x.x.inherited > y.x.inherited;
    return detail::error_rank(x.x.local) > detail::error_rank(y.x.local);
  });
  if (rows.size() > top) rows.resize(top);
  return rows;
}

void render_rules_found(std::ostream& out, const analysis::Diagnosis& d,
                        std::set<std::string> shown_nodes, std::size_t top, const Terminal& t) {
  if (d.rules.empty()) return;
  // Findings on origins and on the worst nodes first.
  std::vector<const analysis::RuleFinding*> findings;
  for (const auto& r : d.rules) findings.push_back(&r);
  std::stable_sort(findings.begin(), findings.end(), [&](const auto* x, const auto* y) {
    return shown_nodes.count(x->node) > shown_nodes.count(y->node);
  });
  out << "\n"
      << t.bold("Risk rules (" + std::to_string(d.rules.size()) +
                "; turn off with --disable-rule ID):")
      << "\n";
  for (std::size_t i = 0; i < findings.size(); ++i) {
    if (i == top) {
      out << fmt::format("  ... and {} more (--json has all)\n", findings.size() - top);
      break;
    }
    out << fmt::format("  [{}] {}: {}\n", findings[i]->id, findings[i]->node,
                       describe(*findings[i]));
  }
}

}  // namespace

void render(std::ostream& out, const analysis::Diagnosis& d, const CheckText& o,
            const Terminal& t) {
  render_verdict(out, d, t);
  render_origins(out, d, t);
  std::set<std::string> origin_nodes;
  for (const auto& x : d.origins) origin_nodes.insert(x.node);
  const auto rows = worst_nodes(d, origin_nodes, o.top);
  if (!rows.empty()) {
    out << "\n" << t.bold(fmt::format("Worst nodes (top {}):", rows.size())) << "\n";
    Table table({{"node"},
                 {"op"},
                 {"headroom", Align::right},
                 {"overflow", Align::right},
                 {"local", Align::right},
                 {"propagated", Align::right}});
    for (const auto& r : rows)
      table.add({(r.origin ? "* " : "  ") + r.n->name, r.n->op_type, bits(r.x.headroom),
                 std::to_string(r.x.inherited), detail::error_cell(r.x.local, r.x.local_nonfinite),
                 detail::error_cell(r.x.propagated, r.x.propagated_nonfinite)});
    table.render(out, t.width);
    out << "  (* origin; headroom: log2(format max / reference absmax); overflow: inf/NaN or "
           "saturated values in the emulated run; local / propagated: relative RMS error the "
           "node adds on its own / of the emulated run, over the values finite in both runs: "
           "\"non-finite\" counts them where none is, n/a where nothing was compared)\n";
  }
  std::set<std::string> shown = origin_nodes;
  for (const auto& r : rows) shown.insert(r.n->name);
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
