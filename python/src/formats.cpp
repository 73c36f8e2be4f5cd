// fpguard.finfo, fpguard.iinfo, fpguard.formats: the C++ format table (format.hpp) as
// objects with torch.finfo's / torch.iinfo's attributes and print.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <sstream>
#include <string>

#include "bindings.hpp"
#include "fpguard/error.hpp"
#include "fpguard/report.hpp"

namespace fpguard::python {

namespace {

bool is_torch_dtype(py::handle x) {
  const auto type = py::type::handle_of(x);
  return py::str(type.attr("__module__")).cast<std::string>() == "torch" &&
         py::str(type.attr("__name__")).cast<std::string>() == "dtype";
}

// The name NumPy or torch gives the type `x` stands for ("float16" for numpy.float16,
// numpy.dtype("float16") and torch.float16), or `x` itself when it is a string; nullopt
// when `x` is none of those. torch is never imported: a torch.dtype comes from it.
std::optional<std::string> type_name(py::handle x) {
  if (py::isinstance<py::str>(x)) return x.cast<std::string>();
  if (x.is_none()) return std::nullopt;
  if (is_torch_dtype(x)) {
    const std::string s = py::str(x);  // "torch.float16"
    return s.substr(s.find('.') + 1);
  }
  try {
    return py::dtype::from_args(py::reinterpret_borrow<py::object>(x))
        .attr("name")
        .cast<std::string>();
  } catch (const py::error_already_set&) {
    return std::nullopt;
  }
}

[[noreturn]] void not_a_type(const char* what, py::handle x) {
  throw Error(std::string(what) + " " + py::repr(x).cast<std::string>(),
              "not a name, numpy.dtype or torch.dtype");
}

// A complex type's limits are those of its real part, as numpy.finfo and torch.finfo give.
std::string real_part(const std::string& name) {
  if (name == "complex32") return "float16";
  if (name == "complex64") return "float32";
  if (name == "complex128") return "float64";
  return name;
}

IInfo iinfo_of(py::handle x) {
  const auto name = type_name(x);
  if (!name) not_a_type("integer type", x);
  return iinfo(*name);
}

void bind_finfo(py::module_& m) {
  py::class_<FInfo>(m, "finfo",
                    "Limits of a floating-point format, with torch.finfo's attributes and print "
                    "(and NumPy's field names). finfo(x): x is a format name or alias as the CLI "
                    "takes it, a numpy.dtype or a torch.dtype.")
      .def(py::init([](py::handle x) { return finfo(format_of(x)); }), py::arg("type"))
      .def_readonly("dtype", &FInfo::dtype)
      .def_readonly("bits", &FInfo::bits)
      .def_readonly("eps", &FInfo::eps)
      .def_readonly("max", &FInfo::max)
      .def_readonly("min", &FInfo::min)
      .def_readonly("tiny", &FInfo::tiny)
      .def_readonly("smallest_normal", &FInfo::smallest_normal)
      .def_readonly("smallest_subnormal", &FInfo::smallest_subnormal)
      .def_readonly("resolution", &FInfo::resolution)
      .def_readonly("precision", &FInfo::precision)
      .def_readonly("maxexp", &FInfo::maxexp)
      .def_readonly("minexp", &FInfo::minexp)
      .def_readonly("exponent_bits", &FInfo::exponent_bits)
      .def_readonly("mantissa_bits", &FInfo::mantissa_bits)
      .def_readonly("bias", &FInfo::bias)
      .def_readonly("has_inf", &FInfo::has_inf)
      .def_readonly("has_subnormals", &FInfo::has_subnormals)
      .def_property_readonly("nan", [](const FInfo& i) { return std::string(to_string(i.nan)); })
      // NumPy's names for the field widths.
      .def_property_readonly("nexp", [](const FInfo& i) { return i.exponent_bits; })
      .def_property_readonly("nmant", [](const FInfo& i) { return i.mantissa_bits; })
      .def("__repr__", [](const FInfo& i) { return to_torch_string(i); })
      .def("__eq__",
           [](const FInfo& a, py::handle b) {
             return py::isinstance<FInfo>(b) && a.dtype == b.cast<const FInfo&>().dtype;
           })
      .def("__hash__", [](const FInfo& i) { return py::hash(py::str(i.dtype)); });
}

void bind_iinfo(py::module_& m) {
  py::class_<IInfo>(m, "iinfo",
                    "Limits of an integer type, with torch.iinfo's attributes and print. "
                    "iinfo(x): x is a name (int8, uint4, ...), a numpy.dtype or a torch.dtype.")
      .def(py::init([](py::handle x) { return iinfo_of(x); }), py::arg("type"))
      .def_readonly("dtype", &IInfo::dtype)
      .def_readonly("bits", &IInfo::bits)
      .def_readonly("min", &IInfo::min)
      .def_readonly("max", &IInfo::max)
      .def_readonly("is_signed", &IInfo::is_signed)
      .def_property_readonly("kind", [](const IInfo& i) { return i.is_signed ? "i" : "u"; })
      .def("__repr__", [](const IInfo& i) { return to_torch_string(i); })
      .def("__eq__",
           [](const IInfo& a, py::handle b) {
             return py::isinstance<IInfo>(b) && a.dtype == b.cast<const IInfo&>().dtype;
           })
      .def("__hash__", [](const IInfo& i) { return py::hash(py::str(i.dtype)); });
}

// The limits of a scaled format (`fpguard finfo mxfp8_e4m3`): str() is the CLI's text,
// to_dict() its --json object; fpguard.finfo gives one for a scaled format's name.
void bind_scaled_finfo(py::module_& m) {
  py::class_<ScaledInfo>(m, "scaled_finfo",
                         "Limits of a scaled format (MX, NVFP4, scaled FP8): the element and "
                         "scale formats as finfo objects, the block size, the bits per value "
                         "and the dynamic range (fpguard finfo mxfp8_e4m3).")
      .def(py::init([](const std::string& name) { return finfo(parse_scaled_format(name)); }),
           py::arg("name"))
      .def_readonly("name", &ScaledInfo::name)
      .def_readonly("element", &ScaledInfo::element)
      .def_readonly("scale", &ScaledInfo::scale)
      .def_readonly("scope", &ScaledInfo::scope)
      .def_readonly("rule", &ScaledInfo::rule)
      .def_readonly("block_size", &ScaledInfo::block_size)
      .def_readonly("bits_per_value", &ScaledInfo::bits_per_value)
      .def_readonly("block_range_bits", &ScaledInfo::block_range_bits)
      .def_readonly("max", &ScaledInfo::max)
      .def_readonly("smallest_positive", &ScaledInfo::smallest_positive)
      .def_readonly("range_bits", &ScaledInfo::range_bits)
      .def_property_readonly("dtype", [](const ScaledInfo& i) { return i.name; })
      .def("to_dict",
           [](const ScaledInfo& i) {
             return py::module_::import("json").attr("loads")(report::to_json(i).dump());
           })
      .def("__str__",
           [](const ScaledInfo& i) {
             std::ostringstream out;
             report::render(out, i);
             std::string s = out.str();
             while (!s.empty() && s.back() == '\n') s.pop_back();
             return s;
           })
      .def("__repr__",
           [](const ScaledInfo& i) {
             return "scaled_finfo(name=" + i.name + ", element=" + i.element.dtype +
                    ", scale=" + i.scale.dtype + ", scope=" + i.scope +
                    ", block_size=" + std::to_string(i.block_size) + ")";
           })
      .def("__eq__", [](const ScaledInfo& a, py::handle b) {
        return py::isinstance<ScaledInfo>(b) && a.name == b.cast<const ScaledInfo&>().name;
      });
  // fpguard.finfo(x) of a name: a scaled_finfo for a scaled format, else None (then finfo).
  m.def("_scaled_finfo", [](py::handle x) -> py::object {
    // As `fpguard finfo`: a name that is no scaled format is a scalar one (or its error).
    if (!py::isinstance<py::str>(x)) return py::none();
    const auto s = find_scaled_format(name_of(x));
    return s ? py::cast(finfo(*s)) : py::object(py::none());
  });
}

}  // namespace

std::string name_of(py::handle x) {
  return py::isinstance<py::str>(x) ? real_part(x.cast<std::string>()) : std::string();
}

Precision precision_of(py::handle x, const std::string& other) {
  if (py::isinstance<py::str>(x)) return parse_precision(name_of(x), other);
  return {.format = format_of(x)};
}

Format format_of(py::handle x) {
  if (py::isinstance<FInfo>(x)) return parse_format(x.cast<const FInfo&>().dtype);
  const auto name = type_name(x);
  if (!name) not_a_type("format", x);
  return parse_format(real_part(*name));
}

void bind_formats(py::module_& m) {
  bind_finfo(m);
  bind_iinfo(m);
  bind_scaled_finfo(m);
  m.def(
      "formats",
      [] {
        std::vector<FInfo> v;
        for (const auto& f : named_formats()) v.push_back(finfo(f));
        return v;
      },
      "Every named format, in the CLI's order (fpguard finfo --all), as finfo objects.");
  m.def("integer_types", &integer_types,
        "Every integer type (fpguard iinfo --all), as iinfo objects.");
  m.def("format_names", &format_names,
        "Every name and alias a format argument takes (besides custom eXmY[fn|fnuz]).");
}

}  // namespace fpguard::python
