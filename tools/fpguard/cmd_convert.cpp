// `fpguard convert`: writes a mixed-precision ONNX model (rewrite::convert) from a plan
// or a --keep-fp32 list, then verifies it: the converted model against the float32
// original on the same inputs, with check's pass criterion.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "cli.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/io.hpp"
#include "fpguard/report.hpp"
#include "fpguard/rewrite.hpp"
#include "inputs.hpp"

namespace fpguard::cli {

namespace {

// A format's canonical name, scalar or scaled.
std::string canonical_name(const std::string& name) {
  return std::visit([](const auto& f) { return f.name; }, parse_any_format(name));
}

// Why convert does not write a scaled precision (appended to the refusal).
constexpr const char* kNoScaledTypes =
    "ONNX has no MX, NVFP4 or scaled-FP8 tensor types to store it in; deploy it with a "
    "quantization tool";

// The format convert writes: a scalar one (rewrite::convert refuses all but float16 and
// bfloat16 with its reason); a scaled one is refused here with why.
Format convert_format(const std::string& name) {
  if (find_scaled_format(name))
    throw Error("--precision " + name,
                std::string("a scaled format, which convert does not write: ") + kNoScaledTypes +
                    " (run, check and plan take it)");
  return parse_format(name);
}

struct ConvertArgs {
  std::string model, precision, plan, output;
  std::vector<std::string> keep, keep_ops;
  inputs::Options in;
  double min_cosine = 0.999;
  bool keep_io_types = false, no_verify = false, scale_only = false, external_data = false;
  bool seed_given = false;  // --seed on the command line (else the plan's)
  int threads = 0;
};

// Saves the output; initializers go to `<output>.data` with --external-data, or by
// themselves when the model would reach protobuf's 2 GiB.
void save_output(const model::Model& m, const ConvertArgs& a) {
  model::SaveOptions o;
  if (a.external_data) o.external = model::SaveOptions::External::always;
  const auto r = model::save(m, a.output, o);
  if (!r.data_file.empty())
    std::cout << fmt::format("wrote {}: {} initializer{} ({:.1f} MiB) as external data\n",
                             r.data_file.string(), r.external_tensors,
                             r.external_tensors == 1 ? "" : "s",
                             static_cast<double>(r.external_bytes) / (1 << 20));
}

// The inputs to verify on: the plan's recorded ones, where it has them, under what the
// command line gives: --input or --inputs replace its inputs, --shape entries override
// its shapes per input (the later entry wins), --seed its seed.
inputs::Options verify_inputs(const ConvertArgs& a, const analysis::PlanFile* plan) {
  if (!plan || !plan->inputs) return a.in;
  inputs::Options o = plan->inputs->options;
  if (!a.in.input.empty() || !a.in.inputs.empty()) {
    o.input = a.in.input;
    o.inputs = a.in.inputs;
  }
  o.shape.insert(o.shape.end(), a.in.shape.begin(), a.in.shape.end());
  if (a.seed_given) o.seed = a.in.seed;
  o.require_inputs = a.in.require_inputs;
  return o;
}

// The converted model (real 16-bit storage) against the float32 original on the first
// input set, with check's pass criterion; false when an output misses it.
bool verify(const ConvertArgs& a, const model::Model& original,
            const std::vector<NamedValue>& sample) {
  const model::Model saved = model::load(a.output);
  bool pass = true;
  for (const auto& v : rewrite::verify(original, saved, sample, a.min_cosine, a.threads)) {
    pass = pass && v.pass;
    std::cout << fmt::format(
        "  verified {}: {} vs the float32 model: cosine {:.6f}, max abs "
        "error {:.4g}{}{}\n",
        v.output, v.pass ? "ok  " : "FAIL", v.cosine, v.max_abs_error,
        v.nonfinite ? fmt::format(", {} non-finite", v.nonfinite) : "",
        v.mismatch ? "; its kind or length differs from the float32 model's" : "");
  }
  return pass;
}

// The input sets to verify on; an error in inputs that only the plan named says so.
inputs::Samples verify_samples(const ConvertArgs& a, const analysis::PlanFile* plan,
                               const model::Model& original) {
  const inputs::Options o = verify_inputs(a, plan);
  const bool only_the_plans = plan && plan->inputs && a.in.input.empty() && a.in.inputs.empty() &&
                              a.in.shape.empty() && !a.seed_given;
  if (!only_the_plans) return inputs::gather_samples(o, original, 1);
  try {
    return inputs::gather_samples(o, original, 1);
  } catch (const Error& e) {
    throw Error("--plan " + a.plan, "the inputs it records: " + where_of(e) + ": " + e.problem() +
                                        " (give the inputs with --input, --inputs, --shape)");
  }
}

void convert_command(const ConvertArgs& a) {
  if (a.output.empty()) throw Error("-o", "give the output model path");
  check_not_same_file(a.model, a.output, "-o");
  rewrite::ConvertOptions o;
  std::string precision = a.precision;
  model::Model m = model::load(a.model);
  analysis::name_nodes(m);
  const model::Model original = m;
  std::optional<analysis::PlanFile> plan;
  if (!a.plan.empty()) {
    plan = report::read_plan("--plan " + a.plan, a.plan);
    if (!precision.empty() && canonical_name(precision) != canonical_name(plan->precision))
      throw Error("--plan " + a.plan,
                  "the plan is for " + plan->precision + ", not " + canonical_name(precision));
    precision = plan->precision;
    if (!a.scale_only) try {
        rewrite::require_convertible_plan("--plan " + a.plan, precision);
      } catch (const Error& e) {
        throw Error("--plan " + a.plan, e.problem() + " (--scale-only writes its rescaled model)");
      }
    // The plan's exact scale rewrites first: its node names include what they add.
    m = rewrite::apply_plan(m, *plan, o, "--plan " + a.plan, a.model);
  }
  if (a.scale_only) {  // the float32 model with the plan's scale rewrites, for other tools
    if (a.plan.empty()) throw Error("--scale-only", "needs --plan");
    save_output(m, a);
    std::cout << "wrote " << a.output << ": the float32 model with the plan's scale rewrites\n";
    return;
  }
  if (precision.empty()) throw Error("--precision", "give float16 or bfloat16 (or --plan)");
  o.precision = convert_format(precision);
  for (const auto& k : a.keep) o.keep_fp32.insert(k);
  for (const auto& k : a.keep_ops) o.keep_fp32_ops.insert(k);
  o.keep_io_types = a.keep_io_types;
  // The verification's inputs before anything is written: bad inputs leave no output.
  std::optional<inputs::Samples> in;
  if (!a.no_verify) in = verify_samples(a, plan ? &*plan : nullptr, original);
  rewrite::ConvertReport rep;
  const model::Model out = rewrite::convert(m, o, &rep);
  save_output(out, a);

  std::cout << fmt::format(
      "wrote {}: {} nodes in {}, {} in float32, {} Cast{} added, {} initializer{} stored in "
      "{}\n",
      a.output, rep.low_nodes, o.precision.name, rep.fp32_nodes, rep.casts,
      rep.casts == 1 ? "" : "s", rep.initializers_converted,
      rep.initializers_converted == 1 ? "" : "s", o.precision.name);
  for (const auto& k : rep.kept_by_spec)
    std::cout << "  float32: " << k << " has no " << o.precision.name
              << " kernel in the ONNX schema at this opset\n";
  for (const auto& w : rep.warnings) std::cout << "  warning: " << w << "\n";
  if (a.no_verify) return;

  // Verify: the converted model against the float32 original.
  const bool pass = verify(a, original, in->sets[0]);
  if (plan && plan->inputs && a.in.input.empty() && a.in.inputs.empty())
    std::cout << "  note: verified on the inputs the plan records (--input/--inputs override "
                 "them)\n";
  if (const std::string advice = report::generated_advice(in->generated); !advice.empty())
    std::cout << "  note: verified on generated inputs: " << advice << "\n";
  exit_code = pass ? 0 : 1;
}

}  // namespace

void add_convert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  auto* cmd = app.add_subcommand(
      "convert", "Write a mixed-precision (float16/bfloat16) ONNX model from a plan");
  mark_runs_models(*cmd);
  cmd->add_option("model", a->model, "ONNX model")->required();
  cmd->add_option("-o,--output", a->output, "The converted model (required)");
  cmd->add_option("--precision", a->precision, "float16 or bfloat16 (default: the plan's)");
  cmd->add_option("--plan", a->plan, "plan.json from fpguard plan");
  cmd->add_option("--keep-fp32", a->keep, "Also keep these nodes in float32 (NODE,...)")
      ->take_all()
      ->delimiter(',');
  cmd->add_option("--keep-fp32-ops", a->keep_ops, "Keep these op types in float32")
      ->take_all()
      ->delimiter(',');
  cmd->add_flag("--keep-io-types", a->keep_io_types,
                "Graph inputs and outputs keep float32 (Casts inside the model)");
  add_input_options(*cmd, a->in);
  cmd->add_option("--min-cosine", a->min_cosine,
                  "Verification: outputs' cosine to the float32 model (default 0.999)");
  cmd->add_flag("--no-verify", a->no_verify, "Skip the verification run");
  cmd->add_flag("--external-data", a->external_data,
                "Initializers of 1 KiB or more in OUTPUT.data beside the model (automatic for "
                "models of 2 GiB or more)");
  cmd->add_flag("--scale-only", a->scale_only,
                "Write the float32 model with the plan's scale rewrites only (for TensorRT's "
                "--layerPrecisions, or to emulate the plan with fpguard run)");
  cmd->add_option("--threads", a->threads, "Threads (default: the cores this process may use)");
  cmd->callback([a, cmd] {
    a->seed_given = cmd->count("--seed") > 0;
    convert_command(*a);
  });
}

}  // namespace fpguard::cli
