// Mixed-precision conversion (rewrite::convert). One pass over the main graph in
// topological order decides each node's type class and rewires its inputs to values of
// the type it needs, creating converted initializers and Cast nodes on first need.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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

struct Converter {
  const model::Model& src;
  const ConvertOptions& o;
  ConvertReport& rep;
  model::Model out;
  int low = 0;         // ONNX elem type of the format
  std::string suffix;  // "fp16" / "bf16"
  std::int64_t opset = 0;
  std::map<std::string, int> orig;  // original elem type of every value shape inference typed
  std::map<std::string, int> cur;   // elem type of a value in the converted graph
  std::set<std::string> names;      // every value and node name in use
  std::map<std::pair<std::string, int>, std::string> as;  // (value, type) -> its name
  std::map<std::string, const Tensor*> initializer;       // original float initializers
  std::map<std::string, const Tensor*> constant;          // Constant node values (float)
  std::vector<model::Node> nodes;                         // the converted main graph
  std::vector<NamedTensor> new_initializers;

  Converter(const model::Model& m, const ConvertOptions& opt, ConvertReport& r)
      : src(m), o(opt), rep(r), out(m) {}

  std::string unique(const std::string& base) {
    std::string s = base;
    for (int i = 1; names.count(s); ++i) s = base + "_" + std::to_string(i);
    names.insert(s);
    return s;
  }

  // A name for `value` as a value of type `want` (creating what it takes).
  std::string as_type(const std::string& value, int want) {
    const int have = cur.count(value) ? cur[value] : 0;
    if (have == want || have == 0) return value;
    auto key = std::make_pair(value, want);
    if (auto it = as.find(key); it != as.end()) return it->second;
    std::string name;
    const Tensor* t = initializer.count(value) ? initializer[value]
                      : constant.count(value)  ? constant[value]
                                               : nullptr;
    if (t && want == low) {  // store the constant in the format: no Cast at run time
      const Tensor f32 = exec::convert(*t, DType::float32);
      std::uint64_t over = 0;
      for (float v : f32.data<float>())
        if (std::isfinite(v) && std::fabs(v) > o.precision.max()) ++over;
      if (over == 0) {
        name = unique(value + "_" + suffix);
        Tensor lowt = exec::convert(f32, low == 10 ? DType::float16 : DType::bfloat16);
        const Tensor back = exec::convert(lowt, DType::float32);
        std::uint64_t flushed = 0;
        double smallest = INFINITY;
        for (std::size_t i = 0; i < f32.size(); ++i)
          if (f32.data<float>()[i] != 0 && back.data<float>()[i] == 0) {
            ++flushed;
            smallest = std::min(smallest, std::fabs(static_cast<double>(f32.data<float>()[i])));
          }
        if (flushed)
          rep.warnings.push_back(fmt::format(
              "'{}': {} non-zero value{} flush{} to zero in {} (smallest {:.4g}), as the "
              "emulation predicted",
              value, flushed, flushed > 1 ? "s" : "", flushed > 1 ? "" : "es", o.precision.name,
              smallest));
        new_initializers.push_back({name, std::move(lowt)});
        ++rep.initializers_converted;
      } else {
        rep.warnings.push_back("'" + value + "': " + std::to_string(over) + " values beyond " +
                               o.precision.name +
                               " max: kept float32, a Cast converts it at run time (to inf)");
      }
    }
    if (name.empty()) {  // a Cast node
      name = unique(value + "_" + (want == low ? suffix : std::string("fp32")));
      model::Node c;
      c.name = unique(name + "_cast");
      c.op_type = "Cast";
      c.inputs = {value};
      c.outputs = {name};
      c.attributes.push_back({"to", std::int64_t{want}, ""});
      nodes.push_back(std::move(c));
      ++rep.casts;
    }
    cur[name] = want;
    as[key] = name;
    return name;
  }

  model::Model run();
};

