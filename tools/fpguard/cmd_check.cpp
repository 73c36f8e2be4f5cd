// `fpguard check`: the main job. Runs the model in lockstep (float32 reference, emulated
// precision, local runs), prints a verdict, the origins of trouble with their fixes, the
// worst nodes and the risk rules; --json writes the whole diagnosis. `fpguard rules`
// lists the rules.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli.hpp"
#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/io.hpp"
#include "fpguard/model.hpp"
#include "inputs.hpp"

namespace fpguard::cli {

namespace {

using json = nlohmann::ordered_json;

struct CheckArgs {
  std::string model;
  InputArgs in;
  std::vector<std::string> precisions, keep, keep_ops, disabled;
  std::string reference = "fp32", accumulate, accumulation = "sequential", json_file, target;
  std::size_t samples = 1, top = 10;
  std::optional<double> atol, rtol;
  double min_cosine = 0.999;
  bool saturate = false, quiet = false;
  int threads = 0;
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

json comparison_json(const analysis::Comparison& c) {
  return {{"count", c.count},
          {"max_abs_error", json_number(c.max_abs)},
          {"max_rel_error", json_number(c.max_rel)},
          {"mean_rel_error", json_number(c.mean_rel())},
          {"cosine", json_number(c.cosine())},
          {"snr_db", json_number(c.snr_db())},
          {"overflow", c.overflow},
          {"nan", c.nan},
          {"underflow", c.underflow}};
}

json diagnosis_json(const analysis::Diagnosis& d) {
  json outputs = json::array();
  for (const auto& o : d.outputs)
    outputs.push_back({{"name", o.name},
                       {"max_abs_error", json_number(o.max_abs_error)},
                       {"max_rel_error", json_number(o.max_rel_error)},
                       {"cosine", json_number(o.cosine)},
                       {"nonfinite", o.nonfinite},
                       {"outside_tolerance", o.outside_tolerance},
                       {"pass", o.pass}});
  json origins = json::array();
  for (const auto& o : d.origins) {
    json j = {{"node", o.node},
              {"op_type", o.op_type},
              {"kind", std::string(analysis::to_string(o.kind))},
              {"outputs", o.outputs},
              {"message", o.message},
              {"suggestions", o.suggestions},
              {"keep_fp32", o.keep_fp32}};
    if (o.kind == analysis::OriginKind::accuracy) j["contribution"] = json_number(o.contribution);
    origins.push_back(std::move(j));
  }
  json nodes = json::array();
  for (const auto& n : d.nodes) {
    json outs = json::array();
    for (const auto& t : n.outputs) {
      if (!t.floating) continue;
      json hist = json::object();
      for (const auto& [e, c] : t.exponent_histogram) hist[std::to_string(e)] = c;
      outs.push_back({{"name", t.name},
                      {"ref_min", json_number(t.ref_min)},
                      {"ref_max", json_number(t.ref_max)},
                      {"ref_absmax", json_number(t.ref_absmax)},
                      {"headroom_bits", json_number(t.headroom_bits)},
                      {"overflow", t.propagated.overflow},
                      {"nan", t.propagated.nan},
                      {"underflow", t.propagated.underflow},
                      {"subnormal", t.propagated.subnormal},
                      {"local", comparison_json(t.local)},
                      {"propagated", comparison_json(t.propagated)},
                      {"exponent_histogram", hist}});
    }
    nodes.push_back({{"name", n.name},
                     {"op_type", n.op_type},
                     {"precision", n.precision},
                     {"inputs_nonfinite", n.inputs_nonfinite},
                     {"outputs", outs}});
  }
  json rules = json::array();
  for (const auto& r : d.rules)
    rules.push_back({{"id", r.id}, {"node", r.node}, {"message", r.message}});
  return {{"schema_version", 1},
          {"model", d.model},
          {"precision", d.precision},
          {"reference", d.reference},
          {"accumulate", d.accumulate},
          {"samples", d.samples},
          {"verdict", d.pass ? "pass" : "fail"},
          {"outputs", outputs},
          {"origins", origins},
          {"nodes", nodes},
          {"rules", rules},
          {"notes", d.notes}};
}

std::string g4(double v) {
  return fmt::format("{:.4g}", v);
}

void print_text(const analysis::Diagnosis& d, const CheckArgs& a) {
  std::ostream& out = std::cout;
  // The verdict first.
  std::vector<std::string> failing;
  for (const auto& o : d.outputs)
    if (!o.pass) failing.push_back(o.name);
  out << (d.pass ? "PASS" : "FAIL") << "  " << d.model << " in " << d.precision
      << (d.accumulate != "float32" ? " accumulating in " + d.accumulate : "") << " (reference "
      << d.reference << ", " << d.samples << " input set" << (d.samples > 1 ? "s" : "") << ")\n";
  for (const auto& o : d.outputs) {
    std::string why;
    if (o.nonfinite)
      why = fmt::format("{} non-finite values where the reference is finite; ", o.nonfinite);
    if (o.outside_tolerance)
      why += fmt::format("{} values outside atol/rtol; ", o.outside_tolerance);
    out << fmt::format("  {} {}: cosine {:.6f}{}, max abs error {}, max rel error {}{}\n",
                       o.pass ? "ok  " : "FAIL", o.name, o.cosine,
                       o.cosine < a.min_cosine ? fmt::format(" < {}", a.min_cosine) : "",
                       g4(o.max_abs_error), g4(o.max_rel_error),
                       why.empty() ? "" : " (" + why.substr(0, why.size() - 2) + ")");
  }
  for (const auto& n : d.notes) out << "  note: " << n << "\n";

  out << "\nOrigins (where the trouble starts):\n";
  if (d.origins.empty()) out << "  none\n";
  for (std::size_t i = 0; i < d.origins.size(); ++i) {
    const auto& o = d.origins[i];
    out << fmt::format("  {}. [{}] {}\n", i + 1, analysis::to_string(o.kind), o.message);
    for (const auto& s : o.suggestions) out << "       fix: " << s << "\n";
  }

  // The worst nodes: own trouble first, then inherited trouble, then local error.
  std::set<std::string> origin_nodes;
  for (const auto& o : d.origins) origin_nodes.insert(o.node);
  struct Row {
    const analysis::NodeRecord* n;
    bool origin;
    std::uint64_t own, inherited;
    double local, propagated, headroom;
  };
  std::vector<Row> rows;
  for (const auto& n : d.nodes) {
    Row r{&n, origin_nodes.count(n.name) > 0, 0, 0, 0, 0, INFINITY};
    bool floating = false;
    for (const auto& t : n.outputs) {
      if (!t.floating) continue;
      floating = true;
      r.own += t.local.overflow + t.local.nan;
      r.inherited += t.propagated.overflow + t.propagated.nan;
      r.local = std::max(r.local, t.local.nrmse());
      r.propagated = std::max(r.propagated, t.propagated.nrmse());
      r.headroom = std::min(r.headroom, t.headroom_bits);
    }
    if (floating && n.emulated) rows.push_back(r);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    if (x.origin != y.origin) return x.origin;
    if (x.own != y.own) return x.own > y.own;
    if (x.inherited != y.inherited) return x.inherited > y.inherited;
    return x.local > y.local;
  });
  if (rows.size() > a.top) rows.resize(a.top);
  if (!rows.empty()) {
    std::size_t w = 4;
    for (const auto& r : rows) w = std::max(w, r.n->name.size() + 2);
    w = std::min<std::size_t>(w, 48);
    out << fmt::format("\nWorst nodes (top {}):\n  {:<{}}  {:<18} {:>9} {:>10} {:>10} {:>11}\n",
                       rows.size(), "node", w, "op", "headroom", "overflow", "local", "propagated");
    for (const auto& r : rows)
      out << fmt::format("  {:<{}}  {:<18} {:>9} {:>10} {:>10} {:>11}\n",
                         (r.origin ? "* " : "  ") + r.n->name, w, r.n->op_type,
                         std::isinf(r.headroom) ? "-" : fmt::format("{:.1f}b", r.headroom),
                         r.inherited, g4(r.local), g4(r.propagated));
    out << "  (* origin; headroom: log2(format max / reference absmax); overflow: inf/NaN or "
           "saturated values in the emulated run; local / propagated: relative RMS error the "
           "node adds on its own / of the emulated run)\n";
  }
  if (!d.rules.empty()) {
    // Findings on origins and on the worst nodes first.
    std::set<std::string> shown_nodes = origin_nodes;
    for (const auto& r : rows) shown_nodes.insert(r.n->name);
    std::vector<const analysis::RuleFinding*> findings;
    for (const auto& r : d.rules) findings.push_back(&r);
    std::stable_sort(findings.begin(), findings.end(), [&](const auto* x, const auto* y) {
      return shown_nodes.count(x->node) > shown_nodes.count(y->node);
    });
    out << "\nRisk rules (" << d.rules.size() << "; turn off with --disable-rule ID):\n";
    for (std::size_t i = 0; i < findings.size(); ++i) {
      if (i == a.top) {
        out << fmt::format("  ... and {} more (--json has all)\n", findings.size() - a.top);
        break;
      }
      out << fmt::format("  [{}] {}: {}\n", findings[i]->id, findings[i]->node,
                         findings[i]->message);
    }
  }
}

class Progress {
 public:
  Progress(bool on, std::string label) : on_(on), label_(std::move(label)) {}
  ~Progress() {
    if (on_ && drawn_) std::cerr << "\r\033[K" << std::flush;
  }
  void operator()(std::size_t done, std::size_t total) {
    if (!on_ || total == 0) return;
    const int pct = static_cast<int>(100 * done / total);
    if (pct == last_) return;
    last_ = pct;
    drawn_ = true;
    const int filled = pct * 30 / 100;
    std::cerr << "\r" << label_ << " [" << std::string(filled, '#') << std::string(30 - filled, '.')
              << "] " << pct << "%" << std::flush;
  }

