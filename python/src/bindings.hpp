// The Python module fpguard._fpguard: what its translation units share. Each area of the
// API (formats, rounding, statistics, safety) binds its own functions; module.cpp makes the module
// and turns fpguard::Error into the Python exception fpguard.Error.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "fpguard/exec.hpp"
#include "fpguard/format.hpp"
#include "fpguard/model.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::python {

namespace py = pybind11;

void bind_formats(py::module_& m);
void bind_round(py::module_& m);
void bind_stats(py::module_& m);
void bind_safety(py::module_& m);
void bind_model(py::module_& m);
void bind_check(py::module_& m);
void bind_experiments(py::module_& m);

// The format `x` names: a format name or alias as the CLI takes it ("float16", "bf16",
// "e5m7"), a numpy.dtype or numpy scalar type, a torch.dtype, or a finfo. Throws
// fpguard::Error (unknown names with a "did you mean") like parse_format.
Format format_of(py::handle x);

// The precision `x` names (precision= of run and check): anything format_of takes, or a
// scaled format's name ("mxfp8_e4m3", "fp8", "block:E:S:N"), whose other ops run in `other`
// (parse_precision: the CLI's parser, with its "did you mean" and refusals).
Precision precision_of(py::handle x, const std::string& other);
// The name of a format argument that is a string, else "" (a dtype, a finfo).
std::string name_of(py::handle x);

// Arrays (arrays.cpp).
bool is_float32(const py::array& a);
bool is_float64(const py::array& a);
// C-contiguous and aligned: its data can be handed to the kernels as one span.
bool plain(const py::array& a);
std::string str(py::handle x);
std::vector<py::ssize_t> shape_of(const py::array& a);
// `x` as an array: an ndarray itself, anything else through numpy.asarray; Error(name,
// ...) for what numpy cannot make an array of.
py::array as_array(py::handle x, const char* name);
// A copy that is C-contiguous and aligned, for an input that is neither.
py::array contiguous(const py::array& a);
// The float32/float64 array `func` reads (argument `name`), in place where it is
// contiguous; Error(name, "dtype ... is not supported by <func> ...") for other dtypes.
py::array float_input(py::handle x, const char* func, const char* name = "a");
// `out`, checked to be an array `func` can write a result of `in`'s dtype and shape into.
py::array float_output(py::handle out, const py::array& in, const char* func);
// Where `func` writes a result of `in`'s dtype and shape: `out` (checked as above), or a
// new array when out is None.
py::array float_result(const py::array& in, py::handle out, const char* func);
// The DType NumPy spells `name` ("float16", "bool", "bfloat16" of ml_dtypes).
std::optional<DType> dtype_named(const std::string& name);
// `a`'s elements copied into a Tensor of dtype `d`, whose item size must be a's (NumPy's
// layout is the Tensor's for every numeric dtype); Error(name, ...) otherwise.
Tensor tensor_copy(const py::array& a, DType d, const std::string& name);
// A new array holding a copy of `t`: its own dtype, bfloat16 as float32 (NumPy has no
// bfloat16), strings as NumPy's str dtype.
py::array array_copy(const Tensor& t);
// Whether `a` and `b` share some bytes without being the same block (out=a is fine; a
// shifted view of the same buffer would be read after it is written).
bool overlap_partially(const py::array& a, const py::array& b);

// ---- long library calls (model.cpp) -----------------------------------------------------
// Ctrl-C during a library call that runs with the GIL released: the call's progress hook
// (or a run's observer) calls poll_interrupt(), which at most every few milliseconds takes
// the GIL and runs Python's signal handlers; when one raised (KeyboardInterrupt), it throws
// Interrupted, which unwinds the library call (it keeps nothing), and without_gil turns it
// back into that Python exception.
struct Interrupted {};
void poll_interrupt();
template <class F>
auto without_gil(F&& f) {
  try {
    py::gil_scoped_release nogil;
    return f();
  } catch (const Interrupted&) {
    throw py::error_already_set();
  }
}

// A model as fpguard.load gives it (python/src/model.cpp): its unnamed nodes have check's
// display names (analysis::name_nodes: run, check, plan and convert name nodes so, as the
// CLI does); `file_names` keeps the names the file gives them ("" for none).
struct LoadedModel {
  model::Model model;
  std::vector<std::string> file_names;
  std::string path;  // as given to load
};
// One input set from the package's [(name, array, dtype name or None), ...]: each array
// copied into a Tensor of its dtype (or of the dtype named: bfloat16 bits in a uint16 view).
std::vector<NamedValue> input_set(const py::list& items);

}  // namespace fpguard::python
