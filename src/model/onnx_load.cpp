// ONNX ModelProto -> model::Model. protobuf types stay in src/model and src/tensor.
// libonnx's checker and shape inference are not used: they know opsets up to 17 only
// and must never reject a newer model that we can run.
#include <google/protobuf/unknown_field_set.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <sys/mman.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <span>
#include <utility>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/model.hpp"
#include "model/onnx_parse.hpp"
#include "model/proto_fields.hpp"
#include "tensor/tensor_pb.hpp"

namespace fpguard::model {

namespace {

struct LoadContext {
  std::string file;  // for errors
  std::filesystem::path base_dir;
  std::int64_t opset = 0;  // of the default domain
  // The external data files read so far (canonical paths), each mapped once: the tensors
  // in it view the map.
  mutable std::map<std::filesystem::path, std::shared_ptr<const FileMap>> external_files;
  // load_graph_bytes: tensors without values (save_graph_bytes) read as zeros.
  bool graph_only = false;
  // A model parsed by parse_mapped: its buffer, the buffer's file map (null for bytes in
  // memory), and where the raw_data it left there lie.
  std::span<const std::byte> buffer;
  std::shared_ptr<const FileMap> model_map;
  const MappedRaw* mapped = nullptr;
};

// An attribute whose type differs from the one the op's ONNX schema declares: refused at
// load, naming the node (kernels would otherwise fail on first use, or misread it).
void check_attribute_type(const onnx::NodeProto& n, const onnx::AttributeProto& a,
                          std::int64_t opset, const std::string& where) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return;
  const auto* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), "");
  if (!schema || !a.ref_attr_name().empty()) return;
  const auto it = schema->attributes().find(a.name());
  if (it == schema->attributes().end()) return;
  if (a.type() != onnx::AttributeProto::UNDEFINED && a.type() != it->second.type)
    throw Error(where, "attribute '" + a.name() + "' is " +
                           onnx::AttributeProto::AttributeType_Name(a.type()) + ", but " +
                           n.op_type() + " declares it " +
                           onnx::AttributeProto::AttributeType_Name(it->second.type));
}

// Opsets 1 to 6: an op whose definition at the model's opset is still the one in force at
// kFullOpset means what fpguard implements; an older definition (Add-6's `broadcast`,
// BatchNormalization-6's `spatial`, Relu-1's `consumed_inputs`, ...) is refused by name.
void check_legacy_op(const onnx::NodeProto& n, std::int64_t opset, const std::string& where) {
  if (opset >= kFullOpset || (!n.domain().empty() && n.domain() != "ai.onnx")) return;
  const auto* then = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), "");
  const auto* full = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(kFullOpset), "");
  if (!full) return;  // introduced later, or unknown: the executor lists unsupported ops
  const std::string op = n.op_type(), at = "opset " + std::to_string(opset);
  if (!then)
    throw Error(where, "unsupported at " + at + ": " + op + " does not exist before opset " +
                           std::to_string(full->since_version()));
  if (then->since_version() != full->since_version())
    throw Error(where, "unsupported at " + at + ": it defines " + op + "-" +
                           std::to_string(then->since_version()) + ", and fpguard implements " +
                           op + " from version " + std::to_string(full->since_version()) +
                           " (opsets 1 to 6 are read only for ops unchanged since; "
                           "re-export with opset 7 or later)");
}

// Where external data lies, as the ONNX spec describes it: keys location (relative to the
// model's directory), offset, length.
struct ExternalRef {
  std::string location;
  std::uint64_t offset = 0;
  std::optional<std::uint64_t> length;
};

ExternalRef external_ref(const onnx::TensorProto& p, const std::string& where) {
  auto parse_u64 = [&](const std::string& key, const std::string& v) {
    try {
      std::size_t pos = 0;
      const auto r = std::stoull(v, &pos);
      if (pos != v.size()) throw std::invalid_argument(v);
      return static_cast<std::uint64_t>(r);
    } catch (const std::exception&) {
      throw Error(where, "external data " + key + " '" + v + "' is not a non-negative integer");
    }
  };
  ExternalRef r;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location")
      r.location = kv.value();
    else if (kv.key() == "offset")
      r.offset = parse_u64("offset", kv.value());
    else if (kv.key() == "length")
      r.length = parse_u64("length", kv.value());
  }
  if (r.location.empty()) throw Error(where, "external data without a location");
  return r;
}

