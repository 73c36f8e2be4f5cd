// `fpguard merge PART...`: the parts of a sharded check (check --shard I/N --json PART)
// merged into the diagnosis one check over all input sets gives (docs/scale.md), from the
// parts alone (the model file only where something runs it or compares its weights). Parts
// of different checks, input sets in two parts, and missing sets are refused.
#include <algorithm>
#include <exception>
#include <iostream>
#include <map>

#include "cli.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/inputs.hpp"
#include "fpguard/io.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/model.hpp"
#include "fpguard/report.hpp"

namespace fpguard::cli {

namespace {

struct MergeArgs {
  std::vector<std::string> parts;
  std::string model, reference_model, inputs;
  CheckOutputs out;  // --json, --html, --top, --threads, --quiet, --color
};

// The model of the parts, from `path` (or the one they recorded), verified by SHA-256: for
// what needs the file itself (accuracy origins run it; a reference model's rules compare
// weights).
model::Model load_verified(const std::string& path, const report::FileId& id,
                           const std::vector<report::FileId>& data, const std::string& flag) {
  const std::string file = path.empty() ? id.path : path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw Error(file,
                "cannot be read: merge needs this model here (" + flag + " names where it is now)");
  if (sha256_file(file) != id.sha256)
    throw Error(file, "is not the model the parts were checked with (its sha256 differs; " + flag +
                          " names the right file)");
  model::Model m = model::load(file);
  bool same = m.external_files.size() == data.size();
  for (std::size_t i = 0; same && i < data.size(); ++i)
    same = sha256_file(m.external_files[i]) == data[i].sha256;
  if (!same) throw Error(file, "its external data is not what the parts were checked with");
  return m;
}

// The first input set (set 0), read again as the check read it and verified by SHA-256.
std::vector<NamedValue> first_set(const MergeArgs& a, const std::vector<report::CheckPart>& parts,
                                  const model::Model& m) {
  for (const auto& p : parts) {
    const auto& sets = p.checks.front().state.sets;
    if (sets.empty() || sets.front() != 0) continue;
    inputs::Options o = p.inputs;
    const std::string dir = a.inputs.empty() ? o.inputs : a.inputs;
    o.inputs = (std::filesystem::path(dir) / p.set_names.front()).string();
    std::vector<NamedValue> values;
    try {
      values = inputs::gather(o, m, 0);
    } catch (const Error& e) {
      throw Error(e.where(), e.problem() +
                                 " (merge reads input set 0 again for the accuracy "
                                 "origins; --inputs names the directory of sets)");
    }
    if (inputs::set_sha256(values) != p.first_set_sha256)
      throw Error(o.inputs,
                  "is not the input set 0 the parts were checked with (its sha256 "
                  "differs; --inputs names the directory of sets)");
    return values;
  }
  throw Error("merge", "no part holds input set 0");
}

// The model, from `path` (or where the parts recorded it), verified, its nodes named.
model::Model load_named(const std::string& path, const report::FileId& id,
                        const std::vector<report::FileId>& data, const std::string& flag) {
  model::Model m = load_verified(path, id, data, flag);
  analysis::name_nodes(m);
  return m;
}

// The parts, read side by side on up to `threads` threads (0: the cores this process may
// use), and the first one's graph (their hashes agree: the same model). Errors are
// reported as reading them one by one would: the first part that cannot be read or is of
// another check, then the first malformed one, then the sets (none missing, none twice),
// then the graph.
std::pair<std::vector<report::CheckPart>, model::Model> read_parts(
    const std::vector<std::string>& files, int threads) {
  std::vector<report::CheckPartFile> read(files.size());
  std::vector<std::exception_ptr> unreadable(files.size());
  parallel_tasks(files.size(), threads, [&](std::size_t i) {
    try {  // (every exception kept, out of memory included, and reported in order below)
      read[i] = report::read_check_part(files[i]);
    } catch (...) {
      unreadable[i] = std::current_exception();
    }
  });
  // The graph is loaded on this thread alone: in the parallel loop, the other threads
  // would spin at its end while the first loads it (libgomp's default wait).
  release_idle_threads();
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (unreadable[i]) std::rethrow_exception(unreadable[i]);
    report::require_same_check(read.front().identity, files.front(), read[i].identity, files[i]);
  }
  std::vector<report::CheckPart> parts;
  for (auto& r : read) {
    if (r.malformed) std::rethrow_exception(r.malformed);
    parts.push_back(std::move(*r.part));
  }
  std::vector<std::vector<std::size_t>> sets;
  for (const auto& p : parts) sets.push_back(p.checks.front().state.sets);
  require_all_sets(files, sets, parts.front().total_sets, "merge");
  model::Model graph = model::load_graph_bytes(parts.front().graph, files.front());
  return {std::move(parts), std::move(graph)};
}

void merge(const MergeArgs& a) {
  if (!a.out.html.empty()) check_output_file(a.parts.front(), a.out.html, "--html");
  if (!a.out.json.empty() && a.out.json != "-")
    for (const auto& p : a.parts) check_not_same_file(p, a.out.json, "--json");
  // (not a structured binding: lambdas below use both, which clang 14 cannot capture)
  const auto read = read_parts(a.parts, a.out.threads);
  const auto& parts = read.first;
  const auto& graph = read.second;
  const report::CheckPart& head = parts.front();
  // The model file itself only for what runs it or compares its weights: accuracy
  // origins, and a reference model's rules.
  std::optional<model::Model> m, original;
  auto full_model = [&]() -> const model::Model& {
    if (!m) m = load_named(a.model, head.model, head.data, "--model");
    return *m;
  };
  if (head.reference_model)
    original = load_verified(a.reference_model, *head.reference_model, head.reference_data,
                             "--reference-model");
  const report::Terminal term = a.out.terminal();
  std::vector<analysis::Diagnosis> results;
  bool all_pass = true;
  for (std::size_t k = 0; k < head.checks.size(); ++k) {
    analysis::CheckState state = parts.front().checks[k].state;  // (first_set reads the sets)
    for (std::size_t p = 1; p < parts.size(); ++p) analysis::merge(state, parts[p].checks[k].state);
    analysis::CheckOptions o = head.checks[k].options;
    o.reference_model = original ? &*original : nullptr;
    o.threads = a.out.threads;
    auto set0 = [&] { return first_set(a, parts, graph); };
    auto d = original ? analysis::finish(full_model(), std::move(state), o, set0)
                      : analysis::finish(graph, std::move(state), o, full_model, set0);
    d.model = head.model.path;  // as the check named them
    if (head.reference_model) d.reference_model = head.reference_model->path;
    all_pass = all_pass && d.pass;
    results.push_back(std::move(d));
  }
  exit_code = all_pass ? 0 : 1;
  CheckOutputs to = a.out;
  to.model = head.model.path;
  write_check_results(to, results, term);
}

}  // namespace

