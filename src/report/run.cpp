// `fpguard run`'s summary of the outputs as JSON (README: `run --json`), read back, and as
// text; `fpguard ops --json`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <span>

#include "fpguard/report.hpp"
#include "json_reader.hpp"

namespace fpguard::report {

namespace {

using detail::JsonReader;

bool has_range(const TensorSummary& s) {
  if (s.dtype == DType::string) return false;
  std::int64_t n = 1;
  for (auto d : s.shape) n *= d;
  return n > 0;
}

// The fields of a tensor summary, added to `j`.
void add_summary(Json& j, const TensorSummary& s) {
  j["shape"] = s.shape;
  j["dtype"] = std::string(to_string(s.dtype));
  if (s.dtype == DType::string) return;  // no numeric range
  const bool range = has_range(s);
  j["min"] = range ? number(s.min) : Json(nullptr);
  j["max"] = range ? number(s.max) : Json(nullptr);
  j["absmax"] = range ? number(s.absmax) : Json(nullptr);
}

TensorSummary summary_at(const JsonReader& r, const Json& j, const std::string& path) {
  TensorSummary s;
  s.shape = r.integers(j, "shape", path);
  s.dtype = r.kind(j, "dtype", path, DType::string);
  if (s.dtype == DType::string) return s;
  // null: an empty tensor (no range) or an infinite bound; written again, both are null.
  s.min = r.real(j, "min", path, -INFINITY);
  s.max = r.real(j, "max", path, INFINITY);
  s.absmax = r.real(j, "absmax", path, INFINITY);
  return s;
}

std::string summary_text(const TensorSummary& s) {
  const std::string shape = Json(s.shape).dump();
  if (!has_range(s)) return fmt::format("{} {}", to_string(s.dtype), shape);
  return fmt::format("{} {}  min {}  max {}  absmax {}", to_string(s.dtype), shape, num(s.min),
                     num(s.max), num(s.absmax));
}

OutputSummary output_at(const JsonReader& r, const Json& j, const std::string& path) {
  OutputSummary o;
  o.name = r.str(j, "name", path);
  const std::string kind = j.contains("kind") ? r.str(j, "kind", path) : "tensor";
  if (kind == "tensor") {
    o.items.push_back(summary_at(r, j, path));
  } else if (kind == "sequence") {
    o.kind = ValueKind::sequence;
    const Json& items = r.array(j, "items", path);
    for (std::size_t i = 0; i < items.size(); ++i)
      o.items.push_back(summary_at(r, items[i], detail::item(path, "items", i)));
  } else if (kind == "none") {
    o.kind = ValueKind::none;
  } else {
    r.fail(JsonReader::field(path, "kind"), "is not tensor, sequence or none");
  }
  return o;
}

}  // namespace

TensorSummary summarize(const Tensor& t) {
  TensorSummary s{t.shape(), t.dtype()};
  if (t.dtype() == DType::string || t.size() == 0) return s;
  // A piece at a time: a whole output in doubles was twice a float32 output's size more
  // (GPT-2's logits at sequence 512: 103 MB, 206 MB more at the end of the run).
  constexpr std::size_t kPiece = 4096;
  std::vector<double> v(std::min(kPiece, t.size()));
  double mn = INFINITY, mx = -INFINITY, am = 0;
  bool any = false;
  for (std::size_t at = 0; at < t.size(); at += kPiece) {
    const std::span<double> piece(v.data(), std::min(kPiece, t.size() - at));
    to_double(t, at, piece);
    for (double x : piece)
      if (!std::isnan(x)) {
        any = true;
        mn = std::min(mn, x), mx = std::max(mx, x), am = std::max(am, std::fabs(x));
      }
  }
  if (any) s.min = mn, s.max = mx, s.absmax = am;
  return s;
}

Json to_json(const RunSummary& r) {
  Json outs = Json::array();
  for (const auto& o : r.outputs) {
    Json j = {{"name", o.name}};
    if (o.kind == ValueKind::tensor) {
      add_summary(j, o.items.at(0));
    } else if (o.kind == ValueKind::sequence) {
      Json items = Json::array();
      for (const auto& s : o.items) {
        Json i = Json::object();
        add_summary(i, s);
        items.push_back(std::move(i));
      }
      j["kind"] = "sequence";
      j["items"] = std::move(items);
    } else {
      j["kind"] = "none";
    }
    outs.push_back(std::move(j));
  }
  Json j = {
      {"schema_version", kRunSchema},
      {"outputs", outs},
      {"timing", {{"load_ms", r.load_ms}, {"median_run_ms", r.median_run_ms}, {"runs", r.runs}}},
      {"memory", {{"peak_rss_mib", r.peak_rss_mib}, {"start_rss_mib", r.start_rss_mib}}}};
  if (r.profile) j["profile"] = to_json(*r.profile);
  return j;
}

RunSummary run_from_json(const Json& j, const std::string& where) {
  const JsonReader r{where};
  r.schema(j, kRunSchema, "run output");
  RunSummary s;
  const Json& outs = r.array(j, "outputs", "");
  for (std::size_t i = 0; i < outs.size(); ++i)
    s.outputs.push_back(output_at(r, outs[i], detail::item("", "outputs", i)));
  const Json& timing = r.object(j, "timing", "");
  s.load_ms = r.real(timing, "load_ms", "\"timing\"");
  s.median_run_ms = r.real(timing, "median_run_ms", "\"timing\"");
  s.runs = r.u64(timing, "runs", "\"timing\"");
  const Json& memory = r.object(j, "memory", "");
  s.peak_rss_mib = r.real(memory, "peak_rss_mib", "\"memory\"");
  s.start_rss_mib = r.real(memory, "start_rss_mib", "\"memory\"");
  if (j.contains("profile")) s.profile = profile_from_json(j["profile"], where + ": \"profile\"");
  return s;
}

void render(std::ostream& out, const RunSummary& r, const Terminal& term) {
  for (const auto& o : r.outputs) {
    if (o.kind == ValueKind::tensor) {
      out << o.name << "  " << summary_text(o.items.at(0)) << "\n";
    } else if (o.kind == ValueKind::sequence) {
      out << fmt::format("{}  sequence of {} tensors\n", o.name, o.items.size());
      for (std::size_t i = 0; i < o.items.size(); ++i)
        out << fmt::format("  [{}]  {}\n", i, summary_text(o.items[i]));
    } else {
      out << o.name << "  empty optional\n";
    }
  }
  out << fmt::format("load {} ms, run {} ms (median of {}), peak memory {} MiB ({} MiB at start)\n",
                     fixed(r.load_ms, 2), fixed(r.median_run_ms, 2), r.runs,
                     fixed(r.peak_rss_mib, 0), fixed(r.start_rss_mib, 0));
  if (!r.profile) return;
  out << "\n";
  render(out, *r.profile, r.profile_top, term);
}

Json ops_json(const std::vector<std::string>& names) {
  return {{"schema_version", 1}, {"ops", names}};
}

}  // namespace fpguard::report
