// model::Model -> ONNX ModelProto. Every tensor is written inline (raw_data).
#include <onnx/onnx_pb.h>

#include <climits>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/model.hpp"
#include "tensor/tensor_pb.hpp"

namespace fpguard::model {

namespace {

void save_value_info(const ValueInfo& v, onnx::ValueInfoProto& p) {
  p.set_name(v.name);
  if (v.elem_type == 0 && !v.has_shape) return;
  auto* tt = p.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(v.elem_type);
  if (!v.has_shape) return;
  auto* shape = tt->mutable_shape();
  for (const auto& d : v.shape) {
    auto* dp = shape->add_dim();
    if (d.fixed()) dp->set_dim_value(d.value);
    if (!d.param.empty()) dp->set_dim_param(d.param);
  }
}

void save_graph(const Graph& g, onnx::GraphProto& p);

void save_tensor(const Tensor& t, const std::string& name, onnx::TensorProto& p) {
  detail::tensor_to_proto(t, p);
  if (!name.empty()) p.set_name(name);
}

void save_attribute(const Attribute& a, onnx::AttributeProto& p) {
  using A = onnx::AttributeProto;
  p.set_name(a.name);
  if (!a.ref_attr_name.empty()) p.set_ref_attr_name(a.ref_attr_name);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, float>) {
          p.set_type(A::FLOAT), p.set_f(v);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          p.set_type(A::INT), p.set_i(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          p.set_type(A::STRING), p.set_s(v);
        } else if constexpr (std::is_same_v<T, Tensor>) {
          p.set_type(A::TENSOR), save_tensor(v, "", *p.mutable_t());
        } else if constexpr (std::is_same_v<T, GraphPtr>) {
          p.set_type(A::GRAPH), save_graph(*v, *p.mutable_g());
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          p.set_type(A::FLOATS);
          for (auto x : v) p.add_floats(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
          p.set_type(A::INTS);
          for (auto x : v) p.add_ints(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          p.set_type(A::STRINGS);
          for (const auto& x : v) p.add_strings(x);
        } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
          p.set_type(A::TENSORS);
          for (const auto& x : v) save_tensor(x, "", *p.add_tensors());
        } else {
          p.set_type(A::GRAPHS);
          for (const auto& x : v) save_graph(*x, *p.add_graphs());
        }
      },
      a.value);
}

void save_graph(const Graph& g, onnx::GraphProto& p) {
  p.set_name(g.name);
  if (!g.doc_string.empty()) p.set_doc_string(g.doc_string);
  for (const auto& t : g.initializers) save_tensor(t.tensor, t.name, *p.add_initializer());
  for (const auto& v : g.inputs) save_value_info(v, *p.add_input());
  for (const auto& v : g.outputs) save_value_info(v, *p.add_output());
  for (const auto& v : g.value_info) save_value_info(v, *p.add_value_info());
  for (const auto& n : g.nodes) {
    auto* np = p.add_node();
    np->set_name(n.name);
    np->set_op_type(n.op_type);
    if (!n.domain.empty()) np->set_domain(n.domain);
    if (!n.doc_string.empty()) np->set_doc_string(n.doc_string);
    for (const auto& i : n.inputs) np->add_input(i);
    for (const auto& o : n.outputs) np->add_output(o);
    for (const auto& a : n.attributes) save_attribute(a, *np->add_attribute());
  }
}

}  // namespace

std::string save_to_bytes(const Model& m) {
  onnx::ModelProto mp;
  mp.set_ir_version(m.ir_version);
  if (!m.producer_name.empty()) mp.set_producer_name(m.producer_name);
  if (!m.producer_version.empty()) mp.set_producer_version(m.producer_version);
  if (!m.domain.empty()) mp.set_domain(m.domain);
  if (m.model_version) mp.set_model_version(m.model_version);
  if (!m.doc_string.empty()) mp.set_doc_string(m.doc_string);
  for (const auto& [k, v] : m.metadata) {
    auto* kv = mp.add_metadata_props();
    kv->set_key(k), kv->set_value(v);
  }
  for (const auto& [dom, ver] : m.opsets) {
    auto* op = mp.add_opset_import();
    op->set_domain(dom), op->set_version(ver);
  }
  save_graph(m.graph, *mp.mutable_graph());
  if (mp.ByteSizeLong() >= static_cast<std::size_t>(INT_MAX))
    throw Error("",
                "the model is 2 GiB or more, which protobuf cannot write inline "
                "(external data on save is not supported yet)");
  std::string bytes;
  if (!mp.SerializeToString(&bytes)) throw Error("", "cannot serialize the model");
  return bytes;
}

void save(const Model& m, const std::filesystem::path& path) {
  std::string bytes;
  try {
    bytes = save_to_bytes(m);
  } catch (const Error& e) {
    throw Error(path.string(), e.problem());
  }
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  });
}

}  // namespace fpguard::model
