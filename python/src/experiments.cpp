// fpguard.gemm_error, fpguard.accum, fpguard.targets: the precision experiments
// (experiments.hpp) with the options of `fpguard gemm-error`, `accum` and `targets` by their
// Python names. Each returns the JSON the CLI's --json prints (the report layer's writer, one
// spelling of the field names), whose rows python/fpguard/__init__.py makes Records of.
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/report.hpp"

namespace fpguard::python {

namespace {

std::vector<Format> formats_of(const std::vector<py::object>& names) {
  std::vector<Format> out;
  for (const auto& n : names) out.push_back(format_of(n));
  return out;
}

// Scalar formats (any type format_of takes) and scaled ones by name, as --formats.
std::vector<GemmInput> gemm_inputs_of(const std::vector<py::object>& names) {
  std::vector<GemmInput> out;
  for (const auto& n : names)
    out.push_back(py::isinstance<py::str>(n) ? parse_any_format(name_of(n)) : format_of(n));
  return out;
}

std::string gemm_error_json(const std::vector<std::int64_t>& sizes,
                            const std::vector<py::object>& formats, const std::string& accumulate,
                            const std::string& accumulation, const std::string& output,
                            const std::string& distribution, int samples, std::uint64_t seed,
                            int threads) {
  GemmErrorOptions o;
  // The CLI's checks of --sizes (positive, fits in memory), on the same text.
  std::string list;
  for (const auto n : sizes) {
    if (!list.empty()) list += ',';
    list += std::to_string(n);
  }
  o.sizes = parse_sizes(list);
  o.formats = gemm_inputs_of(formats);
  if (o.formats.empty()) throw Error::in_option("formats", "", "no format given");
  o.accumulate = parse_format_or_same(accumulate);
  o.output = parse_format_or_same(output);
  o.order = parse_accumulation_order(accumulation);
  o.distribution = parse_distribution(distribution);
  if (samples < 1) throw Error::in_option("samples", std::to_string(samples), "must be at least 1");
  o.samples = samples;
  o.seed = seed;
  o.threads = threads;
  report::GemmErrorTable t{o.distribution, o.seed, {}};
  t.rows = without_gil([&] { return gemm_error(o); });
  return report::to_json(t).dump();
}

// One row per format; with `all` (formats=None: every accum format, as --all), a format the
// options do not fit is a skipped row naming the Error instead of a failure.
std::string accum_json(const std::optional<std::vector<py::object>>& formats, double value,
                       double start, std::uint64_t n) {
  const bool all = !formats;
  const std::vector<Format> fs = all ? accum_formats() : formats_of(*formats);
  if (fs.empty()) throw Error::in_option("formats", "", "no format given");
  AccumOptions o;
  o.value = value;
  o.start = start;
  o.n = n;
  std::vector<report::AccumEntry> entries;
  for (const auto& f : fs) {
    try {
      entries.push_back({f.name, accum_limits(f, o), ""});
    } catch (const Error& e) {
      if (!all) throw;
      entries.push_back({f.name, std::nullopt, e.what()});
    }
  }
  return report::to_json(entries).dump();
}

std::string targets_json(const std::optional<std::string>& name,
                         const std::optional<std::string>& format) {
  report::TargetTable t;
  if (name)
    t.targets.push_back(find_target(*name));
  else
    t.targets = targets();
  if (format && !find_scaled_format(*format)) t.format = parse_format(*format);
  return report::to_json(t).dump();
}

}  // namespace

void bind_experiments(py::module_& m) {
  m.def("gemm_error", &gemm_error_json, py::arg("sizes"), py::arg("formats"), py::arg("accumulate"),
        py::arg("accumulation"), py::arg("output"), py::arg("distribution"), py::arg("samples"),
        py::arg("seed"), py::arg("threads"));
  m.def("accum", &accum_json, py::arg("formats"), py::arg("value"), py::arg("start"), py::arg("n"));
  m.def("targets", &targets_json, py::arg("name"), py::arg("format"));
}

}  // namespace fpguard::python
