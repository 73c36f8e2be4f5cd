// The model layer: a small graph IR of our own (Value, Node, Graph, Model) and ONNX
// load/save. This is the only layer that sees protobuf types; everything above reads
// the plain structs below. Subgraphs (If/Loop/Scan bodies) are kept as graph-valued
// attributes. Analyses of a graph (topological order, consumers, liveness) are free
// functions that compute plain tables. Bad models throw fpguard::Error naming the file
// and the node ("model.onnx: node 'conv1' (Conv)") and the problem.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "fpguard/tensor.hpp"

namespace fpguard::model {

struct Graph;

// One dimension of a declared shape: a fixed size, a symbolic name, or unknown.
struct Dim {
  std::int64_t value = -1;  // >= 0 when fixed
  std::string param;        // dim_param when symbolic
  bool fixed() const { return value >= 0; }
  bool operator==(const Dim&) const = default;
};

// What a declared type is: a tensor (also when no type is declared), a sequence
// (seq(tensor)), an optional (of a tensor or a sequence), or another ONNX type (map,
// sparse tensor).
enum class TypeKind : std::uint8_t { tensor, sequence, optional, other };

// A graph input, output or value_info entry: the declared type of a value. elem_type is
// the ONNX TensorProto.DataType code (1 FLOAT, 10 FLOAT16, ...); 0 when not a tensor
// or unknown. `has_shape` is false when no shape was declared at all. A type that is not
// a tensor is kept as its serialized onnx.TypeProto (`type_proto`), which save writes back.
struct ValueInfo {
  ValueInfo() = default;
  ValueInfo(std::string n, int elem, bool shaped = false, std::vector<Dim> dims = {})
      : name(std::move(n)), elem_type(elem), has_shape(shaped), shape(std::move(dims)) {}
  std::string name;
  int elem_type = 0;
  bool has_shape = false;
  std::vector<Dim> shape;
  TypeKind kind = TypeKind::tensor;
  std::string type_proto;  // kind sequence, optional, other
  bool operator==(const ValueInfo&) const = default;
};

using GraphPtr = std::shared_ptr<Graph>;
// A type attribute (TYPE_PROTO: Optional's `type`), kept as its serialized onnx.TypeProto.
struct TypeAttr {
  std::string proto;
  bool operator==(const TypeAttr&) const = default;
};
using AttrValue =
    std::variant<float, std::int64_t, std::string, Tensor, GraphPtr, std::vector<float>,
                 std::vector<std::int64_t>, std::vector<std::string>, std::vector<Tensor>,
                 std::vector<GraphPtr>, TypeAttr>;

struct Attribute {
  std::string name;
  AttrValue value;
  std::string ref_attr_name;  // set inside function bodies only; kept for save
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;                // "" or "ai.onnx" for the default domain
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an omitted optional output
  std::vector<Attribute> attributes;
  std::string doc_string;
  // NodeProto.metadata_props (field 22, ONNX 1.16+): key/value pairs that tools such as
  // Netron show with the node. Debian's libonnx 1.12 predates the field, so load/save
  // carry it as protobuf's unknown field 22 (the same bytes a newer onnx writes).
  std::vector<std::pair<std::string, std::string>> metadata;

  const Attribute* find_attr(const std::string& n) const;
  bool has_attr(const std::string& n) const { return find_attr(n) != nullptr; }
  // Typed getters: the default when absent; an Error naming the node when present with
  // another type.
  std::int64_t attr_int(const std::string& n, std::int64_t def) const;
  float attr_float(const std::string& n, float def) const;
  std::string attr_string(const std::string& n, const std::string& def) const;
  std::vector<std::int64_t> attr_ints(const std::string& n,
                                      const std::vector<std::int64_t>& def = {}) const;
  std::vector<float> attr_floats(const std::string& n, const std::vector<float>& def = {}) const;
  const Tensor* attr_tensor(const std::string& n) const;
  // "node 'name' (OpType)", or "node #index (OpType)" style text for errors.
  std::string describe() const;
  // Number of non-empty inputs / whether input i is present.
  bool has_input(std::size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;
  std::vector<NamedTensor> initializers;
  std::string doc_string;

  const NamedTensor* find_initializer(const std::string& n) const;
  // Graph inputs that are not initializers: what a caller must feed.
  std::vector<const ValueInfo*> runtime_inputs() const;
};

struct Model {
  std::int64_t ir_version = 0;
  std::map<std::string, std::int64_t> opsets;  // domain ("" default) -> version
  std::string producer_name, producer_version, domain, doc_string;
  std::int64_t model_version = 0;
  std::vector<std::pair<std::string, std::string>> metadata;
  Graph graph;
  std::filesystem::path path;  // the file it was loaded from (for errors)
  // The external data files its tensors were read from (canonical paths): inputs that a
  // save never overwrites.
  std::vector<std::filesystem::path> external_files;

