// Mixed-precision conversion (rewrite::convert). One pass over each graph in topological
// order (the main graph, and each If/Loop/Scan body when the pass reaches the node holding
// it) decides each node's type class and rewires its inputs to values of the type it
// needs, creating converted initializers and Cast nodes on first need.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>

#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/rewrite.hpp"
#include "fpguard/round.hpp"

namespace fpguard::rewrite {

namespace {

constexpr int kFloat = 1;

bool has_subgraph(const model::Node& n) {
  for (const auto& a : n.attributes)
    if (std::holds_alternative<model::GraphPtr>(a.value) ||
        std::holds_alternative<std::vector<model::GraphPtr>>(a.value))
      return true;
  return false;
}

// Ops that make or take sequences or optionals (SequenceConstruct, SplitToSequence,
// ConcatFromSequence, Optional, ...): a type parameter of theirs holds no tensor type. The
// sequences and optionals of a converted model hold float32 tensors (as declared), so such
// a node reads and gives float32, with Casts on its tensor edges.
bool handles_values(const model::OpTyping& t) {
  auto no_tensor = [&](const std::string& p) {
    auto it = t.allowed.find(p);
    return it != t.allowed.end() && it->second.empty();
  };
  return t.known && (std::any_of(t.input_params.begin(), t.input_params.end(), no_tensor) ||
                     std::any_of(t.output_params.begin(), t.output_params.end(), no_tensor));
}

// Renames reads of `from` to `to` inside a subgraph (and its subgraphs), where `from` is
// not defined by the subgraph itself.
void rename_captured(model::Graph& g, const std::string& from, const std::string& to) {
  for (const auto& v : g.inputs)
    if (v.name == from) return;
  for (const auto& t : g.initializers)
    if (t.name == from) return;
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs)
      if (o == from) return;
  for (auto& v : g.outputs)
    if (v.name == from) v.name = to;
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs)
      if (in == from) in = to;
    for (auto& a : n.attributes) {
      if (auto* sg = std::get_if<model::GraphPtr>(&a.value)) rename_captured(**sg, from, to);
      if (auto* sgs = std::get_if<std::vector<model::GraphPtr>>(&a.value))
        for (auto& sg : *sgs) rename_captured(*sg, from, to);
    }
  }
}

// The graphs of a node's attribute (one, or a list), to replace.
std::vector<model::GraphPtr*> graphs_of(model::Attribute& a) {
  std::vector<model::GraphPtr*> out;
  if (auto* sg = std::get_if<model::GraphPtr>(&a.value)) out.push_back(sg);
  if (auto* sgs = std::get_if<std::vector<model::GraphPtr>>(&a.value))
    for (auto& sg : *sgs) out.push_back(&sg);
  return out;
}

// Every value and node name of `g` and its subgraphs.
void collect_names(const model::Graph& g, std::set<std::string>& names) {
  for (const auto& v : g.inputs) names.insert(v.name);
  for (const auto& v : g.outputs) names.insert(v.name);
  for (const auto& t : g.initializers) names.insert(t.name);
  for (const auto& n : g.nodes) {
    names.insert(n.name);
    for (const auto& x : n.outputs) names.insert(x);
    for (const auto& a : n.attributes) {
      if (const auto* sg = std::get_if<model::GraphPtr>(&a.value)) collect_names(**sg, names);
      if (const auto* sgs = std::get_if<std::vector<model::GraphPtr>>(&a.value))
        for (const auto& sg : *sgs) collect_names(*sg, names);
    }
  }
}

