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

template <class J>
std::optional<analysis::OutputMismatch> read_mismatch(const BasicJsonReader<J>& r, const J& j,
                                                      const std::string& path) {
  const J& m = r.at(j, "mismatch", path);
  if (m.is_null()) return std::nullopt;
  const std::string p = JsonReader::field(path, "mismatch");
  auto form = [&](const char* key) {
    const std::string fp = JsonReader::field(p, key);
    const J& f = r.object(m, key, p);
    return analysis::ValueForm{.kind = r.kind(f, "kind", fp, ValueKind::none),
                               .length = r.u64(f, "length", fp)};
  };
  return analysis::OutputMismatch{
      .set = r.u64(m, "set", p), .reference = form("reference"), .emulated = form("emulated")};
}

}  // namespace fpguard::report::detail
