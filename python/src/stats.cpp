// fpguard.stats: the statistics and per-format findings of `fpguard inspect` for one array,
// as a Stats object whose to_dict() is the array's entry of `inspect --json` (written by
// the report layer, report::to_json). float32/float64 arrays that are contiguous are read
// in place; other dtypes through a Tensor of their own dtype, as inspect reads a file.
#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fpguard/error.hpp"
#include "fpguard/report.hpp"
#include "fpguard/stats.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::python {

namespace {

using report::InspectedTensor;

std::vector<Format> formats_of(py::handle formats) {
  // One format (a name, a dtype, a finfo), or any iterable of them.
  if (py::isinstance<py::str>(formats) || !py::isinstance<py::iterable>(formats))
    return {format_of(formats)};
  std::vector<Format> out;
  for (py::handle f : formats) out.push_back(format_of(f));
  if (out.empty()) throw Error::in_option("formats", "", "no format given");
  return out;
}

StatsOptions options(double margin, int threads) {
  if (!(margin > 0 && margin <= 1))
    throw Error::in_option("margin", str(py::float_(margin)), "must be in (0, 1]");
  if (threads < 0)
    throw Error::in_option("threads", std::to_string(threads), "must be 0 (automatic) or more");
  StatsOptions o;
  o.margin = margin;
  o.threads = threads;
  return o;
}

template <class T>
Stats stats_in_place(const py::array& a, const std::vector<Format>& f, const StatsOptions& o) {
  const std::span<const T> x(static_cast<const T*>(a.data()), static_cast<std::size_t>(a.size()));
  py::gil_scoped_release nogil;
  return fpguard::stats(x, f, o);
}

// `a` copied into a Tensor of dtype `d`.
Stats stats_of_copy(const py::array& a, DType d, const std::vector<Format>& f,
                    const StatsOptions& o) {
  Tensor t = tensor_copy(a, d, "a");
  py::gil_scoped_release nogil;
  return fpguard::stats(t, f, o);
}

// dtype_name: the dtype the array's bytes hold when it is not the array's own (torch's
// bfloat16, passed as its int16 view by python/fpguard/__init__.py).
InspectedTensor stats_array(py::handle x, py::handle formats, double margin, std::string name,
                            int threads, std::optional<std::string> dtype_name) {
  const std::vector<Format> f = formats_of(formats);
  const StatsOptions o = options(margin, threads);
  py::array a = as_array(x, "a");
  const std::string dname = dtype_name ? *dtype_name : str(a.dtype());
  const std::optional<DType> d = dtype_named(dname);
  if (!d)
    throw Error(
        "a", "dtype " + dname + " is not supported by stats (float, integer or bool arrays only)");
  if (!plain(a)) a = contiguous(a);
  InspectedTensor t;
  t.name = std::move(name);
  t.dtype = *d;
  t.shape.assign(a.shape(), a.shape() + a.ndim());
  if (*d == DType::float32 && !dtype_name)
    t.stats = stats_in_place<float>(a, f, o);
  else if (*d == DType::float64 && !dtype_name)
    t.stats = stats_in_place<double>(a, f, o);
  else
    t.stats = stats_of_copy(a, *d, f, o);
  return t;
}

// A report-layer Json value as the Python object json.loads makes of it.
py::object to_python(const report::Json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

void bind_format_stats(py::module_& m) {
  py::class_<FormatStats>(m, "FormatStats",
                          "How a tensor fares in one format: one entry of inspect's \"formats\"")
      .def_property_readonly("format", [](const FormatStats& f) { return f.format.name; })
      .def_readonly("overflow", &FormatStats::overflow)
      .def_readonly("underflow", &FormatStats::underflow)
      .def_readonly("subnormal", &FormatStats::subnormal)
      .def_readonly("precision_loss", &FormatStats::precision_loss)
      .def_readonly("max_abs_error", &FormatStats::max_abs_error)
      .def_readonly("max_rel_error", &FormatStats::max_rel_error)
      .def_readonly("mean_rel_error", &FormatStats::mean_rel_error)
      .def_readonly("headroom_bits", &FormatStats::headroom_bits)
      .def_readonly("scale", &FormatStats::scale)
      .def_readonly("scale_for_square", &FormatStats::scale_for_square)
      .def_property_readonly("verdict",
                             [](const FormatStats& f) { return std::string(to_string(f.verdict)); })
      .def("__repr__", [](const FormatStats& f) {
        return "FormatStats(format='" + f.format.name + "', verdict='" +
               std::string(to_string(f.verdict)) + "', overflow=" + std::to_string(f.overflow) +
               ", underflow=" + std::to_string(f.underflow) +
               ", subnormal=" + std::to_string(f.subnormal) + ")";
      });
}

template <class Field>
auto tensor_field(Field TensorStats::*field) {
  return [field](const InspectedTensor& t) { return t.stats.tensor.*field; };
}

void bind_stats_class(py::module_& m) {
  py::class_<InspectedTensor>(m, "Stats",
                              "Statistics of one tensor: the fields of `fpguard inspect --json`")
      .def_readonly("name", &InspectedTensor::name)
      .def_property_readonly(
          "dtype", [](const InspectedTensor& t) { return std::string(to_string(t.dtype)); })
      .def_property_readonly("shape",
                             [](const InspectedTensor& t) { return py::tuple(py::cast(t.shape)); })
      .def_property_readonly("count", tensor_field(&TensorStats::count))
      .def_property_readonly("nan", tensor_field(&TensorStats::nan))
      .def_property_readonly("posinf", tensor_field(&TensorStats::posinf))
      .def_property_readonly("neginf", tensor_field(&TensorStats::neginf))
      .def_property_readonly("zeros", tensor_field(&TensorStats::zeros))
      .def_property_readonly("min", tensor_field(&TensorStats::min))
      .def_property_readonly("max", tensor_field(&TensorStats::max))
      .def_property_readonly("absmax", tensor_field(&TensorStats::absmax))
      .def_property_readonly("min_abs_nonzero", tensor_field(&TensorStats::min_abs_nonzero))
      .def_property_readonly("mean", tensor_field(&TensorStats::mean))
      .def_property_readonly("std", tensor_field(&TensorStats::std))
      .def_property_readonly("exponent_histogram", tensor_field(&TensorStats::exponent_histogram))
      .def_property_readonly("formats",
                             [](const InspectedTensor& t) {
                               py::dict out;
                               for (const auto& f : t.stats.formats)
                                 out[py::str(f.format.name)] = py::cast(f);
                               return out;
                             })
      .def("to_dict", [](const InspectedTensor& t) { return to_python(report::to_json(t)); })
      .def("__repr__", [](const InspectedTensor& t) {
        std::string verdicts;
        for (const auto& f : t.stats.formats)
          verdicts += (verdicts.empty() ? "" : ", ") + f.format.name + ": " +
                      std::string(to_string(f.verdict));
        return "Stats(name='" + t.name + "', dtype=" + std::string(to_string(t.dtype)) +
               ", count=" + std::to_string(t.stats.tensor.count) + ", verdicts={" + verdicts + "})";
      });
}

}  // namespace

void bind_stats(py::module_& m) {
  bind_format_stats(m);
  bind_stats_class(m);
  m.def("stats", &stats_array, py::arg("a"), py::arg("formats"), py::arg("margin"), py::arg("name"),
        py::arg("threads"), py::arg("dtype_name") = py::none());
}

}  // namespace fpguard::python
