// model::Model -> ONNX ModelProto: tensors inline (raw_data), or the main graph's
// initializers in an external data file beside the model.
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <climits>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/model.hpp"
#include "model/proto.hpp"
#include "model/proto_fields.hpp"
#include "tensor/tensor_pb.hpp"

namespace fpguard::model {

namespace {

void save_value_info(const ValueInfo& v, onnx::ValueInfoProto& p) {
  p.set_name(v.name);
  if (!v.type_proto.empty()) {
    if (!p.mutable_type()->ParseFromString(v.type_proto))
      throw Error(v.name, "cannot serialize its type");
    return;
  }
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

void save_graph(const Graph& g, onnx::GraphProto& p, bool types_only);

// Tensors of this many bytes or more lose their values in a proto for typing (to_proto):
// shape inference reads values only of small tensors (shapes, axes, scales).
constexpr std::size_t kTypingDataBytes = 4096;

void save_tensor(const Tensor& t, const std::string& name, onnx::TensorProto& p, bool types_only) {
  if (types_only && t.nbytes() >= kTypingDataBytes) {
    for (auto d : t.shape()) p.add_dims(d);
    p.set_data_type(detail::pb_type(t.dtype()).code);
  } else {
    detail::tensor_to_proto(t, p);
  }
  if (!name.empty()) p.set_name(name);
}

void save_attribute(const Attribute& a, onnx::AttributeProto& p, bool types_only) {
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
          p.set_type(A::TENSOR), save_tensor(v, "", *p.mutable_t(), types_only);
        } else if constexpr (std::is_same_v<T, GraphPtr>) {
          p.set_type(A::GRAPH), save_graph(*v, *p.mutable_g(), types_only);
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
          for (const auto& x : v) save_tensor(x, "", *p.add_tensors(), types_only);
        } else if constexpr (std::is_same_v<T, std::vector<GraphPtr>>) {
          p.set_type(A::GRAPHS);
          for (const auto& x : v) save_graph(*x, *p.add_graphs(), types_only);
        } else {
          static_assert(std::is_same_v<T, TypeAttr>);
          p.set_type(A::TYPE_PROTO);
          if (!p.mutable_tp()->ParseFromString(v.proto)) throw Error(a.name, "corrupt type");
        }
      },
      a.value);
}

void save_graph(const Graph& g, onnx::GraphProto& p, bool types_only) {
  p.set_name(g.name);
  if (!g.doc_string.empty()) p.set_doc_string(g.doc_string);
  for (const auto& t : g.initializers)
    save_tensor(t.tensor, t.name, *p.add_initializer(), types_only);
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
    for (const auto& a : n.attributes) save_attribute(a, *np->add_attribute(), types_only);
    for (const auto& [k, v] : n.metadata) {
      // metadata_props as field 22, which libonnx 1.12 does not know (see Node::metadata).
      onnx::StringStringEntryProto kv;
      kv.set_key(k), kv.set_value(v);
      np->mutable_unknown_fields()->AddLengthDelimited(kNodeMetadataField, kv.SerializeAsString());
    }
  }
}

}  // namespace

onnx::ModelProto to_proto(const Model& m, bool types_only) {
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
  save_graph(m.graph, *mp.mutable_graph(), types_only);
  return mp;
}

namespace {

std::string serialize(const onnx::ModelProto& mp, const char* what) {
  if (mp.ByteSizeLong() >= static_cast<std::size_t>(INT_MAX))
    throw Error(
        "", std::string("the model is 2 GiB or more ") + what + ", which protobuf cannot write");
  std::string bytes;
  if (!mp.SerializeToString(&bytes)) throw Error("", "cannot serialize the model");
  return bytes;
}

constexpr std::size_t kAlign = 64;

}  // namespace

std::string save_to_bytes(const Model& m) {
  return serialize(to_proto(m, false),
                   "with every tensor inline (save it to a file: its "
                   "initializers then go to external data)");
}

std::string save_graph_bytes(const Model& m) {
  return serialize(to_proto(m, true), "even without its large tensors' values");
}

