// `fpguard calibrate MODEL --inputs DIR [--shard I/N] --json AMAX`: the activation amax a
// scaled precision of the amax rule (fp8, tensor:, channel:) calibrates its static scales
// on, over some input sets. The shards of such a check each see only their sets, so they
// take every shard's file (check --amax AMAX...) and use their maximum, which is exactly
// what one check over all the sets calibrates (docs/scale.md).
#include <iostream>

#include "cli.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/inputs.hpp"
#include "fpguard/io.hpp"
#include "fpguard/model.hpp"
#include "fpguard/report.hpp"
#include "inputs.hpp"

namespace fpguard::cli {

namespace {

struct CalibrateArgs {
  std::string model, shard, reference = "fp32", json;
  inputs::Options in;
  std::size_t samples = 1;
  int threads = 0;
  bool quiet = false;
};

void calibrate(const CalibrateArgs& a) {
  if (a.json.empty()) throw Error("--json", "give the file to write the amax to (- for stdout)");
  const inputs::Shard shard = a.shard.empty() ? inputs::Shard{} : inputs::parse_shard(a.shard);
  analysis::CheckOptions o;
  o.reference = parse_reference(a.reference);
  o.threads = a.threads;
  if (a.json != "-") check_output_file(a.model, a.json, "--json");
  model::Model m = model::load(a.model);
  analysis::name_nodes(m);
  const inputs::SetList sets = inputs::list_samples(a.in, m, a.samples, shard);
  report::AmaxFile f{.reference = std::string(to_string(o.reference)),
                     .inputs = inputs::absolute(a.in),
                     .total_sets = sets.total,
                     .sets = sets.indices,
                     .amax = analysis::calibrate(m, analysis::read_lazily(sets), o)};
  identify(m, a.model, f.model, f.data);
  const report::Json j = report::to_json(f);
  if (a.json == "-") {
    std::cout << j.dump(2) << "\n";
    return;
  }
  write_file_atomic(a.json, [&](std::ostream& out) { out << j.dump(1) << "\n"; });
  if (!a.quiet)
    std::cout << "calibrated on " << sets.size() << " of " << sets.total
              << " input sets: " << f.amax.size() << " activation amax written to " << a.json
              << " (check --amax takes every shard's)\n";
}

// What the files say differs from this check: where, and how.
// (`model`, `data`: this check's model, as identify() gives them.)
void require_same_calibration(const std::string& file, const report::AmaxFile& f,
                              const report::FileId& model, const std::vector<report::FileId>& data,
                              const inputs::Options& in, std::size_t total, DType reference) {
  if (f.model.sha256 != model.sha256)
    throw Error(file,
                "was calibrated on another model than " + model.path + " (its sha256 differs)");
  bool same_data = f.data.size() == data.size();
  for (std::size_t i = 0; same_data && i < data.size(); ++i)
    same_data = f.data[i].sha256 == data[i].sha256;
  if (!same_data)
    throw Error(file, "was calibrated on another model than " + model.path +
                          " (the sha256 of its external data differs)");
  if (f.reference != to_string(reference))
    throw Error(file, "was calibrated with the reference in " + f.reference + ", not " +
                          std::string(to_string(reference)) + " (--reference)");
  inputs::Options theirs = f.inputs, ours = in;
  theirs.inputs = ours.inputs = "";  // the directory may have moved
  theirs.require_inputs = ours.require_inputs = false;
  if (!(theirs == ours) || f.total_sets != total)
    throw Error(file, "was calibrated on other input sets (" + std::to_string(f.total_sets) +
                          " sets, or other --input, --shape, --seed, --max-sets, --sample-sets)");
}

}  // namespace

analysis::ActivationAmax read_amax(const std::vector<std::string>& files, const model::Model& m,
                                   const inputs::Options& in, std::size_t total, DType reference) {
  report::FileId model;
  std::vector<report::FileId> data;
  identify(m, m.path.string(), model, data);
  analysis::ActivationAmax amax;
  std::vector<std::vector<std::size_t>> sets;
  for (const auto& file : files) {
    report::AmaxFile f = report::read_amax_file(file);
    require_same_calibration(file, f, model, data, in, total, reference);
    analysis::max_amax(amax, f.amax);
    sets.push_back(std::move(f.sets));
  }
  require_all_sets(files, sets, total, "--amax");
  return amax;
}

void add_calibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Calibrate the activation amax of scaled FP8 (fp8, tensor:, channel:) on some input sets, "
      "for the shards of a check (check --amax)");
  mark_runs_models(*cmd);
  cmd->add_option("model", a->model, "ONNX model")->required();
  add_input_options(*cmd, a->in);
  add_set_options(*cmd, a->in);
  cmd->add_option("--samples", a->samples,
                  "Number of generated input sets (seeds SEED, SEED+1, ...; default 1)");
  cmd->add_option("--shard", a->shard, "Calibrate on input sets I, I+N, ... only (I/N)");
  cmd->add_option("--reference", a->reference, "The check's reference run: fp32 (default) or fp64");
  cmd->add_option("--json", a->json, "Write the amax to FILE (- for stdout)");
  cmd->add_option("--threads", a->threads, "Threads (default: the cores this process may use)");
  cmd->add_flag("--quiet", a->quiet, "No summary line");
  cmd->callback([a] { calibrate(*a); });
}

}  // namespace fpguard::cli
