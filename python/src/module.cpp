// fpguard._fpguard: the extension behind `import fpguard` (python/fpguard/__init__.py).
#include <exception>

#include "bindings.hpp"
#include "fpguard/error.hpp"
#include "fpguard/version.hpp"

PYBIND11_MODULE(_fpguard, m) {
  namespace py = pybind11;
  m.doc() = "fpguard's C++ library (use the package fpguard, which re-exports it)";
  m.attr("__version__") = fpguard::kVersion;
  // fpguard.Error is a ValueError whose message is the CLI's error line without its
  // "fpguard: error: " prefix: "<where>: <what>", always one line.
  static py::exception<fpguard::Error> error(m, "Error", PyExc_ValueError);
  error.attr("__module__") = "fpguard";  // shown as fpguard.Error, where users catch it
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const fpguard::Error& e) {
      error(fpguard::one_line(e.what()).c_str());
    }
  });
  fpguard::python::bind_formats(m);
  fpguard::python::bind_round(m);
  fpguard::python::bind_stats(m);
  fpguard::python::bind_safety(m);
  fpguard::python::bind_model(m);
  fpguard::python::bind_check(m);
  fpguard::python::bind_experiments(m);
  for (const char* name : {"finfo", "iinfo", "Stats", "FormatStats"})
    m.attr(name).attr("__module__") = "fpguard";
}
