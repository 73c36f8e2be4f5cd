// `fpguard finfo` and `fpguard iinfo` as JSON (docs/formats.md), read back, and as tables.
// A single format prints as torch does (fpguard::to_torch_string), not here.
#include <fmt/format.h>

#include <limits>
#include <ostream>

#include "fpguard/format.hpp"
#include "fpguard/report.hpp"
#include "json_reader.hpp"

namespace fpguard::report {

namespace {

int int_at(const detail::JsonReader& r, const Json& j, const char* key) {
  const std::int64_t v = r.i64(j, key, "");
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    r.fail(detail::JsonReader::field("", key), "is out of range");
  return static_cast<int>(v);
}

std::string yes_no(bool b) {
  return b ? "yes" : "no";
}

}  // namespace

Json to_json(const FInfo& i) {
  return {{"dtype", i.dtype},
          {"bits", i.bits},
          {"eps", i.eps},
          {"max", i.max},
          {"min", i.min},
          {"tiny", i.tiny},
          {"smallest_normal", i.smallest_normal},
          {"smallest_subnormal", i.smallest_subnormal},
          {"resolution", i.resolution},
          {"maxexp", i.maxexp},
          {"minexp", i.minexp},
          {"exponent_bits", i.exponent_bits},
          {"mantissa_bits", i.mantissa_bits},
          {"bias", i.bias},
          {"precision", i.precision},
          {"has_inf", i.has_inf},
          {"nan", std::string(to_string(i.nan))},
          {"has_subnormals", i.has_subnormals}};
}

Json to_json(const ScaledInfo& i) {
  return {{"format", i.name},
          {"element", to_json(i.element)},
          {"scale", to_json(i.scale)},
          {"scope", i.scope},
          {"rule", i.rule},
          {"block_size", i.block_size},
          {"bits_per_value", i.bits_per_value},
          {"block_range_bits", i.block_range_bits},
          {"max", i.max},
          {"smallest_positive", i.smallest_positive},
          {"range_bits", i.range_bits}};
}

void render(std::ostream& out, const ScaledInfo& i) {
  const std::string covers =
      i.scope == "block" ? fmt::format("block of {}", i.block_size) : i.scope;
  out << fmt::format("{}: {} elements, one {} scale per {} ({} scales), {:.4g} bits per value\n",
                     i.name, i.element.dtype, i.scale.dtype, covers, i.rule, i.bits_per_value);
  out << fmt::format("  element: max {:g}, smallest subnormal {:g}, eps {:g}\n", i.element.max,
                     i.element.smallest_subnormal, i.element.eps);
  out << fmt::format("  within one scale: {:.3g} binades (max / smallest positive element)\n",
                     i.block_range_bits);
  out << fmt::format("  over all scales{}: max {:g}, smallest positive {:g} ({:.4g} binades)\n",
                     i.rule == "two_level" ? " (tensor scale 1)" : "", i.max, i.smallest_positive,
                     i.range_bits);
}

FInfo finfo_from_json(const Json& j, const std::string& where) {
  const detail::JsonReader r{where};
  FInfo i;
  i.dtype = r.str(j, "dtype", "");
  i.bits = int_at(r, j, "bits");
  i.eps = r.real(j, "eps", "");
  i.max = r.real(j, "max", "");
  i.min = r.real(j, "min", "");
  i.tiny = r.real(j, "tiny", "");
  i.smallest_normal = r.real(j, "smallest_normal", "");
  i.smallest_subnormal = r.real(j, "smallest_subnormal", "");
  i.resolution = r.real(j, "resolution", "");
  i.maxexp = int_at(r, j, "maxexp");
  i.minexp = int_at(r, j, "minexp");
  i.exponent_bits = int_at(r, j, "exponent_bits");
  i.mantissa_bits = int_at(r, j, "mantissa_bits");
  i.bias = int_at(r, j, "bias");
  i.precision = int_at(r, j, "precision");
  i.has_inf = r.boolean(j, "has_inf", "");
  i.nan = r.kind(j, "nan", "", NanEncoding::none);
  i.has_subnormals = r.boolean(j, "has_subnormals", "");
  return i;
}

Json to_json(const IInfo& i) {
  return {{"dtype", i.dtype},
          {"bits", i.bits},
          {"is_signed", i.is_signed},
          {"min", i.min},
          {"max", i.max}};
}

IInfo iinfo_from_json(const Json& j, const std::string& where) {
  const detail::JsonReader r{where};
  IInfo i;
  i.dtype = r.str(j, "dtype", "");
  i.bits = int_at(r, j, "bits");
  i.is_signed = r.boolean(j, "is_signed", "");
  i.min = r.i64(j, "min", "");
  i.max = r.u64(j, "max", "");
  return i;
}

void render(std::ostream& out, const std::vector<FInfo>& infos, const Terminal& term) {
  Table table({{"dtype"},
               {"bits", Align::right},
               {"e", Align::right},
               {"m", Align::right},
               {"bias", Align::right},
               {"max", Align::right},
               {"smallest_normal", Align::right},
               {"smallest_subn", Align::right},
               {"eps", Align::right},
               {"inf", Align::right},
               {"nan", Align::right},
               {"subn", Align::right}});
  for (const auto& i : infos)
    table.add({i.dtype, std::to_string(i.bits), std::to_string(i.exponent_bits),
               std::to_string(i.mantissa_bits), std::to_string(i.bias), num(i.max),
               num(i.smallest_normal), num(i.smallest_subnormal), num(i.eps), yes_no(i.has_inf),
               std::string(to_string(i.nan)), yes_no(i.has_subnormals)});
  table.render(out, term.width, "");
}

void render(std::ostream& out, const std::vector<IInfo>& infos, const Terminal& term) {
  // The limits exactly: they are what the command is asked for.
  Table table({{"dtype"}, {"bits", Align::right}, {"min", Align::right}, {"max", Align::right}});
  for (const auto& i : infos)
    table.add({i.dtype, std::to_string(i.bits), std::to_string(i.min), std::to_string(i.max)});
  table.render(out, term.width, "");
}

namespace {

void render_scaled(std::ostream& out, const RoundSummary& s) {
  const ScaledCounts& c = *s.scaled;
  const std::string what =
      s.scope == "block"
          ? fmt::format("{} blocks of {} along axis {}", c.scales, s.block_size, s.axis)
      : s.scope == "channel" ? fmt::format("{} channels of axis {}", c.scales, s.axis)
                             : std::string("one tensor scale");
  out << fmt::format(
      "{}: {} {} values through {} ({}): {} changed, {} saturated (in {} scales), {} underflowed "
      "to zero, {} NaN or inf in input ({} NaN scales){}\n",
      s.output, c.values, to_string(s.input), s.format, what, c.changed, c.saturated,
      c.saturated_scales, c.underflow, c.nan, c.nan_scales,
      s.codes ? "; wrote codes and scales" : "");
}

}  // namespace

void render(std::ostream& out, const RoundSummary& s) {
  if (s.scaled) return render_scaled(out, s);
  const RoundOptions& o = s.options;
  const RoundCounts& c = s.counts;
  out << fmt::format(
      "{}: {} {} values rounded to {} ({}{}{}): {} changed, {} overflowed, {} underflowed to zero, "
      "{} NaN in input{}\n",
      s.output, c.values, to_string(s.input), s.format, to_string(o.rounding),
      o.saturate ? ", saturate" : "", o.flush_subnormals ? ", flush-subnormals" : "", c.changed,
      c.overflow, c.underflow, c.nan,
      s.codes    ? fmt::format("; wrote {} codes", to_string(*s.codes))
      : s.stored ? fmt::format("; wrote {} values", to_string(*s.stored))
                 : "");
}

}  // namespace fpguard::report
