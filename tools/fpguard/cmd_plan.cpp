// `fpguard plan`: which nodes must stay in float32 for the model to meet a tolerance in a
// low precision (analysis::plan); writes plan.json and prints the TensorRT / ONNX Runtime
// settings that apply it.

#include <iostream>
#include <nlohmann/json.hpp>

#include "annotate.hpp"
#include "cli.hpp"
#include "distributed.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/io.hpp"
#include "fpguard/report.hpp"
#include "fpguard/rewrite.hpp"
#include "inputs.hpp"
#include "mpi.hpp"

namespace fpguard::cli {

namespace {

struct PlanArgs {
  std::string model, precision, target, output, emit, objective = "fewest-fp32", scale = "auto";
  std::string annotate;  // --annotate OUT.onnx
  inputs::Options in;
  std::vector<std::string> keep, keep_ops;
  std::size_t samples = 1, max_passes = 48;
  std::optional<double> atol, rtol;
  double min_cosine = 0.999;
  std::string color = "auto", html_file;
  ScaledArgs scaled;  // --other-precision, --amax-margin
  bool saturate = false, quiet = false, progress = false;
  int threads = 0;
};

// The planner's options from the flags, in precision `p`.
analysis::PlanOptions plan_options(const PlanArgs& a, const Precision& p) {
  const Format& f = p.format;
  analysis::PlanOptions po;
  if (a.objective == "fewest-fp32")
    po.objective = analysis::Objective::fewest_fp32;
  else if (a.objective == "fewest-casts")
    po.objective = analysis::Objective::fewest_casts;
  else
    throw Error("--objective " + a.objective, "expected fewest-fp32 or fewest-casts");
  po.check.precision = f;
  po.check.scaled = p.scaled;
  po.check.amax_margin = a.scaled.amax_margin;
  po.check.keep_unscaled = unscaled_nodes(a.scaled, p);
  po.check.keep_fp32 = std::set<std::string>(a.keep.begin(), a.keep.end());
  po.check.keep_fp32_ops = std::set<std::string>(a.keep_ops.begin(), a.keep_ops.end());
  po.check.round_options.saturate = a.saturate;
  po.check.min_cosine = a.min_cosine;
  po.check.atol = a.atol;
  po.check.rtol = a.rtol;
  po.check.threads = a.threads;
  po.max_passes = a.max_passes;
  po.count_casts = rewrite::cast_counter();
  if (a.scale == "auto")
    po.scaler = rewrite::exact_scaler(f);
  else if (a.scale != "none")
    throw Error("--scale " + a.scale, "expected auto or none");
  return po;
}

// What plan reads: the model and its input sets, listed to be read one at a time (under
// mpirun, this rank's: distributed.hpp), and set 0, read inside an exchange so that a
// failure on one rank reaches all.
struct PlanInputs {
  model::Model m{};
  std::vector<std::string> original_names{};
  distributed::RankSets sets{};
};

// (Into `in`: its sets point at its model.)
void read_inputs(const PlanArgs& a, PlanInputs& in) {
  const mpi::World& w = mpi::world();
  distributed::exchange([&] {
    if (w.root()) {
      if (!a.output.empty()) check_not_same_file(a.model, a.output, "-o");
      if (!a.html_file.empty()) check_output_file(a.model, a.html_file, "--html");
      if (!a.annotate.empty()) check_output_file(a.model, a.annotate, kAnnotateFlag);
    }
    in.m = model::load(a.model);
    in.original_names = node_names(in.m);
    analysis::name_nodes(in.m);
    in.sets = distributed::gather_rank_sets(a.in, in.m, a.samples);
    return std::string();
  });
}

// One check over every input set, read one at a time (spread over the ranks under mpirun).
analysis::Diagnosis check_all(const model::Model& m, PlanInputs& in,
                              const analysis::CheckOptions& o) {
  if (mpi::world().distributed()) return distributed::check(m, in.sets, o);
  return analysis::check(m, analysis::read_lazily(in.sets.own, &in.sets.generated), o);
}

void plan_command(const PlanArgs& a) {
  if (a.emit != "" && a.emit != "trtexec" && a.emit != "ort")
    throw Error("--emit " + a.emit, "expected trtexec or ort");
  std::optional<Precision> f;
  if (!a.precision.empty()) f = parse_precision(a.precision, a.scaled.other);
  if (!a.target.empty()) {
    // As check --target: a scaled precision's block (or element) format and the format the
    // other ops run in must both run natively.
    const Target& t = find_target(a.target);
    if (!f) f = Precision{.format = recommended_format(t)};
    require_native(t, f->format);
    if (f->scaled) require_native(t, *f->scaled);
  }
  if (!f) throw Error("--precision", "give the format to plan for (or --target)");
  if (f->format.name == "float32")
    throw Error("--precision float32", "nothing to plan: it is float32");
  analysis::PlanOptions po = plan_options(a, *f);
  const mpi::World& w = mpi::world();
  const report::Terminal term = terminal(a.color, a.quiet, a.progress);
  PlanInputs in;
  read_inputs(a, in);
  model::Model& m = in.m;
  // Each pass checks every set, read one at a time; plan() itself holds set 0 alone.
  po.check_pass = [&in](const model::Model& mm, const analysis::CheckOptions& c) {
    return check_all(mm, in, c);
  };

  analysis::Plan p;
  {
    report::Progress progress(term, "plan");
    po.progress = [&progress](std::size_t pass, const analysis::PlanStep& what) {
      progress.step("pass " + std::to_string(pass) + ": " + report::describe(what));
    };
    p = analysis::plan(m, {in.sets.first}, po);
  }
  std::optional<analysis::Diagnosis> annotated;
  if (!a.annotate.empty()) {
    // The numbers beside each node's plan are those of `fpguard check` in the plan's
    // precision: the model as given, every node in it (one more check run).
    report::Progress progress(term, "check " + f->name());
    analysis::CheckOptions co = po.check;
    co.progress = [&progress](std::size_t d, std::size_t t) { progress.update(d, t); };
    annotated = check_all(m, in, co);
  }
  if (!w.root()) return;
  // plan.json records the inputs, files made absolute, for convert to verify on them.
  p.inputs = inputs::Provenance{
      .options = inputs::absolute(a.in), .samples = a.samples, .generated = in.sets.generated};
  exit_code = p.meets ? 0 : 1;
  if (annotated) write_annotated(m, in.original_names, a.annotate, *annotated, &p);

  const report::Json j = report::to_json(p);
  if (!a.output.empty())
    write_file_atomic(a.output, [&](std::ostream& out) { out << j.dump(2) << "\n"; });
  if (!a.html_file.empty())
    write_file_atomic(a.html_file, [&](std::ostream& out) { report::write_html(out, p, {}); });
  report::PlanText text{.model_arg = a.model, .plan_file = a.output};
  if (!a.emit.empty()) {
    if (const auto w = report::emit_warning(p, text); !w.empty())
      std::cerr << "fpguard: warning: " << w << "\n";
    std::cout << (a.emit == "trtexec" ? report::trtexec_flags(p)
                                      : report::ort_block_lists(p).dump(2))
              << "\n";
    return;
  }
  report::render(std::cout, p, text, term);
}

}  // namespace

void add_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Find the nodes to keep in float32 so that a low precision meets a tolerance");
  mark_runs_models(*cmd);
  cmd->add_option("model", a->model, "ONNX model")->required();
  cmd->add_option("--precision", a->precision,
                  "Format to plan for (float16, bfloat16, ...; or a scaled one, fp8, mxfp8_e4m3, "
                  "...: MatMul, Gemm and Conv quantize their operands into it)");
  add_scaled_options(*cmd, a->scaled);
  cmd->add_option("--target", a->target,
                  "Accelerator: picks the precision when --precision is absent, refuses "
                  "formats it cannot run");
  add_input_options(*cmd, a->in);
  add_set_options(*cmd, a->in);
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
  cmd->add_option("--html", a->html_file,
                  "Write the plan as one self-contained HTML page (islands on the node list)");
  cmd->add_option(kAnnotateFlag, a->annotate,
                  "Write the model with each node's plan and findings (metadata_props, "
                  "doc_string) to OUT.onnx, for Netron");
  cmd->add_option("--emit", a->emit,
                  "Print only the settings: trtexec (TensorRT 10 flags) or ort "
                  "(onnxconverter-common node_block_list)");
  cmd->add_flag("--saturate", a->saturate, "Overflow saturates to +-max");
  cmd->add_option("--threads", a->threads, "Threads (default: the cores this process may use)");
  cmd->add_flag("--quiet", a->quiet, "No progress line");
  cmd->add_flag("--progress", a->progress,
                "The progress line even when stderr is not a terminal (mpirun: on rank 0)");
  cmd->add_option("--color", a->color,
                  "Colour the verdict: auto (default; off with NO_COLOR), always, never");
  cmd->callback([a] { plan_command(*a); });
}

}  // namespace fpguard::cli
