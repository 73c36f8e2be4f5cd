// fpguard.round, fpguard.encode, fpguard.decode on NumPy arrays, in scalar formats and in
// scaled ones (MX, NVFP4, scaled FP8: along `axis`, as `fpguard round --axis`) (torch tensors
// arrive as their .numpy() views, python/fpguard/__init__.py). Contiguous input is read in place;
// `out` is written in place; the GIL is released while the kernels run.
#include <pybind11/numpy.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fpguard/error.hpp"
#include "fpguard/round.hpp"

namespace fpguard::python {

namespace {

RoundOptions options(const std::string& rounding, bool saturate, bool flush, py::handle seed) {
  RoundOptions o;
  o.rounding = parse_rounding(rounding);
  o.saturate = saturate;
  o.flush_subnormals = flush;
  try {
    o.seed = seed.cast<std::uint64_t>();
  } catch (const py::cast_error&) {
    throw Error::in_option("seed", str(py::repr(seed)), "not an integer from 0 to 2**64-1");
  }
  return o;
}

template <class T>
void round_into(const py::array& in, py::array& out, const Format& f, const RoundOptions& o) {
  const std::span<const T> src(static_cast<const T*>(in.data()),
                               static_cast<std::size_t>(in.size()));
  const std::span<T> dst(static_cast<T*>(out.mutable_data()), static_cast<std::size_t>(out.size()));
  py::gil_scoped_release nogil;
  fpguard::round(src, dst, f, o);
}

// The scaled format `fmt` names (a misspelt one with its "did you mean"), or nullopt for a
// scalar format.
std::optional<ScaledFormat> scaled_of(py::handle fmt) {
  const std::string name = name_of(fmt);
  if (name.empty()) return std::nullopt;
  auto any = parse_any_format(name);
  if (auto* s = std::get_if<ScaledFormat>(&any)) return *s;
  return std::nullopt;
}

// A scaled format rounds to nearest-even, saturating, by its definition (as `round` says).
ScaledLayout scaled_layout(const ScaledFormat& f, const py::array& in, const std::string& rounding,
                           bool flush_subnormals, const py::object& axis) {
  if (rounding != "nearest-even" || flush_subnormals)
    throw Error::in_option(flush_subnormals ? "flush_subnormals" : "rounding",
                           flush_subnormals ? "" : rounding,
                           f.name + " rounds to nearest-even, saturating (its definition)");
  ScaledLayout l{.shape = {in.shape(), in.shape() + in.ndim()}};
  l.axis = axis.is_none() ? (f.scope == ScaleScope::channel ? 0 : -1) : axis.cast<int>();
  return l;
}

template <class T>
void round_scaled_into(const py::array& in, py::array& out, const ScaledLayout& l,
                       const ScaledFormat& f, ScaledCodes* codes) {
  const std::span<const T> src(static_cast<const T*>(in.data()),
                               static_cast<std::size_t>(in.size()));
  const std::span<T> dst(static_cast<T*>(out.mutable_data()), static_cast<std::size_t>(out.size()));
  py::gil_scoped_release nogil;
  fpguard::round_scaled(src, dst, l, f, {}, codes);
}

// Quantize-dequantize into a scaled format (`out` may be `a`); with `codes`, the encoding.
py::array round_scaled_array(py::handle a, const ScaledFormat& f, const std::string& rounding,
                             bool flush_subnormals, py::handle out, const py::object& axis,
                             ScaledCodes* codes, const char* func) {
  py::array in = float_input(a, func);
  const ScaledLayout l = scaled_layout(f, in, rounding, flush_subnormals, axis);
  py::array dst = float_result(in, out, func);
  if (overlap_partially(in, dst)) in = py::array(in.attr("copy")());
  if (is_float32(in))
    round_scaled_into<float>(in, dst, l, f, codes);
  else
    round_scaled_into<double>(in, dst, l, f, codes);
  return dst;
}

py::object round_array(py::handle a, py::handle fmt, const std::string& rounding, bool saturate,
                       bool flush_subnormals, py::handle seed, py::handle out,
                       const py::object& axis) {
  if (const auto s = scaled_of(fmt))
    return round_scaled_array(a, *s, rounding, flush_subnormals, out, axis, nullptr, "round");
  if (!axis.is_none())
    throw Error::in_option("axis", str(axis),
                           "only scaled formats (mxfp8_e4m3, nvfp4, fp8, ...) have one");
  const Format f = format_of(fmt);
  const RoundOptions o = options(rounding, saturate, flush_subnormals, seed);
  py::array in = float_input(a, "round");
  py::array dst = float_result(in, out, "round");
  if (overlap_partially(in, dst)) in = py::array(in.attr("copy")());
  if (is_float32(in))
    round_into<float>(in, dst, f, o);
  else
    round_into<double>(in, dst, f, o);
  return dst;
}

// Codes as the CLI's `round --encode` computes them: from the values in double (exact for
// both input dtypes), in the narrowest unsigned type that holds the format's bits.
template <class Code>
py::array encode_as(const py::array& in, const Format& f, const RoundOptions& o) {
  py::array out(py::dtype::of<Code>(), shape_of(in));
  const auto n = static_cast<std::size_t>(in.size());
  const std::span<Code> dst(static_cast<Code*>(out.mutable_data()), n);
  const bool f32 = is_float32(in);
  const void* data = in.data();
  {
    py::gil_scoped_release nogil;
    std::vector<double> x(n);
    if (f32) {
      const auto* p = static_cast<const float*>(data);
      std::copy(p, p + n, x.begin());
    } else {
      const auto* p = static_cast<const double*>(data);
      std::copy(p, p + n, x.begin());
    }
    fpguard::encode(std::span<const double>(x), dst, f, o);
  }
  return out;
}

// A scaled format's encoding as `round --encode` writes its .npz: {codes, scales[,
// global_scale]} (scaled_code_tensors).
py::dict encode_scaled(py::handle a, const ScaledFormat& f, const std::string& rounding,
                       bool flush_subnormals, const py::object& axis) {
  ScaledCodes codes;
  const py::array values =
      round_scaled_array(a, f, rounding, flush_subnormals, py::none(), axis, &codes, "encode");
  const DType input = is_float32(values) ? DType::float32 : DType::float64;
  py::dict out;
  for (const auto& t :
       scaled_code_tensors(codes, f, input, {values.shape(), values.shape() + values.ndim()}))
    out[py::str(t.name)] = array_copy(t.tensor);
  return out;
}

py::object encode_array(py::handle a, py::handle fmt, const std::string& rounding, bool saturate,
                        bool flush_subnormals, py::handle seed, const py::object& axis) {
  if (const auto s = scaled_of(fmt)) return encode_scaled(a, *s, rounding, flush_subnormals, axis);
  if (!axis.is_none())
    throw Error::in_option("axis", str(axis),
                           "only scaled formats (mxfp8_e4m3, nvfp4, fp8, ...) have one");
  const Format f = format_of(fmt);
  const RoundOptions o = options(rounding, saturate, flush_subnormals, seed);
  const py::array in = float_input(a, "encode");
  if (f.bits() <= 8) return encode_as<std::uint8_t>(in, f, o);
  if (f.bits() <= 16) return encode_as<std::uint16_t>(in, f, o);
  if (f.bits() <= 32) return encode_as<std::uint32_t>(in, f, o);
  return encode_as<std::uint64_t>(in, f, o);
}

// Codes of any integer dtype as wide as the format (signed ones are read as their bit
// patterns, as torch's x.view(torch.int16) gives them).
template <class Code>
void decode_into(const py::array& codes, py::array& out, const Format& f) {
  const auto n = static_cast<std::size_t>(codes.size());
  const auto* src = static_cast<const Code*>(codes.data());
  auto* dst = static_cast<double*>(out.mutable_data());
  py::gil_scoped_release nogil;
  for (std::size_t i = 0; i < n; ++i) dst[i] = fpguard::decode(src[i], f);
}

py::array decode_array(py::handle codes, py::handle fmt) {
  const Format f = format_of(fmt);
  py::array c = as_array(codes, "codes");
  const auto bytes = c.itemsize();
  const char kind = c.dtype().kind();
  if ((kind != 'u' && kind != 'i') || (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8))
    throw Error("codes", "dtype " + str(c.dtype()) +
                             " is not supported by decode (bit patterns: uint8, uint16, uint32, "
                             "uint64 or the signed types of those widths)");
  if (bytes * 8 < f.bits())
    throw Error("codes", "dtype " + str(c.dtype()) + " holds " + std::to_string(bytes * 8) +
                             " bits; " + f.name + " codes have " + std::to_string(f.bits()));
  if (!plain(c)) c = contiguous(c);
  py::array out(py::dtype::of<double>(), shape_of(c));
  if (bytes == 1) decode_into<std::uint8_t>(c, out, f);
  if (bytes == 2) decode_into<std::uint16_t>(c, out, f);
  if (bytes == 4) decode_into<std::uint32_t>(c, out, f);
  if (bytes == 8) decode_into<std::uint64_t>(c, out, f);
  return out;
}

}  // namespace

void bind_round(py::module_& m) {
  m.def("round", &round_array, py::arg("a"), py::arg("fmt"), py::arg("rounding") = "nearest-even",
        py::arg("saturate") = false, py::arg("flush_subnormals") = false, py::arg("seed") = 0,
        py::arg("out") = py::none(), py::arg("axis") = py::none());
  m.def("encode", &encode_array, py::arg("a"), py::arg("fmt"), py::arg("rounding") = "nearest-even",
        py::arg("saturate") = false, py::arg("flush_subnormals") = false, py::arg("seed") = 0,
        py::arg("axis") = py::none());
  m.def("decode", &decode_array, py::arg("codes"), py::arg("fmt"));
}

}  // namespace fpguard::python