// One graph under conversion, the main graph or a body, and what the pass knows of its
// values. A body reads the values of its enclosing graphs by name: lookups go from the
// innermost scope out, and what converts a value (a Cast, an initializer in the format) is
// made in the graph that defines it, before the node that holds the body, so a Loop casts a
// captured value once, not once per iteration.
struct Scope {
  const model::Graph& g;  // as in the source model
  Scope* parent = nullptr;
  std::string prefix{};                // of its nodes' paths: "" (main), "<outer>/<attribute>/"
  std::vector<std::string> visible{};  // the values its subgraphs see
  std::set<std::string> own{};         // values it defines (and the pass adds to it)
  std::map<std::string, int> orig{};   // original elem type of what shape inference typed
  std::map<std::string, int> cur{};    // elem type in the converted graph
  std::map<std::pair<std::string, int>, std::string> as{};  // (value, type) -> its name
  std::map<std::string, const Tensor*> initializer{};       // float initializers
  std::map<std::string, const Tensor*> constant{};          // Constant node values (float)
  std::set<std::string> constlike{};  // constants or data movement of constants only
  std::map<std::string, std::vector<std::size_t>> readers{};  // value -> reading node indices
  std::vector<std::size_t> order{};                           // topological
  std::vector<int> compute_class{};  // per node index; 0: not a floating compute node
  std::vector<model::Node> nodes{};  // the converted graph's
  std::vector<NamedTensor> new_initializers{};

  Scope* find(const std::string& v) {
    for (Scope* x = this; x; x = x->parent)
      if (x->own.count(v)) return x;
    return nullptr;
  }
  int orig_of(const std::string& v) {
    Scope* w = find(v);
    return w && w->orig.count(v) ? w->orig[v] : 0;
  }
  int cur_of(const std::string& v) {
    Scope* w = find(v);
    return w && w->cur.count(v) ? w->cur[v] : 0;
  }
  bool is_constlike(const std::string& v) {
    Scope* w = find(v);
    return w && w->constlike.count(v);
  }
  bool all_readers(const std::string& v, int cls) const {
    auto it = readers.find(v);
    return it != readers.end() && !it->second.empty() &&
           std::all_of(it->second.begin(), it->second.end(),
                       [&](std::size_t r) { return compute_class[r] == cls; });
  }
};

struct Converter {
  const model::Model& src;
  const ConvertOptions& o;
  ConvertReport& rep;
  model::Model out;
  int low = 0;         // ONNX elem type of the format
  std::string suffix;  // "fp16" / "bf16"
  std::int64_t opset = 0;
  std::map<const model::Graph*, std::map<std::string, int>> types;  // of every source graph
  std::set<std::string> names;  // every value and node name in use

  Converter(const model::Model& m, const ConvertOptions& opt, ConvertReport& r)
      : src(m), o(opt), rep(r), out(m) {}

  std::string unique(const std::string& base) {
    std::string s = base;
    for (int i = 1; names.count(s); ++i) s = base + "_" + std::to_string(i);
    names.insert(s);
    return s;
  }

  DType low_dtype() const { return low == 10 ? DType::float16 : DType::bfloat16; }
  std::string as_type(Scope& s, const std::string& value, int want);
  std::string stored_low(Scope& w, const std::string& value, const Tensor& t);
  void open(Scope& s, const std::vector<std::string>& outer);
  void classify(Scope& s);
  void convert_node(Scope& s, std::size_t pos);
  int node_class(Scope& s, std::size_t idx, const model::OpTyping& typing, bool moves);
  bool attr_typed_low(Scope& s, model::Node& n);
  void rewire_inputs(Scope& s, model::Node& n, int cls, bool computes);
  Scope open_body(Scope& parent, const model::Graph& g, const std::string& prefix);
  std::vector<bool> low_outputs(Scope& s, const model::Node& n, std::deque<Scope>& bodies);
  model::GraphPtr close_body(Scope& s, const std::vector<bool>& low_out);
  void keep_output_types(Scope& s);
  void finish(Scope& s, model::Graph& g);
  void check_options();
  model::Model run();
};

// `value` (a float initializer or Constant) stored in the format, or "" when values lie
// beyond its range (then a Cast converts it at run time, to inf, as the emulation does).
std::string Converter::stored_low(Scope& w, const std::string& value, const Tensor& t) {
  const Tensor f32 = exec::convert(t, DType::float32);
  const std::string label = w.prefix + value;
  std::uint64_t over = 0;
  for (float v : f32.data<float>())
    if (std::isfinite(v) && std::fabs(v) > o.precision.max()) ++over;
  if (over) {
    rep.warnings.push_back("'" + label + "': " + std::to_string(over) + " values beyond " +
                           o.precision.name +
                           " max: kept float32, a Cast converts it at run time (to inf)");
    return "";
  }
  const std::string name = unique(value + "_" + suffix);
  Tensor lowt = exec::convert(f32, low_dtype());
  const Tensor back = exec::convert(lowt, DType::float32);
  std::uint64_t flushed = 0;
  double smallest = INFINITY;
  for (std::size_t i = 0; i < f32.size(); ++i)
    if (f32.data<float>()[i] != 0 && back.data<float>()[i] == 0) {
      ++flushed;
      smallest = std::min(smallest, std::fabs(static_cast<double>(f32.data<float>()[i])));
    }
  if (flushed)
    rep.warnings.push_back(
        fmt::format("'{}': {} non-zero value{} flush{} to zero in {} (smallest {:.4g}), as the "
                    "emulation predicted",
                    label, flushed, flushed > 1 ? "s" : "", flushed > 1 ? "" : "es",
                    o.precision.name, smallest));
  w.new_initializers.push_back({name, std::move(lowt)});
  ++rep.initializers_converted;
  return name;
}

