// Shared plumbing of the fpguard subcommands. Each cmd_*.cpp registers one or more
// subcommands on the app; their callbacks set the process exit code through `exit_code`.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/format.hpp"
#include "fpguard/report.hpp"

namespace fpguard::cli {

// 0 success, 1 completed with findings, 2 error (set by main on fpguard::Error).
inline int exit_code = 0;

// The flag that sets a library option named `option` (fpguard::Error::in_option):
// "keep_fp32" -> "--keep-fp32", "disabled_rules" -> "--disable-rule".
std::string flag_of(const std::string& option);
// Where an Error is, as the CLI words it (an option as its flag).
std::string where_of(const Error& e);
// What an Error says, as the CLI words it: with the flag of the setting that governs it
// ("... (--max-memory)").
std::string problem_of(const Error& e);

// A command line CLI11 could not parse, worded as fpguard's errors are (where, what):
// "--precison", "unknown option of check; did you mean '--precision'?".
struct ParseProblem {
  std::string where, what;
};
ParseProblem explain(const CLI::App& app, const CLI::ParseError& e);
// `fpguard` alone: the commands, one line each.
std::string short_usage(const CLI::App& app);

// --other-precision, --amax-margin and --keep-unscaled of run, check and plan.
struct ScaledArgs {
  std::string other = "bfloat16";
  int amax_margin = 0;
  std::vector<std::string> keep_unscaled;  // NODE,... (repeatable)
};
void add_scaled_options(CLI::App& cmd, ScaledArgs& a);
// The --keep-unscaled nodes; Error("--keep-unscaled") when given without a scaled `p`.
std::set<std::string> unscaled_nodes(const ScaledArgs& a, const Precision& p);

// Marks `cmd` as a command that runs models (or GEMM experiments) on OpenMP's threads:
// for those, how its threads wait matters, and main() starts the process again with a
// bounded spin when a core is busy (tools/fpguard/main.cpp). `runs_models(name)`: whether
// that command is one.
void mark_runs_models(CLI::App& cmd);
bool runs_models(const std::string& command);

void add_finfo(CLI::App& app);
void add_iinfo(CLI::App& app);
void add_round(CLI::App& app);
void add_inspect(CLI::App& app);
void add_run(CLI::App& app);  // `run` and `ops`
void add_gemm_error(CLI::App& app);
void add_accum(CLI::App& app);
void add_targets(CLI::App& app);
void add_check(CLI::App& app);  // `check` and `rules`
void add_plan(CLI::App& app);
void add_convert(CLI::App& app);
void add_merge(CLI::App& app);      // `merge`: the parts of a sharded check
void add_calibrate(CLI::App& app);  // `calibrate`: scaled FP8's activation amax, per shard

// --reference: fp32 or fp64.
DType parse_reference(const std::string& name);
// A model file (`path`, as given) and its external data files (m.external_files), by SHA-256:
// what part and amax files identify a model by.
void identify(const model::Model& m, const std::string& path, report::FileId& file,
              std::vector<report::FileId>& data);
// Every input set 0 .. total-1 in exactly one of `files` (sets[i]: the indices of
// files[i]'s): else an Error naming the file that repeats one, or (at `where`) the sets in
// none.
void require_all_sets(const std::vector<std::string>& files,
                      const std::vector<std::vector<std::size_t>>& sets, std::size_t total,
                      const std::string& where);
// check --amax FILE...: files `fpguard calibrate` wrote for `m` with this check's input
// options (`total` sets) and reference, whose sets are every set once; their maximum.
analysis::ActivationAmax read_amax(const std::vector<std::string>& files, const model::Model& m,
                                   const inputs::Options& in, std::size_t total, DType reference);

// What check and merge write: --html, --json (- for stdout: then no text), then the text;
// and how (--top, --threads, --quiet, --color).
struct CheckOutputs {
  std::string model{};  // as named on the command line (the JSON's "model")
  std::string json{}, html{}, color = "auto";
  std::size_t top = 10;
  bool quiet = false, progress = false;
  int threads = 0;
  report::Terminal terminal() const;
};
// The terminal of check, merge and plan: --color, --quiet, --progress (the bar even when
// stderr is not a terminal). Under mpirun, rank 0's (colour only when asked: its stdout is
// OpenMPI's pseudo-terminal, not mpirun's) and silent on the other ranks.
report::Terminal terminal(const std::string& color, bool quiet, bool progress);
// Registers --json, --html, --top, --threads, --quiet, --progress and --color.
void add_check_outputs(CLI::App& cmd, CheckOutputs& to);
void write_check_results(const CheckOutputs& to, const std::vector<analysis::Diagnosis>& results,
                         const report::Terminal& term);

}  // namespace fpguard::cli
