// The check diagnosis as JSON (docs/check.md documents every field) and read back. The
// numbers kept per tensor are written whole (the sums behind cosine and SNR included), so
// a diagnosis read back gives the same derived numbers and the same sentences.
#include <cmath>
#include <limits>
#include <set>

#include "fpguard/error.hpp"
#include "fpguard/report.hpp"
#include "json_reader.hpp"
#include "output_json.hpp"
#include "scaled_operands.hpp"

namespace fpguard::report {

namespace {

using analysis::Comparison;

// The errors are over the `finite` pairs: null when there are none (never 0).
Json comparison_json(const Comparison& c) {
  const auto measured = [&](double v) { return c.finite ? number(v) : Json(nullptr); };
  return {{"count", c.count},
          {"max_abs_error", measured(c.max_abs)},
          {"max_rel_error", measured(c.max_rel)},
          {"mean_rel_error", measured(c.mean_rel())},
          {"cosine", measured(c.cosine())},
          {"snr_db", measured(c.snr_db())},
          {"rel_rms_error", measured(c.nrmse())},
          {"overflow", c.overflow},
          {"nan", c.nan},
          {"underflow", c.underflow},
          {"subnormal", c.subnormal},
          {"finite", c.finite},
          {"sums", {{"rel", c.sum_rel}, {"dot", c.dot}, {"vv", c.vv}, {"rr", c.rr}, {"dd", c.dd}}}};
}

bool scaled_kind(analysis::OriginKind k) {
  return k == analysis::OriginKind::block_underflow ||
         k == analysis::OriginKind::block_saturation || k == analysis::OriginKind::scale_underflow;
}

Json fix_json(const analysis::Fix& f) {
  Json j = {{"kind", std::string(analysis::to_string(f.kind))}, {"nodes", f.nodes}};
  if (!f.value.empty()) j["value"] = f.value;
  if (!f.format.empty()) j["format"] = f.format;
  if (f.kind == analysis::FixKind::scale) {
    j["exponent"] = f.exponent;
    j["degree"] = f.degree;
    j["undo"] = f.undo;
    j["before_model"] = f.before_model;
  }
  if (f.kind != analysis::FixKind::keep_fp32 && f.kind != analysis::FixKind::format &&
      f.kind != analysis::FixKind::scaled_format && f.kind != analysis::FixKind::keep_unscaled)
    j["replacement"] = number(f.replacement);
  if (f.kind == analysis::FixKind::replace_value) j["value_seen"] = number(f.value_seen);
  return j;
}

Json origin_json(const analysis::Origin& o) {
  std::vector<std::string> suggestions;
  Json fixes = Json::array();
  for (const auto& f : o.fixes) {
    suggestions.push_back(describe(f));
    fixes.push_back(fix_json(f));
  }
  Json consumers = Json::array();
  for (const auto& [op, node] : o.consumers) consumers.push_back({{"op_type", op}, {"node", node}});
  Json j = {{"node", o.node},
            {"op_type", o.op_type},
            {"kind", std::string(analysis::to_string(o.kind))},
            {"cause", std::string(analysis::to_string(o.cause))},
            {"outputs", o.outputs},
            {"format", o.format},
            {"affected", o.affected},
            {"total", o.total},
            {"absmax", number(o.absmax)},
            {"input_absmax", number(o.input_absmax)},
            {"related", o.related},
            {"min_nonzero", number(o.min_nonzero)},
            {"local_error", number(o.local_error)},
            {"input_error", number(o.input_error)},
            {"absorbed", o.absorbed},
            {"saturates", o.saturates},
            {"consumers", std::move(consumers)},
            {"message", describe(o)},
            {"fixes", std::move(fixes)},
            {"suggestions", suggestions},
            {"keep_fp32", o.keep_fp32},
            {"iteration", o.iteration}};
  if (o.kind == analysis::OriginKind::accuracy) {
    j["contribution"] = number(o.contribution);
    j["total_error"] = number(o.total_error);
  }
  if (scaled_kind(o.kind)) {
    j["operand"] = o.operand;
    j["blocks"] = o.blocks;
    j["blocks_affected"] = o.blocks_affected;
  }
  return j;
}

Json tensor_fields(const analysis::TensorRecord& t, Json hist);

Json tensor_json(const analysis::TensorRecord& t) {
  Json hist = Json::object();
  for (const auto& [e, c] : t.exponent_histogram) hist[std::to_string(e)] = c;
  Json j = tensor_fields(t, std::move(hist));
  if (!t.original.empty()) {  // (with a reference model only)
    j["original"] = t.original;
    j["against_original"] = comparison_json(t.against_original);
  }
  return j;
}

Json tensor_fields(const analysis::TensorRecord& t, Json hist) {
  return {{"name", t.name},
          {"ref_min", number(t.ref_min)},
          {"ref_max", number(t.ref_max)},
          {"ref_absmax", number(t.ref_absmax)},
          {"ref_nonfinite", t.ref_nonfinite},
          {"headroom_bits", number(t.headroom_bits)},
          {"overflow", t.propagated.overflow},
          {"nan", t.propagated.nan},
          {"underflow", t.propagated.underflow},
          {"subnormal", t.propagated.subnormal},
          {"local", comparison_json(t.local)},
          {"propagated", comparison_json(t.propagated)},
          {"exponent_histogram", std::move(hist)}};
}

Json node_json(const analysis::NodeRecord& n) {
  Json outs = Json::array();
  for (const auto& t : n.outputs)
    if (t.floating) outs.push_back(tensor_json(t));
  return {{"name", n.name},
          {"op_type", n.op_type},
          {"index", n.index},
          {"precision", n.precision},
          {"emulated", n.emulated},
          {"inputs_nonfinite", n.inputs_nonfinite},
          {"input_error", number(n.input_error)},
          {"input_absmax", number(n.input_absmax)},
          {"damage", number(n.damage)},
          {"boundary_inputs", n.boundary_inputs},
          {"input_shapes", n.input_shapes},
          {"parent", n.parent},
          {"runs", n.runs},
          {"first_overflow_iteration", n.first_overflow_iteration},
          {"outputs", std::move(outs)},
          {"scaled_operands", detail::scaled_operands_json(n.scaled_operands)}};
}

Json generated_json(const inputs::Generated& g) {
  const inputs::Generator& d = g.generator;
  Json j = {{"name", g.name}, {"distribution", d.distribution}};
  if (d.distribution == "normal")
    j["mean"] = d.a, j["std"] = d.b;
  else
    j["low"] = d.a, j["high"] = d.b;
  j["default"] = g.by_default;
  return j;
}

Json kinds_json(const std::set<analysis::OriginKind>& kinds) {
  Json j = Json::array();
  for (const auto k : kinds) j.push_back(std::string(analysis::to_string(k)));
  return j;
}

Json output_json(const analysis::OutputVerdict& o) {
  Json elements = Json::array();
  for (const auto& e : o.elements) elements.push_back(output_json(e));
  Json mismatch = detail::mismatch_json(o.mismatch);
  if (o.mismatch) mismatch["message"] = describe(*o.mismatch, o.mismatched_sets);
  return {{"name", o.name},
          {"max_abs_error", number(o.max_abs_error)},
          {"max_rel_error", number(o.max_rel_error)},
          {"max_scaled_error", number(o.max_scaled_error)},
          {"rel_rms_error", number(o.rel_rms_error)},
          {"cosine", number(o.cosine)},
          {"nonfinite", o.nonfinite},
          {"outside_tolerance", o.outside_tolerance},
          {"elements", std::move(elements)},
          {"mismatched_sets", o.mismatched_sets},
          {"mismatch", std::move(mismatch)},
          {"pass", o.pass}};
}

Json rule_json(const analysis::RuleFinding& r) {
  return {{"id", r.id},
          {"node", r.node},
          {"op_type", r.op_type},
          {"tensor", r.tensor},
          {"format", r.format},
          {"observed", number(r.observed)},
          {"limit", number(r.limit)},
          {"parameter", number(r.parameter)},
          {"count", r.count},
          {"total", r.total},
          {"centred", r.centred},
          {"types", r.types},
          {"margin_bits", number(r.margin_bits)},
          {"norm_share", number(r.norm_share)},
          {"severity", std::string(analysis::to_string(r.severity))},
          {"message", describe(r)}};
}

// ---- reading ---------------------------------------------------------------------------

// The diagnosis' own structures, on the shared field access.
struct Reader : detail::JsonReader {
  Comparison comparison(const Json& j, const std::string& path) const {
    Comparison c;
    c.count = u64(j, "count", path);
    // null: no finite pair, where the maxima are still 0.
    c.max_abs = real(j, "max_abs_error", path, 0);
    c.max_rel = real(j, "max_rel_error", path, 0);
    c.overflow = u64(j, "overflow", path);
    c.nan = u64(j, "nan", path);
    c.underflow = u64(j, "underflow", path);
    c.subnormal = u64(j, "subnormal", path);
    c.finite = u64(j, "finite", path);
    const Json& s = at(j, "sums", path);
    const std::string sp = path + ".\"sums\"";
    c.sum_rel = real(s, "rel", sp);
    c.dot = real(s, "dot", sp);
    c.vv = real(s, "vv", sp);
    c.rr = real(s, "rr", sp);
    c.dd = real(s, "dd", sp);
    return c;
  }

