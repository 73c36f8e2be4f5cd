// A sequence or optional graph output's mismatch (analysis::OutputMismatch) as JSON, written
// and read alike by the diagnosis (check_json.cpp) and the partial results of a sharded
// check (check_part.cpp). Internal to src/report.
#pragma once

#include "fpguard/analysis.hpp"
#include "fpguard/report.hpp"
#include "json_reader.hpp"

namespace fpguard::report::detail {

// {"set": S, "reference": {"kind": K, "length": N}, "emulated": {...}}; null without one.
inline Json mismatch_json(const std::optional<analysis::OutputMismatch>& m) {
  if (!m) return nullptr;
  auto form = [](const analysis::ValueForm& f) {
    return Json{{"kind", std::string(to_string(f.kind))}, {"length", f.length}};
  };
  return {{"set", m->set}, {"reference", form(m->reference)}, {"emulated", form(m->emulated)}};
}

inline std::optional<analysis::OutputMismatch> read_mismatch(const JsonReader& r, const Json& j,
                                                             const std::string& path) {
  if (r.at(j, "mismatch", path).is_null()) return std::nullopt;
  const std::string p = JsonReader::field(path, "mismatch");
  const Json& m = j["mismatch"];
  auto form = [&](const char* key) {
    const std::string fp = JsonReader::field(p, key);
    const Json& f = r.object(m, key, p);
    return analysis::ValueForm{.kind = r.kind(f, "kind", fp, ValueKind::none),
                               .length = r.u64(f, "length", fp)};
  };
  return analysis::OutputMismatch{
      .set = r.u64(m, "set", p), .reference = form("reference"), .emulated = form("emulated")};
}

}  // namespace fpguard::report::detail