 private:
  bool on_;
  std::string label_;
  int last_ = -1;
  bool drawn_ = false;
};

void check(const CheckArgs& a) {
  DType reference = DType::float32;
  if (a.reference == "fp64" || a.reference == "float64")
    reference = DType::float64;
  else if (a.reference != "fp32" && a.reference != "float32")
    throw Error("--reference " + a.reference, "expected fp32 or fp64");
  std::optional<Format> accumulate;
  if (!a.accumulate.empty()) accumulate = parse_format(a.accumulate);
  const AccumulationOrder order =
      parse_accumulation_order(a.accumulation).value_or(AccumulationOrder{});
  if (order.kind == AccumulationOrder::Kind::library && accumulate && accumulate->name != "float32")
    throw Error("--accumulation library",
                "oneDNN's sgemm accumulates in float32, not " + accumulate->name);
  auto precisions = split_commas(a.precisions);
  std::vector<Format> formats;
  for (const auto& p : precisions) formats.push_back(parse_format(p));
  if (!a.target.empty()) {
    // --target picks the precision when none is given and refuses what it cannot run.
    const Target& t = find_target(a.target);
    if (formats.empty()) formats.push_back(recommended_format(t));
    for (const auto& f : formats) require_native(t, f);
  }
  if (formats.empty()) throw Error("--precision", "give at least one format (or --target)");

  model::Model m = model::load(a.model);
  analysis::name_nodes(m);
  std::vector<std::string> generated;
  const auto samples = gather_samples(a.in, m, a.samples, generated);

  std::vector<analysis::Diagnosis> results;
  for (const auto& f : formats) {
    analysis::CheckOptions o;
    o.precision = f;
    for (const auto& k : split_commas(a.keep)) o.keep_fp32.insert(k);
    for (const auto& k : split_commas(a.keep_ops)) o.keep_fp32_ops.insert(k);
    for (const auto& r : split_commas(a.disabled)) o.disabled_rules.insert(r);
    o.round_options.saturate = a.saturate;
    o.accumulate = accumulate;
    o.accumulation = order;
    o.reference = reference;
    o.min_cosine = a.min_cosine;
    o.atol = a.atol;
    o.rtol = a.rtol;
    o.threads = a.threads;
    Progress progress(!a.quiet && isatty(2), "check " + f.name);
    o.progress = [&progress](std::size_t d, std::size_t t) { progress(d, t); };
    auto d = analysis::check(m, samples, o);
    if (!generated.empty()) d.notes.insert(d.notes.begin(), generated_note(generated));
    results.push_back(std::move(d));
  }

  bool all_pass = true;
  for (const auto& d : results) all_pass = all_pass && d.pass;
  exit_code = all_pass ? 0 : 1;

  if (!a.json_file.empty()) {
    json j;
    if (results.size() == 1) {
      j = diagnosis_json(results[0]);
    } else {
      json checks = json::array();
      for (const auto& d : results) checks.push_back(diagnosis_json(d));
      j = {{"schema_version", 1},
           {"model", a.model},
           {"verdict", all_pass ? "pass" : "fail"},
           {"checks", checks}};
    }
    if (a.json_file == "-") {
      std::cout << j.dump(2) << "\n";
      return;
    }
    check_not_same_file(a.model, a.json_file, "--json");
    write_file_atomic(a.json_file, [&](std::ostream& out) { out << j.dump(2) << "\n"; });
  }
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (i) std::cout << "\n" << std::string(78, '-') << "\n";
    print_text(results[i], a);
  }
  if (results.size() > 1) {
    std::cout << "\n" << std::string(78, '-') << "\nSide by side:\n";
    std::cout << fmt::format("  {:<16} {:<7} {:>12} {:>8}\n", "precision", "verdict", "min cosine",
                             "origins");
    for (const auto& d : results) {
      double c = 1;
      for (const auto& o : d.outputs)
        c = std::isnan(o.cosine) || std::isnan(c) ? NAN : std::min(c, o.cosine);
      std::cout << fmt::format("  {:<16} {:<7} {:>12.6f} {:>8}\n", d.precision,
                               d.pass ? "PASS" : "FAIL", c, d.origins.size());
    }
  }
}

}  // namespace