  analysis::Fix fix(const Json& j, const std::string& path) const {
    analysis::Fix f;
    f.kind = kind(j, "kind", path, analysis::FixKind::keep_unscaled);
    f.nodes = strings(j, "nodes", path);
    if (j.contains("value")) f.value = str(j, "value", path);
    if (j.contains("format")) f.format = str(j, "format", path);
    if (f.kind == analysis::FixKind::scale) {
      // Exponents and degrees of a power-of-two scaling: small integers.
      const std::int64_t e = i64(j, "exponent", path), deg = i64(j, "degree", path);
      if (e < -1100 || e > 1100) fail(field(path, "exponent"), "is out of range");
      if (deg < -64 || deg > 64) fail(field(path, "degree"), "is out of range");
      f.exponent = static_cast<int>(e);
      f.degree = static_cast<int>(deg);
      f.undo = boolean(j, "undo", path);
      f.before_model = boolean(j, "before_model", path);
    }
    if (j.contains("replacement")) f.replacement = real(j, "replacement", path);
    if (j.contains("value_seen")) f.value_seen = real(j, "value_seen", path);
    return f;
  }

  analysis::Origin origin(const Json& j, const std::string& path) const {
    analysis::Origin o;
    o.node = str(j, "node", path);
    o.op_type = str(j, "op_type", path);
    o.kind = kind(j, "kind", path, analysis::OriginKind::scale_underflow);
    o.cause = kind(j, "cause", path, analysis::Cause::clipped);
    o.outputs = strings(j, "outputs", path);
    o.format = str(j, "format", path);
    o.affected = u64(j, "affected", path);
    o.total = u64(j, "total", path);
    o.absmax = real(j, "absmax", path);
    o.input_absmax = real(j, "input_absmax", path);
    o.related = str(j, "related", path);
    o.min_nonzero = real(j, "min_nonzero", path, INFINITY);
    o.local_error = real(j, "local_error", path);
    o.input_error = real(j, "input_error", path);
    o.absorbed = boolean(j, "absorbed", path);
    o.saturates = boolean(j, "saturates", path);
    const Json& cs = array(j, "consumers", path);
    for (std::size_t i = 0; i < cs.size(); ++i) {
      const std::string p = path + ".\"consumers\"[" + std::to_string(i) + "]";
      o.consumers.emplace_back(str(cs[i], "op_type", p), str(cs[i], "node", p));
    }
    const Json& fs = array(j, "fixes", path);
    for (std::size_t i = 0; i < fs.size(); ++i)
      o.fixes.push_back(fix(fs[i], path + ".\"fixes\"[" + std::to_string(i) + "]"));
    o.keep_fp32 = strings(j, "keep_fp32", path);
    if (j.contains("iteration")) o.iteration = sizes(j, "iteration", path);
    if (o.kind == analysis::OriginKind::accuracy) {
      o.contribution = real(j, "contribution", path);
      o.total_error = real(j, "total_error", path);
    }
    if (scaled_kind(o.kind)) {
      o.operand = u64(j, "operand", path);
      o.blocks = u64(j, "blocks", path);
      o.blocks_affected = u64(j, "blocks_affected", path);
    }
    return o;
  }