// The memory map of the file `location` names, opened once per model. The location may not
// leave the model's directory.
const std::shared_ptr<const FileMap>& external_file(const std::string& location,
                                                    const LoadContext& ctx,
                                                    const std::string& where) {
  const std::filesystem::path rel(location);
  if (rel.is_absolute())
    throw Error(where, "external data location '" + location + "' is absolute");
  std::error_code ec;
  const auto base = std::filesystem::weakly_canonical(ctx.base_dir, ec);
  const auto full = std::filesystem::weakly_canonical(ctx.base_dir / rel, ec);
  const auto mism = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  if (ec || mism.first != base.end())
    throw Error(where,
                "external data location '" + location + "' leaves the model's directory (refused)");
  auto& file = ctx.external_files[full];
  if (!file) {
    try {
      file = FileMap::open(full, where);
    } catch (const Error& e) {
      ctx.external_files.erase(full);
      throw Error(where, "external data file '" + full.string() + "': " + e.problem());
    }
  }
  return file;
}

// The element type of external tensor `p`, validated as an inline tensor's would be, on an
// empty copy (dims [0], no data: nothing is copied), so the refusals read the same.
DType external_dtype(const onnx::TensorProto& p, const std::string& where) {
  onnx::TensorProto probe = p;
  probe.clear_external_data();
  probe.set_data_location(onnx::TensorProto::DEFAULT);
  probe.clear_dims();
  probe.add_dims(0);
  (void)detail::tensor_from_proto(probe, where);
  const DType dtype = *detail::find_pb_type(p.data_type())->dtype;
  if (dtype == DType::string)  // the spec stores only raw bytes externally
    throw Error(where, "a STRING tensor cannot hold external data");
  return dtype;
}

// The external data of `p`: offset and length are checked against the file. The tensor is
// a view of the file's memory map (nothing is copied, and the file is never written), or a
// copy where the data is not aligned for its type.
Tensor load_external(const onnx::TensorProto& p, const LoadContext& ctx, const std::string& where) {
  const ExternalRef ref = external_ref(p, where);
  const std::shared_ptr<const FileMap>& map = external_file(ref.location, ctx, where);
  const FileMap& file = *map;
  const std::uint64_t size = file.size();
  const std::string file_size =
      " is past the end of '" + ref.location + "' (" + std::to_string(size) + " bytes)";
  if (ref.offset > size)
    throw Error(where, "external data offset " + std::to_string(ref.offset) + file_size);
  const std::uint64_t len = ref.length ? *ref.length : size - ref.offset;
  if (len > size - ref.offset)
    throw Error(where, "external data offset " + std::to_string(ref.offset) + " + length " +
                           std::to_string(len) + file_size);
  const DType dtype = external_dtype(p, where);
  const std::vector<std::int64_t> dims(p.dims().begin(), p.dims().end());
  const std::uint64_t want = element_count(dims, where) * itemsize(dtype);
  if (len != want)
    throw Error(where, "external data has " + std::to_string(len) + " bytes, but dims " +
                           detail::dims_text(dims) + " of " +
                           detail::find_pb_type(p.data_type())->name + " need " +
                           std::to_string(want));
  const std::byte* bytes = file.data() + ref.offset;
  Tensor t;
  if (reinterpret_cast<std::uintptr_t>(bytes) % itemsize(dtype) == 0) {
    t = Tensor::view(dtype, dims, map, ref.offset);
  } else {
    check_memory(want, where);
    t = Tensor::uninitialized(dtype, dims);
    std::memcpy(t.bytes(), bytes, want);
  }
  if (dtype == DType::bool_)
    for (std::uint8_t v : std::as_const(t).data<std::uint8_t>())
      if (v > 1) throw Error(where, "external data holds a BOOL that is not 0 or 1");
  return t;
}

// A tensor save_graph_bytes wrote without its values: a numeric type, dims of at least one
// element, and no data at all.
bool without_values(const onnx::TensorProto& p) {
  const auto* type = detail::find_pb_type(p.data_type());
  if (!type || !type->dtype || *type->dtype == DType::string || p.dims_size() == 0) return false;
  for (const auto d : p.dims())
    if (d <= 0) return false;
  return p.raw_data().empty() && p.float_data_size() == 0 && p.int32_data_size() == 0 &&
         p.int64_data_size() == 0 && p.double_data_size() == 0 && p.uint64_data_size() == 0 &&
         p.external_data_size() == 0 && p.data_location() != onnx::TensorProto::EXTERNAL;
}

