// Internal to src/report: a node's numbers as the check's tables show them, one definition
// for the text report, the HTML page and the Netron annotations, so that the same node
// shows the same numbers everywhere.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fpguard/analysis.hpp"
#include "fpguard/report.hpp"

namespace fpguard::report::detail {

struct NodeNumbers {
  bool floating = false;  // it has a floating output
  // Values that became inf/NaN (or saturated) where the reference is finite, summed over
  // its floating outputs (overflow + nan of the comparisons): in its local run (its own:
  // what an overflow/NaN origin's `affected` counts) and in the emulated run (with what it
  // inherits).
  std::uint64_t local_overflow = 0, propagated_overflow = 0;
  double damage = 0;  // NodeRecord::damage
  // The worst relative RMS error over its outputs that have values finite in both runs;
  // NaN (n/a) when none has.
  double local = std::numeric_limits<double>::quiet_NaN();
  double propagated = std::numeric_limits<double>::quiet_NaN();
  // Values compared with no finite counterpart (inf/NaN where the reference is finite).
  std::uint64_t local_nonfinite = 0, propagated_nonfinite = 0;
  double headroom = std::numeric_limits<double>::infinity();  // smallest over its outputs
};

inline NodeNumbers node_numbers(const analysis::NodeRecord& n) {
  NodeNumbers r;
  r.damage = n.damage;
  // The worst error of the comparisons that measured one.
  const auto worst = [](double sofar, const analysis::Comparison& c) {
    if (c.finite == 0) return sofar;
    return std::isnan(sofar) ? c.nrmse() : std::max(sofar, c.nrmse());
  };
  for (const auto& t : n.outputs) {
    if (!t.floating) continue;
    r.floating = true;
    r.local_overflow += t.local.overflow + t.local.nan;
    r.propagated_overflow += t.propagated.overflow + t.propagated.nan;
    r.local = worst(r.local, t.local);
    r.propagated = worst(r.propagated, t.propagated);
    r.local_nonfinite += t.local.count - t.local.finite;
    r.propagated_nonfinite += t.propagated.count - t.propagated.finite;
    r.headroom = std::min(r.headroom, t.headroom_bits);
  }
  return r;
}

// An error cell: the number; where nothing was finite in both runs, how many values were
// not ("16,384 non-finite"), or "n/a" when nothing was compared.
inline std::string error_cell(double error, std::uint64_t nonfinite) {
  if (!std::isnan(error)) return num(error);
  return nonfinite ? count(nonfinite) + " non-finite" : "n/a";
}

// A sort key for errors: n/a below every measured error.
inline double error_rank(double error) {
  return std::isnan(error) ? -1 : error;
}

struct WorstRow {
  const analysis::NodeRecord* node = nullptr;
  NodeNumbers x;
};

// The worst nodes, as every table ranks them: the emulated nodes with a floating output by
// damage to the outputs, then by their own inf/NaN, their local error, their propagated
// inf/NaN; at most `top`.
inline std::vector<WorstRow> worst_nodes(const analysis::Diagnosis& d, std::size_t top) {
  std::vector<WorstRow> rows;
  for (const auto& n : d.nodes) {
    WorstRow r{&n, node_numbers(n)};
    if (r.x.floating && n.emulated) rows.push_back(r);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const WorstRow& a, const WorstRow& b) {
    if (a.x.damage != b.x.damage) return a.x.damage > b.x.damage;
    if (a.x.local_overflow != b.x.local_overflow) return a.x.local_overflow > b.x.local_overflow;
    if (error_rank(a.x.local) != error_rank(b.x.local))
      return error_rank(a.x.local) > error_rank(b.x.local);
    return a.x.propagated_overflow > b.x.propagated_overflow;
  });
  if (rows.size() > top) rows.resize(top);
  return rows;
}

// A damage cell: "inf/NaN" where it is unbounded (its own inf/NaN reach an output that
// has some), the number otherwise.
inline std::string damage_cell(double damage) {
  return std::isinf(damage) ? "inf/NaN" : num(damage);
}

}  // namespace fpguard::report::detail
