// fpguard.safe_divide, fpguard.safe_rsqrt and fpguard.LossScaler (include/fpguard/safety.hpp,
// loss_scaler.hpp). Contiguous inputs are read in place, `out` and the gradients of
// LossScaler.unscale_ are written in place, and the GIL is released while the kernels run.
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fpguard/error.hpp"
#include "fpguard/loss_scaler.hpp"
#include "fpguard/safety.hpp"

namespace fpguard::python {

namespace {

template <class T>
std::span<T> span_of(py::array& a) {
  return {static_cast<T*>(a.mutable_data()), static_cast<std::size_t>(a.size())};
}
template <class T>
std::span<const T> cspan_of(const py::array& a) {
  return {static_cast<const T*>(a.data()), static_cast<std::size_t>(a.size())};
}

template <class T>
void divide(const py::array& a, const py::array& b, py::array& out, double eps_scale,
            const std::optional<Format>& f) {
  const auto sa = cspan_of<T>(a), sb = cspan_of<T>(b);
  const auto so = span_of<T>(out);
  py::gil_scoped_release nogil;
  if (f)
    safe_divide(sa, sb, so, eps_scale, *f);
  else
    safe_divide(sa, sb, so, eps_scale);
}

py::array safe_divide_arrays(py::handle a_, py::handle b_, double eps_scale, py::handle fmt,
                             py::handle out_) {
  const std::optional<Format> f =
      fmt.is_none() ? std::nullopt : std::optional<Format>(format_of(fmt));
  py::array a = float_input(a_, "safe_divide", "a");
  py::array b = float_input(b_, "safe_divide", "b");
  if (is_float32(a) != is_float32(b))
    throw Error("b", "dtype " + str(b.dtype()) + " differs from a's " + str(a.dtype()));
  if (shape_of(a) != shape_of(b))
    throw Error("b", "shape " + str(b.attr("shape")) + " differs from a's " + str(a.attr("shape")) +
                         " (safe_divide does not broadcast)");
  py::array out = float_result(a, out_, "safe_divide");
  if (overlap_partially(a, out)) a = py::array(a.attr("copy")());
  if (overlap_partially(b, out)) b = py::array(b.attr("copy")());
  if (is_float32(a))
    divide<float>(a, b, out, eps_scale, f);
  else
    divide<double>(a, b, out, eps_scale, f);
  return out;
}

template <class T>
void rsqrt(const py::array& x, py::array& out, double eps_scale, const std::optional<Format>& f) {
  const auto sx = cspan_of<T>(x);
  const auto so = span_of<T>(out);
  py::gil_scoped_release nogil;
  if (f)
    safe_rsqrt(sx, so, eps_scale, *f);
  else
    safe_rsqrt(sx, so, eps_scale);
}

py::array safe_rsqrt_array(py::handle x_, double eps_scale, py::handle fmt, py::handle out_) {
  const std::optional<Format> f =
      fmt.is_none() ? std::nullopt : std::optional<Format>(format_of(fmt));
  py::array x = float_input(x_, "safe_rsqrt", "x");
  py::array out = float_result(x, out_, "safe_rsqrt");
  if (overlap_partially(x, out)) x = py::array(x.attr("copy")());
  if (is_float32(x))
    rsqrt<float>(x, out, eps_scale, f);
  else
    rsqrt<double>(x, out, eps_scale, f);
  return out;
}

// ---- LossScaler ----------------------------------------------------------------------

// The gradient arrays unscale_ writes in place: float32/float64, writable, C-contiguous.
std::vector<py::array> gradients(py::handle grads) {
  std::vector<py::handle> items;
  if (py::isinstance<py::list>(grads) || py::isinstance<py::tuple>(grads)) {
    for (py::handle g : grads) items.push_back(g);
  } else {
    items.push_back(grads);
  }
  std::vector<py::array> out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string name = items.size() == 1 && items[0].ptr() == grads.ptr()
                                 ? std::string("grads")
                                 : "grads[" + std::to_string(i) + "]";
    if (!py::isinstance<py::array>(items[i]))
      throw Error(name, "a " + str(py::type::handle_of(items[i]).attr("__name__")) +
                            " is not a numpy.ndarray or torch.Tensor");
    auto a = py::reinterpret_borrow<py::array>(items[i]);
    if (!is_float32(a) && !is_float64(a))
      throw Error(name, "dtype " + str(a.dtype()) +
                            " is not supported by unscale_ (float32 or float64 only)");
    if (!a.writeable()) throw Error(name, "the array is read-only");
    if (!plain(a))
      throw Error(name,
                  "not a C-contiguous array: unscale_ works in place, so a gradient "
                  "cannot be a strided view");
    out.push_back(a);
  }
  return out;
}

bool unscale(const LossScaler& s, py::handle grads) {
  std::vector<py::array> arrays = gradients(grads);
  std::vector<std::span<float>> f32;
  std::vector<std::span<double>> f64;
  for (auto& a : arrays) {
    if (is_float32(a))
      f32.push_back(span_of<float>(a));
    else
      f64.push_back(span_of<double>(a));
  }
  py::gil_scoped_release nogil;
  // One found_inf over all of them; every array is unscaled, as GradScaler.unscale_ does.
  const bool inf32 = s.unscale_and_check(std::span<const std::span<float>>(f32));
  const bool inf64 = s.unscale_and_check(std::span<const std::span<double>>(f64));
  return inf32 || inf64;
}

bool truth(py::handle x, const char* name) {
  if (py::isinstance<py::bool_>(x)) return x.cast<bool>();
  if (str(py::type::handle_of(x).attr("__name__")) == "bool_")
    return PyObject_IsTrue(x.ptr()) == 1;  // numpy
  throw Error::in_option(name, str(py::repr(x)), "must be True or False");
}

void update(LossScaler& s, py::handle found_inf, py::handle new_scale) {
  if (found_inf.is_none() == new_scale.is_none())
    throw Error::in_option("found_inf", "",
                           "give found_inf (after a step) or new_scale (to set the scale), "
                           "exactly one of them");
  if (!new_scale.is_none()) {
    double v = 0;
    try {
      v = py::float_(py::reinterpret_borrow<py::object>(new_scale)).cast<double>();
    } catch (const py::error_already_set&) {
      throw Error::in_option("new_scale", str(py::repr(new_scale)), "must be a number");
    }
    s.update(v);
  } else
    s.update(truth(found_inf, "found_inf"));
}

// GradScaler.state_dict(): {} when disabled.
py::dict state_dict(const LossScaler& s) {
  py::dict d;
  if (!s.enabled()) return d;
  d["scale"] = s.scale();
  d["growth_factor"] = s.growth_factor();
  d["backoff_factor"] = s.backoff_factor();
  d["growth_interval"] = s.growth_interval();
  d["_growth_tracker"] = s.growth_tracker();
  return d;
}

// GradScaler.load_state_dict(): ignored when disabled; an empty dict is refused.
void load_state_dict(LossScaler& s, const py::dict& d) {
  if (!s.enabled()) return;
  if (d.empty())
    throw Error("LossScaler state",
                "the dict is empty (a disabled scaler's state_dict(), as GradScaler says)");
  for (const auto& [key, value] : d)
    if (py::isinstance<py::float_>(value) && !std::isfinite(value.cast<double>()))
      throw Error("LossScaler state", "field '" + str(key) + "' is " + str(value) +
                                          ", which the state (JSON) cannot hold");
  const auto json = py::module_::import("json").attr("dumps")(d).cast<std::string>();
  s = LossScaler::from_json(json);
}

std::string repr(const LossScaler& s) {
  return "LossScaler(scale=" + str(py::float_(s.scale())) +
         ", growth_tracker=" + std::to_string(s.growth_tracker()) +
         ", growth_factor=" + str(py::float_(s.growth_factor())) +
         ", backoff_factor=" + str(py::float_(s.backoff_factor())) +
         ", growth_interval=" + std::to_string(s.growth_interval()) +
         ", enabled=" + (s.enabled() ? "True" : "False") + ")";
}

void bind_loss_scaler(py::module_& m) {
  py::class_<LossScaler>(m, "LossScaler",
                         "Dynamic loss scaling with torch.cuda.amp.GradScaler's semantics")
      .def(py::init([](double init_scale, double growth_factor, double backoff_factor,
                       int growth_interval, bool enabled) {
             LossScaler::Options o;
             o.init_scale = init_scale;
             o.growth_factor = growth_factor;
             o.backoff_factor = backoff_factor;
             o.growth_interval = growth_interval;
             o.enabled = enabled;
             return LossScaler(o);
           }),
           py::arg("init_scale") = 65536.0, py::arg("growth_factor") = 2.0,
           py::arg("backoff_factor") = 0.5, py::arg("growth_interval") = 2000,
           py::arg("enabled") = true)
      .def("get_scale", &LossScaler::scale)
      .def("get_growth_factor", &LossScaler::growth_factor)
      .def("get_backoff_factor", &LossScaler::backoff_factor)
      .def("get_growth_interval", &LossScaler::growth_interval)
      .def("is_enabled", &LossScaler::enabled)
      .def_property_readonly("growth_tracker", &LossScaler::growth_tracker)
      .def(
          "scale", [](const LossScaler& s, double loss) { return s.scale_loss(loss); },
          py::arg("loss"))
      .def("unscale_", &unscale, py::arg("grads"))
      .def("update", &update, py::arg("found_inf") = py::none(), py::kw_only(),
           py::arg("new_scale") = py::none())
      .def("state_dict", &state_dict)
      .def("load_state_dict", &load_state_dict, py::arg("state_dict"))
      .def("__repr__", &repr);
}

}  // namespace

void bind_safety(py::module_& m) {
  m.def("safe_divide", &safe_divide_arrays, py::arg("a"), py::arg("b"), py::arg("eps_scale") = 1.0,
        py::arg("fmt") = py::none(), py::arg("out") = py::none());
  m.def("safe_rsqrt", &safe_rsqrt_array, py::arg("x"), py::arg("eps_scale") = 1.0,
        py::arg("fmt") = py::none(), py::arg("out") = py::none());
  bind_loss_scaler(m);
}

}  // namespace fpguard::python