// A name for `value` as a value of type `want` (creating what it takes, in the graph that
// defines the value).
std::string Converter::as_type(Scope& s, const std::string& value, int want) {
  Scope* w = s.find(value);
  if (!w) return value;
  const int have = w->cur.count(value) ? w->cur[value] : 0;
  if (have == want || have == 0) return value;
  const auto key = std::make_pair(value, want);
  if (auto it = w->as.find(key); it != w->as.end()) return it->second;
  std::string name;
  const Tensor* t = w->initializer.count(value) ? w->initializer[value]
                    : w->constant.count(value)  ? w->constant[value]
                                                : nullptr;
  if (t && want == low) name = stored_low(*w, value, *t);
  if (name.empty()) {  // a Cast node
    name = unique(value + "_" + (want == low ? suffix : std::string("fp32")));
    model::Node c;
    c.name = unique(name + "_cast");
    c.op_type = "Cast";
    c.inputs = {value};
    c.outputs = {name};
    c.attributes.push_back({"to", std::int64_t{want}, ""});
    w->nodes.push_back(std::move(c));
    ++rep.casts;
  }
  w->own.insert(name);
  w->cur[name] = want;
  w->as[key] = name;
  return name;
}

// What the pass knows of `s`'s graph before converting it; `outer`: what it sees of its
// enclosing graphs.
void Converter::open(Scope& s, const std::vector<std::string>& outer) {
  const auto& g = s.g;
  s.orig = types[&g];
  s.cur = s.orig;
  s.visible = outer;
  for (const auto& v : g.inputs) s.own.insert(v.name);
  for (const auto& t : g.initializers) {
    s.own.insert(t.name);
    if (t.tensor.dtype() == DType::float32) s.initializer[t.name] = &t.tensor;
  }
  for (const auto& n : g.nodes) {
    for (const auto& x : n.outputs)
      if (!x.empty()) s.own.insert(x);
    if (n.op_type == "Constant" && !n.outputs.empty())
      if (const Tensor* t = n.attr_tensor("value"); t && t->dtype() == DType::float32)
        s.constant[n.outputs[0]] = t;
  }
  s.visible.insert(s.visible.end(), s.own.begin(), s.own.end());
  for (const auto& [name, t] : s.initializer) s.constlike.insert(name);
  for (const auto& [name, t] : s.constant) s.constlike.insert(name);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs) s.readers[in].push_back(i);
  s.order = model::topological_order(g, src.path.string(), outer);
  classify(s);
}

// The class of compute nodes: low unless kept, not floating, or not allowed by the spec.
void Converter::classify(Scope& s) {
  s.compute_class.assign(s.g.nodes.size(), 0);
  for (std::size_t pos = 0; pos < s.order.size(); ++pos) {
    const auto idx = s.order[pos];
    const auto& n = s.g.nodes[idx];
    const auto* info = exec::Registry::global().find(n.op_type);
    if (info && info->kind == exec::OpKind::data_movement) continue;
    if (n.outputs.empty() || !s.orig.count(n.outputs[0]) || s.orig[n.outputs[0]] != kFloat)
      continue;
    const std::string path = s.prefix + exec::display_name(n, pos);
    int c = low;
    if (o.keep_fp32.count(path) || o.keep_fp32_ops.count(n.op_type) || has_subgraph(n)) c = kFloat;
    const auto typing = model::op_typing(n.op_type, n.domain, opset);
    if (c == low && (!typing.known || !typing.allows(typing.output_param(0), low))) {
      c = kFloat;
      rep.kept_by_spec.push_back("'" + path + "' (" + n.op_type + ")");
    }
    s.compute_class[idx] = c;
    ++(c == low ? rep.low_nodes : rep.fp32_nodes);
  }
}

