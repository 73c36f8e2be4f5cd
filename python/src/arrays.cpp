// NumPy arrays as the bindings take them: dtype tests, contiguity, and the float input of
// the kernels (bindings.hpp).
#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"

namespace fpguard::python {

bool is_float32(const py::array& a) {
  return py::isinstance<py::array_t<float>>(a);
}
bool is_float64(const py::array& a) {
  return py::isinstance<py::array_t<double>>(a);
}

bool plain(const py::array& a) {
  return (a.flags() & py::array::c_style) && (a.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_);
}

std::string str(py::handle x) {
  return py::str(x).cast<std::string>();
}

std::vector<py::ssize_t> shape_of(const py::array& a) {
  return {a.shape(), a.shape() + a.ndim()};
}

py::array as_array(py::handle x, const char* name) {
  if (py::isinstance<py::array>(x)) return py::reinterpret_borrow<py::array>(x);
  auto a = py::array::ensure(x);
  if (!a)
    throw Error(name, "a " + str(py::type::handle_of(x).attr("__name__")) + " is not an array");
  return a;
}

std::optional<DType> dtype_named(const std::string& name) {
  for (int i = 0; i < static_cast<int>(DType::string); ++i) {
    const auto d = static_cast<DType>(i);
    if (to_string(d) == name) return d;
  }
  return std::nullopt;
}

Tensor tensor_copy(const py::array& a, DType d, const std::string& name) {
  const py::array c = plain(a) ? a : contiguous(a);
  Tensor t = Tensor::uninitialized(d, {c.shape(), c.shape() + c.ndim()});
  if (t.nbytes() != static_cast<std::size_t>(c.nbytes()))
    throw Error(name, "dtype " + str(c.dtype()) + " has an unexpected item size");
  if (t.nbytes()) std::memcpy(t.bytes(), c.data(), t.nbytes());
  return t;
}

py::array array_copy(const Tensor& t) {
  if (t.dtype() == DType::bfloat16) return array_copy(exec::convert(t, DType::float32));
  if (t.dtype() == DType::string) {
    py::list items;
    for (const auto& s : t.data<std::string>()) items.append(py::str(s));
    return py::module_::import("numpy")
        .attr("array")(items, "str")
        .attr("reshape")(py::tuple(py::cast(t.shape())))
        .cast<py::array>();
  }
  py::array a(py::dtype(std::string(to_string(t.dtype()))), t.shape());
  if (t.nbytes()) std::memcpy(a.mutable_data(), t.bytes(), t.nbytes());
  return a;
}

py::array contiguous(const py::array& a) {
  return py::module_::import("numpy").attr("require")(a, py::none(), "CA").cast<py::array>();
}

py::array float_input(py::handle x, const char* func, const char* name) {
  py::array a = as_array(x, name);
  if (!is_float32(a) && !is_float64(a))
    throw Error(name, "dtype " + str(a.dtype()) + " is not supported by " + func +
                          " (float32 or float64 only)");
  return plain(a) ? a : contiguous(a);
}

py::array float_output(py::handle x, const py::array& in, const char* func) {
  if (!py::isinstance<py::array>(x))
    throw Error("out", "a " + str(py::type::handle_of(x).attr("__name__")) +
                           " is not a numpy.ndarray or torch.Tensor");
  auto out = py::reinterpret_borrow<py::array>(x);
  if (is_float32(out) != is_float32(in) || !(is_float32(out) || is_float64(out)))
    throw Error("out",
                "dtype " + str(out.dtype()) + " differs from the input's " + str(in.dtype()));
  if (shape_of(out) != shape_of(in))
    throw Error("out", "shape " + str(out.attr("shape")) + " differs from the input's " +
                           str(in.attr("shape")));
  if (!out.writeable()) throw Error("out", "the array is read-only");
  if (!plain(out))
    throw Error("out", std::string("not a C-contiguous array: ") + func +
                           " writes its result in place, so out cannot be a strided view (pass "
                           "a contiguous array, or no out)");
  return out;
}

py::array float_result(const py::array& in, py::handle out, const char* func) {
  return out.is_none() ? py::array(in.dtype(), shape_of(in)) : float_output(out, in, func);
}

bool overlap_partially(const py::array& a, const py::array& b) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a.data());
  const auto pb = reinterpret_cast<std::uintptr_t>(b.data());
  const auto na = static_cast<std::uintptr_t>(a.nbytes());
  const auto nb = static_cast<std::uintptr_t>(b.nbytes());
  return pa != pb && pa < pb + nb && pb < pa + na;
}

}  // namespace fpguard::python