  analysis::TensorRecord tensor(const Json& j, const std::string& path) const {
    analysis::TensorRecord t;
    t.name = str(j, "name", path);
    t.floating = true;  // only floating tensors are written
    t.ref_min = real(j, "ref_min", path);
    t.ref_max = real(j, "ref_max", path);
    t.ref_absmax = real(j, "ref_absmax", path);
    t.ref_nonfinite = u64(j, "ref_nonfinite", path);
    t.headroom_bits = real(j, "headroom_bits", path, INFINITY);
    t.local = comparison(at(j, "local", path), path + ".\"local\"");
    t.propagated = comparison(at(j, "propagated", path), path + ".\"propagated\"");
    t.exponent_histogram = histogram(j, "exponent_histogram", path);
    if (j.contains("original")) {  // with a reference model only
      t.original = str(j, "original", path);
      t.against_original =
          comparison(at(j, "against_original", path), path + ".\"against_original\"");
    }
    return t;
  }

  analysis::NodeRecord node(const Json& j, const std::string& path) const {
    analysis::NodeRecord n;
    n.name = str(j, "name", path);
    n.op_type = str(j, "op_type", path);
    n.index = u64(j, "index", path);
    n.precision = str(j, "precision", path);
    n.emulated = boolean(j, "emulated", path);
    n.inputs_nonfinite = boolean(j, "inputs_nonfinite", path);
    n.input_error = real(j, "input_error", path);
    n.input_absmax = real(j, "input_absmax", path);
    n.damage = real(j, "damage", path, INFINITY);  // never NaN: null is +inf
    n.boundary_inputs = strings(j, "boundary_inputs", path);
    if (j.contains("parent")) n.parent = str(j, "parent", path);  // (older files lack these)
    if (j.contains("runs")) n.runs = u64(j, "runs", path);
    if (j.contains("first_overflow_iteration"))
      n.first_overflow_iteration = sizes(j, "first_overflow_iteration", path);
    const Json& shapes = array(j, "input_shapes", path);
    for (const auto& s : shapes) {
      if (!s.is_array()) fail(path + ".\"input_shapes\"", "holds a non-array");
      std::vector<std::int64_t> shape;
      for (const auto& d : s) {
        if (!d.is_number_integer()) fail(path + ".\"input_shapes\"", "holds a non-integer");
        shape.push_back(d.get<std::int64_t>());
      }
      n.input_shapes.push_back(std::move(shape));
    }
    const Json& outs = array(j, "outputs", path);
    for (std::size_t i = 0; i < outs.size(); ++i)
      n.outputs.push_back(tensor(outs[i], path + ".\"outputs\"[" + std::to_string(i) + "]"));
    n.scaled_operands = detail::read_scaled_operands(*this, j, path);
    return n;
  }

