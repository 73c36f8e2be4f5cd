// Scaled formats as data: the named table (OCP MX v1.0, NVFP4, scaled FP8) and the custom
// spellings tensor:E, channel:E and block:E:S:N.
#include <charconv>
#include <cmath>

#include "fpguard/error.hpp"
#include "fpguard/format.hpp"
#include "table.hpp"

namespace fpguard {

std::string_view to_string(ScaleRule r) {
  switch (r) {
    case ScaleRule::power_of_two:
      return "power_of_two";
    case ScaleRule::amax:
      return "amax";
    case ScaleRule::two_level:
      return "two_level";
  }
  return "?";
}

std::string_view to_string(ScaleScope s) {
  switch (s) {
    case ScaleScope::block:
      return "block";
    case ScaleScope::tensor:
      return "tensor";
    case ScaleScope::channel:
      return "channel";
  }
  return "?";
}

bool ScaledFormat::operator==(const ScaledFormat& o) const {
  return element == o.element && scale == o.scale && scope == o.scope && rule == o.rule &&
         block_size == o.block_size && integer_elements == o.integer_elements;
}

namespace {

constexpr int kMaxBlock = 1 << 16;

// MXINT8's elements k * 2^-6, |k| <= 127, are exactly the values of a sign-magnitude
// e1m6 with bias 1 and no NaN: exponent code 0 holds k < 64, code 1 holds 64 <= k < 128.
Format mxint8_element() {
  Format f;
  f.name = "int8";
  f.exponent_bits = 1;
  f.mantissa_bits = 6;
  f.bias = 1;
  f.nan = NanEncoding::none;
  return f;
}

ScaledFormat block_format(const char* name, const Format& element, const char* scale, int size) {
  ScaledFormat s;
  s.name = name;
  s.element = element;
  s.scale = parse_format(scale);
  s.scope = ScaleScope::block;
  s.rule = s.scale.mantissa_bits == 0 ? ScaleRule::power_of_two : ScaleRule::two_level;
  s.block_size = size;
  return s;
}

using detail::lower;
using Row = detail::NamedRow<ScaledFormat>;

const std::vector<Row>& table() {
  static const std::vector<Row> rows = [] {
    const auto mx = [](const char* name, const char* element) {
      return block_format(name, parse_format(element), "float8_e8m0fnu", 32);
    };
    ScaledFormat mxint8 = block_format("mxint8", mxint8_element(), "float8_e8m0fnu", 32);
    mxint8.integer_elements = true;
    std::vector<Row> r = {
        {mx("mxfp8_e4m3", "float8_e4m3fn"), {}},
        {mx("mxfp8_e5m2", "float8_e5m2"), {}},
        {mx("mxfp6_e3m2", "float6_e3m2fn"), {}},
        {mx("mxfp6_e2m3", "float6_e2m3fn"), {}},
        {mx("mxfp4_e2m1", "float4_e2m1fn"), {"mxfp4"}},
        {mxint8, {}},
        {block_format("nvfp4", parse_format("float4_e2m1fn"), "float8_e4m3fn", 16), {}},
    };
    for (const char* scope : {"tensor", "channel"})
      for (const char* e : {"float8_e4m3fn", "float8_e5m2"}) {
        ScaledFormat s;
        s.name = std::string(scope) + ":" + e;
        s.element = parse_format(e);
        s.scale = parse_format("float32");
        s.scope = scope[0] == 't' ? ScaleScope::tensor : ScaleScope::channel;
        s.rule = ScaleRule::amax;
        // fp8: per-tensor float8_e4m3fn, as ModelOpt's FP8 PTQ deploys it.
        r.push_back({s, s.name == "tensor:float8_e4m3fn" ? std::vector<std::string>{"fp8"}
                                                         : std::vector<std::string>{}});
      }
    return r;
  }();
  return rows;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t at = 0;;) {
    const std::size_t next = s.find(sep, at);
    parts.push_back(s.substr(at, next == std::string_view::npos ? next : next - at));
    if (next == std::string_view::npos) return parts;
    at = next + 1;
  }
}

Format element_format(std::string_view text, const std::string& where) {
  const auto e = find_format(text);
  if (!e) throw Error(where, "unknown element format '" + std::string(text) + "'");
  if (!e->is_signed || e->bits() > 16)
    throw Error(where, "element format " + e->name + " must be signed and at most 16 bits");
  return *e;
}

int block_size(std::string_view text, const std::string& where) {
  int n = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), n);
  if (r.ec != std::errc{} || r.ptr != text.data() + text.size() || n < 1 || n > kMaxBlock)
    throw Error(where, "block size '" + std::string(text) + "' must be an integer from 1 to " +
                           std::to_string(kMaxBlock));
  return n;
}