// The type class a node's main values take: its compute class, or for data movement its
// data's: low when any main input already is; over constants only (an Identity of a
// weight), low when every reader computes in the format.
int Converter::node_class(Scope& s, std::size_t idx, const model::OpTyping& typing, bool moves) {
  if (s.compute_class[idx]) return s.compute_class[idx];
  const auto& n = s.g.nodes[idx];
  if (!moves || !typing.known || has_subgraph(n) || handles_values(typing)) return kFloat;
  const std::string main = typing.output_param(0);
  bool any_low = false, all_const = true, any_float = false;
  for (std::size_t i = 0; i < n.inputs.size(); ++i) {
    const std::string& in = n.inputs[i];
    if (in.empty() || typing.input_param(i) != main || s.orig_of(in) != kFloat) continue;
    any_float = true;
    if (s.cur_of(in) == low) any_low = true;
    if (!s.is_constlike(in)) all_const = false;
  }
  const bool readers_low = !n.outputs.empty() && s.all_readers(n.outputs[0], low);
  if (any_float && all_const)
    for (const auto& x : n.outputs) s.constlike.insert(x);
  return (any_low || (any_float && all_const && readers_low)) && typing.allows(main, low) ? low
                                                                                          : kFloat;
}

// Ops whose float output type comes from an attribute (ConstantOfShape's value, Random*'s
// dtype) produce the format directly when every reader computes in it: true when `n` now
// does.
bool Converter::attr_typed_low(Scope& s, model::Node& n) {
  if ((n.op_type != "ConstantOfShape" && n.op_type.rfind("Random", 0) != 0) || n.outputs.empty() ||
      !s.orig.count(n.outputs[0]) || s.orig[n.outputs[0]] != kFloat ||
      !s.all_readers(n.outputs[0], low))
    return false;
  bool set = false;
  for (auto& a : n.attributes) {
    if (a.name == "dtype") a.value = std::int64_t{low}, set = true;
    if (auto* t = std::get_if<Tensor>(&a.value); t && a.name == "value") {
      *t = exec::convert(exec::convert(*t, DType::float32), low_dtype());
      set = true;
    }
  }
  if (!set && n.op_type.rfind("Random", 0) == 0)
    n.attributes.push_back({"dtype", std::int64_t{low}, ""});
  if (!set && n.op_type == "ConstantOfShape") {  // the default value is float 0
    Tensor zero(low_dtype(), {1});
    std::fill(zero.bytes(), zero.bytes() + zero.nbytes(), std::byte{0});
    n.attributes.push_back({"value", std::move(zero), ""});
  }
  return true;
}

// Each float input becomes a value of the type the node needs: its class for inputs of
// its main type parameter, float32 for a parameter of its own that does not allow what it
// gets, and float32 for everything a node holding a body reads (bodies are typed float32)
// or one that makes or takes sequences and optionals reads (handles_values).
void Converter::rewire_inputs(Scope& s, model::Node& n, int cls, bool computes) {
  const auto typing = model::op_typing(n.op_type, n.domain, opset);
  const std::string main = typing.known ? typing.output_param(0) : std::string();
  for (std::size_t i = 0; i < n.inputs.size(); ++i) {
    std::string& in = n.inputs[i];
    if (in.empty() || s.orig_of(in) != kFloat) continue;
    const std::string& p = typing.input_param(i);
    const int have = s.cur_of(in) ? s.cur_of(in) : kFloat;
    if (has_subgraph(n) || handles_values(typing))
      in = as_type(s, in, kFloat);
    else if (typing.known && p == main && computes)
      in = as_type(s, in, cls);
    else if (!typing.known || !typing.allows(p, have))
      in = as_type(s, in, kFloat);
  }
}