  // Version of the default domain ("" or "ai.onnx"); 0 when none is imported.
  std::int64_t default_opset() const;
};

// The default opsets this build accepts: ONNX opsets 7 .. 21 (kFullOpset on, every op of
// the opset), and 1 .. 6 for models whose ops are all still defined as at opset 7 (an op
// redefined since, such as Add-6 with its `broadcast` attribute, is refused by name).
inline constexpr std::int64_t kMinOpset = 1;
inline constexpr std::int64_t kFullOpset = 7;
inline constexpr std::int64_t kMaxOpset = 21;

// Loads an ONNX model. External data (location/offset/length) is read relative to the
// model's directory; a location that leaves that directory is refused. Initializers are
// not copied: those in external data view the file's read-only memory map (Tensor::view;
// the file is never written, and must not be truncated while the model lives), inline
// ones the raw_data buffers taken over from the parser. libonnx's checker
// is never a gate: newer opsets load as long as their protobuf parses. Validation:
// opset range, unique producers, node inputs defined (in this graph or, for subgraphs,
// an enclosing one), attribute types; each Error names the file and the node.
Model load(const std::filesystem::path& path);
// Parses a serialized ModelProto (`where` names it in errors; external data is resolved
// relative to `base_dir`).
Model load_from_bytes(const std::string& bytes, const std::string& where,
                      const std::filesystem::path& base_dir);
// How save stores initializers: inline (raw_data), or in one data file beside the model
// as ONNX external data (location/offset/length), which protobuf needs for models of
// 2 GiB or more.
struct SaveOptions {
  enum class External { automatic, always, never };
  // automatic: external when the initializers would make the model reach inline_limit.
  External external = External::automatic;
  std::size_t inline_limit = (std::size_t{1} << 31) - (std::size_t{64} << 20);
  std::size_t min_external_bytes = 1024;  // smaller initializers stay inline
};
struct SaveResult {
  std::filesystem::path data_file;  // empty when every tensor is inline
  std::size_t external_tensors = 0, external_bytes = 0;
};
// Writes a model back atomically. External data goes to `<model file name>.data` beside
// it (offsets aligned to 64 bytes), written before the model and removed again if the
// model cannot be written; a data file that is the model's own input (m.path or one of
// m.external_files) is refused, never overwritten, and so is a `path` among
// m.external_files.
SaveResult save(const Model& m, const std::filesystem::path& path, const SaveOptions& o = {});
// The model inline (every tensor in raw_data); Error when it would be 2 GiB or more.
std::string save_to_bytes(const Model& m);
// The model without the values of its tensors of 4 KiB or more (the weights; what ONNX
// shape inference does not read): its graph, attributes, types and small constants, a
// serialized ModelProto. What a partial check result carries so that merge finishes the
// check without the model file (docs/scale.md).
std::string save_graph_bytes(const Model& m);
// Loads what save_graph_bytes wrote (m.path = `where`): each tensor it left without values
// reads as zeros, taking no memory (a read-only anonymous map). For analyses that never
// read those values (analysis::finish of recorded constant scans).
Model load_graph_bytes(const std::string& bytes, const std::string& where);

// ---- graph analyses ------------------------------------------------------------------
// Names that nodes of `g` (including nested subgraphs) read but that `g` does not define
// (not a graph input, initializer or node output): the values a subgraph captures from
// its enclosing scopes.
std::vector<std::string> outer_references(const Graph& g);
// Gives the nodes of `g` their own copies of their subgraphs, nested as deep as the model
// goes: a copied Model shares its bodies with the original (GraphPtr), so a copy edits its
// bodies only after this.
void unshare_subgraphs(Graph& g);
// The graphs a body-carrying attribute holds (If's branches, Loop/Scan's body: one, or a
// list); none for any other attribute.
std::vector<const Graph*> subgraphs(const Attribute& a);
// Inputs a node reads: its declared inputs plus what its subgraph attributes capture.
std::vector<std::string> node_reads(const Node& n);
// Node indices in an order where each node comes after the producers of what it reads
// (stable: the file order when it is already topological). A cycle, or a value read but
// produced nowhere (and not a graph input/initializer nor in `outer`), throws an Error
// naming the node; `where` prefixes it (the file).
std::vector<std::size_t> topological_order(const Graph& g, const std::string& where,
                                           const std::vector<std::string>& outer = {});
// Value name -> indices of the nodes that read it (in node-index order).
std::map<std::string, std::vector<std::size_t>> consumers(const Graph& g);
// For a topological `order`: value name -> position in `order` of its last reader. Graph
// outputs are absent (never freed); values nobody reads map to the position of their
// producer (freed right after it runs).
std::map<std::string, std::size_t> last_use(const Graph& g, const std::vector<std::size_t>& order);

// ---- typing (from libonnx) -------------------------------------------------------------
// The type constraints of an op at an opset, from its ONNX schema: the type parameter of
// each input/output position ("T", "T1", or a fixed "tensor(float)") and the element
// types each parameter allows. known = false for ops without a schema (other domains).
struct OpTyping {
  bool known = false;
  std::vector<std::string> input_params, output_params;
  bool inputs_variadic = false, outputs_variadic = false;  // the last one repeats
  std::map<std::string, std::set<int>> allowed;            // parameter -> elem types
  const std::string& input_param(std::size_t i) const;     // "" past the end
  const std::string& output_param(std::size_t i) const;
  bool allows(const std::string& param, int elem_type) const;
};
OpTyping op_typing(const std::string& op, const std::string& domain, std::int64_t opset);
// The element type of every value of the main graph ONNX shape inference can type
// (inputs, initializers, node outputs): name -> ONNX elem type.
std::map<std::string, int> infer_elem_types(const Model& m);

// The same for every graph of `m`: the main graph and each subgraph (If/Loop/Scan bodies,
// nested), keyed by the graph's address in `m`; a subgraph's map holds its own values (its
// inputs, outputs, initializers and typed node outputs), not those of enclosing graphs.
std::map<const Graph*, std::map<std::string, int>> infer_graph_elem_types(const Model& m);

// ONNX data type code <-> DType (nullopt for types without a DType: STRING, FLOAT8...).
std::optional<DType> dtype_of(int onnx_elem_type);
int onnx_elem_type(DType d);
std::string onnx_type_name(int onnx_elem_type);

}  // namespace fpguard::model