model::Model Converter::run() {
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
  const auto& g = src.graph;
  std::set<std::string> node_names;
  for (const auto& n : g.nodes) node_names.insert(n.name);
  for (const auto& k : o.keep_fp32)
    if (!node_names.count(k)) {
      std::vector<std::string> all(node_names.begin(), node_names.end());
      std::string msg = "the model has no node named '" + k + "'";
      if (auto hint = did_you_mean(k, all); !hint.empty()) msg += "; did you mean '" + hint + "'?";
      throw Error(src.path.string(), msg);
    }
  orig = model::infer_elem_types(src);
  cur = orig;
  for (const auto& v : g.inputs) names.insert(v.name);
  for (const auto& t : g.initializers) {
    names.insert(t.name);
    if (t.tensor.dtype() == DType::float32) initializer[t.name] = &t.tensor;
  }
  for (const auto& n : g.nodes) {
    names.insert(n.name);
    for (const auto& x : n.outputs) names.insert(x);
    if (n.op_type == "Constant" && !n.outputs.empty())
      if (const Tensor* t = n.attr_tensor("value"); t && t->dtype() == DType::float32)
        constant[n.outputs[0]] = t;
  }
  if (!o.keep_io_types)
    for (auto& v : out.graph.inputs)
      if (v.elem_type == kFloat && !initializer.count(v.name)) {
        v.elem_type = low;
        cur[v.name] = low;
      }

  // Values that are constants or data movement of constants only.
  std::set<std::string> constlike;
  for (const auto& [name, t] : initializer) constlike.insert(name);
  for (const auto& [name, t] : constant) constlike.insert(name);
  // Readers of each value, for Cast look-ahead.
  std::map<std::string, std::vector<std::size_t>> readers;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs) readers[in].push_back(i);

  // The class of compute nodes: low unless kept, not floating, or not allowed by the spec.
  const auto order = model::topological_order(g, src.path.string());
  std::vector<int> compute_class(g.nodes.size(), 0);  // 0: not a floating compute node
  for (const auto idx : order) {
    const auto& n = g.nodes[idx];
    const auto* info = exec::Registry::global().find(n.op_type);
    if (info && info->kind == exec::OpKind::data_movement) continue;
    if (n.outputs.empty() || !orig.count(n.outputs[0]) || orig[n.outputs[0]] != kFloat) continue;
    int c = low;
    if (o.keep_fp32.count(n.name) || o.keep_fp32_ops.count(n.op_type) || has_subgraph(n))
      c = kFloat;
    const auto typing = model::op_typing(n.op_type, n.domain, opset);
    if (c == low && (!typing.known || !typing.allows(typing.output_param(0), low))) {
      c = kFloat;
      rep.kept_by_spec.push_back("'" + n.name + "' (" + n.op_type + ")");
    }
    compute_class[idx] = c;
    ++(c == low ? rep.low_nodes : rep.fp32_nodes);
  }

  for (const auto idx : order) {
    model::Node n = g.nodes[idx];
    const auto typing = model::op_typing(n.op_type, n.domain, opset);
    const auto* info = exec::Registry::global().find(n.op_type);
    const bool moves = info && info->kind == exec::OpKind::data_movement;
    if (n.op_type == "Constant") {  // converted where read (as_type), kept as it is
      nodes.push_back(std::move(n));
      continue;
    }
    const std::string main = typing.known ? typing.output_param(0) : std::string();
    int cls = kFloat;
    if (compute_class[idx]) {
      cls = compute_class[idx];
    } else if (moves && typing.known && !has_subgraph(n)) {
      // Data movement follows its data: low when any main input already is; over constants
      // only (an Identity of a weight), low when every reader computes in the format.
      bool any_low = false, all_const = true, any_float = false;
      for (std::size_t i = 0; i < n.inputs.size(); ++i) {
        const std::string& in = n.inputs[i];
        if (in.empty() || typing.input_param(i) != main || !orig.count(in) || orig[in] != kFloat)
          continue;
        any_float = true;
        if (cur.count(in) && cur[in] == low) any_low = true;
        if (!constlike.count(in)) all_const = false;
      }
      bool readers_low = !n.outputs.empty() && !readers[n.outputs[0]].empty();
      if (readers_low)
        for (auto r : readers[n.outputs[0]]) readers_low = readers_low && compute_class[r] == low;
      if (any_float && all_const)
        for (const auto& x : n.outputs) constlike.insert(x);
      cls = (any_low || (any_float && all_const && readers_low)) && typing.allows(main, low)
                ? low
                : kFloat;
    }
    if (n.op_type == "Cast" && n.attr_int("to", 0) == kFloat && !n.outputs.empty()) {
      // A Cast to float whose readers all compute in the format casts to it directly.
      const auto& rs = readers[n.outputs[0]];
      const bool all_low = !rs.empty() && std::all_of(rs.begin(), rs.end(), [&](std::size_t r) {
        return compute_class[r] == low;
      });
      if (all_low)
        for (auto& a : n.attributes)
          if (a.name == "to") a.value = std::int64_t{low};
    }
    // Ops whose float output type comes from an attribute (ConstantOfShape's value,
    // Random*'s dtype) produce the format directly when every reader computes in it.
    bool attr_typed_low = false;
    if ((n.op_type == "ConstantOfShape" || n.op_type.rfind("Random", 0) == 0) &&
        !n.outputs.empty() && orig.count(n.outputs[0]) && orig[n.outputs[0]] == kFloat) {
      const auto& rs = readers[n.outputs[0]];
      attr_typed_low = !rs.empty() && std::all_of(rs.begin(), rs.end(), [&](std::size_t r) {
        return compute_class[r] == low;
      });
      if (attr_typed_low) {
        bool set = false;
        for (auto& a : n.attributes) {
          if (a.name == "dtype") a.value = std::int64_t{low}, set = true;
          if (auto* t = std::get_if<Tensor>(&a.value); t && a.name == "value") {
            *t = exec::convert(exec::convert(*t, DType::float32),
                               low == 10 ? DType::float16 : DType::bfloat16);
            set = true;
          }
        }
        if (!set && n.op_type.rfind("Random", 0) == 0)
          n.attributes.push_back({"dtype", std::int64_t{low}, ""});
        if (!set && n.op_type == "ConstantOfShape") {  // the default value is float 0
          Tensor zero(low == 10 ? DType::float16 : DType::bfloat16, {1});
          std::fill(zero.bytes(), zero.bytes() + zero.nbytes(), std::byte{0});
          n.attributes.push_back({"value", std::move(zero), ""});
        }
      }
    }
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      std::string& in = n.inputs[i];
      if (in.empty() || !orig.count(in) || orig[in] != kFloat) continue;
      const std::string& p = typing.input_param(i);
      if (has_subgraph(n))  // If/Loop/Scan bodies were typed for float32
        in = as_type(in, kFloat);
      else if (typing.known && p == main && (compute_class[idx] || moves))
        in = as_type(in, cls);
      else if (!typing.known || !typing.allows(p, cur.count(in) ? cur[in] : kFloat))
        in = as_type(in, kFloat);  // a parameter of its own that needs float32
    }
    // Subgraphs read outer values by name: they must still be float32.
    for (auto& a : n.attributes) {
      std::vector<model::GraphPtr*> subs;
      if (auto* sg = std::get_if<model::GraphPtr>(&a.value)) subs.push_back(sg);
      if (auto* sgs = std::get_if<std::vector<model::GraphPtr>>(&a.value))
        for (auto& sg : *sgs) subs.push_back(&sg);
      for (auto* sg : subs) {
        auto copy = std::make_shared<model::Graph>(**sg);
        for (const auto& v : model::outer_references(*copy))
          if (cur.count(v) && cur[v] != orig[v] && orig[v] == kFloat)
            rename_captured(*copy, v, as_type(v, kFloat));
        *sg = copy;
      }
    }
    for (std::size_t j = 0; j < n.outputs.size(); ++j) {
      const std::string& x = n.outputs[j];
      if (x.empty() || !orig.count(x)) continue;
      if (n.op_type == "Cast") {
        cur[x] = static_cast<int>(n.attr_int("to", orig[x]));
        continue;
      }
      if (attr_typed_low && j == 0) {
        cur[x] = low;
        continue;
      }
      if (orig[x] != kFloat) continue;
      const bool follows =
          typing.known && typing.output_param(j) == main && (compute_class[idx] || moves);
      cur[x] = follows ? cls : kFloat;
    }
    nodes.push_back(std::move(n));
  }

  // Graph outputs keep float32 with --keep-io-types (a Cast at the end), else take the
  // type their producer gives them.
  for (auto& v : out.graph.outputs) {
    if (!cur.count(v.name) || cur[v.name] == orig[v.name]) continue;
    if (!o.keep_io_types) {
      v.elem_type = cur[v.name];
      continue;
    }
    const std::string inner = unique(v.name + "_" + suffix);
    for (auto& n : nodes) {
      for (auto& x : n.outputs)
        if (x == v.name) x = inner;
      for (auto& x : n.inputs)
        if (x == v.name) x = inner;
    }
    for (auto& [key, name] : as)
      if (name == v.name) name = inner;
    cur[inner] = cur[v.name];
    model::Node c;
    c.name = unique(v.name + "_cast");
    c.op_type = "Cast";
    c.inputs = {inner};
    c.outputs = {v.name};
    c.attributes.push_back({"to", std::int64_t{orig[v.name]}, ""});
    nodes.push_back(std::move(c));
    ++rep.casts;
    cur[v.name] = orig[v.name];
  }

  out.graph.nodes = std::move(nodes);
  for (auto& t : new_initializers) out.graph.initializers.push_back(std::move(t));
  // Drop initializers and Constant nodes nothing reads any more.
  std::set<std::string> read;
  for (const auto& n : out.graph.nodes)
    for (const auto& x : model::node_reads(n)) read.insert(x);
  for (const auto& v : out.graph.outputs) read.insert(v.name);
  std::set<std::string> inputs;
  for (const auto& v : out.graph.inputs) inputs.insert(v.name);
  std::erase_if(out.graph.initializers,
                [&](const NamedTensor& t) { return !read.count(t.name) && !inputs.count(t.name); });
  std::erase_if(out.graph.nodes, [&](const model::Node& n) {
    return n.op_type == "Constant" && !n.outputs.empty() && !read.count(n.outputs[0]);
  });
  // Declared types follow the values.
  for (auto& vi : out.graph.value_info)
    if (cur.count(vi.name) && vi.elem_type != 0) vi.elem_type = cur[vi.name];
  return std::move(out);
}

}  // namespace