// Zeros of `p`'s type and dims that take no memory: a view of an anonymous read-only map
// (the kernel's zero page, shared, when read).
Tensor unbacked_zeros(const onnx::TensorProto& p, const std::string& where) {
  const DType dtype = *detail::find_pb_type(p.data_type())->dtype;
  const std::vector<std::int64_t> dims(p.dims().begin(), p.dims().end());
  const std::size_t bytes = element_count(dims, where) * itemsize(dtype);
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) throw Error(where, std::string("cannot map: ") + std::strerror(errno));
  std::shared_ptr<const void> owner(
      map, [bytes](const void* q) { ::munmap(const_cast<void*>(q), bytes); });
  return Tensor::view(dtype, dims, static_cast<const std::byte*>(map), std::move(owner));
}

// `p`'s raw_data is taken over (the parsed model is not used after loading).
Tensor load_tensor(onnx::TensorProto& p, const LoadContext& ctx, const std::string& where) {
  if (ctx.graph_only && without_values(p)) return unbacked_zeros(p, where);
  if (p.data_location() == onnx::TensorProto::EXTERNAL || p.external_data_size() > 0)
    return load_external(p, ctx, where);
  if (ctx.mapped)
    if (const auto it = ctx.mapped->find(&p); it != ctx.mapped->end())
      return detail::tensor_from_proto(p,
                                       detail::RawInBuffer{.buffer = ctx.buffer.data(),
                                                           .map = ctx.model_map,
                                                           .offset = it->second.offset,
                                                           .size = it->second.size},
                                       where);
  return detail::take_tensor_from_proto(p, where);
}

ValueInfo load_value_info(const onnx::ValueInfoProto& v) {
  ValueInfo out;
  out.name = v.name();
  if (v.has_type() && !v.type().has_tensor_type() &&
      v.type().value_case() != onnx::TypeProto::VALUE_NOT_SET) {
    out.kind = v.type().has_sequence_type()   ? TypeKind::sequence
               : v.type().has_optional_type() ? TypeKind::optional
                                              : TypeKind::other;
    v.type().SerializeToString(&out.type_proto);
  }
  if (v.has_type() && v.type().has_tensor_type()) {
    const auto& tt = v.type().tensor_type();
    out.elem_type = tt.elem_type();
    if (tt.has_shape()) {
      out.has_shape = true;
      for (const auto& d : tt.shape().dim()) {
        Dim dim;
        if (d.has_dim_value()) dim.value = d.dim_value();
        if (d.has_dim_param()) dim.param = d.dim_param();
        out.shape.push_back(dim);
      }
    }
  }
  return out;
}

GraphPtr load_graph(onnx::GraphProto& g, const LoadContext& ctx);

Attribute load_attribute(onnx::AttributeProto& a, const LoadContext& ctx,
                         const std::string& where) {
  Attribute out;
  out.name = a.name();
  out.ref_attr_name = a.ref_attr_name();
  const std::string aw = where + ": attribute '" + a.name() + "'";
  using A = onnx::AttributeProto;
  auto type = a.type();
  if (type == A::UNDEFINED) {  // very old writers: infer from the populated field
    if (a.has_f())
      type = A::FLOAT;
    else if (a.has_i())
      type = A::INT;
    else if (a.has_s())
      type = A::STRING;
    else if (a.has_t())
      type = A::TENSOR;
    else if (a.has_g())
      type = A::GRAPH;
    else if (a.floats_size())
      type = A::FLOATS;
    else if (a.ints_size())
      type = A::INTS;
    else if (a.strings_size())
      type = A::STRINGS;
    else if (a.tensors_size())
      type = A::TENSORS;
    else if (a.graphs_size())
      type = A::GRAPHS;
    else if (a.has_tp())
      type = A::TYPE_PROTO;
  }
  switch (type) {
    case A::FLOAT:
      out.value = a.f();
      break;
    case A::INT:
      out.value = static_cast<std::int64_t>(a.i());
      break;
    case A::STRING:
      out.value = a.s();
      break;
    case A::TENSOR:
      out.value = load_tensor(*a.mutable_t(), ctx, aw);
      break;
    case A::GRAPH:
      out.value = load_graph(*a.mutable_g(), ctx);
      break;
    case A::FLOATS:
      out.value = std::vector<float>(a.floats().begin(), a.floats().end());
      break;
    case A::INTS:
      out.value = std::vector<std::int64_t>(a.ints().begin(), a.ints().end());
      break;
    case A::STRINGS:
      out.value = std::vector<std::string>(a.strings().begin(), a.strings().end());
      break;
    case A::TENSORS: {
      std::vector<Tensor> ts;
      for (auto& t : *a.mutable_tensors()) ts.push_back(load_tensor(t, ctx, aw));
      out.value = std::move(ts);
      break;
    }
    case A::GRAPHS: {
      std::vector<GraphPtr> gs;
      for (auto& g : *a.mutable_graphs()) gs.push_back(load_graph(g, ctx));
      out.value = std::move(gs);
      break;
    }
    case A::TYPE_PROTO:
      out.value = TypeAttr{a.tp().SerializeAsString()};
      break;
    default:
      throw Error(aw, "unsupported attribute type " + std::to_string(static_cast<int>(type)) +
                          " (sparse tensors and lists of type protos are not supported)");
  }
  return out;
}

