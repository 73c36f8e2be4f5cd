// Floating-point formats as data. A Format is a handful of numbers (exponent bits,
// mantissa bits, bias) plus how it treats infinities, NaN, subnormals and sign, in the
// spirit of LLVM's fltSemantics. Every limit (max, eps, tiny, ...), every name and the
// torch/NumPy-compatible finfo are derived from those numbers; there is no class per
// format. The named formats are one table (format.cpp); custom IEEE-like formats are
// written eXmY (optionally with an fn/fnuz suffix) and parsed into the same struct.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace fpguard {

// Where NaN lives in the encoding, which also decides whether infinities exist.
enum class NanEncoding {
  ieee,  // exponent all ones: mantissa 0 is +-inf, anything else NaN (IEEE 754)
  fn,    // only exponent and mantissa all ones is NaN; no inf (OCP FP8 E4M3, E8M0)
  fnuz,  // only the "negative zero" code 0x80.. is NaN; no inf, no -0 (AMD/Graphcore)
  none,  // every code is a finite number (OCP MX FP6/FP4)
};

std::string_view to_string(NanEncoding n);

struct Format {
  std::string name;  // canonical name (NumPy / ml_dtypes / torch spelling, or eXmY)
  int exponent_bits = 0;
  int mantissa_bits = 0;
  int bias = 0;
  NanEncoding nan = NanEncoding::ieee;
  bool has_subnormals = true;  // false: exponent code 0 is an ordinary binade (E8M0)
  bool is_signed = true;       // false: no sign bit, no zero (E8M0)

  bool has_inf() const { return nan == NanEncoding::ieee; }
  bool has_nan() const { return nan != NanEncoding::none; }
  bool has_negative_zero() const { return is_signed && nan != NanEncoding::fnuz; }
  // Formats that cannot express an overflow at all saturate by definition (OCP MX).
  bool always_saturates() const { return nan == NanEncoding::none; }

  int bits() const { return (is_signed ? 1 : 0) + exponent_bits + mantissa_bits; }
  int precision_bits() const { return mantissa_bits + 1; }
  // Exponent of the lowest binade whose quantum is 2^(emin - mantissa_bits).
  int emin() const { return has_subnormals ? 1 - bias : -bias; }
  // Exponent of the largest finite value.
  int emax() const;
  double max() const;                 // largest finite value
  double smallest_normal() const;     // 2^emin
  double smallest_subnormal() const;  // 2^(emin - m); equals smallest_normal without subnormals
  double eps() const;                 // 2^-m, the distance from 1 to the next value

  bool operator==(const Format& o) const;
};

// Whether every value of `f` (inf and NaN included) is a value of `wide`: storing f's
// values in wide is exact (float8_e4m3fn in float16: yes; bfloat16 in float16: no).
bool holds_every_value(const Format& wide, const Format& f);

// The table of named formats, in display order.
const std::vector<Format>& named_formats();
// Every name parse_format accepts by table (canonical names and aliases).
std::vector<std::string> format_names();

// Resolves a canonical name, an alias or a custom eXmY[fn|fnuz] spelling; nullopt if none.
// A custom spelling whose parameters equal a named format resolves to the named one.
std::optional<Format> find_format(std::string_view name);
// As find_format, but throws fpguard::Error("format '<name>'", ...) with a "did you mean"
// or the reason a custom eXmY spelling is malformed.
Format parse_format(std::string_view name);

// numpy.finfo / torch.finfo for any Format. Field meanings follow NumPy.
struct FInfo {
  std::string dtype;
  int bits = 0;
  double eps = 0, max = 0, min = 0, tiny = 0, smallest_normal = 0, smallest_subnormal = 0;
  double resolution = 0;  // 10^-precision
  int maxexp = 0;         // smallest power of two that overflows
  int minexp = 0;         // exponent of the smallest normal
  int exponent_bits = 0, mantissa_bits = 0, bias = 0;
  int precision = 0;  // decimal digits: int(-log10(eps)), as NumPy computes it
  bool has_inf = false;
  NanEncoding nan = NanEncoding::ieee;
  bool has_subnormals = true;
};
FInfo finfo(const Format& f);
// Exactly what Python's print(torch.finfo(dtype)) prints, e.g.
// finfo(resolution=0.001, min=-65504, max=65504, eps=0.000976562, smallest_normal=6.10352e-05,
// tiny=6.10352e-05, dtype=float16)
std::string to_torch_string(const FInfo& fi);

// ---- Scaled formats ------------------------------------------------------------------
// Low-precision elements sharing a scale, as accelerators run matrix products: OCP MX
// block formats (v1.0: 32 elements, one E8M0 power-of-two scale), NVFP4 (16 E2M1
// elements, an E4M3 block scale under a float32 tensor scale) and scaled FP8 (one float32
// scale per tensor or per channel). Like a Format, a ScaledFormat is data: an element
// format, a scale format, what one scale covers and the rule that chooses it; the named
// ones are a table (scaled.cpp). Quantizing into one is in round.hpp (round_scaled).

