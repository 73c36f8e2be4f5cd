// `fpguard plan`: which nodes must stay in float32 for the model to meet a tolerance in a
// low precision (analysis::plan); writes plan.json and prints the TensorRT / ONNX Runtime
// settings that apply it.
#include <fmt/format.h>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/io.hpp"
#include "fpguard/rewrite.hpp"
#include "inputs.hpp"

namespace fpguard::cli {

namespace {

using json = nlohmann::ordered_json;

struct PlanArgs {
  std::string model, precision, target, output, emit, objective = "fewest-fp32", scale = "auto";
  InputArgs in;
  std::vector<std::string> keep, keep_ops;
  std::size_t samples = 1, max_passes = 48;
  std::optional<double> atol, rtol;
  double min_cosine = 0.999;
  bool saturate = false, quiet = false;
  int threads = 0;
};

json plan_json(const analysis::Plan& p) {
  json tol = {{"min_cosine", p.min_cosine},
              {"atol", p.atol ? json(*p.atol) : json(nullptr)},
              {"rtol", p.rtol ? json(*p.rtol) : json(nullptr)}};
  double max_abs = 0, max_rel = 0, cosine = 1;
  for (const auto& o : p.final_outputs) {
    max_abs = std::max(max_abs, o.max_abs_error);
    max_rel = std::max(max_rel, o.max_rel_error);
    cosine = std::isnan(o.cosine) || std::isnan(cosine) ? NAN : std::min(cosine, o.cosine);
  }
  json scaled = json::array();
  for (const auto& s : p.scaled)
    scaled.push_back(
        {{"node", s.node}, {"value", s.value}, {"k", s.k}, {"scale", std::ldexp(1.0, -s.k)}});
  json islands = json::array();
  for (const auto& i : p.islands) islands.push_back({{"nodes", i.nodes}, {"reason", i.reason}});
  return {{"schema_version", 1},
          {"model", p.model},
          {"precision", p.precision},
          {"tolerance", tol},
          {"fp32_nodes", p.fp32_nodes},
          {"scaled", scaled},
          {"casts", p.casts},
          {"passes", p.passes},
          {"meets", p.meets},
          {"float_nodes", p.float_nodes},
          {"low_nodes", p.low_nodes},
          {"islands", islands},
          {"notes", p.notes},
          {"final",
           {{"max_abs_error", json_number(max_abs)},
            {"max_rel_error", json_number(max_rel)},
            {"cosine", json_number(cosine)}}}};
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

void plan_command(const PlanArgs& a) {
  if (a.emit != "" && a.emit != "trtexec" && a.emit != "ort")
    throw Error("--emit " + a.emit, "expected trtexec or ort");
  analysis::PlanOptions po;
  if (a.objective == "fewest-fp32")
    po.objective = analysis::Objective::fewest_fp32;
  else if (a.objective == "fewest-casts")
    po.objective = analysis::Objective::fewest_casts;
  else
    throw Error("--objective " + a.objective, "expected fewest-fp32 or fewest-casts");
  std::optional<Format> f;
  if (!a.precision.empty()) f = parse_format(a.precision);
  if (!a.target.empty()) {
    const Target& t = find_target(a.target);
    if (!f) f = recommended_format(t);
    require_native(t, *f);
  }
  if (!f) throw Error("--precision", "give the format to plan for (or --target)");
  if (f->name == "float32") throw Error("--precision float32", "nothing to plan: it is float32");
  if (!a.output.empty()) check_not_same_file(a.model, a.output, "-o");

  model::Model m = model::load(a.model);
  analysis::name_nodes(m);
  std::vector<std::string> generated;
  const auto samples = gather_samples(a.in, m, a.samples, generated);

  po.check.precision = *f;
  po.check.keep_fp32 = std::set<std::string>(a.keep.begin(), a.keep.end());
  po.check.keep_fp32_ops = std::set<std::string>(a.keep_ops.begin(), a.keep_ops.end());
  po.check.round_options.saturate = a.saturate;
  po.check.min_cosine = a.min_cosine;
  po.check.atol = a.atol;
  po.check.rtol = a.rtol;
  po.check.threads = a.threads;
  po.max_passes = a.max_passes;
  if (a.scale == "auto") {
    const Format fmt = *f;
    po.scaler = [fmt](
                    const model::Model& mm, const std::string& value,
                    const std::map<std::string, double>& absmax,
                    std::string* why) -> std::optional<std::pair<model::Model, analysis::Scaled>> {
      const auto s = rewrite::find_scale(mm, value, absmax, fmt, why);
      if (!s) return std::nullopt;
      return std::make_pair(rewrite::apply_scale(mm, *s), analysis::Scaled{"", value, s->k});
    };
  } else if (a.scale != "none") {
    throw Error("--scale " + a.scale, "expected auto or none");
  }
  const bool bar = !a.quiet && isatty(2);
  po.progress = [bar](std::size_t pass, const std::string& what) {
    if (bar) std::cerr << "\r\033[Kplan: pass " << pass << ": " << what << std::flush;
  };
  const analysis::Plan p = analysis::plan(m, samples, po);
  if (bar) std::cerr << "\r\033[K" << std::flush;
  exit_code = p.meets ? 0 : 1;

  const json j = plan_json(p);
  if (!a.output.empty())
    write_file_atomic(a.output, [&](std::ostream& out) { out << j.dump(2) << "\n"; });
  if (a.emit == "trtexec") {
    std::cout << trtexec_flags(p) << "\n";
    return;
  }
  if (a.emit == "ort") {
    std::cout << json({{"node_block_list", p.fp32_nodes}, {"op_block_list", json::array()}}).dump(2)
              << "\n";
    return;
  }
  const auto& fin = j["final"];
  std::cout << fmt::format(
      "{}  {} in {}: {} of {} floating nodes in {}, {} in float32 ({} island{}), {} cast{}, "
      "{} pass{}\n",
      p.meets ? "PLAN" : "NO PLAN MEETS THE TOLERANCE (best found)", p.model, p.precision,
      p.low_nodes, p.float_nodes, p.precision, p.fp32_nodes.size(), p.islands.size(),
      p.islands.size() == 1 ? "" : "s", p.casts, p.casts == 1 ? "" : "s", p.passes,
      p.passes == 1 ? "" : "es");
  std::cout << fmt::format(
      "  final: worst cosine {}, max abs error {}, max rel error {}\n",
      fin["cosine"].is_null() ? "nan" : fmt::format("{:.6f}", double(fin["cosine"])),
      fin["max_abs_error"].is_null() ? "inf" : fmt::format("{:.4g}", double(fin["max_abs_error"])),
      fin["max_rel_error"].is_null() ? "inf" : fmt::format("{:.4g}", double(fin["max_rel_error"])));
  if (!generated.empty()) std::cout << "  note: " << generated_note(generated) << "\n";
  for (const auto& s : p.scaled)
    std::cout << fmt::format("  scaled: '{}' x 2^-{} (exact) for the overflow at {}\n", s.value,
                             s.k, s.node);
  for (const auto& n : p.notes) std::cout << "  note: " << n << "\n";
  for (std::size_t i = 0; i < p.islands.size(); ++i) {
    std::string nodes;
    for (const auto& n : p.islands[i].nodes) nodes += (nodes.empty() ? "" : ", ") + n;
    std::cout << fmt::format("  island {}: {} — {}\n", i + 1, nodes, p.islands[i].reason);
  }
  std::cout << "  TensorRT 10"
            << (p.scaled.empty() ? "" : " (on the rescaled model: convert --scale-only)")
            << ": trtexec " << trtexec_flags(p) << "\n";
  if (!p.fp32_nodes.empty() || !p.scaled.empty()) {
    std::string list;
    for (const auto& n : p.fp32_nodes) list += (list.empty() ? "" : ",") + n;
    std::cout << "  fpguard: fpguard convert " << a.model << " --precision " << p.precision
              << (!a.output.empty()  ? " --plan " + a.output
                  : p.scaled.empty() ? " --keep-fp32 " + list
                                     : " --plan PLAN.json (write it with -o)")
              << "\n";
  }
}

}  // namespace

void add_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Find the nodes to keep in float32 so that a low precision meets a tolerance");
  cmd->add_option("model", a->model, "ONNX model")->required();
  cmd->add_option("--precision", a->precision, "Format to plan for (float16, bfloat16, ...)");
  cmd->add_option("--target", a->target,
                  "Accelerator: picks the precision when --precision is absent, refuses "
                  "formats it cannot run");
  add_input_options(*cmd, a->in);
  cmd->add_option("--samples", a->samples, "Generated input sets (default 1)");
  cmd->add_option("--atol", a->atol, "Tolerance: |v - r| <= atol + rtol |r| everywhere");
  cmd->add_option("--rtol", a->rtol, "See --atol");
  cmd->add_option("--min-cosine", a->min_cosine, "Tolerance: cosine >= this (default 0.999)");
  cmd->add_option("--objective", a->objective, "fewest-fp32 (default) or fewest-casts");
  cmd->add_option("--scale", a->scale,
                  "auto (default): remove overflows by exact power-of-two scaling where the "
                  "subgraph allows it; none: float32 islands only");
  cmd->add_option("--keep-fp32", a->keep, "Nodes forced into float32 (NODE,...)")
      ->take_all()
      ->delimiter(',');
  cmd->add_option("--keep-fp32-ops", a->keep_ops, "Op types forced into float32")
      ->take_all()
      ->delimiter(',');
  cmd->add_option("--max-passes", a->max_passes, "check() runs at most (default 48)");
  cmd->add_option("-o,--output", a->output, "Write plan.json here");
  cmd->add_option("--emit", a->emit,
                  "Print only the settings: trtexec (TensorRT 10 flags) or ort "
                  "(onnxconverter-common node_block_list)");
  cmd->add_flag("--saturate", a->saturate, "Overflow saturates to +-max");
  cmd->add_option("--threads", a->threads, "Threads (default: all cores)");
  cmd->add_flag("--quiet", a->quiet, "No progress line");
  cmd->callback([a] { plan_command(*a); });
}

}  // namespace fpguard::cli
