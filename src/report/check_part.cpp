// The partial results of a sharded check as JSON (docs/scale.md documents every field) and
// read back exactly: numbers are written in full (shortest round-trip decimals; inf and NaN
// as the strings "inf", "-inf", "nan"), so that a merge of parts gives the numbers one check
// over all sets gives.
#include <array>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "fpguard/error.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/report.hpp"
#include "json_reader.hpp"
#include "json_tape.hpp"
#include "output_json.hpp"
#include "scaled_operands.hpp"

namespace fpguard::report {

namespace {

using analysis::CheckState;
using analysis::Comparison;

// Lossless: a JSON number when finite, else "inf", "-inf" or "nan".
Json exact(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

Json set_index(std::size_t i) {
  return i == analysis::kNoSet ? Json(nullptr) : Json(i);
}

// A comparison's counts and numbers, one flat array (schema 4: a part holds thousands),
// in this order; null for one that compared nothing (every field zero, +0.0).
Json comparison_state(const Comparison& c) {
  const std::uint64_t counts[] = {c.count, c.overflow, c.nan, c.underflow, c.subnormal, c.finite};
  const double numbers[] = {c.max_abs, c.max_rel, c.max_scaled, c.sum_rel, c.dot,   c.vv,   c.rr,
                            c.dd,      c.lo.rel,  c.lo.dot,     c.lo.vv,   c.lo.rr, c.lo.dd};
  bool zero = true;
  for (const auto n : counts) zero = zero && n == 0;
  for (const auto v : numbers) zero = zero && std::bit_cast<std::uint64_t>(v) == 0;
  if (zero) return nullptr;
  Json j = Json::array();
  for (const auto n : counts) j.push_back(n);
  for (const auto v : numbers) j.push_back(exact(v));
  return j;
}

Json tensor_state(const analysis::TensorRecord& t) {
  Json hist = Json::array();  // [exponent, count, exponent, count, ...]
  for (const auto& [e, c] : t.exponent_histogram) hist.push_back(e), hist.push_back(c);
  return {{"name", t.name},
          {"floating", t.floating},
          {"ref_min", exact(t.ref_min)},
          {"ref_max", exact(t.ref_max)},
          {"ref_absmax", exact(t.ref_absmax)},
          {"ref_nonfinite", t.ref_nonfinite},
          {"exponent_histogram", hist},
          {"propagated", comparison_state(t.propagated)},
          {"local", comparison_state(t.local)},
          {"original", t.original},
          {"against_original", comparison_state(t.against_original)}};
}

Json node_state(const analysis::NodeRecord& n, const analysis::NodeFirsts& f) {
  Json outs = Json::array();
  for (const auto& t : n.outputs) outs.push_back(tensor_state(t));
  Json boundary = Json::array();
  for (const auto s : f.boundary) boundary.push_back(s);
  return {{"name", n.name},
          {"runs", n.runs},
          {"first_overflow_iteration", n.first_overflow_iteration},
          {"inputs_nonfinite", n.inputs_nonfinite},
          {"input_error", exact(n.input_error)},
          {"input_absmax", exact(n.input_absmax)},
          {"boundary_inputs", n.boundary_inputs},
          {"input_shapes", n.input_shapes},
          {"firsts",
           {{"shapes", set_index(f.shapes)},
            {"overflow", set_index(f.overflow)},
            {"boundary", boundary}}},
          {"outputs", outs},
          {"scaled_operands", detail::scaled_operands_json(n.scaled_operands)}};
}

Json constant_scan(const analysis::ConstantScan& c) {
  return {{"name", c.name},
          {"label", c.label},
          {"kind", c.kind},
          {"size", c.size},
          {"overflow", c.overflow},
          {"underflow", c.underflow},
          {"min", exact(c.min)},
          {"max", exact(c.max)},
          {"min_abs_nonzero", exact(c.min_abs_nonzero)},
          {"sumsq", {exact(c.sumsq), exact(c.sumsq_underflow), exact(c.sumsq_overflow)}},
          {"absmax", exact(c.absmax)},
          {"nonfinite", c.nonfinite}};
}

Json map_state(const std::map<std::string, double>& m) {
  Json j = Json::object();
  for (const auto& [k, v] : m) j[k] = exact(v);
  return j;
}

Json state_json(const CheckState& s) {
  Json nodes = Json::array();
  for (std::size_t i = 0; i < s.nodes.size(); ++i)
    nodes.push_back(node_state(s.nodes[i], s.firsts[i]));
  Json constants = Json::array();
  for (const auto& c : s.constants) constants.push_back(constant_scan(c));
  Json outputs = Json::array();
  auto counts = [](const analysis::OutputVerdict& v, const Comparison& c) {
    return Json{{"name", v.name},
                {"nonfinite", v.nonfinite},
                {"outside_tolerance", v.outside_tolerance},
                {"comparison", comparison_state(c)}};
  };
  for (std::size_t i = 0; i < s.verdicts.size(); ++i) {
    const auto& v = s.verdicts[i];
    Json elements = Json::array();
    for (std::size_t k = 0; k < v.elements.size(); ++k)
      elements.push_back(counts(v.elements[k], s.element_cmp[i][k]));
    Json o = counts(v, s.output_cmp[i]);
    o["elements"] = elements;
    o["mismatched_sets"] = v.mismatched_sets;
    o["mismatch"] = detail::mismatch_json(v.mismatch);
    outputs.push_back(std::move(o));
  }
  return {{"sets", s.sets},
          {"outputs", outputs},
          {"absmax", map_state(s.absmax)},
          {"min_abs_nonzero", map_state(s.min_abs_nonzero)},
          {"seen", s.seen},
          {"nodes", nodes},
          {"constants", constants}};
}

Json optional_number(const std::optional<double>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json strings_of(const std::set<std::string>& s) {
  return Json(std::vector<std::string>(s.begin(), s.end()));
}

// [[node, input, amax], ...], in key order.
Json amax_json(const analysis::ActivationAmax& a) {
  Json j = Json::array();
  for (const auto& [key, v] : a) j.push_back(Json::array({key.first, key.second, exact(v)}));
  return j;
}

Json options_json(const analysis::CheckOptions& o) {
  Json fail_on = Json::array();
  for (const auto k : o.fail_on) fail_on.push_back(std::string(analysis::to_string(k)));
  Json generated = Json::array();
  for (const auto& g : o.generated)
    generated.push_back(
        {{"name", g.name}, {"generator", g.generator.spec()}, {"default", g.by_default}});
  return {{"precision", o.precision.name},
          {"scaled", o.scaled ? Json(o.scaled->name) : Json(nullptr)},
          {"amax_margin", o.amax_margin},
          {"activation_amax", o.activation_amax ? amax_json(*o.activation_amax) : Json(nullptr)},
          {"keep_fp32", strings_of(o.keep_fp32)},
          {"keep_fp32_ops", strings_of(o.keep_fp32_ops)},
          {"keep_unscaled", strings_of(o.keep_unscaled)},
          {"rounding", std::string(to_string(o.round_options.rounding))},
          {"saturate", o.round_options.saturate},
          {"flush_subnormals", o.round_options.flush_subnormals},
          {"rounding_seed", o.round_options.seed},
          {"accumulate", o.accumulate ? Json(o.accumulate->name) : Json(nullptr)},
          {"accumulation", to_string(o.accumulation)},
          {"reference", std::string(to_string(o.reference))},
          {"min_cosine", o.min_cosine},
          {"atol", optional_number(o.atol)},
          {"rtol", optional_number(o.rtol)},
          {"disabled_rules", strings_of(o.disabled_rules)},
          {"fail_on", fail_on},
          {"generated", generated}};
}

Json file_id(const FileId& f) {
  return {{"path", f.path}, {"sha256", f.sha256}};
}

Json file_ids(const std::vector<FileId>& fs) {
  Json j = Json::array();
  for (const auto& f : fs) j.push_back(file_id(f));
  return j;
}

// ---- reading ---------------------------------------------------------------------------

using Node = detail::JsonNode;

// fn(element, index) for each element of an array, in order.
template <class Fn>
void each(const Node& array, Fn&& fn) {
  std::size_t i = 0;
  for (const Node& e : array) fn(e, i++);
}

struct PartReader : detail::BasicJsonReader<Node> {
  double exact(const Node& v, const std::string& path) const {
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      if (s == "inf") return INFINITY;
      if (s == "-inf") return -INFINITY;
      if (s == "nan") return NAN;
    }
    fail(path, "is not a number (or \"inf\", \"-inf\", \"nan\")");
  }
  // (The paths of the values, built only to name a wrong one: a part holds 100,000s.)
  double exact(const Node& j, const char* key, const std::string& path) const {
    const Node& v = at(j, key, path);
    return v.is_number() ? v.get<double>() : exact(v, field(path, key));
  }
  // An array of `n` exact numbers.
  std::vector<double> exacts(const Node& j, const char* key, const std::string& path,
                             std::size_t n) const {
    const Node& a = array(j, key, path);
    if (a.size() != n) fail(field(path, key), "does not hold " + std::to_string(n) + " numbers");
    std::vector<double> out;
    for (std::size_t i = 0; i < n; ++i)
      out.push_back(a[i].is_number() ? a[i].get<double>()
                                     : exact(a[i], detail::item(path, key, i)));
    return out;
  }
  std::size_t set(const Node& j, const char* key, const std::string& path) const {
    return at(j, key, path).is_null() ? analysis::kNoSet : u64(j, key, path);
  }

  // comparison_state's array, or null.
  Comparison comparison(const Node& j, const std::string& path) const {
    Comparison c;
    if (j.is_null()) return c;
    if (!j.is_array() || j.size() != 19) fail(path, "is not null or an array of 19 numbers");
    std::uint64_t* counts[] = {&c.count,     &c.overflow,  &c.nan,
                               &c.underflow, &c.subnormal, &c.finite};
    double* numbers[] = {&c.max_abs, &c.max_rel, &c.max_scaled, &c.sum_rel, &c.dot,
                         &c.vv,      &c.rr,      &c.dd,         &c.lo.rel,  &c.lo.dot,
                         &c.lo.vv,   &c.lo.rr,   &c.lo.dd};
    std::size_t i = 0;
    for (auto* n : counts) {
      if (!j[i].is_number_unsigned()) fail(path + "[" + std::to_string(i) + "]", "is not a count");
      *n = j[i++].get<std::uint64_t>();
    }
    for (auto* v : numbers) {
      *v =
          j[i].is_number() ? j[i].get<double>() : exact(j[i], path + "[" + std::to_string(i) + "]");
      ++i;
    }
    return c;
  }

  // [exponent, count, ...]: floor(log2|x|) -> count.
  std::map<int, std::uint64_t> histogram(const Node& j, const char* key,
                                         const std::string& path) const {
    const Node& h = array(j, key, path);
    if (h.size() % 2) fail(field(path, key), "does not hold [exponent, count] pairs");
    std::map<int, std::uint64_t> out;
    for (std::size_t i = 0; i < h.size(); i += 2) {
      if (!h[i].is_number_integer() || h[i].get<std::int64_t>() < INT_MIN ||
          h[i].get<std::int64_t>() > INT_MAX || !h[i + 1].is_number_unsigned())
        fail(detail::item(path, key, i), "is not an exponent followed by a count");
      out[static_cast<int>(h[i].get<std::int64_t>())] = h[i + 1].get<std::uint64_t>();
    }
    return out;
  }

  analysis::TensorRecord tensor(const Node& j, const std::string& path) const {
    analysis::TensorRecord t;
    t.name = str(j, "name", path);
    t.floating = boolean(j, "floating", path);
    t.ref_min = exact(j, "ref_min", path);
    t.ref_max = exact(j, "ref_max", path);
    t.ref_absmax = exact(j, "ref_absmax", path);
    t.ref_nonfinite = u64(j, "ref_nonfinite", path);
    t.exponent_histogram = histogram(j, "exponent_histogram", path);
    t.propagated = comparison(at(j, "propagated", path), field(path, "propagated"));
    t.local = comparison(at(j, "local", path), field(path, "local"));
    t.original = str(j, "original", path);
    t.against_original =
        comparison(at(j, "against_original", path), field(path, "against_original"));
    return t;
  }

  std::pair<analysis::NodeRecord, analysis::NodeFirsts> node(const Node& j,
                                                             const std::string& path) const {
    analysis::NodeRecord n;
    n.name = str(j, "name", path);
    n.runs = u64(j, "runs", path);
    n.first_overflow_iteration = sizes(j, "first_overflow_iteration", path);
    n.inputs_nonfinite = boolean(j, "inputs_nonfinite", path);
    n.input_error = exact(j, "input_error", path);
    n.input_absmax = exact(j, "input_absmax", path);
    n.boundary_inputs = strings(j, "boundary_inputs", path);
    each(array(j, "input_shapes", path), [&](const Node& shape, std::size_t i) {
      if (!shape.is_array()) fail(detail::item(path, "input_shapes", i), "is not an array");
      n.input_shapes.push_back(integers(shape, i, path));
    });
    const Node& f = object(j, "firsts", path);
    const std::string fp = field(path, "firsts");
    analysis::NodeFirsts firsts{.shapes = set(f, "shapes", fp), .overflow = set(f, "overflow", fp)};
    for (const auto s : sizes(f, "boundary", fp)) firsts.boundary.push_back(s);
    if (firsts.boundary.size() != n.boundary_inputs.size())
      fail(field(fp, "boundary"), "does not hold one set per boundary input");
    each(array(j, "outputs", path), [&](const Node& out, std::size_t i) {
      n.outputs.push_back(tensor(out, detail::item(path, "outputs", i)));
    });
    n.scaled_operands = detail::read_scaled_operands(*this, j, path);
    return {std::move(n), std::move(firsts)};
  }
  // input_shapes[i] (an array of integers).
  std::vector<std::int64_t> integers(const Node& shape, std::size_t i,
                                     const std::string& path) const {
    std::vector<std::int64_t> out;
    for (const auto& d : shape) {
      if (!d.is_number_integer())
        fail(detail::item(path, "input_shapes", i), "holds a non-integer");
      out.push_back(d.get<std::int64_t>());
    }
    return out;
  }

  std::map<std::string, double> map(const Node& j, const char* key, const std::string& path) const {
    std::map<std::string, double> out;
    const Node& m = object(j, key, path);
    for (auto it = m.begin(); it != m.end(); ++it)
      out[it.key()] = it.value().is_number()
                          ? it.value().get<double>()
                          : exact(it.value(), field(path, key) + ".\"" + it.key() + "\"");
    return out;
  }

  analysis::ConstantScan constant(const Node& j, const std::string& path) const {
    analysis::ConstantScan c{.name = str(j, "name", path),
                             .label = str(j, "label", path),
                             .kind = str(j, "kind", path),
                             .size = u64(j, "size", path),
                             .overflow = u64(j, "overflow", path),
                             .underflow = u64(j, "underflow", path),
                             .min = exact(j, "min", path),
                             .max = exact(j, "max", path),
                             .min_abs_nonzero = exact(j, "min_abs_nonzero", path)};
    const auto sq = exacts(j, "sumsq", path, 3);
    c.sumsq = sq[0], c.sumsq_underflow = sq[1], c.sumsq_overflow = sq[2];
    c.absmax = exact(j, "absmax", path);
    c.nonfinite = boolean(j, "nonfinite", path);
    return c;
  }

  CheckState state(const Node& j, const std::string& path) const;
  analysis::CheckOptions options(const Node& j, const std::string& path) const;
  analysis::ActivationAmax amax(const Node& j, const char* key, const std::string& path) const {
    analysis::ActivationAmax out;
    each(array(j, key, path), [&](const Node& e, std::size_t i) {
      const std::string p = detail::item(path, key, i);
      if (!e.is_array() || e.size() != 3 || !e[0].is_string() || !e[1].is_number_unsigned())
        fail(p, "is not [node, input index, amax]");
      out[{e[0].get<std::string>(), e[1].get<std::size_t>()}] = exact(e[2], p);
    });
    return out;
  }
  FileId file(const Node& j, const std::string& path) const {
    return {.path = str(j, "path", path), .sha256 = str(j, "sha256", path)};
  }
  std::vector<FileId> files(const Node& j, const char* key, const std::string& path) const {
    std::vector<FileId> out;
    each(array(j, key, path),
         [&](const Node& f, std::size_t i) { out.push_back(file(f, detail::item(path, key, i))); });
    return out;
  }
};

CheckState PartReader::state(const Node& j, const std::string& path) const {
  CheckState s;
  s.sets = sizes(j, "sets", path);
  // An output's (or a sequence element's) counts and comparison.
  auto counts = [&](const Node& o, const std::string& p) {
    analysis::OutputVerdict v;
    v.name = str(o, "name", p);
    v.nonfinite = u64(o, "nonfinite", p);
    v.outside_tolerance = u64(o, "outside_tolerance", p);
    return std::make_pair(v, comparison(at(o, "comparison", p), field(p, "comparison")));
  };
  each(array(j, "outputs", path), [&](const Node& out, std::size_t i) {
    const std::string p = detail::item(path, "outputs", i);
    auto counted = counts(out, p);  // (not a structured binding: the lambda below uses it)
    analysis::OutputVerdict& v = counted.first;
    const Comparison c = counted.second;
    std::vector<Comparison> element_cmp;
    if (out.contains("elements")) {  // (sequence and optional outputs; absent in older files)
      each(array(out, "elements", p), [&](const Node& element, std::size_t k) {
        auto [e, ec] = counts(element, detail::item(p, "elements", k));
        v.elements.push_back(std::move(e));
        element_cmp.push_back(ec);
      });
      v.mismatched_sets = u64(out, "mismatched_sets", p);
      v.mismatch = detail::read_mismatch(*this, out, p);
    }
    s.verdicts.push_back(std::move(v));
    s.output_cmp.push_back(c);
    s.element_cmp.push_back(std::move(element_cmp));
  });
  s.absmax = map(j, "absmax", path);
  s.min_abs_nonzero = map(j, "min_abs_nonzero", path);
  for (auto& k : strings(j, "seen", path)) s.seen.insert(std::move(k));
  each(array(j, "nodes", path), [&](const Node& record, std::size_t i) {
    auto [n, f] = node(record, detail::item(path, "nodes", i));
    s.nodes.push_back(std::move(n));
    s.firsts.push_back(std::move(f));
  });
  each(array(j, "constants", path), [&](const Node& c, std::size_t i) {
    s.constants.push_back(constant(c, detail::item(path, "constants", i)));
  });
  return s;
}

analysis::CheckOptions PartReader::options(const Node& j, const std::string& path) const {
  analysis::CheckOptions o;
  auto where = [&](const char* key) { return field(path, key); };
  try {
    o.precision = parse_format(str(j, "precision", path));
    if (!at(j, "scaled", path).is_null())
      o.scaled = parse_precision(str(j, "scaled", path), o.precision.name).scaled;
    if (!at(j, "accumulate", path).is_null())
      o.accumulate = parse_format(str(j, "accumulate", path));
    o.accumulation =
        parse_accumulation_order(str(j, "accumulation", path)).value_or(o.accumulation);
    o.round_options.rounding = parse_rounding(str(j, "rounding", path));
  } catch (const Error& e) {
    fail(where("precision") + " or its neighbours", e.what());
  }
  o.amax_margin = static_cast<int>(i64(j, "amax_margin", path));
  if (!at(j, "activation_amax", path).is_null())
    o.activation_amax = amax(j, "activation_amax", path);
  for (auto& k : strings(j, "keep_fp32", path)) o.keep_fp32.insert(std::move(k));
  for (auto& k : strings(j, "keep_fp32_ops", path)) o.keep_fp32_ops.insert(std::move(k));
  for (auto& k : strings(j, "keep_unscaled", path)) o.keep_unscaled.insert(std::move(k));
  o.round_options.saturate = boolean(j, "saturate", path);
  o.round_options.flush_subnormals = boolean(j, "flush_subnormals", path);
  o.round_options.seed = u64(j, "rounding_seed", path);
  const std::string ref = str(j, "reference", path);
  if (ref != "float32" && ref != "float64") fail(where("reference"), "is not float32 or float64");
  o.reference = ref == "float64" ? DType::float64 : DType::float32;
  o.min_cosine = real(j, "min_cosine", path);
  if (!at(j, "atol", path).is_null()) o.atol = real(j, "atol", path);
  if (!at(j, "rtol", path).is_null()) o.rtol = real(j, "rtol", path);
  for (auto& k : strings(j, "disabled_rules", path)) o.disabled_rules.insert(std::move(k));
  try {
    o.fail_on = analysis::parse_fail_on(strings(j, "fail_on", path));
  } catch (const Error& e) {
    fail(where("fail_on"), e.what());
  }
  const Node& gs = array(j, "generated", path);
  for (std::size_t i = 0; i < gs.size(); ++i) {
    const std::string p = detail::item(path, "generated", i);
    inputs::Generated g;
    g.name = str(gs[i], "name", p);
    try {
      g.generator = inputs::parse_generator(str(gs[i], "generator", p), g.name);
    } catch (const Error& e) {
      fail(field(p, "generator"), e.what());
    }
    g.by_default = boolean(gs[i], "default", p);
    o.generated.push_back(std::move(g));
  }
  return o;
}

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Bytes as base64 (RFC 4648, padded), and back.
std::string base64(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t v = std::uint32_t(std::uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= std::uint32_t(std::uint8_t(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= std::uint8_t(bytes[i + 2]);
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kBase64[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kBase64[v & 63] : '=';
  }
  return out;
}

// kBase64's inverse: each character's 6 bits, -1 for the others.
constexpr auto kUnbase64 = [] {
  std::array<int, 256> t{};
  t.fill(-1);
  for (int i = 0; i < 64; ++i) t[static_cast<std::uint8_t>(kBase64[i])] = i;
  return t;
}();

std::string unbase64(const PartReader& r, std::string_view text, const std::string& path) {
  if (text.size() % 4 != 0) r.fail(path, "is not base64");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint32_t v = 0;
    int pad = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char ch = text[i + k];
      const int bits = kUnbase64[static_cast<std::uint8_t>(ch)];
      if (ch == '=' && i + 4 == text.size() && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++pad;
        v <<= 6;
        continue;
      }
      if (bits < 0 || pad) r.fail(path, "is not base64");
      v = (v << 6) | static_cast<std::uint32_t>(bits);
    }
    out += char((v >> 16) & 255);
    if (pad < 2) out += char((v >> 8) & 255);
    if (pad < 1) out += char(v & 255);
  }
  return out;
}

constexpr const char* kPartKind = "fpguard check part";

// The document is an object whose "kind" is `kind`.
bool is_kind(const Node& j, std::string_view kind) {
  const auto it = j.find("kind");
  return it != j.end() && it->is_string() && it->text() == kind;
}

// The schema_version, and the "kind" that tells a part from other files of that version.
// (The kind first: a part of an older schema says so.)

void schema(const PartReader& r, const Node& j) {
  if (!is_kind(j, kPartKind))
    throw Error(r.where, std::string("not a partial check result (check --shard): its \"kind\" "
                                     "is not \"") +
                             kPartKind + "\"");
  r.schema(j, kCheckPartSchema, "a partial check result (check --shard)");
}

}  // namespace

namespace {
constexpr const char* kAmaxKind = "fpguard amax";

Json input_options_json(const inputs::Options& o) {
  return {{"input", o.input},
          {"shape", o.shape},
          {"seed", o.seed},
          {"max_sets", o.max_sets},
          {"sample_sets", o.sample_sets}};
}

void read_input_options(const PartReader& r, const Node& io, const std::string& iop,
                        inputs::Options& o) {
  o.input = r.strings(io, "input", iop);
  o.shape = r.strings(io, "shape", iop);
  o.seed = r.u64(io, "seed", iop);
  o.max_sets = r.u64(io, "max_sets", iop);
  o.sample_sets = r.u64(io, "sample_sets", iop);
}
}  // namespace

Json to_json(const CheckPart& p) {
  Json options = Json::array(), states = Json::array();
  for (const auto& c : p.checks) {
    options.push_back(options_json(c.options));
    states.push_back(state_json(c.state));
  }
  return {{"schema_version", kCheckPartSchema},
          {"kind", kPartKind},
          {"identity",
           {{"model", file_id(p.model)},
            {"data", file_ids(p.data)},
            {"reference_model", p.reference_model ? file_id(*p.reference_model) : Json(nullptr)},
            {"reference_data", file_ids(p.reference_data)},
            {"sets", p.total_sets},
            {"input_options", input_options_json(p.inputs)},
            {"options", options}}},
          {"inputs", p.inputs.inputs},
          {"shard", {{"index", p.shard.index}, {"count", p.shard.count}}},
          {"set_names", p.set_names},
          {"first_set_sha256", p.first_set_sha256},
          {"graph", base64(p.graph)},
          {"states", states},
          {"threads", p.threads}};
}

std::string to_cbor(const std::vector<CheckState>& states) {
  Json j = Json::array();
  for (const auto& s : states) j.push_back(state_json(s));
  const std::vector<std::uint8_t> cbor = Json::to_cbor(j);
  return std::string(cbor.begin(), cbor.end());
}

std::vector<CheckState> check_states_from_cbor(std::string_view bytes, const std::string& where) {
  const auto tape = detail::JsonTape::parse_cbor(bytes, where, "check states");
  const PartReader r{{where}};
  const Node& states = tape.root();
  if (!states.is_array()) r.fail("the document", "is not an array of check states");
  std::vector<CheckState> out;
  for (const auto& s : states) out.push_back(r.state(s, ""));
  return out;
}

namespace {

CheckPart part_of(const PartReader& r, const Node& j) {
  schema(r, j);
  CheckPart p;
  const Node& id = r.object(j, "identity", "");
  const std::string ip = "\"identity\"";
  p.model = r.file(r.object(id, "model", ip), r.field(ip, "model"));
  p.data = r.files(id, "data", ip);
  if (!r.at(id, "reference_model", ip).is_null())
    p.reference_model = r.file(r.object(id, "reference_model", ip), r.field(ip, "reference_model"));
  p.reference_data = r.files(id, "reference_data", ip);
  p.total_sets = r.u64(id, "sets", ip);
  const Node& io = r.object(id, "input_options", ip);
  const std::string iop = r.field(ip, "input_options");
  read_input_options(r, io, iop, p.inputs);
  p.inputs.inputs = r.str(j, "inputs", "");
  const Node& sh = r.object(j, "shard", "");
  p.shard = {.index = r.u64(sh, "index", "\"shard\""), .count = r.u64(sh, "count", "\"shard\"")};
  p.set_names = r.strings(j, "set_names", "");
  p.first_set_sha256 = r.str(j, "first_set_sha256", "");
  const Node& graph = r.at(j, "graph", "");
  if (!graph.is_string()) r.fail("\"graph\"", "is not a string");
  p.graph = unbase64(r, graph.text(), "\"graph\"");
  const Node& options = r.array(id, "options", ip);
  const Node& states = r.array(j, "states", "");
  if (options.size() != states.size() || options.empty())
    r.fail("\"states\"", "does not hold one state per check of \"identity\".\"options\"");
  auto option = options.begin();
  std::size_t i = 0;
  for (const Node& state : states) {
    CheckPart::Check c{.options = r.options(*option, detail::item(ip, "options", i)),
                       .state = r.state(state, detail::item("", "states", i))};
    if (c.state.sets.size() != p.set_names.size())
      r.fail(detail::item("", "states", i), "does not hold one set per \"set_names\" entry");
    p.checks.push_back(std::move(c));
    ++option, ++i;
  }
  p.threads = r.u64(j, "threads", "");
  return p;
}

}  // namespace

CheckPart check_part_from_json(const Json& j, const std::string& where) {
  const auto tape = detail::JsonTape::parse(j.dump(), where, "a part");
  return part_of(PartReader{{where}}, tape.root());
}

namespace {
// The SHA-256 of an identity's file ({path, sha256}), or of each of its files; null as is.
Json sha256s(const Json& files) {
  if (files.is_object()) return files.value("sha256", Json());
  if (!files.is_array()) return files;
  Json out = Json::array();
  for (const auto& f : files) out.push_back(sha256s(f));
  return out;
}
}  // namespace

void require_same_check(const Json& a, const std::string& a_where, const Json& b,
                        const std::string& b_where) {
  const Json& ia = a.at("identity");
  const Json& ib = b.at("identity");
  // In `b`, `what` is `theirs`; in `a`, `ours`.
  auto differ = [&](const std::string& what, const Json& ours, const Json& theirs) {
    throw Error(b_where, "not a part of the same check as " + a_where + ": its " + what + " is " +
                             theirs.dump() + ", " + a_where + "'s " + ours.dump());
  };
  // Files by content: a copy of the model elsewhere (another machine) checks the same.
  for (const auto& [key, what] : {std::pair{"model", "model"}, std::pair{"data", "external data"},
                                  std::pair{"reference_model", "reference model"},
                                  std::pair{"reference_data", "reference model's external data"}})
    if (sha256s(ia.at(key)) != sha256s(ib.at(key)))
      differ(std::string(what) + " (sha256)", sha256s(ia.at(key)), sha256s(ib.at(key)));
  for (const char* key : {"sets", "input_options"})
    if (ia.at(key) != ib.at(key)) differ(std::string("\"") + key + "\"", ia.at(key), ib.at(key));
  const Json& oa = ia.at("options");
  const Json& ob = ib.at("options");
  if (oa.size() != ob.size())
    differ("number of precisions checked", Json(oa.size()), Json(ob.size()));
  for (std::size_t i = 0; i < oa.size(); ++i)
    for (auto it = oa[i].begin(); it != oa[i].end(); ++it)
      if (ob[i].value(it.key(), Json()) != it.value())
        differ("option \"" + it.key() + "\"", it.value(), ob[i].value(it.key(), Json()));
}

namespace {
// The JSON of the file at `path`, as a tape; Error(path) when it cannot be read or is not
// JSON (`expected`: what it should be).
detail::JsonTape read_json(const std::filesystem::path& path, const char* expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string(), "cannot be read");
  // Read whole and parsed from memory: nlohmann reads a stream a character at a time.
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  std::string text;
  if (!ec) {
    check_memory(size, path.string());
    text.resize(size);
    in.read(text.data(), static_cast<std::streamsize>(size));
    text.resize(static_cast<std::size_t>(in.gcount()));
  } else {  // not a regular file (a pipe)
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (in.bad()) throw Error(path.string(), "cannot be read");
  return detail::JsonTape::parse(text, path.string(), expected);
}
}  // namespace

CheckPartFile read_check_part(const std::filesystem::path& path) {
  const std::string where = path.string();
  const detail::JsonTape tape = read_json(path, "a part written by fpguard check --shard");
  const Node& j = tape.root();
  const PartReader r{{where}};
  schema(r, j);
  const auto identity = j.find("identity");
  if (identity == j.end() || !identity->is_object()) r.fail("\"identity\"", "is missing");
  const Node& id = *identity;
  const std::string ip = "\"identity\"";
  r.str(r.object(id, "model", ip), "sha256", r.field(ip, "model"));
  for (const char* key : {"data", "reference_model", "reference_data", "sets", "input_options"})
    r.at(id, key, ip);
  each(r.array(id, "options", ip), [&](const Node& o, std::size_t i) {
    if (!o.is_object()) r.fail(detail::item(ip, "options", i), "is not an object");
  });
  CheckPartFile f;
  f.identity["identity"] = detail::to_dom(id);
  try {
    f.part = part_of(r, j);
  } catch (...) {
    f.malformed = std::current_exception();
  }
  return f;
}

Json to_json(const AmaxFile& a) {
  return {{"schema_version", kAmaxSchema},
          {"kind", kAmaxKind},
          {"model", file_id(a.model)},
          {"data", file_ids(a.data)},
          {"reference", a.reference},
          {"inputs", a.inputs.inputs},
          {"input_options", input_options_json(a.inputs)},
          {"total_sets", a.total_sets},
          {"sets", a.sets},
          {"amax", amax_json(a.amax)}};
}

AmaxFile read_amax_file(const std::filesystem::path& path) {
  const std::string where = path.string();
  const detail::JsonTape tape = read_json(path, "an amax file written by fpguard calibrate");
  const Node& j = tape.root();
  const PartReader r{{where}};
  if (!is_kind(j, kAmaxKind))
    throw Error(where, std::string("not an amax file (fpguard calibrate): its \"kind\" is not \"") +
                           kAmaxKind + "\"");
  r.schema(j, kAmaxSchema, "an amax file (fpguard calibrate)");
  AmaxFile a;
  a.model = r.file(r.object(j, "model", ""), "\"model\"");
  a.data = r.files(j, "data", "");
  a.reference = r.str(j, "reference", "");
  a.inputs.inputs = r.str(j, "inputs", "");
  read_input_options(r, r.object(j, "input_options", ""), "\"input_options\"", a.inputs);
  a.total_sets = r.u64(j, "total_sets", "");
  const Node& sets = r.array(j, "sets", "");
  for (std::size_t i = 0; i < sets.size(); ++i) {
    if (!sets[i].is_number_unsigned()) r.fail(detail::item("", "sets", i), "is not a count");
    a.sets.push_back(sets[i].get<std::size_t>());
  }
  a.amax = r.amax(j, "amax", "");
  return a;
}

std::string describe(const CheckPart& p, const std::string& file) {
  return "shard " + std::to_string(p.shard.index) + "/" + std::to_string(p.shard.count) + ": " +
         std::to_string(p.set_names.size()) + " of " + std::to_string(p.total_sets) +
         " input sets checked, written to " + file + " (fpguard merge combines the parts)";
}

}  // namespace fpguard::report