  analysis::RuleFinding rule(const Json& j, const std::string& path) const {
    analysis::RuleFinding r;
    r.id = str(j, "id", path);
    r.node = str(j, "node", path);
    r.op_type = str(j, "op_type", path);
    r.tensor = str(j, "tensor", path);
    r.format = str(j, "format", path);
    r.observed = real(j, "observed", path);
    r.limit = real(j, "limit", path);
    r.parameter = real(j, "parameter", path);
    r.count = u64(j, "count", path);
    r.total = u64(j, "total", path);
    r.centred = boolean(j, "centred", path);
    if (j.contains("types")) {  // (absent in older files)
      const Json& a = array(j, "types", path);
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_string()) fail(detail::item(path, "types", i), "is not a string");
        r.types.push_back(a[i].get<std::string>());
      }
    }
    // null: NaN for the rules without a margin, +inf when nothing was seen.
    const bool constant = r.id == "constant-overflow" || r.id == "constant-underflow" ||
                          !r.types.empty() || r.id == "clipped-initializer" ||
                          r.id == "floored-initializer";
    r.margin_bits = real(j, "margin_bits", path, constant ? NAN : INFINITY);
    r.norm_share = real(j, "norm_share", path);
    r.severity = kind(j, "severity", path, analysis::Severity::major);
    return r;
  }

  analysis::OutputVerdict output(const Json& j, const std::string& path) const {
    analysis::OutputVerdict v;
    v.name = str(j, "name", path);
    v.max_abs_error = real(j, "max_abs_error", path);  // null: NaN, no finite pair
    v.max_rel_error = real(j, "max_rel_error", path);
    v.max_scaled_error = real(j, "max_scaled_error", path);
    v.rel_rms_error = real(j, "rel_rms_error", path);
    v.cosine = real(j, "cosine", path);
    v.nonfinite = u64(j, "nonfinite", path);
    v.outside_tolerance = u64(j, "outside_tolerance", path);
    v.pass = boolean(j, "pass", path);
    if (j.contains("elements")) {  // (sequence and optional outputs; absent in older files)
      const Json& es = array(j, "elements", path);
      for (std::size_t k = 0; k < es.size(); ++k)
        v.elements.push_back(output(es[k], detail::item(path, "elements", k)));
      v.mismatched_sets = u64(j, "mismatched_sets", path);
      v.mismatch = detail::read_mismatch(*this, j, path);
    }
    return v;
  }