// NodeProto.metadata_props: field 22 of ONNX 1.16+, an unknown field to libonnx 1.12, which
// protobuf keeps as raw length-delimited bytes: each one a StringStringEntryProto.
std::vector<std::pair<std::string, std::string>> node_metadata(const onnx::NodeProto& n,
                                                               const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto& unknown = n.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto& f = unknown.field(i);
    if (f.number() != kNodeMetadataField) continue;
    onnx::StringStringEntryProto kv;
    if (f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED ||
        !kv.ParseFromString(f.length_delimited()))
      throw Error(where, "corrupt metadata_props");
    out.emplace_back(kv.key(), kv.value());
  }
  return out;
}

GraphPtr load_graph(onnx::GraphProto& g, const LoadContext& ctx) {
  auto out = std::make_shared<Graph>();
  out->name = g.name();
  out->doc_string = g.doc_string();
  if (g.sparse_initializer_size() > 0)
    throw Error(ctx.file, "graph '" + g.name() + "' has sparse initializers (not supported)");
  for (auto& t : *g.mutable_initializer())
    out->initializers.push_back(
        {t.name(), load_tensor(t, ctx, ctx.file + ": initializer '" + t.name() + "'")});
  for (const auto& v : g.input()) out->inputs.push_back(load_value_info(v));
  for (const auto& v : g.output()) out->outputs.push_back(load_value_info(v));
  for (const auto& v : g.value_info()) out->value_info.push_back(load_value_info(v));
  for (auto& n : *g.mutable_node()) {
    Node node;
    node.name = n.name();
    node.op_type = n.op_type();
    node.domain = n.domain();
    node.doc_string = n.doc_string();
    node.metadata = node_metadata(n, ctx.file + ": " + node.describe());
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    const std::string where = ctx.file + ": " + node.describe();
    // A graph that save_graph_bytes wrote was checked against the ONNX schemas when its
    // model was loaded: its load skips the schema registry, whose first use builds every
    // op's schema (~5 ms, a tenth of a merge). Typed attribute reads still refuse a type
    // that does not match (Node::attr_int, ...).
    if (!ctx.graph_only) check_legacy_op(n, ctx.opset, where);
    for (auto& a : *n.mutable_attribute()) {
      if (!ctx.graph_only) check_attribute_type(n, a, ctx.opset, where);
      node.attributes.push_back(load_attribute(a, ctx, where));
    }
    out->nodes.push_back(std::move(node));
  }
  return out;
}

// Each value is produced once (graph input, initializer or one node output), in every
// graph and subgraph; nodes read only what exists in their scope.
void validate_graph(const Graph& g, const std::string& file, std::set<std::string> scope) {
  std::set<std::string> defined;
  auto define = [&](const std::string& name, const std::string& by) {
    if (name.empty()) return;
    if (!defined.insert(name).second)
      throw Error(file + ": " + by, "value '" + name + "' is defined more than once");
  };
  for (const auto& v : g.inputs) scope.insert(v.name), defined.insert(v.name);
  for (const auto& t : g.initializers) scope.insert(t.name), defined.insert(t.name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) define(o, n.describe()), scope.insert(o);
  for (const auto& n : g.nodes) {
    for (const auto& in : n.inputs)
      if (!in.empty() && !scope.count(in))
        throw Error(file + ": " + n.describe(), "input '" + in +
                                                    "' is not produced by any node "
                                                    "and is not a graph input or initializer");
    for (const auto& a : n.attributes) {
      if (const auto* sg = std::get_if<GraphPtr>(&a.value)) validate_graph(**sg, file, scope);
      if (const auto* sgs = std::get_if<std::vector<GraphPtr>>(&a.value))
        for (const auto& sg : *sgs) validate_graph(*sg, file, scope);
    }
  }
  for (const auto& o : g.outputs)
    if (!scope.count(o.name))
      throw Error(file, "graph output '" + o.name + "' is not produced by any node");
}

}  // namespace