// Converts the node at `pos` of `s`'s order into s.nodes (its bodies first, recursively).
void Converter::convert_node(Scope& s, std::size_t pos) {
  const std::size_t idx = s.order[pos];
  const std::string path = s.prefix + exec::display_name(s.g.nodes[idx], pos);
  model::Node n = s.g.nodes[idx];
  if (!s.prefix.empty()) n.name = exec::display_name(n, pos);  // paths stay as they were
  if (n.op_type == "Constant") {  // converted where read (as_type), kept as it is
    s.nodes.push_back(std::move(n));
    return;
  }
  const auto typing = model::op_typing(n.op_type, n.domain, opset);
  const auto* info = exec::Registry::global().find(n.op_type);
  const bool moves = info && info->kind == exec::OpKind::data_movement;
  const int cls = node_class(s, idx, typing, moves);
  if (n.op_type == "Cast" && n.attr_int("to", 0) == kFloat && !n.outputs.empty() &&
      s.all_readers(n.outputs[0], low))  // a Cast to float read in the format casts to it
    for (auto& a : n.attributes)
      if (a.name == "to") a.value = std::int64_t{low};
  const bool typed_low = attr_typed_low(s, n);
  const bool computes = s.compute_class[idx] || moves;
  rewire_inputs(s, n, cls, computes);
  std::deque<Scope> bodies;
  std::vector<model::GraphPtr*> slots;
  for (auto& a : n.attributes)
    for (auto* sg : graphs_of(a)) {
      bodies.push_back(open_body(s, **sg, path + "/" + a.name + "/"));
      slots.push_back(sg);
    }
  const std::vector<bool> low_out = low_outputs(s, n, bodies);
  for (std::size_t b = 0; b < bodies.size(); ++b) *slots[b] = close_body(bodies[b], low_out);
  const std::string main = typing.known ? typing.output_param(0) : std::string();
  for (std::size_t j = 0; j < n.outputs.size(); ++j) {
    const std::string& x = n.outputs[j];
    if (x.empty() || !s.orig.count(x)) continue;
    if (n.op_type == "Cast")
      s.cur[x] = static_cast<int>(n.attr_int("to", s.orig[x]));
    else if (typed_low && j == 0)
      s.cur[x] = low;
    else if (s.orig[x] == kFloat)
      s.cur[x] = low_out[j]                                                   ? low
                 : typing.known && typing.output_param(j) == main && computes ? cls
                                                                              : kFloat;
  }
  s.nodes.push_back(std::move(n));
}

// A body converted but for its outputs (close_body): its nodes in their classes, Casts
// inside it at its boundaries.
Scope Converter::open_body(Scope& parent, const model::Graph& g, const std::string& prefix) {
  Scope s{.g = g, .parent = &parent, .prefix = prefix};
  open(s, parent.visible);
  for (std::size_t pos = 0; pos < s.order.size(); ++pos) convert_node(s, pos);
  return s;
}

// The outputs of `n` (its bodies converted, `bodies`) that stay in the format: an If's
// output that every branch gives in the format and every reader computes in (float32
// between them would be a Cast out of each branch and one back).
std::vector<bool> Converter::low_outputs(Scope& s, const model::Node& n,
                                         std::deque<Scope>& bodies) {
  std::vector<bool> out(n.outputs.size(), false);
  if (n.op_type != "If" || bodies.empty()) return out;
  for (std::size_t j = 0; j < n.outputs.size(); ++j) {
    const std::string& x = n.outputs[j];
    bool low_all = !x.empty() && s.orig.count(x) && s.orig[x] == kFloat && s.all_readers(x, low);
    for (auto& b : bodies)
      low_all = low_all && j < b.g.outputs.size() && b.cur_of(b.g.outputs[j].name) == low;
    out[j] = low_all;
  }
  return out;
}

// The body of `s` with its outputs of the types declared, or in the format where `low_out`
// says so (the node holding it is unchanged otherwise).
model::GraphPtr Converter::close_body(Scope& s, const std::vector<bool>& low_out) {
  auto body = std::make_shared<model::Graph>(s.g);
  for (std::size_t j = 0; j < body->outputs.size(); ++j) {
    auto& v = body->outputs[j];
    if (j < low_out.size() && low_out[j]) {
      v.elem_type = low;
      continue;
    }
    const int want = v.elem_type ? v.elem_type : s.orig_of(v.name);
    if (want == kFloat) v.name = as_type(s, v.name, want);
  }
  finish(s, *body);
  return body;
}

