// Internal to src/report: a node's numbers as the check's tables show them, one definition
// for the text report, the HTML page and the Netron annotations, so that the same node
// shows the same numbers everywhere.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "fpguard/analysis.hpp"
#include "fpguard/report.hpp"

namespace fpguard::report::detail {

struct NodeNumbers {
  bool floating = false;        // it has a floating output
  std::uint64_t own = 0;        // overflow + NaN of its local run (its own)
  std::uint64_t inherited = 0;  // overflow + NaN of the emulated run (what it shows)
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
  // The worst error of the comparisons that measured one.
  const auto worst = [](double sofar, const analysis::Comparison& c) {
    if (c.finite == 0) return sofar;
    return std::isnan(sofar) ? c.nrmse() : std::max(sofar, c.nrmse());
  };
  for (const auto& t : n.outputs) {
    if (!t.floating) continue;
    r.floating = true;
    r.own += t.local.overflow + t.local.nan;
    r.inherited += t.propagated.overflow + t.propagated.nan;
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

}  // namespace fpguard::report::detail