namespace {

// The parsed protobuf -> Model; the tensors take over its raw_data, or read the raw_data
// that parse_mapped left in its buffer (ctx.mapped).
Model from_proto(onnx::ModelProto& mp, const std::string& where,
                 const std::filesystem::path& base_dir, LoadContext ctx = {}) {
  if (!mp.has_graph()) throw Error(where, "the model has no graph");
  ctx.file = where;
  ctx.base_dir = base_dir;
  Model m;
  m.ir_version = mp.ir_version();
  m.producer_name = mp.producer_name();
  m.producer_version = mp.producer_version();
  m.domain = mp.domain();
  m.model_version = mp.model_version();
  m.doc_string = mp.doc_string();
  for (const auto& kv : mp.metadata_props()) m.metadata.emplace_back(kv.key(), kv.value());
  for (const auto& op : mp.opset_import()) {
    const std::string dom = op.domain() == "ai.onnx" ? "" : op.domain();
    m.opsets[dom] = op.version();
  }
  if (mp.functions_size() > 0)
    throw Error(where, "model-local functions are not supported (" +
                           std::to_string(mp.functions_size()) + " defined)");
  const auto opset = m.default_opset();
  if (m.opsets.count("") && (opset < kMinOpset || opset > kMaxOpset))
    throw Error(where, "unsupported opset " + std::to_string(opset) + " of the default domain (" +
                           "supported: " + std::to_string(kMinOpset) + " to " +
                           std::to_string(kMaxOpset) + ")");
  ctx.opset = opset;
  m.graph = std::move(*load_graph(*mp.mutable_graph(), ctx));
  validate_graph(m.graph, where, {});
  for (const auto& f : ctx.external_files) m.external_files.push_back(f.first);
  return m;
}

// A model parsed from `buffer` (parse_mapped): its tensors' values copied from it, or views
// of `map` where it is the buffer's file map.
Model from_buffer(std::span<const std::byte> buffer, std::shared_ptr<const FileMap> map,
                  const std::string& where, const std::filesystem::path& base_dir) {
  onnx::ModelProto mp;
  const MappedRaw mapped = parse_mapped(buffer, mp, where);
  LoadContext ctx;
  ctx.buffer = buffer;
  ctx.model_map = std::move(map);
  ctx.mapped = &mapped;
  return from_proto(mp, where, base_dir, std::move(ctx));
}

const char* const kNotOnnx = "not an ONNX model (corrupt or not protobuf data)";

}  // namespace

Model load_from_bytes(const std::string& bytes, const std::string& where,
                      const std::filesystem::path& base_dir) {
  return from_buffer(std::as_bytes(std::span(bytes)), nullptr, where, base_dir);
}

Model load_graph_bytes(const std::string& bytes, const std::string& where) {
  onnx::ModelProto mp;
  if (bytes.size() >= static_cast<std::size_t>(INT_MAX) || !mp.ParseFromString(bytes))
    throw Error(where, kNotOnnx);
  LoadContext ctx;
  ctx.graph_only = true;
  Model m = from_proto(mp, where, ".", std::move(ctx));
  m.path = where;
  return m;
}

Model load(const std::filesystem::path& path) {
  const std::string where = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(where, "cannot open: is a directory");
  auto dir = path.parent_path();
  if (dir.empty()) dir = ".";
  Model m;
  if (std::filesystem::is_regular_file(path, ec)) {
    // A regular file: parsed from its memory map, the tensors' raw_data left in it
    // (parse_mapped). Tensors aligned for their type view the map, as external data does;
    // the others are FileCopies, which read the file (its descriptor kept), or small
    // copies. The map's pages are given back once loaded: the parse read the messages
    // around the values, and the values come back from the file when read.
    const auto map = FileMap::open(path, where, FileMap::Keep::map_and_descriptor);
    m = from_buffer({map->data(), map->size()}, map, where, dir);
    map->release(0, map->size());
  } else {
    // Not a regular file (a pipe, say): read to its end.
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(where, std::string("cannot open: ") + std::strerror(errno));
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error(where, "read failed");
    m = load_from_bytes(bytes, where, dir);
  }
  m.path = path;
  return m;
}

}  // namespace fpguard::model
