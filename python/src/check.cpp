// fpguard.check, fpguard.plan and fpguard.convert: the analysis and rewrite layers on a
// loaded model, with the options of `fpguard check`, `plan` and `convert` by their library
// names. A Diagnosis or Plan stays a C++ object; its JSON is the report layer's (the CLI's
// --json, one writer of the field names), which python/fpguard/__init__.py wraps in
// attribute-access objects. The GIL is released while the analysis runs, and Ctrl-C stops it
// (poll_interrupt from the progress hooks).
#include <pybind11/stl.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/inputs.hpp"
#include "fpguard/io.hpp"
#include "fpguard/report.hpp"
#include "fpguard/rewrite.hpp"

namespace fpguard::python {

namespace {

template <class T>
T option(const py::dict& o, const char* key, T def) {
  return o.contains(key) && !o[key].is_none() ? o[key].cast<T>() : def;
}

// The options the package passes as a dict (python/fpguard/__init__.py documents them):
// those of CheckOptions by their names, and the input options (seed, shape).
analysis::CheckOptions check_options(const py::dict& d) {
  analysis::CheckOptions o;
  const Precision p =
      precision_of(d["precision"], option<std::string>(d, "other_precision", "bfloat16"));
  o.precision = p.format;
  o.scaled = p.scaled;
  o.amax_margin = option<int>(d, "amax_margin", 0);
  for (const auto& k : option<std::vector<std::string>>(d, "keep_unscaled", {}))
    o.keep_unscaled.insert(k);
  if (!o.keep_unscaled.empty() && !o.scaled)
    throw Error::in_option(
        "keep_unscaled", "",
        "applies to a scaled precision (fp8, mxfp8_e4m3, nvfp4, ...), not " + p.name());
  const std::string reference = option<std::string>(d, "reference", "float32");
  if (reference == "float64" || reference == "fp64")
    o.reference = DType::float64;
  else if (reference != "float32" && reference != "fp32")
    throw Error::in_option("reference", reference, "expected float32 or float64");
  if (const auto a = option<std::string>(d, "accumulate", ""); !a.empty())
    o.accumulate = parse_format(a);
  const auto order = option<std::string>(d, "accumulation", "sequential");
  o.accumulation = parse_accumulation_order(order).value_or(AccumulationOrder{});
  for (const auto& k : option<std::vector<std::string>>(d, "keep_fp32", {})) o.keep_fp32.insert(k);
  for (const auto& k : option<std::vector<std::string>>(d, "keep_fp32_ops", {}))
    o.keep_fp32_ops.insert(k);
  for (const auto& r : option<std::vector<std::string>>(d, "disable_rules", {}))
    o.disabled_rules.insert(r);
  o.fail_on = analysis::parse_fail_on(option<std::vector<std::string>>(d, "fail_on", {}));
  o.round_options.saturate = option<bool>(d, "saturate", false);
  o.min_cosine = option<double>(d, "min_cosine", 0.999);
  o.atol = option<std::optional<double>>(d, "atol", std::nullopt);
  o.rtol = option<std::optional<double>>(d, "rtol", std::nullopt);
  o.threads = option<int>(d, "threads", 0);
  if (o.threads < 0)
    throw Error::in_option("threads", std::to_string(o.threads), "must be 0 (automatic) or more");
  o.progress = [](std::size_t, std::size_t) { poll_interrupt(); };
  return o;
}

// The input sets given (lists of (name, array, dtype)); `samples` is for generated ones.
std::vector<std::vector<NamedValue>> given_sets(const py::object& sets, const py::dict& d) {
  const auto samples = option<std::size_t>(d, "samples", 1);
  if (samples != 1)
    throw Error::in_option("samples", std::to_string(samples),
                           "applies to generated inputs (inputs=None); give a list of input "
                           "sets instead");
  std::vector<std::vector<NamedValue>> out;
  for (py::handle set : sets) out.push_back(input_set(set.cast<py::list>()));
  if (out.empty()) throw Error::in_option("inputs", "", "no input set given");
  return out;
}

// `samples` generated input sets as the CLI makes them (seed, shape: its --seed and
// --shape), each generated when the analysis reads it, as `fpguard check --samples` does: a
// check of many sets holds one set at a time, and Ctrl-C stops it between any two.
struct GeneratedSets {
  inputs::Options options;
  std::size_t samples = 1;
  inputs::SetList list;
  std::vector<inputs::Generated> generated;  // set 0's (and any later set's, as read)
  std::vector<NamedValue> first;             // set 0
};

GeneratedSets generated_sets(const LoadedModel& l, const py::dict& d) {
  GeneratedSets g;
  g.options.seed = option<std::uint64_t>(d, "seed", 0);
  g.options.shape = option<std::vector<std::string>>(d, "shape", {});
  g.samples = option<std::size_t>(d, "samples", 1);
  without_gil([&] {
    g.list = inputs::list_samples(g.options, l.model, g.samples);
    g.first = g.list.read(0, &g.generated);
    return 0;
  });
  return g;
}

void write_html_file(const std::string& model, const std::string& path,
                     const std::function<void(std::ostream&)>& write) {
  check_not_same_file(model, path, "path");
  write_file_atomic(path, write);
}

analysis::Diagnosis check(py::handle m, const py::object& sets, const py::dict& d) {
  const LoadedModel& l = m.cast<const LoadedModel&>();
  analysis::CheckOptions o = check_options(d);
  if (!sets.is_none()) {
    const auto given = given_sets(sets, d);
    return without_gil([&] { return analysis::check(l.model, given, o); });
  }
  GeneratedSets g = generated_sets(l, d);
  o.generated = g.generated;
  return without_gil([&] {
    analysis::Diagnosis r =
        analysis::check(l.model, analysis::read_lazily(g.list, &g.generated), o);
    r.generated = g.generated;
    return r;
  });
}

analysis::Plan plan(py::handle m, const py::object& sets, const py::dict& d) {
  const LoadedModel& l = m.cast<const LoadedModel&>();
  analysis::PlanOptions po;
  po.check = check_options(d);  // a scaled precision too, as `fpguard plan` takes
  if (po.check.precision.name == "float32")
    throw Error::in_option("precision", "float32", "nothing to plan: it is float32");
  const auto objective = option<std::string>(d, "objective", "fewest-fp32");
  if (objective == "fewest-fp32" || objective == "fewest_fp32")
    po.objective = analysis::Objective::fewest_fp32;
  else if (objective == "fewest-casts" || objective == "fewest_casts")
    po.objective = analysis::Objective::fewest_casts;
  else
    throw Error::in_option("objective", objective, "expected fewest-fp32 or fewest-casts");
  const auto scale = option<std::string>(d, "scale", "auto");
  if (scale == "auto")
    po.scaler = rewrite::exact_scaler(po.check.precision);
  else if (scale != "none")
    throw Error::in_option("scale", scale, "expected auto or none");
  po.max_passes = option<std::size_t>(d, "max_passes", 48);
  po.count_casts = rewrite::cast_counter();
  po.progress = [](std::size_t, const analysis::PlanStep&) { poll_interrupt(); };
  if (!sets.is_none()) {
    const auto given = given_sets(sets, d);
    return without_gil([&] { return analysis::plan(l.model, given, po); });
  }
  // Each pass checks every generated set, one at a time (as `fpguard plan` does); plan()
  // itself holds set 0 alone.
  GeneratedSets g = generated_sets(l, d);
  po.check.generated = g.generated;
  po.check_pass = [&g](const model::Model& mm, const analysis::CheckOptions& c) {
    return analysis::check(mm, analysis::read_lazily(g.list, &g.generated), c);
  };
  analysis::Plan p = without_gil([&] { return analysis::plan(l.model, {g.first}, po); });
  // As `fpguard plan` records them, for convert to verify on (arrays given are not files).
  p.inputs = inputs::Provenance{
      .options = inputs::absolute(g.options), .samples = g.samples, .generated = g.generated};
  return p;
}

// `plan`: a Plan, the path of a plan.json, or None.
std::optional<analysis::PlanFile> plan_file(const py::object& plan) {
  if (plan.is_none()) return std::nullopt;
  if (py::isinstance<analysis::Plan>(plan))
    return report::parse_plan(report::to_json(plan.cast<const analysis::Plan&>()).dump(), "plan");
  const std::string path = str(py::module_::import("os").attr("fspath")(plan));
  return report::read_plan("plan " + path, path);
}

// convert's report, with the verification's outputs (empty when not verified).
py::dict convert_report(const std::string& path, const rewrite::ConvertOptions& o,
                        const rewrite::ConvertReport& rep,
                        const std::optional<std::vector<rewrite::Verified>>& verified) {
  py::dict r;
  r["path"] = path;
  r["precision"] = o.precision.name;
  r["low_nodes"] = rep.low_nodes;
  r["fp32_nodes"] = rep.fp32_nodes;
  r["casts"] = rep.casts;
  r["initializers_converted"] = rep.initializers_converted;
  r["kept_by_spec"] = rep.kept_by_spec;
  r["warnings"] = rep.warnings;
  py::list outputs;
  bool pass = true;
  for (const auto& v : verified.value_or(std::vector<rewrite::Verified>{})) {
    py::dict d;
    d["output"] = v.output;
    d["cosine"] = v.cosine;
    d["max_abs_error"] = v.max_abs_error;
    d["nonfinite"] = v.nonfinite;
    d["pass"] = v.pass;
    outputs.append(d);
    pass = pass && v.pass;
  }
  r["verified"] = outputs;
  r["pass"] = verified ? py::object(py::bool_(pass)) : py::object(py::none());
  return r;
}

// The model convert writes, from `plan` (or none) and the options; sets o.precision.
model::Model converted_model(const LoadedModel& l, const py::object& plan,
                             const std::optional<analysis::PlanFile>& p, const py::dict& d,
                             rewrite::ConvertOptions& o) {
  std::string precision = d["precision"].is_none() ? "" : format_of(d["precision"]).name;
  model::Model converted = l.model;
  if (p) {
    const std::string where = py::isinstance<analysis::Plan>(plan) ? "plan" : "plan " + str(plan);
    rewrite::require_convertible_plan(where, p->precision);
    const std::string planned = parse_format(p->precision).name;
    if (!precision.empty() && precision != planned)
      throw Error(where, "the plan is for " + planned + ", not " + precision);
    precision = planned;
    converted = rewrite::apply_plan(converted, *p, o, where, l.path);
  }
  if (precision.empty())
    throw Error::in_option("precision", "", "give float16 or bfloat16 (or a plan)");
  o.precision = parse_format(precision);
  for (const auto& k : option<std::vector<std::string>>(d, "keep_fp32", {})) o.keep_fp32.insert(k);
  for (const auto& k : option<std::vector<std::string>>(d, "keep_fp32_ops", {}))
    o.keep_fp32_ops.insert(k);
  o.keep_io_types = option<bool>(d, "keep_io_types", true);
  return converted;
}

py::dict convert(py::handle m, const py::object& plan, const std::string& out_path,
                 const py::object& sets, const py::dict& d) {
  const LoadedModel& l = m.cast<const LoadedModel&>();
  check_not_same_file(l.path, out_path, "out_path");
  const std::optional<analysis::PlanFile> p = plan_file(plan);
  rewrite::ConvertOptions o;
  const model::Model converted = converted_model(l, plan, p, d, o);
  model::SaveOptions so;
  if (option<bool>(d, "external_data", false)) so.external = model::SaveOptions::External::always;
  // The verification's inputs before anything is written: bad inputs leave no output. The
  // plan's recorded inputs, as `fpguard convert` verifies on, when none are given.
  const bool verify = option<bool>(d, "verify", true);
  std::vector<NamedValue> sample;
  if (verify && !sets.is_none()) {
    sample = given_sets(sets, d).front();
    const exec::Executor original(l.model);
    exec::Session checks_inputs(original, sample);  // their names, dtypes and shapes
  }
  if (verify && sets.is_none()) {
    const inputs::Options io = p && p->inputs ? p->inputs->options : inputs::Options{};
    sample = without_gil([&] { return inputs::gather_samples(io, l.model, 1); }).sets.front();
  }
  const double min_cosine = option<double>(d, "min_cosine", 0.999);
  const int threads = option<int>(d, "threads", 0);
  rewrite::ConvertReport rep;
  std::optional<std::vector<rewrite::Verified>> verified;
  without_gil([&] {
    model::save(rewrite::convert(converted, o, &rep), out_path, so);
    if (verify)
      verified = rewrite::verify(l.model, model::load(out_path), sample, min_cosine, threads);
    return 0;
  });
  return convert_report(out_path, o, rep, verified);
}

void bind_results(py::module_& m) {
  py::class_<analysis::Diagnosis>(m, "_Diagnosis")
      .def("json", [](const analysis::Diagnosis& d) { return report::to_json(d).dump(2); })
      .def("html", [](const analysis::Diagnosis& d, const std::string& path) {
        write_html_file(d.model, path,
                        [&](std::ostream& out) { report::write_html(out, {d}, {}); });
      });
  py::class_<analysis::Plan>(m, "_Plan")
      .def("json", [](const analysis::Plan& p) { return report::to_json(p).dump(2); })
      .def("save",
           [](const analysis::Plan& p, const std::string& path) {
             check_not_same_file(p.model, path, "path");
             const report::Json j = report::to_json(p);
             write_file_atomic(path, [&](std::ostream& out) { out << j.dump(2) << "\n"; });
           })
      .def("html", [](const analysis::Plan& p, const std::string& path) {
        write_html_file(p.model, path, [&](std::ostream& out) { report::write_html(out, p, {}); });
      });
}

}  // namespace

void bind_check(py::module_& m) {
  bind_results(m);
  m.def("check", &check, py::arg("model"), py::arg("sets"), py::arg("options"));
  m.def("plan", &plan, py::arg("model"), py::arg("sets"), py::arg("options"));
  m.def("convert", &convert, py::arg("model"), py::arg("plan"), py::arg("out_path"),
        py::arg("sets"), py::arg("options"));
}

}  // namespace fpguard::python
