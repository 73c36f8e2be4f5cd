#include "fpguard/format.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "fpguard/error.hpp"
#include "table.hpp"

namespace fpguard {

std::string_view to_string(NanEncoding n) {
  switch (n) {
    case NanEncoding::ieee:
      return "ieee";
    case NanEncoding::fn:
      return "fn";
    case NanEncoding::fnuz:
      return "fnuz";
    case NanEncoding::none:
      return "none";
  }
  return "?";
}

int Format::emax() const {
  const int top = (1 << exponent_bits) - 1;  // largest exponent code
  switch (nan) {
    case NanEncoding::ieee:
      return top - 1 - bias;
    // With no mantissa bits, "exponent and mantissa all ones" is the whole top code.
    case NanEncoding::fn:
      return (mantissa_bits == 0 ? top - 1 : top) - bias;
    case NanEncoding::fnuz:
    case NanEncoding::none:
      return top - bias;
  }
  return 0;
}

double Format::max() const {
  // Largest significand as an integer (implicit bit included): all ones, except where
  // the all-ones mantissa of the top binade is the NaN code.
  const double all_ones = std::ldexp(1.0, mantissa_bits + 1) - 1;
  const bool top_mantissa_is_nan = nan == NanEncoding::fn && mantissa_bits > 0;
  const double sig = top_mantissa_is_nan ? all_ones - 1 : all_ones;
  return std::ldexp(sig, emax() - mantissa_bits);
}

double Format::smallest_normal() const {
  return std::ldexp(1.0, emin());
}
double Format::smallest_subnormal() const {
  return has_subnormals ? std::ldexp(1.0, emin() - mantissa_bits) : smallest_normal();
}
double Format::eps() const {
  return std::ldexp(1.0, -mantissa_bits);
}

bool holds_every_value(const Format& wide, const Format& f) {
  // Each binade of f is a multiple of its quantum 2^(e - m), at least f's finest quantum
  // 2^(emin - m): a value of wide where wide's own quantum divides it, i.e. where wide has
  // as many mantissa bits (its normal range) and a finest quantum no coarser.
  return f.mantissa_bits <= wide.mantissa_bits && f.max() <= wide.max() &&
         f.emin() - f.mantissa_bits >= wide.emin() - wide.mantissa_bits &&
         (f.is_signed <= wide.is_signed) && (!f.has_inf() || wide.has_inf()) &&
         (!f.has_nan() || wide.has_nan());
}

bool Format::operator==(const Format& o) const {
  return exponent_bits == o.exponent_bits && mantissa_bits == o.mantissa_bits && bias == o.bias &&
         nan == o.nan && has_subnormals == o.has_subnormals && is_signed == o.is_signed;
}

namespace {

using detail::lower;
using Row = detail::NamedRow<Format>;

Row row(const char* name, int e, int m, int bias, NanEncoding nan,
        std::initializer_list<const char*> aliases, bool subnormals = true, bool is_signed = true) {
  Row r;
  r.format.name = name;
  r.format.exponent_bits = e;
  r.format.mantissa_bits = m;
  r.format.bias = bias;
  r.format.nan = nan;
  r.format.has_subnormals = subnormals;
  r.format.is_signed = is_signed;
  for (const char* a : aliases) r.aliases.emplace_back(a);
  return r;
}

const std::vector<Row>& table() {
  using N = NanEncoding;
  // name, e, m, bias, NaN encoding, aliases[, subnormals, signed]
  static const std::vector<Row> rows = {
      row("float64", 11, 52, 1023, N::ieee, {"fp64", "double"}),
      row("float32", 8, 23, 127, N::ieee, {"fp32", "float"}),
      row("tf32", 8, 10, 127, N::ieee, {}),
      row("float16", 5, 10, 15, N::ieee, {"fp16", "half"}),
      row("bfloat16", 8, 7, 127, N::ieee, {"bf16"}),
      row("float8_e4m3fn", 4, 3, 7, N::fn, {"fp8_e4m3fn", "e4m3"}),
      row("float8_e4m3fnuz", 4, 3, 8, N::fnuz, {"fp8_e4m3fnuz"}),
      row("float8_e5m2", 5, 2, 15, N::ieee, {"fp8_e5m2", "e5m2"}),
      row("float8_e5m2fnuz", 5, 2, 16, N::fnuz, {"fp8_e5m2fnuz"}),
      row("float6_e2m3fn", 2, 3, 1, N::none, {"fp6_e2m3"}),
      row("float6_e3m2fn", 3, 2, 3, N::none, {"fp6_e3m2"}),
      row("float4_e2m1fn", 2, 1, 1, N::none, {"fp4_e2m1", "fp4"}),
      row("float8_e8m0fnu", 8, 0, 127, N::fn, {"e8m0"}, /*subnormals=*/false, /*signed=*/false),
  };
  return rows;
}

// Parses eXmY[fn|fnuz]. Returns nullopt when `s` does not have that shape at all, and
// throws when it has the shape but the numbers are out of range.
std::optional<Format> parse_custom(std::string_view original, std::string_view s) {
  if (s.size() < 4 || s[0] != 'e') return std::nullopt;
  int x = 0, y = 0;
  const char* p = s.data() + 1;
  const char* end = s.data() + s.size();
  // No leading zeros: a format's name must parse back to it, and "e04m3" would name an
  // IEEE-like format "e4m3", which is the alias of float8_e4m3fn (found by fuzzing).
  const auto plain = [](const char* b, const char* e) { return e - b == 1 || *b != '0'; };
  auto rx = std::from_chars(p, end, x);
  if (rx.ec != std::errc{} || rx.ptr == p || rx.ptr == end || *rx.ptr != 'm') return std::nullopt;
  if (!plain(p, rx.ptr)) return std::nullopt;
  p = rx.ptr + 1;
  auto ry = std::from_chars(p, end, y);
  if (ry.ec != std::errc{} || ry.ptr == p || !plain(p, ry.ptr)) return std::nullopt;
  const std::string_view suffix(ry.ptr, static_cast<std::size_t>(end - ry.ptr));
  NanEncoding nan;
  if (suffix.empty())
    nan = NanEncoding::ieee;
  else if (suffix == "fn")
    nan = NanEncoding::fn;
  else if (suffix == "fnuz")
    nan = NanEncoding::fnuz;
  else
    return std::nullopt;
  const std::string where = "format '" + std::string(original) + "'";
  if (x < 2 || x > 11)
    throw Error(where, "custom eXmY needs 2 <= X <= 11 exponent bits, got " + std::to_string(x));
  if (y < 0 || y > 52)
    throw Error(where, "custom eXmY needs 0 <= Y <= 52 mantissa bits, got " + std::to_string(y));
  Format f;
  f.exponent_bits = x;
  f.mantissa_bits = y;
  f.nan = nan;
  // IEEE convention; the AMD/Graphcore fnuz variants shift the bias by one to use the
  // top binade for numbers (as float8_e4m3fnuz, float8_e5m2fnuz).
  f.bias = (1 << (x - 1)) - 1 + (nan == NanEncoding::fnuz ? 1 : 0);
  f.name = "e" + std::to_string(x) + "m" + std::to_string(y) + std::string(suffix);
  if (nan == NanEncoding::ieee && y == 0)
    throw Error(where, "an IEEE-like format needs a mantissa bit to encode NaN; write e" +
                           std::to_string(x) + "m0fn for one with a NaN code and no inf");
  // Carriers are float64, so every value of the format must be a float64 value.
  if (f.emax() > 1023 || f.emin() - y < -1074)
    throw Error(where, "its values do not fit in float64 (the widest carrier)");
  return f;
}

}  // namespace

const std::vector<Format>& named_formats() {
  static const std::vector<Format> formats = detail::formats_of(table());
  return formats;
}

std::vector<std::string> format_names() {
  return detail::names_of(table());
}

std::optional<Format> find_format(std::string_view name) {
  return detail::lookup(table(), lower(name),
                        [&](const std::string& key) { return parse_custom(name, key); });
}

Format parse_format(std::string_view name) {
  if (auto f = find_format(name)) return *f;
  const std::string where = "format '" + std::string(name) + "'";
  if (auto scaled = find_scaled_format(name))
    throw Error(where,
                "is a scaled format (elements sharing a scale); only a scalar format "
                "(float16, float8_e4m3fn, ...) is accepted here");
  std::string msg = "unknown format";
  if (auto hint = did_you_mean(lower(name), format_names()); !hint.empty())
    msg += "; did you mean '" + hint + "'?";
  else
    msg +=
        " (known: float64, float32, tf32, float16, bfloat16, float8_e4m3fn, float8_e4m3fnuz, "
        "float8_e5m2, float8_e5m2fnuz, float6_e2m3fn, float6_e3m2fn, float4_e2m1fn, "
        "float8_e8m0fnu, or a custom eXmY[fn|fnuz])";
  throw Error(where, msg);
}

FInfo finfo(const Format& f) {
  FInfo i;
  i.dtype = f.name;
  i.bits = f.bits();
  i.eps = f.eps();
  i.max = f.max();
  i.min = f.is_signed ? -i.max : f.smallest_normal();
  i.tiny = i.smallest_normal = f.smallest_normal();
  i.smallest_subnormal = f.smallest_subnormal();
  i.precision = static_cast<int>(-std::log10(i.eps));
  i.resolution = std::pow(10.0, -i.precision);
  i.maxexp = f.emax() + 1;
  i.minexp = f.emin();
  i.exponent_bits = f.exponent_bits;
  i.mantissa_bits = f.mantissa_bits;
  i.bias = f.bias;
  i.has_inf = f.has_inf();
  i.nan = f.nan;
  i.has_subnormals = f.has_subnormals;
  return i;
}

std::string to_torch_string(const FInfo& fi) {
  // torch formats these doubles through a default std::ostream (6 significant digits).
  std::ostringstream os;
  os << "finfo(resolution=" << fi.resolution << ", min=" << fi.min << ", max=" << fi.max
     << ", eps=" << fi.eps << ", smallest_normal=" << fi.smallest_normal << ", tiny=" << fi.tiny
     << ", dtype=" << fi.dtype << ")";
  return os.str();
}

const std::vector<IInfo>& integer_types() {
  static const std::vector<IInfo> types = [] {
    std::vector<IInfo> v;
    for (int bits : {8, 16, 32, 64, 4}) {
      for (bool is_signed : {true, false}) {
        IInfo i;
        i.dtype = std::string(is_signed ? "int" : "uint") + std::to_string(bits);
        i.bits = bits;
        i.is_signed = is_signed;
        if (is_signed) {
          i.max = (std::uint64_t{1} << (bits - 1)) - 1;
          i.min = -static_cast<std::int64_t>(i.max) - 1;
        } else {
          i.max = bits == 64 ? std::numeric_limits<std::uint64_t>::max()
                             : (std::uint64_t{1} << bits) - 1;
          i.min = 0;
        }
        v.push_back(i);
      }
    }
    return v;
  }();
  return types;
}

IInfo iinfo(std::string_view name) {
  const std::string key = lower(name);
  std::vector<std::string> names;
  for (const auto& i : integer_types()) {
    if (i.dtype == key) return i;
    names.push_back(i.dtype);
  }
  std::string msg = "unknown integer type";
  if (auto hint = did_you_mean(key, names); !hint.empty())
    msg += "; did you mean '" + hint + "'?";
  else
    msg += " (known: int8, uint8, int16, uint16, int32, uint32, int64, uint64, int4, uint4)";
  throw Error("integer type '" + std::string(name) + "'", msg);
}

std::string to_torch_string(const IInfo& ii) {
  // torch prints iinfo limits through a double, hence "2.14748e+09" for int32.
  std::ostringstream os;
  os << "iinfo(min=" << static_cast<double>(ii.min) << ", max=" << static_cast<double>(ii.max)
     << ", dtype=" << ii.dtype << ")";
  return os.str();
}

}  // namespace fpguard
