// The Python module fpguard._fpguard: what its translation units share. Each area of the
// API (formats, rounding) binds its own functions; module.cpp makes the module and turns
// fpguard::Error into the Python exception fpguard.Error.
#pragma once

#include <pybind11/pybind11.h>

#include "fpguard/format.hpp"

namespace fpguard::python {

namespace py = pybind11;

void bind_formats(py::module_& m);
void bind_round(py::module_& m);

// The format `x` names: a format name or alias as the CLI takes it ("float16", "bf16",
// "e5m7"), a numpy.dtype or numpy scalar type, a torch.dtype, or a finfo. Throws
// fpguard::Error (unknown names with a "did you mean") like parse_format.
Format format_of(py::handle x);

}  // namespace fpguard::python
