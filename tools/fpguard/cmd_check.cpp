// `fpguard check`: the main job. Runs the model in lockstep (float32 reference, emulated
// precision, local runs), prints a verdict, the origins of trouble with their fixes, the
// worst nodes and the risk rules; --json writes the whole diagnosis. `fpguard rules`
// lists the rules.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "annotate.hpp"
#include "cli.hpp"
#include "distributed.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/io.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/model.hpp"
#include "fpguard/report.hpp"
#include "inputs.hpp"
#include "mpi.hpp"

namespace fpguard::cli {

namespace {

struct CheckArgs {
  std::string model;
  inputs::Options in;
  std::vector<std::string> precisions, keep, keep_ops, disabled, fail_on;
  std::string reference = "fp32", accumulate, accumulation = "sequential", target;
  std::string annotate;           // --annotate OUT.onnx
  std::string reference_model;    // --reference-model ORIGINAL.onnx
  std::string shard;              // --shard I/N
  std::vector<std::string> amax;  // --amax FILE...: scaled FP8's calibration (fpguard calibrate)
  std::size_t samples = 1, top = 10;
  std::optional<double> atol, rtol;
  double min_cosine = 0.999;
  CheckOutputs out;  // --json, --html, --top, --threads, --quiet, --color
  bool saturate = false;
  ScaledArgs scaled;
};

// "a,b" "c" -> a, b, c
std::vector<std::string> split_commas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    std::stringstream ss(item);
    std::string p;
    while (std::getline(ss, p, ','))
      if (!p.empty()) out.push_back(p);
  }
  return out;
}

// The options every precision shares, from the flags (the format is set per precision).
analysis::CheckOptions check_options(const CheckArgs& a) {
  analysis::CheckOptions o;
  o.reference = parse_reference(a.reference);
  if (!a.accumulate.empty()) o.accumulate = parse_format(a.accumulate);
  o.accumulation = parse_accumulation_order(a.accumulation).value_or(AccumulationOrder{});
  if (o.accumulation.kind == AccumulationOrder::Kind::library && o.accumulate &&
      o.accumulate->name != "float32")
    throw Error("--accumulation library",
                "oneDNN's sgemm accumulates in float32, not " + o.accumulate->name);
  for (const auto& k : split_commas(a.keep)) o.keep_fp32.insert(k);
  for (const auto& k : split_commas(a.keep_ops)) o.keep_fp32_ops.insert(k);
  for (const auto& r : split_commas(a.disabled)) o.disabled_rules.insert(r);
  o.fail_on = analysis::parse_fail_on(split_commas(a.fail_on));
  o.round_options.saturate = a.saturate;
  o.min_cosine = a.min_cosine;
  o.atol = a.atol;
  o.rtol = a.rtol;
  o.threads = a.out.threads;
  return o;
}

// --precision, or the one --target recommends; formats the target cannot run are refused.
// (A scaled precision: its block format, or scaled FP8's element format, and the format the
// other ops run in.)
std::vector<Precision> check_formats(const CheckArgs& a) {
  std::vector<Precision> formats;
  for (const auto& p : split_commas(a.precisions))
    formats.push_back(parse_precision(p, a.scaled.other));
  if (!a.target.empty()) {
    const Target& t = find_target(a.target);
    if (formats.empty()) formats.push_back({.format = recommended_format(t)});
    for (const auto& f : formats) {
      require_native(t, f.format);
      if (f.scaled) require_native(t, *f.scaled);
    }
  }
  if (formats.empty()) throw Error("--precision", "give at least one format (or --target)");
  return formats;
}

// The options of one precision's check: the shared ones, its format, the inputs it runs on
// and the original model it is compared with.
analysis::CheckOptions precision_options(const analysis::CheckOptions& shared, const Precision& f,
                                         const CheckArgs& a,
                                         const std::vector<inputs::Generated>& generated,
                                         const model::Model* original) {
  analysis::CheckOptions o = shared;
  o.precision = f.format;
  o.scaled = f.scaled;
  o.amax_margin = a.scaled.amax_margin;
  o.keep_unscaled = unscaled_nodes(a.scaled, f);
  o.generated = generated;
  o.reference_model = original;
  return o;
}