void require_all_sets(const std::vector<std::string>& files,
                      const std::vector<std::vector<std::size_t>>& sets, std::size_t total,
                      const std::string& where) {
  std::map<std::size_t, std::size_t> owner;  // set -> file
  for (std::size_t p = 0; p < files.size(); ++p)
    for (const auto s : sets[p]) {
      if (s >= total)
        throw Error(files[p], "input set " + std::to_string(s) + " is out of range (" +
                                  std::to_string(total) + " sets)");
      if (auto [it, fresh] = owner.emplace(s, p); !fresh)
        throw Error(files[p], "input set " + std::to_string(s) + " is also in " +
                                  files[it->second] +
                                  " (the same shard given twice, or overlapping shards)");
    }
  std::vector<std::size_t> missing;
  for (std::size_t s = 0; s < total; ++s)
    if (!owner.count(s)) missing.push_back(s);
  if (missing.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < missing.size() && i < 8; ++i)
    list += (i ? ", " : "") + std::to_string(missing[i]);
  if (missing.size() > 8) list += ", ...";
  throw Error(where, std::to_string(missing.size()) + " of " + std::to_string(total) +
                         " input sets are in no part (" + list + "): a shard is missing");
}

void add_merge(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  auto* cmd = app.add_subcommand(
      "merge", "Merge the parts of a sharded check (check --shard I/N) into its diagnosis");
  cmd->add_option("parts", a->parts, "Part files written by check --shard I/N --json PART")
      ->required();
  cmd->add_option("--model", a->model,
                  "The model, when it is no longer where the parts recorded it and merge needs "
                  "it: to measure accuracy origins, or with --reference-model (verified by "
                  "sha256)");
  cmd->add_option("--reference-model", a->reference_model,
                  "The reference model, likewise (with check --reference-model)");
  cmd->add_option("--inputs", a->inputs,
                  "The directory of input sets, likewise (read only for accuracy origins)");
  add_check_outputs(*cmd, a->out);
  cmd->callback([a] { merge(*a); });
}

}  // namespace fpguard::cli