namespace {

// The tensors read from an external data file are in memory, but the file stays an input
// (another model may share it): never overwritten, whatever the output is called.
void refuse_overwriting_external_inputs(const Model& m, const std::filesystem::path& path) {
  std::error_code ec;
  for (const auto& in : m.external_files)
    if (std::filesystem::weakly_canonical(path, ec) == in)
      throw Error(path.string(),
                  "it is an external data file of this model; refusing to overwrite it");
}

// Whether the initializers of min_external_bytes or more go to an external data file.
bool saves_external(const Model& m, const SaveOptions& o) {
  std::size_t big = 0;
  for (const auto& t : m.graph.initializers)
    if (t.tensor.nbytes() >= o.min_external_bytes) big += t.tensor.nbytes();
  return big > 0 && (o.external == SaveOptions::External::always ||
                     (o.external == SaveOptions::External::automatic && big >= o.inline_limit));
}

// Moves the raw data of mp's large initializers (m's, by index) to `out`, each at an
// offset aligned to kAlign, and points them at `location` there.
void move_to_external(onnx::ModelProto& mp, const Model& m, const SaveOptions& o,
                      const std::string& location, std::ostream& out, SaveResult& result) {
  std::size_t offset = 0;
  auto* g = mp.mutable_graph();
  for (int i = 0; i < g->initializer_size(); ++i) {
    onnx::TensorProto& p = *g->mutable_initializer(i);
    if (m.graph.initializers[static_cast<std::size_t>(i)].tensor.nbytes() < o.min_external_bytes)
      continue;
    const std::string raw = std::move(*p.mutable_raw_data());
    p.clear_raw_data();
    const std::size_t pad = (kAlign - offset % kAlign) % kAlign;
    static const char zeros[kAlign] = {};
    out.write(zeros, static_cast<std::streamsize>(pad));
    offset += pad;
    out.write(raw.data(), static_cast<std::streamsize>(raw.size()));
    p.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* key, const std::string& value) {
      auto* kv = p.add_external_data();
      kv->set_key(key), kv->set_value(value);
    };
    add("location", location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(raw.size()));
    offset += raw.size();
    ++result.external_tensors;
    result.external_bytes += raw.size();
  }
}

// The model beside its data file, PATH.data; both written atomically, and the data file
// removed again when the model could not be written (unless it existed before).
SaveResult save_external(const Model& m, const std::filesystem::path& path, const SaveOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string location = path.filename().string() + ".data";
  const fs::path data = path.parent_path() / location;
  const auto canonical = fs::weakly_canonical(data, ec);
  std::vector<fs::path> inputs = m.external_files;
  if (!m.path.empty()) inputs.push_back(fs::weakly_canonical(m.path, ec));
  for (const auto& in : inputs)
    if (canonical == in)
      throw Error(path.string(), "its external data file '" + data.string() +
                                     "' is an input of this model; refusing to overwrite it");
  onnx::ModelProto mp = to_proto(m, false);
  const bool data_existed = fs::exists(data, ec);
  bool data_written = false;
  SaveResult result;
  try {
    write_file_atomic(path, [&](std::ostream& model_out) {
      write_file_atomic(
          data, [&](std::ostream& out) { move_to_external(mp, m, o, location, out, result); });
      data_written = true;
      std::string bytes;
      try {
        bytes = serialize(mp, "even with its initializers in external data");
      } catch (const Error& e) {
        throw Error(path.string(), e.problem());
      }
      model_out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    });
  } catch (...) {
    if (data_written && !data_existed) fs::remove(data, ec);
    throw;
  }
  result.data_file = data;
  return result;
}

}  // namespace

SaveResult save(const Model& m, const std::filesystem::path& path, const SaveOptions& o) {
  refuse_overwriting_external_inputs(m, path);
  if (saves_external(m, o)) return save_external(m, path, o);
  std::string bytes;
  try {
    bytes = save_to_bytes(m);
  } catch (const Error& e) {
    throw Error(path.string(), e.problem());
  }
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  });
  return {};
}

}  // namespace fpguard::model
