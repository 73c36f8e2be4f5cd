// The precision a model runs in, by name: one parser for the CLI's --precision and
// --other-precision and for Python's precision= and other_precision= (docs/executor.md).
#include "fpguard/error.hpp"
#include "fpguard/format.hpp"

namespace fpguard {

std::variant<Format, ScaledFormat> parse_any_format(const std::string& name) {
  if (auto s = find_scaled_format(name)) return *s;
  // A misspelt scaled name gets its hint (scalar names keep parse_format's).
  if (!find_format(name) && did_you_mean(name, format_names()).empty())
    if (auto hint = did_you_mean(name, scaled_format_names()); !hint.empty())
      throw Error("format '" + name + "'", "unknown format; did you mean '" + hint + "'?");
  return parse_format(name);
}

Precision parse_precision(const std::string& name, const std::string& other) {
  const auto any = parse_any_format(name);
  const auto* s = std::get_if<ScaledFormat>(&any);
  if (!s) return {.format = std::get<Format>(any)};
  if (find_scaled_format(other))
    throw Error::in_option("other_precision", other,
                           "a scaled format, but the ops other than MatMul, Gemm and Conv run "
                           "in a scalar format such as bfloat16 or float16");
  const Format f = parse_format(other);
  if (f.name == "float32" || f.name == "float64")
    throw Error::in_option("other_precision", other,
                           "not emulated, but with a scaled precision the other ops run in a "
                           "low-precision format such as bfloat16 or float16");
  return {.format = f, .scaled = *s};
}

}  // namespace fpguard