// The files asked for (--annotate, --html, --json), then the text on stdout.
void write_results(const CheckArgs& a, model::Model& m,
                   const std::vector<std::string>& original_names,
                   const std::vector<analysis::Diagnosis>& results, const report::Terminal& term) {
  // Several precisions: the first one annotates (docs/check.md).
  if (!a.annotate.empty()) write_annotated(m, original_names, a.annotate, results.front());
  write_check_results(a.out, results, term);
}

// Whether a scaled format calibrates static activation scales (scaled FP8: fp8, tensor:,
// channel:).
bool calibrates(const std::optional<ScaledFormat>& scaled) {
  return scaled && scaled->rule == ScaleRule::amax;
}

// --amax FILE...: the activation amax of every calibrating precision, from the files.
void use_amax(const CheckArgs& a, const model::Model& m, std::size_t total,
              std::vector<analysis::CheckOptions>& opts) {
  if (a.amax.empty()) return;
  bool used = false;
  for (const auto& o : opts) used = used || calibrates(o.scaled);
  if (!used)
    throw Error("--amax",
                "no precision of this check calibrates activation scales (fp8, "
                "tensor:, channel:)");
  const auto amax = read_amax(a.amax, m, a.in, total, opts.front().reference);
  for (auto& o : opts)
    if (calibrates(o.scaled)) o.activation_amax = amax;
}

}  // namespace

void identify(const model::Model& m, const std::string& path, report::FileId& file,
              std::vector<report::FileId>& data) {
  file = {.path = path, .sha256 = sha256_file(path)};
  data.clear();
  for (const auto& f : m.external_files)
    data.push_back({.path = f.string(), .sha256 = sha256_file(f)});
}

DType parse_reference(const std::string& name) {
  if (name == "fp64" || name == "float64") return DType::float64;
  if (name != "fp32" && name != "float32")
    throw Error("--reference " + name, "expected fp32 or fp64");
  return DType::float32;
}

report::Terminal terminal(const std::string& color, bool quiet, bool progress) {
  const report::ColorMode mode = report::parse_color(color, "--color " + color);
  const mpi::World& w = mpi::world();
  if (!w.root()) return report::Terminal::detect(report::ColorMode::never, true);
  if (!w.distributed()) {
    report::Terminal t = report::Terminal::detect(mode, quiet);
    t.progress = t.progress || (progress && !quiet);
    return t;
  }
  // Rank 0 of an mpirun job writes to OpenMPI's pseudo-terminal whatever mpirun's own
  // stdout is, and to a pipe on stderr: automatic colour and fitting are off, progress
  // only with --progress.
  report::Terminal t = report::Terminal::detect(
      mode == report::ColorMode::always ? mode : report::ColorMode::never, quiet);
  t.width = 0;
  t.progress = progress && !quiet;
  return t;
}

report::Terminal CheckOutputs::terminal() const {
  return cli::terminal(color, quiet, progress);
}

void add_check_outputs(CLI::App& cmd, CheckOutputs& to) {
  cmd.add_option("--json", to.json, "Write the diagnosis as JSON to FILE (- for stdout)");
  cmd.add_option("--html", to.html,
                 "Write the diagnosis as one self-contained HTML page (charts, no network)");
  cmd.add_option("--top", to.top,
                 "Rows of the worst-node table and major rule findings shown (default 10)");
  cmd.add_option("--threads", to.threads, "Threads (default: the cores this process may use)");
  cmd.add_flag("--quiet", to.quiet, "No progress bar");
  cmd.add_flag("--progress", to.progress,
               "The progress bar even when stderr is not a terminal (mpirun: on rank 0)");
  cmd.add_option("--color", to.color,
                 "Colour the verdict: auto (default; off with NO_COLOR), always, never");
}