// How a scale is chosen from the largest magnitude (amax) of the values it covers.
enum class ScaleRule {
  // OCP MX: 2^(floor(log2 amax) - emax of the element format), clamped to the scale
  // format's exponent range (E8M0: [-127, 127]).
  power_of_two,
  // Scaled FP8: amax / (element max), in the carrier's precision (1 when amax is 0).
  amax,
  // NVFP4: a tensor scale s_t = amax(tensor) / (element max * scale max), and per block
  // s_b = amax(block) / (element max * s_t) rounded into the scale format.
  two_level,
};
std::string_view to_string(ScaleRule r);

// What one scale covers.
enum class ScaleScope {
  block,    // block_size consecutive elements along the blocking axis
  tensor,   // the whole tensor
  channel,  // one index of the channel axis (a weight's output channel)
};
std::string_view to_string(ScaleScope s);

struct ScaledFormat {
  std::string name;  // canonical: "mxfp8_e4m3", "nvfp4", "tensor:float8_e4m3fn", ...
  Format element;
  // float8_e8m0fnu (power_of_two), float8_e4m3fn (two_level) or float32 (amax).
  Format scale;
  ScaleScope scope = ScaleScope::block;
  ScaleRule rule = ScaleRule::power_of_two;
  int block_size = 0;  // elements per block (block scope), 0 otherwise
  // MXINT8: elements are 8-bit two's complement integers k with value k * 2^-6; `element`
  // holds the same values as a float format (e1m6, bias 1), whose codes are not theirs.
  bool integer_elements = false;

  bool operator==(const ScaledFormat& o) const;
};

// The named scaled formats, in display order.
const std::vector<ScaledFormat>& named_scaled_formats();
// Names parse_scaled_format accepts by table (canonical names and aliases).
std::vector<std::string> scaled_format_names();
// Resolves a named scaled format, an alias ("fp8" is tensor:float8_e4m3fn), or the custom
// spellings "tensor:ELEMENT", "channel:ELEMENT" and "block:ELEMENT:SCALE:SIZE" (SCALE
// float8_e8m0fnu for OCP MX power-of-two scales or float8_e4m3fn for NVFP4-style
// two-level scales, 1 <= SIZE <= 65536); nullopt when `name` is none of these shapes. A
// custom spelling equal to a named format resolves to it. Throws fpguard::Error for a
// custom spelling that is malformed (a bad element or scale format, a bad size).
std::optional<ScaledFormat> find_scaled_format(std::string_view name);
// As find_scaled_format, but throws fpguard::Error with a "did you mean" for unknown names.
ScaledFormat parse_scaled_format(std::string_view name);

// A scalar or a scaled format by name; a misspelt name gets a "did you mean" from both
// tables (a scalar-looking one keeps parse_format's). Throws fpguard::Error.
std::variant<Format, ScaledFormat> parse_any_format(const std::string& name);

// The precision a model runs in (run, check, plan; the CLI's --precision/--other-precision
// and Python's precision=/other_precision=): a scalar format, or a scaled one whose
// MatMul/Gemm/Conv operands are quantized into it while the other ops run in `format`.
struct Precision {
  Format format{};  // what the nodes run in: the other precision when scaled
  std::optional<ScaledFormat> scaled{};
  const std::string& name() const { return scaled ? scaled->name : format.name; }
};
// `name` (any format), with `other` the format of the other ops when `name` is scaled
// (ignored otherwise): a scalar low-precision format, else
// Error::in_option("other_precision", other, ...).
Precision parse_precision(const std::string& name, const std::string& other);

// The limits of a scaled format (`fpguard finfo mxfp8_e4m3`).
struct ScaledInfo {
  std::string name;
  FInfo element, scale;
  std::string scope;  // "block", "tensor", "channel"
  std::string rule;   // "power_of_two", "amax", "two_level"
  int block_size = 0;
  double bits_per_value = 0;  // element bits + the scale's bits spread over its block
  // Within one block (one scale): log2(element max / smallest positive element).
  double block_range_bits = 0;
  // Over all scales (power_of_two, two_level with a float32 tensor scale at 1): the largest
  // value and the smallest positive one, and log2 of their ratio. Scaled FP8 (amax) takes
  // any float32 scale: its range is float32's.
  double max = 0, smallest_positive = 0, range_bits = 0;
};
ScaledInfo finfo(const ScaledFormat& f);

// numpy.iinfo / torch.iinfo for the integer types.
struct IInfo {
  std::string dtype;
  int bits = 0;
  bool is_signed = true;
  std::int64_t min = 0;
  std::uint64_t max = 0;
};
const std::vector<IInfo>& integer_types();
IInfo iinfo(std::string_view name);  // throws Error with "did you mean"
std::string to_torch_string(const IInfo& ii);

}  // namespace fpguard