// tensor:E, channel:E or block:E:S:N; nullopt for other shapes.
std::optional<ScaledFormat> parse_custom(std::string_view original, const std::string& key) {
  const auto parts = split(key, ':');
  if (parts.size() < 2) return std::nullopt;
  const std::string where = "format '" + std::string(original) + "'";
  ScaledFormat s;
  if ((parts[0] == "tensor" || parts[0] == "channel") && parts.size() == 2) {
    s.element = element_format(parts[1], where);
    s.scale = parse_format("float32");
    s.scope = parts[0] == "tensor" ? ScaleScope::tensor : ScaleScope::channel;
    s.rule = ScaleRule::amax;
    s.name = std::string(parts[0]) + ":" + s.element.name;
    return s;
  }
  if (parts[0] != "block") return std::nullopt;
  if (parts.size() != 4) throw Error(where, "expected block:ELEMENT:SCALE:SIZE");
  s.element = element_format(parts[1], where);
  const auto scale = find_format(parts[2]);
  if (!scale || !(*scale == parse_format("float8_e8m0fnu") || *scale == parse_format("e4m3")))
    throw Error(where, "scale format '" + std::string(parts[2]) +
                           "' must be float8_e8m0fnu (power-of-two scales, OCP MX) or "
                           "float8_e4m3fn (two-level scales, NVFP4)");
  s.scale = *scale;
  s.rule = scale->mantissa_bits == 0 ? ScaleRule::power_of_two : ScaleRule::two_level;
  s.block_size = block_size(parts[3], where);
  s.name = "block:" + s.element.name + ":" + s.scale.name + ":" + std::to_string(s.block_size);
  return s;
}

}  // namespace

const std::vector<ScaledFormat>& named_scaled_formats() {
  static const std::vector<ScaledFormat> formats = detail::formats_of(table());
  return formats;
}

std::vector<std::string> scaled_format_names() {
  return detail::names_of(table());
}

std::optional<ScaledFormat> find_scaled_format(std::string_view name) {
  return detail::lookup(table(), lower(name),
                        [&](const std::string& key) { return parse_custom(name, key); });
}

ScaledFormat parse_scaled_format(std::string_view name) {
  if (auto f = find_scaled_format(name)) return *f;
  std::string msg = "unknown scaled format";
  if (auto hint = did_you_mean(lower(name), scaled_format_names()); !hint.empty())
    msg += "; did you mean '" + hint + "'?";
  else
    msg +=
        " (known: mxfp8_e4m3, mxfp8_e5m2, mxfp6_e3m2, mxfp6_e2m3, mxfp4_e2m1, mxint8, nvfp4, "
        "fp8, tensor:ELEMENT, channel:ELEMENT, block:ELEMENT:SCALE:SIZE)";
  throw Error("format '" + std::string(name) + "'", msg);
}

ScaledInfo finfo(const ScaledFormat& f) {
  ScaledInfo i;
  i.name = f.name;
  i.element = finfo(f.element);
  i.element.dtype = f.element.name;
  i.scale = finfo(f.scale);
  i.scope = std::string(to_string(f.scope));
  i.rule = std::string(to_string(f.rule));
  i.block_size = f.block_size;
  const double scale_bits = f.scope == ScaleScope::block ? f.scale.bits() : 0;
  i.bits_per_value = f.element.bits() + (f.block_size ? scale_bits / f.block_size : 0);
  const double emax = f.element.max(), emin = f.element.smallest_subnormal();
  i.block_range_bits = std::log2(emax / emin);
  switch (f.rule) {
    case ScaleRule::power_of_two:
      i.max = emax * f.scale.max();
      i.smallest_positive = emin * f.scale.smallest_normal();
      break;
    case ScaleRule::two_level:
      i.max = emax * f.scale.max();
      i.smallest_positive = emin * f.scale.smallest_subnormal();
      break;
    case ScaleRule::amax: {
      const Format fp32 = parse_format("float32");
      i.max = fp32.max();
      i.smallest_positive = fp32.smallest_subnormal();
      break;
    }
  }
  i.range_bits = std::log2(i.max / i.smallest_positive);
  return i;
}

}  // namespace fpguard