// Graph outputs of the main graph keep float32 with --keep-io-types (a Cast at the end),
// else take the type their producer gives them.
void Converter::keep_output_types(Scope& s) {
  for (auto& v : out.graph.outputs) {
    if (!s.cur.count(v.name) || s.cur[v.name] == s.orig[v.name]) continue;
    if (!o.keep_io_types) {
      v.elem_type = s.cur[v.name];
      continue;
    }
    const std::string inner = unique(v.name + "_" + suffix);
    for (auto& n : s.nodes) {
      for (auto& x : n.outputs)
        if (x == v.name) x = inner;
      for (auto& x : n.inputs)
        if (x == v.name) x = inner;
      for (auto& a : n.attributes)
        for (auto* sg : graphs_of(a)) rename_captured(**sg, v.name, inner);
    }
    for (auto& [key, name] : s.as)
      if (name == v.name) name = inner;
    s.cur[inner] = s.cur[v.name];
    model::Node c;
    c.name = unique(v.name + "_cast");
    c.op_type = "Cast";
    c.inputs = {inner};
    c.outputs = {v.name};
    c.attributes.push_back({"to", std::int64_t{s.orig[v.name]}, ""});
    s.nodes.push_back(std::move(c));
    ++rep.casts;
    s.cur[v.name] = s.orig[v.name];
  }
}

// `g` (a copy of the scope's source graph) gets the converted nodes and initializers, loses
// the initializers and Constant nodes nothing reads any more, and its declared types
// follow the values.
void Converter::finish(Scope& s, model::Graph& g) {
  g.nodes = std::move(s.nodes);
  for (auto& t : s.new_initializers) g.initializers.push_back(std::move(t));
  std::set<std::string> read;
  for (const auto& n : g.nodes)
    for (const auto& x : model::node_reads(n)) read.insert(x);
  for (const auto& v : g.outputs) read.insert(v.name);
  std::set<std::string> inputs;
  for (const auto& v : g.inputs) inputs.insert(v.name);
  std::erase_if(g.initializers,
                [&](const NamedTensor& t) { return !read.count(t.name) && !inputs.count(t.name); });
  std::erase_if(g.nodes, [&](const model::Node& n) {
    return n.op_type == "Constant" && !n.outputs.empty() && !read.count(n.outputs[0]);
  });
  for (auto& vi : g.value_info)
    if (s.cur.count(vi.name) && vi.elem_type != 0) vi.elem_type = s.cur[vi.name];
}

// The format and the node paths to keep: Errors before anything is converted.
void Converter::check_options() {
  if (!can_convert(o.precision)) {
    std::string formats;
    for (const auto f : kConvertFormats)
      formats += (formats.empty() ? "" : " or ") + std::string(f);
    throw Error::in_option(
        "precision", o.precision.name,
        "convert writes " + formats + " models (ONNX has no arithmetic in other formats)");
  }
  low = o.precision.name == "float16" ? 10 : 16;
  suffix = low == 10 ? "fp16" : "bf16";
  opset = src.default_opset();
  if (low == 16 && opset < 13)
    throw Error(src.path.string(), "bfloat16 needs opset 13 or later (the model has opset " +
                                       std::to_string(opset) + ")");
  const auto paths = exec::node_paths(src);
  for (const auto& k : o.keep_fp32)
    if (std::find(paths.begin(), paths.end(), k) == paths.end()) {
      std::string msg = "the model has no node named '" + k + "'";
      if (auto hint = did_you_mean(k, paths); !hint.empty())
        msg += "; did you mean '" + hint + "'?";
      throw Error(src.path.string(), msg);
    }
}

model::Model Converter::run() {
  check_options();
  types = model::infer_graph_elem_types(src);
  collect_names(src.graph, names);
  Scope main{.g = src.graph};
  open(main, {});
  if (!o.keep_io_types)
    for (auto& v : out.graph.inputs)
      if (v.elem_type == kFloat && !main.initializer.count(v.name)) {
        v.elem_type = low;
        main.cur[v.name] = low;
      }
  for (std::size_t pos = 0; pos < main.order.size(); ++pos) convert_node(main, pos);
  keep_output_types(main);
  finish(main, out.graph);
  return std::move(out);
}

}  // namespace

