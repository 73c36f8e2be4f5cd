// Typing from libonnx: each op's type constraints from its schema, and the element type
// of every value from ONNX shape inference. (The model layer is the only one that sees
// onnx types.)
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "fpguard/error.hpp"
#include "fpguard/model.hpp"
#include "model/proto.hpp"

namespace fpguard::model {

namespace {

// "tensor(float16)" -> 10; 0 for anything that is not a tensor type we know.
int elem_type_of(const std::string& s) {
  static const std::map<std::string, int> types = {
      {"float", 1},         {"uint8", 2},           {"int8", 3},        {"uint16", 4},
      {"int16", 5},         {"int32", 6},           {"int64", 7},       {"string", 8},
      {"bool", 9},          {"float16", 10},        {"double", 11},     {"uint32", 12},
      {"uint64", 13},       {"complex64", 14},      {"complex128", 15}, {"bfloat16", 16},
      {"float8e4m3fn", 17}, {"float8e4m3fnuz", 18}, {"float8e5m2", 19}, {"float8e5m2fnuz", 20}};
  if (s.rfind("tensor(", 0) != 0 || s.back() != ')') return 0;
  auto it = types.find(s.substr(7, s.size() - 8));
  return it == types.end() ? 0 : it->second;
}

}  // namespace

OpTyping op_typing(const std::string& op, const std::string& domain, std::int64_t opset) {
  OpTyping t;
  const auto* schema = onnx::OpSchemaRegistry::Schema(op, static_cast<int>(opset),
                                                      domain == "ai.onnx" ? std::string() : domain);
  if (!schema) return t;
  t.known = true;
  auto params = [&](const std::vector<onnx::OpSchema::FormalParameter>& fs,
                    std::vector<std::string>& out, bool& variadic) {
    for (const auto& f : fs) {
      out.push_back(f.GetTypeStr());
      variadic = f.GetOption() == onnx::OpSchema::Variadic;
      auto& allowed = t.allowed[f.GetTypeStr()];
      for (const auto* ts : f.GetTypes())
        if (int e = elem_type_of(*ts)) allowed.insert(e);
    }
  };
  params(schema->inputs(), t.input_params, t.inputs_variadic);
  params(schema->outputs(), t.output_params, t.outputs_variadic);
  return t;
}

namespace {

onnx::ModelProto inferred(const Model& m) {
  onnx::ModelProto mp = to_proto(m, true);
  try {
    onnx::ShapeInferenceOptions options;
    options.check_type = false;
    options.error_mode = 0;  // best effort: values it cannot type stay absent
    onnx::shape_inference::InferShapes(mp, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    throw Error(m.path.string(), std::string("ONNX shape inference failed: ") + e.what());
  }
  return mp;
}

std::map<std::string, int> graph_types(const onnx::GraphProto& g) {
  std::map<std::string, int> out;
  auto take = [&](const onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().elem_type() != 0)
      out[v.name()] = v.type().tensor_type().elem_type();
  };
  for (const auto& v : g.input()) take(v);
  for (const auto& v : g.output()) take(v);
  for (const auto& v : g.value_info()) take(v);
  for (const auto& t : g.initializer()) out[t.name()] = t.data_type();
  return out;
}

// `g`'s types and its subgraphs', walking the IR graph and its inferred proto together
// (save writes nodes and attributes in the IR's order).
void collect(const Graph& g, const onnx::GraphProto& p,
             std::map<const Graph*, std::map<std::string, int>>& out) {
  out[&g] = graph_types(p);
  for (std::size_t i = 0; i < g.nodes.size() && static_cast<int>(i) < p.node_size(); ++i)
    for (const auto& a : g.nodes[i].attributes)
      for (const auto& pa : p.node(static_cast<int>(i)).attribute()) {
        if (pa.name() != a.name) continue;
        if (const auto* sg = std::get_if<GraphPtr>(&a.value); sg && pa.has_g())
          collect(**sg, pa.g(), out);
        if (const auto* sgs = std::get_if<std::vector<GraphPtr>>(&a.value))
          for (std::size_t k = 0; k < sgs->size() && static_cast<int>(k) < pa.graphs_size(); ++k)
            collect(*(*sgs)[k], pa.graphs(static_cast<int>(k)), out);
      }
}

}  // namespace

std::map<std::string, int> infer_elem_types(const Model& m) {
  return graph_types(inferred(m).graph());
}

std::map<const Graph*, std::map<std::string, int>> infer_graph_elem_types(const Model& m) {
  const onnx::ModelProto mp = inferred(m);
  std::map<const Graph*, std::map<std::string, int>> out;
  collect(m.graph, mp.graph(), out);
  return out;
}

}  // namespace fpguard::model
