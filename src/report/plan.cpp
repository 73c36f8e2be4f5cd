// `fpguard plan` as JSON (plan.json, docs/plan.md) and as text, plan.json read back for
// convert, and the settings that apply a plan in TensorRT and ONNX Runtime.
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <ostream>

#include "fpguard/error.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/report.hpp"
#include "fpguard/rewrite.hpp"
#include "json_reader.hpp"

namespace fpguard::report {

namespace {

// The worst of the final plan's outputs; n/a (NaN) as soon as one output has nothing
// finite to compare, as check says of that output.
struct Final {
  double max_abs = 0, max_rel = 0, max_scaled = 0, rel_rms = 0, cosine = 1;
};

Final final_numbers(const analysis::Plan& p) {
  Final f;
  const auto worst = [](double& acc, double v, bool lowest = false) {
    acc = std::isnan(v) || std::isnan(acc) ? NAN : lowest ? std::min(acc, v) : std::max(acc, v);
  };
  for (const auto& o : p.final_outputs) {
    worst(f.max_abs, o.max_abs_error);
    worst(f.max_rel, o.max_rel_error);
    worst(f.max_scaled, o.max_scaled_error);
    worst(f.rel_rms, o.rel_rms_error);
    worst(f.cosine, o.cosine, true);
  }
  return f;
}

Json reason_json(const analysis::Reason& r, const std::string& precision) {
  return {{"kind", std::string(analysis::to_string(r.kind))},
          {"origin", r.origin},
          {"origin_kind", std::string(analysis::to_string(r.origin_kind))},
          {"error", number(r.error)},
          {"message", describe(r, precision)}};
}

// How the input sets were made (inputs::Provenance); null when the plan's maker did not
// say.
Json provenance_json(const std::optional<inputs::Provenance>& p) {
  if (!p) return nullptr;
  Json generated = Json::array();
  for (const auto& g : p->generated)
    generated.push_back(
        {{"name", g.name}, {"generator", g.generator.spec()}, {"default", g.by_default}});
  Json j = {{"input", p->options.input},
            {"inputs", p->options.inputs.empty() ? Json(nullptr) : Json(p->options.inputs)},
            {"shape", p->options.shape},
            {"seed", p->options.seed},
            {"samples", p->samples},
            {"generated", generated}};
  // The subset of a directory of sets, only when one was chosen.
  if (p->options.max_sets) j["max_sets"] = p->options.max_sets;
  if (p->options.sample_sets) j["sample_sets"] = p->options.sample_sets;
  return j;
}

std::optional<inputs::Provenance> provenance_from_json(const Json& j, const std::string& where) {
  if (!j.contains("inputs") || j["inputs"].is_null()) return std::nullopt;
  const detail::JsonReader r{where};
  const std::string path = "\"inputs\"";
  const Json& in = r.object(j, "inputs", "");
  inputs::Provenance p;
  p.options.input = r.strings(in, "input", path);
  if (!r.at(in, "inputs", path).is_null()) p.options.inputs = r.str(in, "inputs", path);
  p.options.shape = r.strings(in, "shape", path);
  p.options.seed = r.u64(in, "seed", path);
  if (in.contains("max_sets")) p.options.max_sets = r.u64(in, "max_sets", path);
  if (in.contains("sample_sets")) p.options.sample_sets = r.u64(in, "sample_sets", path);
  p.samples = r.u64(in, "samples", path);
  const Json& generated = r.array(in, "generated", path);
  for (std::size_t i = 0; i < generated.size(); ++i) {
    const std::string at = detail::item(path, "generated", i);
    inputs::Generated g{.name = r.str(generated[i], "name", at)};
    try {
      g.generator = inputs::parse_generator(r.str(generated[i], "generator", at), g.name);
    } catch (const Error& e) {
      r.fail(r.field(at, "generator"), e.problem());
    }
    // Plans written before "default" was recorded listed default generators only.
    g.by_default = !generated[i].contains("default") || r.boolean(generated[i], "default", at);
    p.generated.push_back(std::move(g));
  }
  return p;
}

// `fpguard convert MODEL --plan PLAN --scale-only -o rescaled.onnx`, and where PLAN comes
// from when the plan was not written.
std::string scale_only_command(const PlanText& o) {
  return "fpguard convert " + o.model_arg + " --plan " +
         (o.plan_file.empty() ? "PLAN.json" : o.plan_file) + " --scale-only -o rescaled.onnx";
}
std::string_view write_plan_hint(const PlanText& o) {
  return o.plan_file.empty() ? " (write PLAN.json with -o)" : "";
}

// How to deploy the plan beyond TensorRT: the convert command in the formats convert
// writes; for the others (FP8, FP4, ...) a quantization tool, given the rescaled model and
// the float32 nodes to exclude.
void render_deployment(std::ostream& out, const analysis::Plan& p, const PlanText& o) {
  if (const auto f = find_format(p.precision); f && rewrite::can_convert(*f)) {
    std::string list;
    for (const auto& n : p.fp32_nodes) list += (list.empty() ? "" : ",") + n;
    out << "  fpguard: fpguard convert " << o.model_arg << " --precision " << p.precision
        << (!o.plan_file.empty() ? " --plan " + o.plan_file
            : p.scaled.empty()   ? " --keep-fp32 " + list
                                 : " --plan PLAN.json (write it with -o)")
        << "\n";
    return;
  }
  std::string formats;
  for (const auto f : rewrite::kConvertFormats)
    formats += (formats.empty() ? "" : " or ") + std::string(f);
  out << fmt::format(
      "  {}: fpguard convert writes {} only; deploy with a quantization tool (ONNX Runtime's "
      "quantize_static, TensorRT Model Optimizer):\n",
      p.precision, formats);
  if (!p.scaled.empty())
    out << "    rescale first: " << scale_only_command(o) << write_plan_hint(o) << "\n";
  if (!p.fp32_nodes.empty())
    out << fmt::format(
        "    exclude the plan's {} float32 node{} from quantization (nodes_to_exclude): listed by "
        "--emit ort and in plan.json's \"fp32_nodes\"\n",
        p.fp32_nodes.size(), p.fp32_nodes.size() == 1 ? "" : "s");
}

}  // namespace

Json to_json(const analysis::Plan& p) {
  const Json tol = {{"min_cosine", p.min_cosine},
                    {"atol", p.atol ? Json(*p.atol) : Json(nullptr)},
                    {"rtol", p.rtol ? Json(*p.rtol) : Json(nullptr)}};
  const Final fin = final_numbers(p);
  Json scaled = Json::array();
  for (const auto& s : p.scaled)
    scaled.push_back(
        {{"node", s.node}, {"value", s.value}, {"k", s.k}, {"scale", std::ldexp(1.0, -s.k)}});
  Json islands = Json::array();
  for (const auto& i : p.islands)
    islands.push_back({{"nodes", i.nodes},
                       {"reason", describe(i.reason, p.precision)},
                       {"why", reason_json(i.reason, p.precision)}});
  Json reasons = Json::object();
  for (const auto& [node, r] : p.reasons) reasons[node] = reason_json(r, p.precision);
  Json refused = Json::array();
  std::vector<std::string> notes;
  for (const auto& r : p.refused) {
    refused.push_back({{"kind", std::string(analysis::to_string(r.kind))},
                       {"value", r.value},
                       {"node", r.node},
                       {"k", r.k},
                       {"error", number(r.error)},
                       {"why", r.why}});
    notes.push_back(describe(r));
  }
  return {{"schema_version", kPlanSchema},
          {"model", p.model},
          {"precision", p.precision},
          {"tolerance", tol},
          {"fp32_nodes", p.fp32_nodes},
          {"unscaled_nodes", p.unscaled_nodes},
          {"scaled", scaled},
          {"casts", p.casts},
          {"passes", p.passes},
          {"meets", p.meets},
          {"float_nodes", p.float_nodes},
          {"low_nodes", p.low_nodes},
          {"islands", islands},
          {"reasons", reasons},
          {"refused", refused},
          {"notes", notes},
          {"inputs", provenance_json(p.inputs)},
          {"final",
           {{"max_abs_error", number(fin.max_abs)},
            {"max_rel_error", number(fin.max_rel)},
            {"max_scaled_error", number(fin.max_scaled)},
            {"rel_rms_error", number(fin.rel_rms)},
            {"cosine", number(fin.cosine)}}}};
}

analysis::PlanFile parse_plan(std::string_view text, const std::string& where) {
  Json j;
  try {
    j = Json::parse(text.begin(), text.end());
  } catch (const std::exception&) {
    throw Error(where, "not JSON (expected a plan.json written by fpguard plan)");
  }
  if (!j.is_object() || !j.contains("schema_version") ||
      (j["schema_version"] != 1 && j["schema_version"] != kPlanSchema))
    throw Error(where, "not a plan.json of schema_version 1 or 2");
  if (!j.contains("precision") || !j["precision"].is_string())
    throw Error(where, "\"precision\" is missing or not a string");
  if (!j.contains("fp32_nodes") || !j["fp32_nodes"].is_array())
    throw Error(where, "\"fp32_nodes\" is missing or not an array");
  analysis::PlanFile p;
  p.precision = j["precision"].get<std::string>();
  const auto names = [&](const char* key, std::vector<std::string>& out) {
    if (!j[key].is_array()) throw Error(where, "\"" + std::string(key) + "\" is not an array");
    for (const auto& n : j[key]) {
      if (!n.is_string()) throw Error(where, "\"" + std::string(key) + "\" holds a non-string");
      out.push_back(n.get<std::string>());
    }
  };
  names("fp32_nodes", p.fp32_nodes);
  if (j.contains("unscaled_nodes")) names("unscaled_nodes", p.unscaled_nodes);
  if (j.contains("scaled")) {
    if (!j["scaled"].is_array()) throw Error(where, "\"scaled\" is not an array");
    for (const auto& e : j["scaled"]) {
      if (!e.is_object() || !e.contains("value") || !e["value"].is_string() || !e.contains("k") ||
          !e["k"].is_number_integer() || e["k"] < 1 || e["k"] > 64)
        throw Error(where,
                    "\"scaled\" entries need a \"value\" name and an integer \"k\" in 1..64");
      p.scaled.push_back({e["value"].get<std::string>(), e["k"].get<int>()});
    }
  }
  p.inputs = provenance_from_json(j, where);
  return p;
}

analysis::PlanFile read_plan(const std::string& where, const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(where, "cannot open the file");
  std::error_code ec;
  if (const auto size = std::filesystem::file_size(path, ec); !ec) check_memory(size, where);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_plan(text, where);
}

std::string trtexec_flags(const analysis::Plan& p) {
  std::string flag = p.precision == "bfloat16"  ? "--bf16"
                     : p.precision == "float16" ? "--fp16"
                                                : "--fp8";
  if (p.fp32_nodes.empty()) return flag;
  std::string layers;
  for (const auto& n : p.fp32_nodes) layers += (layers.empty() ? "" : ",") + n + ":fp32";
  return flag + " --layerPrecisions=" + layers + " --precisionConstraints=obey";
}

Json ort_block_lists(const analysis::Plan& p) {
  return {{"node_block_list", p.fp32_nodes}, {"op_block_list", Json::array()}};
}

void render(std::ostream& out, const analysis::Plan& p, const PlanText& o, const Terminal& t) {
  const auto& generated = p.inputs ? p.inputs->generated : std::vector<inputs::Generated>{};
  const std::string qualifier = generated_qualifier(generated);
  out << fmt::format(
      "{}{}  {} in {}: {} of {} floating nodes in {}, {} in float32 ({} island{}), {} cast{}, "
      "{} pass{}\n",
      p.meets ? t.good("PLAN") : t.bad("NO PLAN MEETS THE TOLERANCE (best found)"),
      qualifier.empty() ? "" : " " + qualifier, p.model, p.precision, p.low_nodes, p.float_nodes,
      p.precision, p.fp32_nodes.size(), p.islands.size(), p.islands.size() == 1 ? "" : "s", p.casts,
      p.casts == 1 ? "" : "s", p.passes, p.passes == 1 ? "" : "es");
  const Final fin = final_numbers(p);
  out << fmt::format(
      "  final: worst cosine {}, relative RMS error {}, max scaled error {}, max abs error {}\n",
      std::isnan(fin.cosine) ? "n/a" : fixed(fin.cosine, 6), num_na(fin.rel_rms),
      num_na(fin.max_scaled), num_na(fin.max_abs));
  if (const std::string advice = generated_advice(generated); !advice.empty())
    out << "  note: " << advice << "\n";
  for (const auto& s : p.scaled)
    out << fmt::format("  scaled: '{}' x 2^-{} (exact) for the overflow at {}\n", s.value, s.k,
                       s.node);
  for (const auto& r : p.refused) out << "  note: " << describe(r) << "\n";
  for (std::size_t i = 0; i < p.islands.size(); ++i) {
    std::string nodes;
    for (const auto& n : p.islands[i].nodes) nodes += (nodes.empty() ? "" : ", ") + n;
    out << fmt::format("  island {}: {} — {}\n", i + 1, nodes,
                       describe(p.islands[i].reason, p.precision));
  }
  if (!p.unscaled_nodes.empty()) {
    std::string list;
    for (const auto& n : p.unscaled_nodes) list += (list.empty() ? "" : ",") + n;
    out << fmt::format(
        "  unscaled: {} in {} rather than float32, unquantized (--keep-unscaled {})\n", list,
        p.final_check.other_precision, list);
  }
  out << "  TensorRT 10"
      << (p.scaled.empty() ? "" : " (on the rescaled model: convert --scale-only)") << ": trtexec "
      << trtexec_flags(p) << "\n";
  if (!p.fp32_nodes.empty() || !p.scaled.empty()) render_deployment(out, p, o);
}

std::string emit_warning(const analysis::Plan& p, const PlanText& o) {
  if (p.scaled.empty()) return "";
  return fmt::format(
      "the plan relies on {} exact scale rewrite{}: its node lists hold only on the rescaled "
      "model written by `{}`{}, not on {} as given",
      p.scaled.size(), p.scaled.size() == 1 ? "" : "s", scale_only_command(o), write_plan_hint(o),
      o.model_arg);
}

}  // namespace fpguard::report