void write_check_results(const CheckOutputs& to, const std::vector<analysis::Diagnosis>& results,
                         const report::Terminal& term) {
  if (!to.html.empty())
    write_file_atomic(to.html, [&](std::ostream& out) { report::write_html(out, results, {}); });
  if (!to.json.empty()) {
    const report::Json j = report::to_json(results, to.model);
    if (to.json == "-") {
      std::cout << j.dump(2) << "\n";
      return;
    }
    check_not_same_file(to.model, to.json, "--json");
    // (Streamed: as j.dump(2), without a string of the whole document.)
    write_file_atomic(to.json, [&](std::ostream& out) { out << std::setw(2) << j << "\n"; });
  }
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (i) std::cout << "\n" << std::string(78, '-') << "\n";
    report::render(std::cout, results[i], {.top = to.top}, term);
  }
  if (results.size() > 1) report::render_side_by_side(std::cout, results, term);
}

namespace {

inputs::Shard shard_of(const CheckArgs& a) {
  return a.shard.empty() ? inputs::Shard{} : inputs::parse_shard(a.shard);
}

// --shard I/N: this shard's sets accumulated for every precision (read one at a time),
// written as a part file.
void check_shard(const CheckArgs& a, const model::Model& m, const inputs::SetList& sets,
                 const model::Model* original, std::vector<analysis::CheckOptions> opts,
                 const report::Terminal& term) {
  std::vector<inputs::Generated> generated;
  report::CheckPart part{
      .inputs = inputs::absolute(a.in),
      .total_sets = sets.total,
      .shard = shard_of(a),
      .set_names = sets.names,
      .first_set_sha256 = inputs::set_sha256(sets.read(0, &generated)),
      .graph = model::save_graph_bytes(m),
      .threads = static_cast<std::size_t>(a.out.threads > 0 ? a.out.threads : available_cores())};
  identify(m, a.model, part.model, part.data);
  if (original)
    identify(*original, a.reference_model, part.reference_model.emplace(), part.reference_data);
  for (auto& o : opts) {
    report::Progress progress(term, "check " + o.precision.name + " (shard)");
    o.progress = [&progress](std::size_t d, std::size_t t) { progress.update(d, t); };
    auto state = analysis::accumulate(m, analysis::read_lazily(sets, &generated), o, sets.indices);
    o.progress = nullptr;
    o.generated = generated;
    part.checks.push_back({.options = std::move(o), .state = std::move(state)});
  }
  const report::Json j = report::to_json(part);
  if (a.out.json == "-") {
    std::cout << j.dump(2) << "\n";
    return;
  }
  check_not_same_file(a.model, a.out.json, "--json");
  // Compact: a machine reads it (merge parses it; whitespace was 40% of a part's bytes).
  write_file_atomic(a.out.json, [&](std::ostream& out) { out << j.dump() << "\n"; });
  if (!a.out.quiet) std::cout << report::describe(part, a.out.json) << "\n";
}

// Under mpirun: every rank checks its input sets (index mod ranks == rank), the ranks
// exchange and merge their states, and rank 0 finishes and writes the diagnosis. All that
// can fail on one rank alone (reading the model, the sets, the output checks) happens
// inside an exchange, so that every rank learns of it.
void check_ranks(const CheckArgs& a, const analysis::CheckOptions& shared,
                 const std::vector<Precision>& formats) {
  const mpi::World& w = mpi::world();
  if (!a.shard.empty()) throw Error("--shard " + a.shard, "under mpirun the ranks are the shards");
  const report::Terminal term = a.out.terminal();
  std::optional<model::Model> m, original;
  std::vector<std::string> original_names;
  distributed::RankSets sets;
  distributed::exchange([&] {
    if (w.root()) {
      if (!a.annotate.empty()) check_output_file(a.model, a.annotate, kAnnotateFlag);
      if (!a.out.html.empty()) check_output_file(a.model, a.out.html, "--html");
    }
    m = model::load(a.model);
    original_names = node_names(*m);
    analysis::name_nodes(*m);
    if (!a.reference_model.empty()) original = model::load(a.reference_model);
    sets = distributed::gather_rank_sets(a.in, *m, a.samples);
    return std::string();
  });
  std::vector<analysis::CheckOptions> opts;
  for (const auto& f : formats)
    opts.push_back(
        precision_options(shared, f, a, sets.generated, original ? &*original : nullptr));
  distributed::exchange([&] {
    use_amax(a, *m, sets.total, opts);
    return std::string();
  });
  for (auto& o : opts)  // (scaled FP8 without --amax: calibrated over every rank's sets)
    o = distributed::calibrated(*m, sets, std::move(o));
  auto states = distributed::merged_states([&] {
    std::vector<analysis::CheckState> out;
    if (sets.own.size() == 0) return out;
    for (auto o : opts) {
      report::Progress bar(term, "check " + (o.scaled ? o.scaled->name : o.precision.name));
      o.progress = distributed::progress(bar, sets, a.out.threads);
      out.push_back(analysis::accumulate(*m, analysis::read_lazily(sets.own, &sets.generated), o,
                                         sets.own.indices));
    }
    return out;
  });
  if (!w.root()) return;
  std::vector<analysis::Diagnosis> results;
  bool all_pass = true;
  for (std::size_t k = 0; k < states.size(); ++k) {
    auto d = analysis::finish(*m, std::move(states[k]), opts[k], [&] { return sets.first; });
    all_pass = all_pass && d.pass;
    results.push_back(std::move(d));
  }
  exit_code = all_pass ? 0 : 1;
  write_results(a, *m, original_names, results, term);
}

void check(const CheckArgs& a) {
  const analysis::CheckOptions shared = check_options(a);
  const std::vector<Precision> formats = check_formats(a);
  if (mpi::world().distributed()) return check_ranks(a, shared, formats);
  const std::optional<inputs::Shard> shard =
      a.shard.empty() ? std::nullopt : std::optional(inputs::parse_shard(a.shard));
  if (shard) {
    for (const auto& f : formats)
      if (calibrates(f.scaled) && a.amax.empty())  // its calibration spans every set
        throw Error("--shard " + a.shard,
                    "a shard of " + f.name() +
                        " takes the activation amax calibrated on every set: --amax FILE... "
                        "(fpguard calibrate --shard, one file per shard)");
    if (a.out.json.empty())
      throw Error("--shard " + a.shard, "a shard writes its partial results with --json FILE");
    if (!a.out.html.empty() || !a.annotate.empty())
      throw Error("--shard " + a.shard,
                  "a shard writes partial results only; fpguard merge writes the HTML");
  }
  if (!a.annotate.empty()) check_output_file(a.model, a.annotate, kAnnotateFlag);
  if (!a.out.html.empty()) check_output_file(a.model, a.out.html, "--html");
  if (shard && a.out.json != "-") check_output_file(a.model, a.out.json, "--json");
  const report::Terminal term = a.out.terminal();
  model::Model m = model::load(a.model);
  const auto original_names = node_names(m);
  analysis::name_nodes(m);
  const inputs::SetList sets =
      inputs::list_samples(a.in, m, a.samples, shard.value_or(inputs::Shard{}));
  // The inputs set 0 generates (those of later sets are added as they are read).
  std::vector<inputs::Generated> generated;
  sets.read(0, &generated);
  std::optional<model::Model> original;
  if (!a.reference_model.empty()) original = model::load(a.reference_model);
  std::vector<analysis::CheckOptions> opts;
  for (const auto& f : formats)
    opts.push_back(precision_options(shared, f, a, generated, original ? &*original : nullptr));
  use_amax(a, m, sets.total, opts);
  if (shard) return check_shard(a, m, sets, original ? &*original : nullptr, opts, term);

  std::vector<analysis::Diagnosis> results;
  bool all_pass = true;
  for (auto& o : opts) {
    report::Progress progress(term, "check " + (o.scaled ? o.scaled->name : o.precision.name));
    o.progress = [&progress](std::size_t d, std::size_t t) { progress.update(d, t); };
    auto d = analysis::check(m, analysis::read_lazily(sets, &generated), o);
    d.generated = generated;
    all_pass = all_pass && d.pass;
    results.push_back(std::move(d));
  }
  exit_code = all_pass ? 0 : 1;
  write_results(a, m, original_names, results, term);
}

}  // namespace