bool can_convert(const Format& f) {
  return std::find(kConvertFormats.begin(), kConvertFormats.end(), f.name) != kConvertFormats.end();
}

model::Model convert(const model::Model& m, const ConvertOptions& o, ConvertReport* report) {
  ConvertReport local;
  Converter c(m, o, report ? *report : local);
  return c.run();
}

}  // namespace fpguard::rewrite

namespace fpguard::rewrite {

std::vector<Verified> verify(const model::Model& original, const model::Model& converted,
                             const std::vector<NamedTensor>& sample, double min_cosine,
                             int threads) {
  exec::RunOptions ro;
  ro.threads = threads;
  const auto want = exec::Executor(original, ro).run(sample);
  std::vector<NamedTensor> feed;
  for (const auto& t : sample) {
    NamedTensor f = t;
    for (const auto& vi : converted.graph.inputs)
      if (vi.name == t.name && vi.elem_type != model::onnx_elem_type(t.tensor.dtype()))
        if (auto d = model::dtype_of(vi.elem_type)) f.tensor = exec::convert(t.tensor, *d);
    feed.push_back(std::move(f));
  }
  const auto got = exec::Executor(converted, ro).run(feed);
  std::vector<Verified> out;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
    if (!exec::is_float(want[i].tensor.dtype())) continue;
    const Tensor r = exec::convert(want[i].tensor, DType::float32);
    const Tensor v = exec::convert(got[i].tensor, DType::float32);
    const auto c = analysis::compare(std::span<const float>(r.data<float>().data(), r.size()),
                                     std::span<const float>(v.data<float>().data(), v.size()),
                                     parse_format("float32"));
    out.push_back({.output = want[i].name,
                   .cosine = c.cosine(),
                   .max_abs_error = c.max_abs,
                   .nonfinite = c.overflow + c.nan,
                   .pass = c.overflow + c.nan == 0 && c.cosine() >= min_cosine});
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
  std::set<std::string> names;
  for (const auto& n : out.graph.nodes) names.insert(n.name);
  for (const auto& n : plan.fp32_nodes) {
    if (!names.count(n))
      throw Error(where,
                  "node '" + n + "' is not in " + model_name + " (a plan for another model?)");
    o.keep_fp32.insert(n);
  }
  return out;
}

}  // namespace fpguard::rewrite