bool can_convert(const Format& f) {
  return std::find(kConvertFormats.begin(), kConvertFormats.end(), f.name) != kConvertFormats.end();
}

void require_convertible_plan(const std::string& where, const std::string& precision) {
  const std::string deploy =
      "deploy it with a quantization tool that excludes the plan's fp32_nodes";
  if (find_scaled_format(precision))
    throw Error(where, "the plan is for " + precision +
                           ", a scaled format, which convert does not write: ONNX has no MX, "
                           "NVFP4 or scaled-FP8 tensor types to store it in; " +
                           deploy);
  if (!can_convert(parse_format(precision)))
    throw Error(where,
                "the plan is for " + precision + ", which convert does not write; " + deploy);
}

model::Model convert(const model::Model& m, const ConvertOptions& o, ConvertReport* report) {
  ConvertReport local;
  Converter c(m, o, report ? *report : local);
  return c.run();
}

decltype(analysis::PlanOptions::count_casts) cast_counter() {
  return [](const model::Model& m, const analysis::CheckOptions& c) {
    ConvertOptions o{.precision = c.precision,
                     .keep_fp32 = c.keep_fp32,
                     .keep_fp32_ops = c.keep_fp32_ops,
                     .keep_io_types = true};
    if (!can_convert(o.precision) || (o.precision.name == "bfloat16" && m.default_opset() < 13))
      o.precision = parse_format("float16");
    ConvertReport rep;
    (void)convert(m, o, &rep);
    return rep.casts;
  };
}

}  // namespace fpguard::rewrite

namespace fpguard::rewrite {

std::vector<Verified> verify(const model::Model& original, const model::Model& converted,
                             const std::vector<NamedValue>& sample, double min_cosine,
                             int threads) {
  exec::RunOptions ro;
  ro.threads = threads;
  const auto want = exec::Executor(original, ro).run_values(sample);
  std::vector<NamedValue> feed;
  for (const auto& t : sample) {
    NamedValue f = t;
    for (const auto& vi : converted.graph.inputs)
      if (t.value.is_tensor() && vi.name == t.name &&
          vi.elem_type != model::onnx_elem_type(t.value.tensor.dtype()))
        if (auto d = model::dtype_of(vi.elem_type)) f.value = exec::convert(t.value.tensor, *d);
    feed.push_back(std::move(f));
  }
  const auto got = exec::Executor(converted, ro).run_values(feed);
  std::vector<Verified> out;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const auto ts = analysis::tensors_of(want[i].value);
    if (std::none_of(ts.begin(), ts.end(),
                     [](const Tensor* t) { return exec::is_float(t->dtype()); }) &&
        !ts.empty())
      continue;
    const auto c = analysis::compare_values(want[i].value, got[i].value);
    const std::uint64_t nonfinite = c.all.overflow + c.all.nan;
    out.push_back({.output = want[i].name,
                   .cosine = c.all.cosine(),
                   .max_abs_error = c.all.max_abs,
                   .nonfinite = nonfinite,
                   .mismatch = !c.same_form,
                   .pass = c.same_form && nonfinite == 0 && c.all.cosine() >= min_cosine});
  }
  return out;
}

model::Model apply_plan(const model::Model& m, const analysis::PlanFile& plan, ConvertOptions& o,
                        const std::string& where, const std::string& model_name) {
  model::Model out = m;
  const Format f = parse_format(plan.precision);
  for (const auto& [value, k] : plan.scaled) {
    std::string why;
    const auto s = find_scale(out, value, {}, f, &why, k);
    if (!s)
      throw Error(where, "cannot scale '" + value + "' by 2^-" + std::to_string(k) + " in " +
                             model_name + " (" + why + ")");
    out = apply_scale(out, *s);
  }
  const auto paths = exec::node_paths(out);
  for (const auto& n : plan.fp32_nodes) {
    if (std::find(paths.begin(), paths.end(), n) == paths.end())
      throw Error(where,
                  "node '" + n + "' is not in " + model_name + " (a plan for another model?)");
    o.keep_fp32.insert(n);
  }
  return out;
}

}  // namespace fpguard::rewrite