void add_check(CLI::App& app) {
  auto a = std::make_shared<CheckArgs>();
  auto* cmd = app.add_subcommand(
      "check", "Find where a low-precision deployment of a model breaks, and why (main job)");
  mark_runs_models(*cmd);
  cmd->add_option("model", a->model, "ONNX model")->required();
  cmd->add_option("--precision", a->precisions,
                  "Format(s) to check, e.g. float16 or float16,bfloat16,float8_e4m3fn, or "
                  "scaled ones for MatMul/Gemm/Conv inputs (fp8, channel:float8_e4m3fn, "
                  "mxfp8_e4m3, nvfp4, ...)")
      ->take_all();
  add_scaled_options(*cmd, a->scaled);
  cmd->add_option("--target", a->target,
                  "Accelerator (fpguard targets): picks the precision when --precision is "
                  "absent, refuses formats it cannot run natively");
  add_input_options(*cmd, a->in);
  add_set_options(*cmd, a->in);
  cmd->add_option("--samples", a->samples,
                  "Number of generated input sets (seeds SEED, SEED+1, ...; default 1)");
  cmd->add_option("--atol", a->atol, "Pass only if |v - r| <= atol + rtol |r| everywhere");
  cmd->add_option("--rtol", a->rtol, "See --atol");
  cmd->add_option("--min-cosine", a->min_cosine,
                  "Pass only if each output's cosine similarity is >= this (default 0.999)");
  cmd->add_option("--fail-on", a->fail_on,
                  "Fail when the outputs pass but origins of these kinds exist (absorbed): "
                  "overflow,nan,underflow")
      ->take_all();
  cmd->add_option("--reference", a->reference,
                  "Reference run: fp32 (default) or fp64 (every floating node in float64)");
  cmd->add_option("--reference-model", a->reference_model,
                  "A converted model's original: check the model as it is against it, run in "
                  "float32");
  cmd->add_option("--accumulate", a->accumulate,
                  "Format MatMul/Gemm/Conv and sum reductions accumulate in (default float32)");
  cmd->add_option("--accumulation", a->accumulation,
                  "Order of that accumulation: sequential (default), pairwise, blocked:K");
  cmd->add_option("--shard", a->shard,
                  "Check only input sets I, I+N, ... (of --inputs DIR or --samples N) and write "
                  "partial results (--json) for fpguard merge (I/N)");
  cmd->add_option("--amax", a->amax,
                  "Scaled FP8's activation amax from these files (fpguard calibrate; with "
                  "--shard, required): their maximum, over every input set")
      ->take_all();
  cmd->add_option(kAnnotateFlag, a->annotate,
                  "Write the model with each node's findings (metadata_props, doc_string) to "
                  "OUT.onnx, for Netron; with several precisions, the first");
  cmd->add_option("--keep-fp32", a->keep, "Keep these nodes in float32 (NODE,...)")->take_all();
  cmd->add_option("--keep-fp32-ops", a->keep_ops, "Keep these op types in float32 (Pow,...)")
      ->take_all();
  cmd->add_option("--disable-rule", a->disabled, "Turn off risk rules by id (ID,...)")->take_all();
  cmd->add_flag("--saturate", a->saturate, "Overflow saturates to +-max (FP8 with scaling)");
  add_check_outputs(*cmd, a->out);
  cmd->callback([a] {
    a->out.model = a->model;
    check(*a);
  });

  auto* rules = app.add_subcommand("rules", "List the risk rules of `fpguard check`");
  auto json_flag = std::make_shared<bool>(false);
  rules->add_flag("--json", *json_flag, "Print JSON");
  rules->callback([json_flag] {
    if (*json_flag)
      std::cout << report::rules_json().dump(2) << "\n";
    else
      report::render_rules(std::cout);
  });
}

}  // namespace fpguard::cli
