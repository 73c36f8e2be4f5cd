// Internal to src/report: a node's scaled operands (analysis::ScaledOperandRecord) as JSON
// and read back, one definition for the check's JSON and its partial results (counts only:
// exact either way).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fpguard/analysis.hpp"
#include "json_reader.hpp"

namespace fpguard::report::detail {

using ScaledCount = std::pair<const char*, std::uint64_t analysis::ScaledOperandRecord::*>;
inline constexpr ScaledCount kScaledCounts[] = {
    {"nonzero", &analysis::ScaledOperandRecord::nonzero},
    {"blocks", &analysis::ScaledOperandRecord::blocks},
    {"flushed", &analysis::ScaledOperandRecord::flushed},
    {"flushed_blocks", &analysis::ScaledOperandRecord::flushed_blocks},
    {"swamped", &analysis::ScaledOperandRecord::swamped},
    {"swamped_blocks", &analysis::ScaledOperandRecord::swamped_blocks},
    {"underflow", &analysis::ScaledOperandRecord::underflow},
    {"subnormal", &analysis::ScaledOperandRecord::subnormal},
    {"saturated", &analysis::ScaledOperandRecord::saturated},
    {"saturated_blocks", &analysis::ScaledOperandRecord::saturated_blocks},
    {"clipped", &analysis::ScaledOperandRecord::clipped},
    {"clipped_blocks", &analysis::ScaledOperandRecord::clipped_blocks},
};

inline Json scaled_operands_json(const std::vector<analysis::ScaledOperandRecord>& ops) {
  Json out = Json::array();
  for (const auto& s : ops) {
    Json j = {{"input", s.input}, {"value", s.value}, {"format", s.format}, {"weight", s.weight}};
    for (const auto& [key, member] : kScaledCounts) j[key] = s.*member;
    out.push_back(std::move(j));
  }
  return out;
}

// The node's "scaled_operands" (absent in files older than them: none).
template <class J>
std::vector<analysis::ScaledOperandRecord> read_scaled_operands(const BasicJsonReader<J>& r,
                                                                const J& node,
                                                                const std::string& path) {
  std::vector<analysis::ScaledOperandRecord> out;
  if (!node.contains("scaled_operands")) return out;
  const J& a = r.array(node, "scaled_operands", path);
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string p = item(path, "scaled_operands", i);
    analysis::ScaledOperandRecord s;
    s.input = r.u64(a[i], "input", p);
    s.value = r.str(a[i], "value", p);
    s.format = r.str(a[i], "format", p);
    s.weight = r.boolean(a[i], "weight", p);
    for (const auto& [key, member] : kScaledCounts) s.*member = r.u64(a[i], key, p);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace fpguard::report::detail