  inputs::Generated generated(const Json& j, const std::string& path) const {
    inputs::Generated g;
    g.name = str(j, "name", path);
    inputs::Generator& d = g.generator;
    d.distribution = str(j, "distribution", path);
    if (d.distribution != "uniform" && d.distribution != "normal")
      fail(field(path, "distribution"), "is not uniform or normal");
    const bool normal = d.distribution == "normal";
    d.a = real(j, normal ? "mean" : "low", path);
    d.b = real(j, normal ? "std" : "high", path);
    g.by_default = boolean(j, "default", path);
    return g;
  }

  std::set<analysis::OriginKind> kinds(const Json& j, const char* key,
                                       const std::string& path) const {
    std::set<analysis::OriginKind> out;
    const Json& a = array(j, key, path);
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string p = detail::item(path, key, i);
      if (!a[i].is_string()) fail(p, "is not a string");
      const std::string s = a[i].get<std::string>();
      try {
        out.merge(analysis::parse_fail_on({s}));
      } catch (const Error& e) {
        fail(p, std::string("is not a kind --fail-on takes: ") + e.what());
      }
    }
    return out;
  }

  // "inputs" ("given" or "generated") and the generated inputs, which must agree.
  std::vector<inputs::Generated> inputs(const Json& j) const {
    std::vector<inputs::Generated> out;
    const Json& gs = array(j, "generated_inputs", "");
    for (std::size_t i = 0; i < gs.size(); ++i)
      out.push_back(generated(gs[i], detail::item("", "generated_inputs", i)));
    const std::string said = str(j, "inputs", "");
    if (said != (out.empty() ? "given" : "generated"))
      fail("\"inputs\"", "is '" + said + "', but \"generated_inputs\" lists " +
                             std::to_string(out.size()) + " inputs");
    return out;
  }
};

}  // namespace

Json first_trouble_json(const analysis::Diagnosis& d) {
  if (!d.first_trouble) return nullptr;
  const auto& f = *d.first_trouble;
  return {{"tensor", f.tensor},         {"node", f.node},
          {"op_type", f.op_type},       {"nonfinite", f.nonfinite},
          {"cosine", number(f.cosine)}, {"producer_emulated", f.producer_emulated},
          {"message", describe(f, d)}};
}

Json to_json(const analysis::Diagnosis& d) {
  Json outputs = Json::array();
  for (const auto& o : d.outputs) outputs.push_back(output_json(o));
  Json generated = Json::array();
  for (const auto& g : d.generated) generated.push_back(generated_json(g));
  Json origins = Json::array();
  for (const auto& o : d.origins) origins.push_back(origin_json(o));
  Json nodes = Json::array();
  for (const auto& n : d.nodes) nodes.push_back(node_json(n));
  Json rules = Json::array();
  for (const auto& r : d.rules) rules.push_back(rule_json(r));
  Json notes = Json::array();
  for (const auto& n : d.notes)
    notes.push_back({{"kind", std::string(analysis::to_string(n.kind))},
                     {"count", n.count},
                     {"text", n.text},
                     {"message", describe(n, d)}});
  return {{"schema_version", kCheckSchema},
          {"model", d.model},
          {"precision", d.precision},
          {"other_precision", d.other_precision},
          {"amax_margin", d.amax_margin},
          {"reference", d.reference},
          {"reference_model", d.reference_model},
          {"accumulate", d.accumulate},
          {"samples", d.samples},
          {"inputs", d.generated.empty() ? "given" : "generated"},
          {"generated_inputs", std::move(generated)},
          {"tolerance",
           {{"min_cosine", d.min_cosine},
            {"atol", d.atol ? Json(*d.atol) : Json(nullptr)},
            {"rtol", d.rtol ? Json(*d.rtol) : Json(nullptr)}}},
          {"fail_on", kinds_json(d.fail_on)},
          {"verdict", d.pass ? "pass" : "fail"},
          {"absorbed", d.absorbed},
          {"outputs", std::move(outputs)},
          {"origins", std::move(origins)},
          {"nodes", std::move(nodes)},
          {"rules", std::move(rules)},
          {"notes", std::move(notes)},
          {"first_trouble", first_trouble_json(d)}};
}

