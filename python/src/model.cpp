// fpguard.load and fpguard.run: an ONNX model loaded by the model layer, its declared inputs,
// outputs and nodes as plain tuples (python/fpguard/__init__.py makes dataclasses of them),
// and one run of the executor on NumPy arrays, with the GIL released while it runs.
#include <Python.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/model.hpp"

namespace fpguard::python {

void poll_interrupt() {
  // Taking the GIL per node would slow a check of small nodes; every 20 ms is prompt.
  using clock = std::chrono::steady_clock;
  thread_local clock::time_point last{};
  const auto now = clock::now();
  if (now - last < std::chrono::milliseconds(20)) return;
  last = now;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw Interrupted{};
}

std::vector<NamedValue> input_set(const py::list& items) {
  std::vector<NamedValue> set;
  for (py::handle item : items) {
    const auto t = item.cast<py::tuple>();
    const std::string name = t[0].cast<std::string>();
    const std::string where = "input '" + name + "'";
    const py::array a = as_array(t[1], where.c_str());
    const std::string dname = t[2].is_none() ? str(a.dtype()) : t[2].cast<std::string>();
    const std::optional<DType> d = dtype_named(dname);
    if (!d || *d == DType::string) throw Error(where, "dtype " + dname + " is not supported");
    set.push_back({name, tensor_copy(a, *d, where)});
  }
  return set;
}

namespace {

// (name, dtype, shape, kind): dtype in NumPy's spelling where fpguard has the type
// ("float32"), else ONNX's ("float8e4m3fn"), None when undeclared; shape a tuple of ints,
// dim_param strings and None (unknown), or None when undeclared.
py::tuple value_info(const model::ValueInfo& v) {
  py::object dtype = py::none();
  if (v.elem_type != 0) {
    const auto d = model::dtype_of(v.elem_type);
    dtype = py::str(d ? std::string(to_string(*d)) : model::onnx_type_name(v.elem_type));
  }
  py::object shape = py::none();
  if (v.has_shape) {
    py::list dims;
    for (const auto& d : v.shape)
      dims.append(d.fixed()         ? py::object(py::int_(d.value))
                  : d.param.empty() ? py::object(py::none())
                                    : py::object(py::str(d.param)));
    shape = py::tuple(dims);
  }
  const char* kinds[] = {"tensor", "sequence", "optional", "other"};
  return py::make_tuple(v.name, dtype, shape, kinds[static_cast<int>(v.kind)]);
}

py::list value_infos(const std::vector<model::ValueInfo>& vs, bool runtime_only,
                     const model::Graph& g) {
  py::list out;
  for (const auto& v : vs)
    if (!runtime_only || !g.find_initializer(v.name)) out.append(value_info(v));
  return out;
}

// The nodes of the graphs `node` holds (If/Loop/Scan bodies, attributes in file order), each
// graph's in the order exec::for_each_node walks it, each followed by the nodes it holds.
using Walked =
    std::map<const model::Graph*, std::vector<std::pair<const model::Node*, std::string>>>;
void held_by(const model::Node& node, const std::string& path, const Walked& walked,
             std::vector<std::tuple<const model::Node*, std::string, std::string>>& out) {
  for (const auto& a : node.attributes) {
    std::vector<const model::Graph*> graphs;
    if (const auto* sg = std::get_if<model::GraphPtr>(&a.value)) graphs.push_back(sg->get());
    if (const auto* sgs = std::get_if<std::vector<model::GraphPtr>>(&a.value))
      for (const auto& sg : *sgs) graphs.push_back(sg.get());
    for (const model::Graph* g : graphs)
      if (auto w = walked.find(g); w != walked.end())
        for (const auto& [n, here] : w->second) {
          out.emplace_back(n, here, path);
          held_by(*n, here, walked, out);
        }
  }
}

// (name as in the file, display name or path, op_type, domain, inputs, outputs, parent) per
// node, named as check, policies and keep_fp32 name them (exec::for_each_node): the main
// graph's in file order (named by load), each control-flow node followed by its bodies'
// nodes, nested as deep as the model goes.
py::list nodes(const LoadedModel& l) {
  const auto& g = l.model.graph;
  Walked walked;
  exec::for_each_node(g, l.path,
                      [&](const model::Node& n, const std::string& path, const model::Graph& in) {
                        walked[&in].emplace_back(&n, path);
                      });
  std::vector<std::tuple<const model::Node*, std::string, std::string>> all;
  for (const auto& n : g.nodes) {
    all.emplace_back(&n, n.name, "");
    held_by(n, n.name, walked, all);
  }
  py::list out;
  for (const auto& [node, path, parent] : all) {
    const model::Node& n = *node;
    const std::string file_name = parent.empty() ? l.file_names[&n - g.nodes.data()] : n.name;
    out.append(py::make_tuple(file_name, path, n.op_type, n.domain, py::tuple(py::cast(n.inputs)),
                              py::tuple(py::cast(n.outputs)), parent));
  }
  return out;
}

std::shared_ptr<LoadedModel> load(const std::string& path) {
  auto l = std::make_shared<LoadedModel>();
  l->path = path;
  {
    py::gil_scoped_release nogil;
    l->model = model::load(path);
  }
  for (const auto& n : l->model.graph.nodes) l->file_names.push_back(n.name);
  analysis::name_nodes(l->model);
  return l;
}

// Stops a run at Ctrl-C: the executor shows each node to its observer.
class InterruptObserver : public exec::Observer {
 public:
  void on_node(const model::Node&, std::size_t, const std::vector<const Tensor*>&,
               const std::vector<NamedTensor>&) override {
    poll_interrupt();
  }
  // A Loop of many iterations is one main-graph node: its body's nodes poll too.
  void on_body_node(const exec::BodyNode&, const std::vector<const Tensor*>&,
                    const std::vector<NamedTensor>&) override {
    poll_interrupt();
  }
  bool reads_weights(bool) const override { return false; }
};

py::object value_object(const Value& v) {
  if (v.kind == ValueKind::none) return py::none();
  if (v.is_tensor()) return array_copy(v.tensor);
  py::list items;
  for (const auto& t : v.items) items.append(array_copy(t));
  return items;
}

// The options of one run: `precision` None or float32 runs as the model is, float64 is the
// truth run (every floating value carried in double), anything else emulates that format
// with the nodes of keep_fp32 (names) and keep_fp32_ops (op types) in float32; a scaled
// precision quantizes the MatMul/Gemm/Conv operands, the other ops run in `other`.
exec::RunOptions run_options(const py::object& precision, const std::string& other, int amax_margin,
                             const std::vector<std::string>& keep,
                             const std::vector<std::string>& keep_ops, int threads) {
  exec::RunOptions o;
  o.threads = threads;
  const std::optional<Precision> p =
      precision.is_none() ? std::nullopt : std::optional(precision_of(precision, other));
  if (p && p->format.name == "float64")
    o.carrier = DType::float64;
  else if (p && p->format.name != "float32")
    o.policy.default_format = p->format;
  if (p && p->scaled) {
    o.policy.scaled = p->scaled;
    o.policy.amax_margin = amax_margin;
  }
  o.policy.exclude_names.insert(keep.begin(), keep.end());
  o.policy.exclude_op_types.insert(keep_ops.begin(), keep_ops.end());
  return o;
}

py::dict run(py::handle m, const py::list& inputs, const py::object& precision,
             const std::string& other, int amax_margin, const std::vector<std::string>& keep,
             const std::vector<std::string>& keep_ops, int threads) {
  const LoadedModel& l = m.cast<const LoadedModel&>();
  if (threads < 0)
    throw Error::in_option("threads", std::to_string(threads), "must be 0 (automatic) or more");
  exec::RunOptions o = run_options(precision, other, amax_margin, keep, keep_ops, threads);
  std::vector<NamedValue> feed;
  for (auto& t : input_set(inputs)) feed.push_back(std::move(t));
  InterruptObserver interrupt;
  o.observer = &interrupt;
  const auto outputs =
      without_gil([&] { return exec::calibrated_executor(l.model, o, {feed}).run_values(feed); });
  py::dict out;
  for (const auto& [name, v] : outputs) out[py::str(name)] = value_object(v);
  return out;
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<LoadedModel, std::shared_ptr<LoadedModel>>(m, "_Model")
      .def_readonly("path", &LoadedModel::path)
      .def_property_readonly("inputs",
                             [](const LoadedModel& l) {
                               const auto& g = l.model.graph;
                               return value_infos(g.inputs, true, g);
                             })
      .def_property_readonly("outputs",
                             [](const LoadedModel& l) {
                               const auto& g = l.model.graph;
                               return value_infos(g.outputs, false, g);
                             })
      .def_property_readonly("nodes", &nodes);
  m.def("load", &load, py::arg("path"));
  m.def("run", &run, py::arg("model"), py::arg("inputs"), py::arg("precision"),
        py::arg("other_precision"), py::arg("amax_margin"), py::arg("keep_fp32"),
        py::arg("keep_fp32_ops"), py::arg("threads"));
}

}  // namespace fpguard::python