void add_check(CLI::App& app) {
  auto a = std::make_shared<CheckArgs>();
  auto* cmd = app.add_subcommand(
      "check", "Find where a low-precision deployment of a model breaks, and why (main job)");
  cmd->add_option("model", a->model, "ONNX model")->required();
  cmd->add_option("--precision", a->precisions,
                  "Format(s) to check, e.g. float16 or float16,bfloat16,float8_e4m3fn")
      ->take_all();
  cmd->add_option("--target", a->target,
                  "Accelerator (fpguard targets): picks the precision when --precision is "
                  "absent, refuses formats it cannot run natively");
  add_input_options(*cmd, a->in);
  cmd->add_option("--samples", a->samples,
                  "Number of generated input sets (seeds SEED, SEED+1, ...; default 1)");
  cmd->add_option("--atol", a->atol, "Pass only if |v - r| <= atol + rtol |r| everywhere");
  cmd->add_option("--rtol", a->rtol, "See --atol");
  cmd->add_option("--min-cosine", a->min_cosine,
                  "Pass only if each output's cosine similarity is >= this (default 0.999)");
  cmd->add_option("--reference", a->reference,
                  "Reference run: fp32 (default) or fp64 (every floating node in float64)");
  cmd->add_option("--accumulate", a->accumulate,
                  "Format MatMul/Gemm/Conv and sum reductions accumulate in (default float32)");
  cmd->add_option("--accumulation", a->accumulation,
                  "Order of that accumulation: sequential (default), pairwise, blocked:K");
  cmd->add_option("--top", a->top, "Rows of the worst-node table (default 10)");
  cmd->add_option("--json", a->json_file, "Write the diagnosis as JSON to FILE (- for stdout)");
  cmd->add_option("--keep-fp32", a->keep, "Keep these nodes in float32 (NODE,...)")->take_all();
  cmd->add_option("--keep-fp32-ops", a->keep_ops, "Keep these op types in float32 (Pow,...)")
      ->take_all();
  cmd->add_option("--disable-rule", a->disabled, "Turn off risk rules by id (ID,...)")->take_all();
  cmd->add_flag("--saturate", a->saturate, "Overflow saturates to +-max (FP8 with scaling)");
  cmd->add_option("--threads", a->threads, "Threads (default: all cores)");
  cmd->add_flag("--quiet", a->quiet, "No progress bar");
  cmd->callback([a] { check(*a); });

  auto* rules = app.add_subcommand("rules", "List the risk rules of `fpguard check`");
  auto json_flag = std::make_shared<bool>(false);
  rules->add_flag("--json", *json_flag, "Print JSON");
  rules->callback([json_flag] {
    if (*json_flag) {
      json r = json::array();
      for (const auto& rule : analysis::rules())
        r.push_back({{"id", std::string(rule.id)}, {"rationale", std::string(rule.rationale)}});
      std::cout << json({{"schema_version", 1}, {"rules", r}}).dump(2) << "\n";
      return;
    }
    for (const auto& rule : analysis::rules())
      std::cout << fmt::format("{:<22} {}\n", rule.id, rule.rationale);
  });
}

}  // namespace fpguard::cli
