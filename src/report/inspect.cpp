// `fpguard inspect` as JSON (docs/inspect.md documents every field), read back, and as
// text: the statistics of a tensor, then one row per format.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <utility>

#include "fpguard/error.hpp"
#include "fpguard/report.hpp"
#include "json_reader.hpp"

namespace fpguard::report {

namespace {

Json format_json(const FormatStats& f) {
  return {{"overflow", f.overflow},
          {"underflow", f.underflow},
          {"subnormal", f.subnormal},
          {"max_abs_error", number(f.max_abs_error)},
          {"max_rel_error", number(f.max_rel_error)},
          {"mean_rel_error", number(f.mean_rel_error)},
          {"headroom_bits", number(f.headroom_bits)},
          {"scale", f.scale},
          {"scale_for_square", f.scale_for_square},
          {"precision_loss", f.precision_loss},
          {"verdict", std::string(to_string(f.verdict))}};
}

FormatStats format_from_json(const detail::JsonReader& r, const std::string& name, const Json& j,
                             const std::string& path) {
  FormatStats f;
  try {
    f.format = parse_format(name);
  } catch (const Error& e) {
    r.fail(path, "is not a format (" + e.problem() + ")");
  }
  f.overflow = r.u64(j, "overflow", path);
  f.underflow = r.u64(j, "underflow", path);
  f.subnormal = r.u64(j, "subnormal", path);
  f.max_abs_error = r.real(j, "max_abs_error", path);
  f.max_rel_error = r.real(j, "max_rel_error", path);
  f.mean_rel_error = r.real(j, "mean_rel_error", path);
  f.headroom_bits = r.real(j, "headroom_bits", path, INFINITY);  // null: an all-zero tensor
  f.scale = r.real(j, "scale", path);
  f.scale_for_square = r.real(j, "scale_for_square", path);
  f.precision_loss = r.u64(j, "precision_loss", path);
  f.verdict = r.kind(j, "verdict", path, Verdict::nonfinite);
  return f;
}

Json histogram_json(const std::map<int, std::uint64_t>& h) {
  Json out = Json::object();
  for (const auto& [k, c] : h) out[std::to_string(k)] = c;
  return out;
}

Json scaled_json(const ScaledFormatStats& s) {
  return {{"axis", s.axis},
          {"blocks", s.blocks},
          {"nan_blocks", s.nan_blocks},
          {"saturated_blocks", s.saturated_blocks},
          {"saturated", s.saturated},
          {"nonzero", s.nonzero},
          {"flushed", s.flushed},
          {"flushed_blocks", s.flushed_blocks},
          {"swamped", s.swamped},
          {"swamped_blocks", s.swamped_blocks},
          {"underflow", s.underflow},
          {"subnormal", s.subnormal},
          {"clipped", s.clipped},
          {"clipped_blocks", s.clipped_blocks},
          {"precision_loss", s.precision_loss},
          {"max_abs_error", number(s.max_abs_error)},
          {"max_rel_error", number(s.max_rel_error)},
          {"mean_rel_error", number(s.mean_rel_error)},
          {"block_range_histogram", histogram_json(s.block_range_histogram)},
          {"max_block_range_bits", number(s.max_block_range_bits)},
          {"element_range_bits", number(s.element_range_bits)},
          {"verdict", std::string(to_string(s.verdict))}};
}

ScaledFormatStats scaled_from_json(const detail::JsonReader& r, const std::string& name,
                                   const Json& j, const std::string& path) {
  ScaledFormatStats s;
  try {
    s.format = parse_scaled_format(name);
  } catch (const Error& e) {
    r.fail(path, "is not a scaled format (" + e.problem() + ")");
  }
  s.axis = static_cast<int>(r.i64(j, "axis", path));
  s.blocks = r.u64(j, "blocks", path);
  s.nan_blocks = r.u64(j, "nan_blocks", path);
  s.saturated_blocks = r.u64(j, "saturated_blocks", path);
  s.saturated = r.u64(j, "saturated", path);
  s.flushed = r.u64(j, "flushed", path);
  s.flushed_blocks = r.u64(j, "flushed_blocks", path);
  s.underflow = r.u64(j, "underflow", path);
  // Counts added after the first scaled inspect files: absent there, read as 0.
  for (auto [key, field] : {std::pair{"nonzero", &ScaledFormatStats::nonzero},
                            std::pair{"swamped", &ScaledFormatStats::swamped},
                            std::pair{"swamped_blocks", &ScaledFormatStats::swamped_blocks},
                            std::pair{"subnormal", &ScaledFormatStats::subnormal},
                            std::pair{"clipped", &ScaledFormatStats::clipped},
                            std::pair{"clipped_blocks", &ScaledFormatStats::clipped_blocks}})
    if (j.contains(key)) s.*field = r.u64(j, key, path);
  s.precision_loss = r.u64(j, "precision_loss", path);
  s.max_abs_error = r.real(j, "max_abs_error", path);
  s.max_rel_error = r.real(j, "max_rel_error", path);
  s.mean_rel_error = r.real(j, "mean_rel_error", path);
  s.block_range_histogram = r.histogram(j, "block_range_histogram", path);
  s.max_block_range_bits = r.real(j, "max_block_range_bits", path);
  s.element_range_bits = r.real(j, "element_range_bits", path);
  s.verdict = r.kind(j, "verdict", path, Verdict::block_underflow);
  return s;
}

Stats stats_at(const detail::JsonReader& r, const Json& j, const std::string& path) {
  Stats s;
  TensorStats& ts = s.tensor;
  ts.count = r.u64(j, "count", path);
  ts.nan = r.u64(j, "nan", path);
  ts.posinf = r.u64(j, "posinf", path);
  ts.neginf = r.u64(j, "neginf", path);
  ts.zeros = r.u64(j, "zeros", path);
  ts.min = r.real(j, "min", path);
  ts.max = r.real(j, "max", path);
  ts.absmax = r.real(j, "absmax", path);
  ts.min_abs_nonzero = r.real(j, "min_abs_nonzero", path);
  ts.mean = r.real(j, "mean", path);
  ts.std = r.real(j, "std", path);
  ts.exponent_histogram = r.histogram(j, "exponent_histogram", path);
  const Json& formats = r.object(j, "formats", path);
  const std::string fp = detail::JsonReader::field(path, "formats");
  for (auto it = formats.begin(); it != formats.end(); ++it)
    s.formats.push_back(format_from_json(r, it.key(), it.value(), fp + ".\"" + it.key() + "\""));
  return s;
}

InspectedTensor tensor_at(const detail::JsonReader& r, const Json& j, const std::string& path) {
  InspectedTensor t;
  t.name = r.str(j, "name", path);
  t.dtype = r.kind(j, "dtype", path, DType::string);
  t.shape = r.integers(j, "shape", path);
  t.stats = stats_at(r, j, path);
  if (j.contains("scaled_formats")) {
    const Json& scaled = r.object(j, "scaled_formats", path);
    const std::string sp = detail::JsonReader::field(path, "scaled_formats");
    for (auto it = scaled.begin(); it != scaled.end(); ++it)
      t.scaled.push_back(scaled_from_json(r, it.key(), it.value(), sp + ".\"" + it.key() + "\""));
  }
  return t;
}

// "2^-9": scales are powers of two, shown as such.
std::string pow2(double scale) {
  int e = 0;
  std::frexp(scale, &e);
  return fmt::format("2^{}", e - 1);
}

// A scale is offered where the verdict needs one: it removes an overflow or an underflow.
// (A tensor that is ok has a scale too, in the JSON: it only moves values in the range.)
bool shows_scale(const FormatStats& f) {
  return f.verdict == Verdict::overflow || f.verdict == Verdict::underflow;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// A histogram as a bar chart: one row per key, bars scaled to the largest count.
void render_bars(std::ostream& out, const std::string& title, const std::string& key,
                 const std::string& unit, const std::map<int, std::uint64_t>& h,
                 const Terminal& term) {
  std::uint64_t peak = 0;
  for (const auto& [k, c] : h) peak = std::max(peak, c);
  out << "  " << title << "\n";
  Table table({{key, Align::right}, {unit, Align::right}, {""}});
  for (const auto& [k, c] : h) {
    const auto bar = static_cast<std::size_t>(
        std::ceil(40.0 * static_cast<double>(c) / static_cast<double>(peak)));
    table.add({std::to_string(k), count(c), std::string(bar, '#')});
  }
  table.render(out, term.width);
}

// "15 (46.9%)": a count of blocks and its share of them.
std::string of_blocks(std::uint64_t n, std::uint64_t blocks) {
  if (n == 0) return "0";
  return fmt::format("{} ({:.1f}%)", count(n),
                     100.0 * static_cast<double>(n) / static_cast<double>(blocks));
}

void render_scaled(std::ostream& out, const InspectedTensor& t, const InspectText& o,
                   const Terminal& term) {
  Table table({{"scaled format"},
               {"verdict"},
               {"axis", Align::right},
               {"blocks", Align::right},
               {"saturated", Align::right},
               {"flushed", Align::right},
               {"flushed_blocks", Align::right},
               {"underflow", Align::right},
               {"range", Align::right},
               {"max_rel_err", Align::right},
               {"mean_rel_err", Align::right}});
  for (const auto& s : t.scaled) {
    const std::string_view v = to_string(s.verdict);
    table.add({s.format.name, s.verdict == Verdict::ok ? term.good(v) : term.bad(v),
               std::to_string(s.axis), count(s.blocks), of_blocks(s.saturated_blocks, s.blocks),
               count(s.flushed), of_blocks(s.flushed_blocks, s.blocks), count(s.underflow),
               bits(s.max_block_range_bits) + "/" + bits(s.element_range_bits),
               num(s.max_rel_error), num(s.mean_rel_error)});
  }
  table.render(out, term.width);
  if (!o.histogram) return;
  for (const auto& s : t.scaled)
    if (!s.block_range_histogram.empty())
      render_bars(out, s.format.name + ": block dynamic range (floor(log2 max/min|x|>0): blocks)",
                  "bits", "blocks", s.block_range_histogram, term);
}

}  // namespace

Json to_json(const InspectedTensor& t) {
  const TensorStats& ts = t.stats.tensor;
  Json formats = Json::object();
  for (const auto& f : t.stats.formats) formats[f.format.name] = format_json(f);
  Json out = {{"name", t.name},
              {"dtype", std::string(to_string(t.dtype))},
              {"shape", t.shape},
              {"count", ts.count},
              {"nan", ts.nan},
              {"posinf", ts.posinf},
              {"neginf", ts.neginf},
              {"zeros", ts.zeros},
              {"min", number(ts.min)},
              {"max", number(ts.max)},
              {"absmax", number(ts.absmax)},
              {"min_abs_nonzero", number(ts.min_abs_nonzero)},
              {"mean", number(ts.mean)},
              {"std", number(ts.std)},
              {"exponent_histogram", histogram_json(ts.exponent_histogram)},
              {"formats", formats}};
  if (!t.scaled.empty()) {
    Json scaled = Json::object();
    for (const auto& f : t.scaled) scaled[f.format.name] = scaled_json(f);
    out["scaled_formats"] = scaled;
  }
  return out;
}

Json to_json(const std::vector<InspectedTensor>& ts) {
  Json tensors = Json::array();
  for (const auto& t : ts) tensors.push_back(to_json(t));
  return {{"schema_version", kInspectSchema}, {"tensors", tensors}};
}

Stats stats_from_json(const Json& j, const std::string& where) {
  return stats_at({where}, j, "");
}

InspectedTensor inspected_from_json(const Json& j, const std::string& where) {
  return tensor_at({where}, j, "");
}

std::vector<InspectedTensor> inspect_from_json(const Json& j, const std::string& where) {
  const detail::JsonReader r{where};
  r.schema(j, kInspectSchema, "inspect output");
  const Json& tensors = r.array(j, "tensors", "");
  std::vector<InspectedTensor> out;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    out.push_back(tensor_at(r, tensors[i], detail::item("", "tensors", i)));
  return out;
}

void render(std::ostream& out, const InspectedTensor& t, const InspectText& o,
            const Terminal& term) {
  const TensorStats& ts = t.stats.tensor;
  out << fmt::format("{}  {} {}  count {}  nan {}  +inf {}  -inf {}  zeros {}\n", t.name,
                     to_string(t.dtype), shape_string(t.shape), count(ts.count), count(ts.nan),
                     count(ts.posinf), count(ts.neginf), count(ts.zeros));
  out << fmt::format("  min {}  max {}  absmax {}  min|x|>0 {}  mean {}  std {}\n", num(ts.min),
                     num(ts.max), num(ts.absmax), num(ts.min_abs_nonzero), num(ts.mean),
                     num(ts.std));
  Table table({{"format"},
               {"verdict"},
               {"overflow", Align::right},
               {"underflow", Align::right},
               {"subnormal", Align::right},
               {"headroom", Align::right},
               {"scale", Align::right},
               {"scale_sq", Align::right},
               {"max_rel_err", Align::right},
               {"mean_rel_err", Align::right}});
  for (const auto& f : t.stats.formats) {
    const std::string_view v = to_string(f.verdict);
    table.add({f.format.name, f.verdict == Verdict::ok ? term.good(v) : term.bad(v),
               count(f.overflow), count(f.underflow), count(f.subnormal), bits(f.headroom_bits),
               shows_scale(f) ? pow2(f.scale) : "-",
               f.scale_for_square < 1 ? pow2(f.scale_for_square) : "-", num(f.max_rel_error),
               num(f.mean_rel_error)});
  }
  if (!t.stats.formats.empty()) table.render(out, term.width);
  if (o.histogram && !ts.exponent_histogram.empty())
    render_bars(out, "exponent histogram (floor(log2|x|): count)", "log2", "count",
                ts.exponent_histogram, term);
  if (!t.scaled.empty()) render_scaled(out, t, o, term);
}

void render_inspect_legend(std::ostream& out) {
  out << "(headroom: log2(format max / absmax); scale: the power of two that puts absmax at "
         "the margin (half the format's max by default), shown for an overflow or an "
         "underflow; scale_sq: the same for a tensor that will be squared, shown when its "
         "square would pass the margin; errors: relative rounding errors of the finite "
         "values)\n";
}

void render_scaled_legend(std::ostream& out) {
  out << "(scaled formats: a block is what one scale covers; saturated: blocks with a value "
         "clamped to the element max; flushed: non-zero values that became zero while a larger "
         "one of their block did not, and flushed_blocks the blocks with one; underflow: "
         "non-zero values whose whole block became zero; range: the widest block's "
         "log2(max/min|x|>0) / what one scale holds)\n";
}

}  // namespace fpguard::report