Json to_json(const std::vector<analysis::Diagnosis>& ds, const std::string& model) {
  if (ds.size() == 1) return to_json(ds.front());
  bool pass = true;
  Json checks = Json::array();
  for (const auto& d : ds) {
    pass = pass && d.pass;
    checks.push_back(to_json(d));
  }
  return {{"schema_version", kCheckSchema},
          {"model", model},
          {"verdict", pass ? "pass" : "fail"},
          {"checks", std::move(checks)}};
}

analysis::Diagnosis diagnosis_from_json(const Json& j, const std::string& where) {
  const Reader r{{where}};
  r.schema(j, kCheckSchema, "a check diagnosis");
  analysis::Diagnosis d;
  d.model = r.str(j, "model", "");
  d.precision = r.str(j, "precision", "");
  if (j.contains("other_precision")) {  // (files before scaled precisions have neither)
    d.other_precision = r.str(j, "other_precision", "");
    d.amax_margin = static_cast<int>(r.i64(j, "amax_margin", ""));
  }
  d.reference = r.str(j, "reference", "");
  if (j.contains("reference_model")) d.reference_model = r.str(j, "reference_model", "");
  d.accumulate = r.str(j, "accumulate", "");
  d.samples = r.u64(j, "samples", "");
  const Json& tol = r.at(j, "tolerance", "");
  d.min_cosine = r.real(tol, "min_cosine", "\"tolerance\"");
  if (!r.at(tol, "atol", "\"tolerance\"").is_null()) d.atol = r.real(tol, "atol", "\"tolerance\"");
  if (!r.at(tol, "rtol", "\"tolerance\"").is_null()) d.rtol = r.real(tol, "rtol", "\"tolerance\"");
  const std::string verdict = r.str(j, "verdict", "");
  if (verdict != "pass" && verdict != "fail") r.fail("\"verdict\"", "is not pass or fail");
  d.pass = verdict == "pass";
  d.generated = r.inputs(j);
  d.fail_on = r.kinds(j, "fail_on", "");
  d.absorbed = r.strings(j, "absorbed", "");
  const Json& outputs = r.array(j, "outputs", "");
  for (std::size_t i = 0; i < outputs.size(); ++i)
    d.outputs.push_back(r.output(outputs[i], detail::item("", "outputs", i)));
  const Json& origins = r.array(j, "origins", "");
  for (std::size_t i = 0; i < origins.size(); ++i)
    d.origins.push_back(r.origin(origins[i], detail::item("", "origins", i)));
  const Json& nodes = r.array(j, "nodes", "");
  for (std::size_t i = 0; i < nodes.size(); ++i)
    d.nodes.push_back(r.node(nodes[i], detail::item("", "nodes", i)));
  const Json& rules = r.array(j, "rules", "");
  for (std::size_t i = 0; i < rules.size(); ++i)
    d.rules.push_back(r.rule(rules[i], detail::item("", "rules", i)));
  if (j.contains("first_trouble") && !j["first_trouble"].is_null()) {
    const Json& f = j["first_trouble"];
    const std::string p = "\"first_trouble\"";
    d.first_trouble =
        analysis::FirstTrouble{.tensor = r.str(f, "tensor", p),
                               .node = r.str(f, "node", p),
                               .op_type = r.str(f, "op_type", p),
                               .nonfinite = r.boolean(f, "nonfinite", p),
                               .cosine = r.real(f, "cosine", p),
                               .producer_emulated = r.boolean(f, "producer_emulated", p)};
  }
  const Json& notes = r.array(j, "notes", "");
  for (std::size_t i = 0; i < notes.size(); ++i) {
    const std::string p = detail::item("", "notes", i);
    analysis::Note n;
    n.kind = r.kind(notes[i], "kind", p, analysis::NoteKind::generated);
    n.count = r.u64(notes[i], "count", p);
    n.text = r.str(notes[i], "text", p);
    d.notes.push_back(std::move(n));
  }
  return d;
}

}  // namespace fpguard::report
