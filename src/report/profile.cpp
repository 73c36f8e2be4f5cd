// `fpguard run --profile`: where a run's time goes, per op type and per node, as text
// tables (like `trtexec --dumpProfile`) and as JSON (docs/executor.md), read back.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <ostream>

#include "fpguard/report.hpp"
#include "json_reader.hpp"

namespace fpguard::report {

namespace {

using detail::JsonReader;

// A share of the profile's total, in percent (0 for an empty profile).
double share(double ms, double total) {
  return total > 0 ? 100.0 * ms / total : 0.0;
}

std::string percent(double ms, double total) {
  return fixed(share(ms, total), 1) + "%";
}

}  // namespace

Json to_json(const exec::Profile& p) {
  const double total = p.total_ms();
  Json types = Json::array();
  for (const auto& t : exec::by_op_type(p))
    types.push_back({{"op_type", t.op_type},
                     {"nodes", t.nodes},
                     {"total_ms", t.ms},
                     {"average_ms", t.ms / static_cast<double>(t.nodes)},
                     {"share", share(t.ms, total)}});
  Json nodes = Json::array();
  for (const auto& n : p.nodes) {
    nodes.push_back({{"name", n.path},
                     {"op_type", n.op_type},
                     {"calls", n.calls},
                     {"ms", n.ms},
                     {"share", share(n.ms, total)}});
    if (!n.fused_into.empty()) nodes.back()["fused_into"] = n.fused_into;
  }
  return {{"schema_version", kProfileSchema},
          {"runs", p.runs},
          {"total_ms", total},
          {"outside_ms", p.outside_ms},
          {"op_types", std::move(types)},
          {"nodes", std::move(nodes)}};
}

exec::Profile profile_from_json(const Json& j, const std::string& where) {
  const JsonReader r{where};
  r.schema(j, kProfileSchema, "profile");
  exec::Profile p;
  p.runs = r.u64(j, "runs", "");
  // Written since 2026-12-02; a profile from before has none (read as 0).
  if (j.contains("outside_ms")) p.outside_ms = r.real(j, "outside_ms", "");
  const Json& nodes = r.array(j, "nodes", "");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string path = detail::item("", "nodes", i);
    p.nodes.push_back({.path = r.str(nodes[i], "name", path),
                       .op_type = r.str(nodes[i], "op_type", path),
                       .calls = r.u64(nodes[i], "calls", path),
                       .ms = r.real(nodes[i], "ms", path)});
    if (nodes[i].contains("fused_into"))
      p.nodes.back().fused_into = r.str(nodes[i], "fused_into", path);
  }
  return p;
}

void render(std::ostream& out, const exec::Profile& p, std::size_t top, const Terminal& term) {
  const double total = p.total_ms();
  out << fmt::format("profile: {} ms a run in {} nodes, {} ms outside them (median of {} run{})\n",
                     num(total), p.nodes.size(), num(p.outside_ms), p.runs, p.runs == 1 ? "" : "s");
  Table types({{"op type"},
               {"nodes", Align::right},
               {"total ms", Align::right},
               {"average ms", Align::right},
               {"share", Align::right}});
  for (const auto& t : exec::by_op_type(p))
    types.add({t.op_type, count(t.nodes), num(t.ms), num(t.ms / static_cast<double>(t.nodes)),
               percent(t.ms, total)});
  types.render(out, term.width);

  std::vector<std::size_t> slowest(p.nodes.size());
  std::iota(slowest.begin(), slowest.end(), std::size_t{0});
  std::stable_sort(slowest.begin(), slowest.end(),
                   [&](std::size_t a, std::size_t b) { return p.nodes[a].ms > p.nodes[b].ms; });
  const std::size_t shown = top == 0 ? slowest.size() : std::min(top, slowest.size());
  Table nodes({{"node"},
               {"op type"},
               {"calls", Align::right},
               {"ms", Align::right},
               {"share", Align::right}});
  for (std::size_t k = 0; k < shown; ++k) {
    const auto& n = p.nodes[slowest[k]];
    nodes.add({n.path, n.op_type, count(n.calls), num(n.ms), percent(n.ms, total)});
  }
  out << "\n";
  nodes.render(out, term.width);
  if (shown < slowest.size())
    out << fmt::format("  ({} slowest of {} nodes; --profile-top 0 shows all)\n", shown,
                       slowest.size());
  const auto fused = std::count_if(p.nodes.begin(), p.nodes.end(),
                                   [](const exec::NodeTime& n) { return !n.fused_into.empty(); });
  if (fused)
    out << fmt::format(
        "  ({} node{} ran fused into the node before {}: {} time is that node's; "
        "--no-fusion times them apart)\n",
        fused, fused == 1 ? "" : "s", fused == 1 ? "it" : "them", fused == 1 ? "its" : "their");
}

}  // namespace fpguard::report
