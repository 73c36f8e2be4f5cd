// The planner: which nodes must stay in float32 for the emulated model to meet a
// tolerance. Every pass is one analysis::check (three lockstep runs over all samples),
// so the search spends passes carefully: seed from the origins (their keep_fp32 sets),
// add the worst nodes by error while the tolerance fails, then prune.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>

#include "analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/limits.hpp"

namespace fpguard::analysis {

namespace {

struct Values {                                 // producers and readers of a graph's values
  std::map<std::string, std::size_t> producer;  // value -> node index
  std::map<std::string, std::vector<std::size_t>> readers;  // value -> node indices
  explicit Values(const model::Graph& g) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      for (const auto& o : g.nodes[i].outputs)
        if (!o.empty()) producer[o] = i;
      for (const auto& in : model::node_reads(g.nodes[i]))
        if (!in.empty()) readers[in].push_back(i);
    }
  }
};

// Each node's op type, by name (copied: a diagnosis it comes from may be replaced).
std::map<std::string, std::string> op_types(const Diagnosis& d) {
  std::map<std::string, std::string> out;
  for (const auto& n : d.nodes) out[n.name] = n.op_type;
  return out;
}

double worst_cosine(const std::vector<OutputVerdict>& v) {
  double c = 1;
  for (const auto& o : v) c = std::isnan(o.cosine) || std::isnan(c) ? NAN : std::min(c, o.cosine);
  return c;
}

// A score to compare failing plans: fewer non-finite outputs first, then cosine.
std::pair<std::uint64_t, double> badness(const Diagnosis& d) {
  std::uint64_t nonfinite = 0, outside = 0;
  for (const auto& o : d.outputs) nonfinite += o.nonfinite, outside += o.outside_tolerance;
  const double c = worst_cosine(d.outputs);
  return {nonfinite, (std::isnan(c) ? 2.0 : 1.0 - c) + static_cast<double>(outside)};
}

// A plan is acceptable when the tolerance holds and no node overflows or makes NaN on
// its own (an overflow the outputs happen to survive must still be covered; a constant
// or input beyond the range whose consumers absorb it is not a node's).
bool acceptable(const Diagnosis& d) {
  if (!d.pass) return false;
  return std::none_of(d.origins.begin(), d.origins.end(), [](const Origin& o) {
    const bool node = o.op_type != "initializer" && o.op_type != "Constant" && o.op_type != "input";
    return node && (o.kind == OriginKind::overflow || o.kind == OriginKind::nan);
  });
}

// A scaled precision: each GEMM the search keeps in float32 (not forced) runs unscaled in
// the other precision instead where the tolerance still holds (cheaper than float32: the
// `keep_unscaled` fix). `run` checks a keep set with `unscaled` as it stands; nullopt when
// out of passes. Moves the nodes from keep to unscaled; best becomes the last passing check.
void prefer_unscaled(const PlanOptions& o, const std::set<std::string>& forced,
                     std::set<std::string>& keep, std::set<std::string>& unscaled, Diagnosis& best,
                     const std::function<std::optional<Diagnosis>(const std::set<std::string>&,
                                                                  const PlanStep&)>& run) {
  if (!o.check.scaled || o.check.precision.name == "float32") return;
  // (Not pointers into best's records: best is replaced as nodes move.)
  const auto ops = op_types(best);
  for (const auto& n : std::vector<std::string>(keep.begin(), keep.end())) {
    const auto r = ops.find(n);
    if (forced.count(n) || r == ops.end() ||
        (r->second != "MatMul" && r->second != "Gemm" && r->second != "Conv"))
      continue;
    std::set<std::string> trial = keep;
    trial.erase(n);
    unscaled.insert(n);
    auto t = run(trial, {.kind = PlanStepKind::pruning, .node = n});
    if (!t) {
      unscaled.erase(n);
      return;
    }
    if (!acceptable(*t)) {
      unscaled.erase(n);
      continue;
    }
    keep = std::move(trial);
    best = std::move(*t);
  }
}

// The float32 reference maxima of every floating value a check recorded (value -> absmax).
std::map<std::string, double> reference_absmax(const Diagnosis& d) {
  std::map<std::string, double> absmax;
  for (const auto& r : d.nodes)
    for (const auto& t : r.outputs)
      if (t.floating) absmax[t.name] = t.ref_absmax;
  return absmax;
}

// The input of `node` a scale rewrite scales: its floating non-constant input with the
// largest range ("" when none).
std::string widest_input(const model::Graph& g, const model::Node& node,
                         const std::map<std::string, double>& absmax) {
  std::string value;
  double best = -1;
  for (const auto& in : node.inputs) {
    if (in.empty() || g.find_initializer(in)) continue;
    const auto it = absmax.find(in);
    const double a = it != absmax.end() ? it->second : 0;
    if (a > best) best = a, value = in;
  }
  return value;
}

// The relative RMS error of `got` against `truth`, or nullopt where they agree within
// float32 rounding (relative RMS <= 1e-5, nothing non-finite): a rewrite that keeps the
// float32 function.
std::optional<double> function_change(const std::vector<NamedValue>& truth,
                                      const std::vector<NamedValue>& got) {
  for (std::size_t i = 0; i < got.size() && i < truth.size(); ++i) {
    const ValueComparison c = compare_values(truth[i].value, got[i].value);
    if (!c.same_form) return INFINITY;
    if (c.all.overflow + c.all.nan > 0 || !(c.all.nrmse() <= 1e-5)) return c.all.nrmse();
  }
  return std::nullopt;
}

// The plan's islands: its float32 nodes connected through values (looking through data
// movement), each within its graph (a body node joins the islands of its body).
void find_islands(Plan& p, const model::Model& m, const std::set<std::string>& fp32) {
  std::map<std::string, std::pair<const model::Node*, const model::Graph*>> located;
  std::map<const model::Node*, std::string> path_of;
  exec::for_each_node(m.graph, m.path.string(),
                      [&](const model::Node& n, const std::string& path, const model::Graph& g) {
                        located[path] = {&n, &g};
                        path_of[&n] = path;
                      });
  std::map<const model::Graph*, Values> values;
  std::map<std::string, std::string> parent;
  std::function<std::string(const std::string&)> root = [&](const std::string& x) {
    auto& px = parent[x];
    if (px.empty() || px == x) return px = x;
    return px = root(px);
  };
  for (const auto& n : p.fp32_nodes) {
    root(n);
    const auto [node, graph] = located.at(n);
    const Values& vals = values.try_emplace(graph, *graph).first->second;
    std::vector<std::string> frontier(node->inputs);
    std::set<std::string> seen;
    while (!frontier.empty()) {
      const std::string v = frontier.back();
      frontier.pop_back();
      if (v.empty() || !seen.insert(v).second) continue;
      auto pr = vals.producer.find(v);
      if (pr == vals.producer.end()) continue;
      const auto& src = graph->nodes[pr->second];
      const auto* info = exec::Registry::global().find(src.op_type);
      if (const std::string& name = path_of.at(&src); fp32.count(name))
        parent[root(name)] = root(n);
      else if (info && info->kind == exec::OpKind::data_movement)
        frontier.insert(frontier.end(), src.inputs.begin(), src.inputs.end());
    }
  }
  std::map<std::string, std::size_t> island_of;
  for (const auto& n : p.fp32_nodes) {
    const std::string r = root(n);
    auto [it, fresh] = island_of.try_emplace(r, p.islands.size());
    if (fresh) p.islands.push_back({{}, p.reasons.count(n) ? p.reasons[n] : Reason{}});
    p.islands[it->second].nodes.push_back(n);
  }
}

// One search: the plan under construction, the model it applies to (p.rewritten: scale
// rewrites replace it), the float32 set and what the search added to it.
struct Planner {
  const model::Model& original;
  const std::vector<std::vector<NamedValue>>& samples;
  const PlanOptions& o;
  Plan p{};
  std::vector<std::string> names{};                // main-graph names by index
  std::map<std::string, std::size_t> position{};   // every node's position by path
  std::set<std::string> keep = o.check.keep_fp32;  // the float32 nodes
  const std::set<std::string> forced = keep;
  std::set<std::string> unscaled = o.check.keep_unscaled;
  std::vector<std::string> added{};  // in the order the search added them
  std::vector<NamedValue> truth{};   // the original's float32 outputs (scale rewrites')
  std::set<std::string> scale_tried{};
  // The original's main-graph names: a node a scale rewrite added (a multiply-back before a
  // reader without a homogeneity degree, or before an output) is not scaled again.
  const std::vector<std::string> original_names = display_names(original);

  Planner(const model::Model& m, const std::vector<std::vector<NamedValue>>& s,
          const PlanOptions& opts);
  model::Model& m() { return p.rewritten; }
  void index_nodes();
  Diagnosis check_pass(const CheckOptions& c) const {
    return o.check_pass ? o.check_pass(p.rewritten, c) : check(p.rewritten, samples, c);
  }
  // A pass: the model with `s` in float32 (and `unscaled` as it stands).
  Diagnosis run(const std::set<std::string>& s, const PlanStep& what);
  // The Casts convert adds with `s` in float32, on the model as it stands.
  std::size_t casts(const std::set<std::string>& s) const;
  bool add(const std::string& n, const Reason& why);
  // The float32 outputs of a model on the first input set (the rewrite's yardstick).
  std::vector<NamedValue> outputs32(const model::Model& mm) const;
  bool try_scale(const Origin& org, const Diagnosis& d);
  bool adopt_scale(model::Model rewritten, const Scaled& s, const std::string& value,
                   const Origin& org);
  // Adds to the float32 set what `d` asks for: origins' keep_fp32 sets, else the largest
  // accuracy contributions or local errors, `batch` at a time (doubled on each stall).
  bool grow(const Diagnosis& d, std::size_t& batch);
  std::size_t grow_accuracy(const Diagnosis& d, std::size_t batch);
  // Returns what the search added to low precision where the tolerance still holds.
  void prune(Diagnosis& best);
  void finish(const Diagnosis& best, const std::set<std::string>& best_keep);
};

Planner::Planner(const model::Model& m, const std::vector<std::vector<NamedValue>>& s,
                 const PlanOptions& opts)
    : original(m), samples(s), o(opts) {
  p.model = original.path.string();
  p.precision = o.check.scaled ? o.check.scaled->name : o.check.precision.name;
  p.min_cosine = o.check.min_cosine;
  p.atol = o.check.atol;
  p.rtol = o.check.rtol;
  p.rewritten = original;  // the model the plan applies to (scale rewrites accumulate)
  index_nodes();
  for (const auto& k : forced) p.reasons[k] = Reason{.kind = KeepReason::forced};
  if (o.scaler) truth = outputs32(original);
}

void Planner::index_nodes() {  // main-graph names by index; every node's position by name
  names = display_names(m());
  const auto paths = exec::node_paths(m());
  position.clear();
  for (std::size_t pos = 0; pos < paths.size(); ++pos) position[paths[pos]] = pos;
}

Diagnosis Planner::run(const std::set<std::string>& s, const PlanStep& what) {
  if (o.progress) o.progress(p.passes + 1, what);
  CheckOptions c = o.check;
  c.keep_fp32 = s;
  // A GEMM the search keeps in float32 is not also unscaled (the check refuses that, as
  // it refuses one the user names in both).
  c.keep_unscaled.clear();
  for (const auto& n : unscaled)
    if (!s.count(n) || forced.count(n)) c.keep_unscaled.insert(n);
  ++p.passes;
  return check_pass(c);
}

std::size_t Planner::casts(const std::set<std::string>& s) const {
  if (!o.count_casts) return 0;
  CheckOptions c = o.check;
  c.keep_fp32 = s;
  return o.count_casts(p.rewritten, c);
}

bool Planner::add(const std::string& n, const Reason& why) {
  if (!position.count(n) || !keep.insert(n).second) return false;
  p.reasons[n] = why;
  added.push_back(n);
  return true;
}

std::vector<NamedValue> Planner::outputs32(const model::Model& mm) const {
  exec::RunOptions ro;
  ro.threads = o.check.threads;
  return exec::Executor(mm, ro).run_values(samples.front());
}

// An exact scale rewrite for a node's overflow, verified: the float32 model keeps its
// function (outputs within float32 rounding, relative RMS <= 1e-5) and the node no
// longer overflows in the format. On success the plan continues on the rewritten model.
bool Planner::try_scale(const Origin& org, const Diagnosis& d) {
  // (Scale rewrites apply to main-graph nodes: a body node's overflow is kept in float32.
  // An overflow at a multiply-back an earlier rewrite added would only move to the next
  // one: float32 covers it.)
  const auto at = std::find(names.begin(), names.end(), org.node);
  if (!o.scaler || at == names.end() ||
      std::find(original_names.begin(), original_names.end(), org.node) == original_names.end() ||
      !scale_tried.insert(org.node).second)
    return false;
  if (std::none_of(d.nodes.begin(), d.nodes.end(),
                   [&](const NodeRecord& r) { return r.name == org.node; }))
    return false;
  const auto& node = m().graph.nodes[at - names.begin()];
  const std::map<std::string, double> absmax = reference_absmax(d);
  const std::string value = widest_input(m().graph, node, absmax);
  if (value.empty()) return false;
  std::string why;
  auto rewritten = o.scaler(m(), value, absmax, &why);
  if (!rewritten) {
    p.refused.push_back(
        {.kind = RefusalKind::no_rewrite, .value = value, .node = org.node, .why = why});
    return false;
  }
  if (const auto error = function_change(truth, outputs32(rewritten->first))) {
    p.refused.push_back({.kind = RefusalKind::changes_function,
                         .value = value,
                         .node = org.node,
                         .k = rewritten->second.k,
                         .error = *error});
    return false;
  }
  return adopt_scale(std::move(rewritten->first), rewritten->second, value, org);
}

// Continues on `rewritten` when the node no longer overflows there (one pass); else keeps
// the model as it was and records the refusal.
bool Planner::adopt_scale(model::Model rewritten, const Scaled& s, const std::string& value,
                          const Origin& org) {
  model::Model saved = std::move(m());
  m() = std::move(rewritten);
  index_nodes();
  CheckOptions c = o.check;
  c.keep_fp32 = keep;
  ++p.passes;
  if (o.progress) o.progress(p.passes, {.kind = PlanStepKind::scaling, .node = org.node});
  const Diagnosis t = check_pass(c);
  const bool gone = std::none_of(t.origins.begin(), t.origins.end(), [&](const Origin& x) {
    return x.node == org.node && (x.kind == OriginKind::overflow || x.kind == OriginKind::nan);
  });
  if (!gone) {
    p.refused.push_back(
        {.kind = RefusalKind::still_overflows, .value = value, .node = org.node, .k = s.k});
    m() = std::move(saved);
    index_nodes();
    return false;
  }
  p.scaled.push_back(s);
  p.scaled.back().node = org.node;
  return true;
}

bool Planner::grow(const Diagnosis& d, std::size_t& batch) {
  bool grew = false;
  // Origins: their keep_fp32 sets (overflow/NaN/underflow first: they must be covered).
  for (const auto& org : d.origins) {
    if (org.kind == OriginKind::accuracy) continue;
    for (const auto& n : org.keep_fp32)
      grew |= add(n, {.kind = n == org.node ? KeepReason::origin : KeepReason::reads_origin,
                      .origin = org.node,
                      .origin_kind = org.kind});
  }
  if (grew) return true;
  // Accuracy: the origins ranked by contribution, else the largest local errors.
  const std::size_t n_added = grow_accuracy(d, batch);
  batch *= 2;  // stalls escalate: 1, 2, 4, ... nodes per pass
  return n_added > 0;
}

std::size_t Planner::grow_accuracy(const Diagnosis& d, std::size_t batch) {
  std::size_t n_added = 0;
  for (const auto& org : d.origins)
    if (org.kind == OriginKind::accuracy && n_added < batch)
      for (const auto& n : org.keep_fp32)
        if (add(n, {.kind = KeepReason::accuracy,
                    .origin = org.node,
                    .origin_kind = org.kind,
                    .error = org.contribution}))
          ++n_added;
  if (n_added > 0) return n_added;
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& r : d.nodes) {
    if (!r.emulated) continue;
    double e = 0;
    for (const auto& t : r.outputs)
      if (t.floating && t.local.finite) e = std::max(e, t.local.nrmse());
    if (e > 0) ranked.push_back({e, r.name});
  }
  std::sort(ranked.rbegin(), ranked.rend());
  for (const auto& [e, n] : ranked) {
    if (n_added >= batch) break;
    if (add(n, {.kind = KeepReason::largest_error, .error = e})) ++n_added;
  }
  return n_added;
}

// Last added first (the early seeds are the ones the origins demand); with fewest_casts,
// only where the Casts do not grow.
void Planner::prune(Diagnosis& best) {
  std::optional<std::size_t> kept_casts;  // casts(keep), counted once per configuration
  for (auto it = added.rbegin(); it != added.rend() && p.passes < o.max_passes; ++it) {
    if (!keep.count(*it)) continue;
    std::set<std::string> trial = keep;
    trial.erase(*it);
    Diagnosis t = run(trial, {.kind = PlanStepKind::pruning, .node = *it});
    if (!acceptable(t)) continue;
    if (o.objective == Objective::fewest_casts) {
      if (!kept_casts) kept_casts = casts(keep);
      const std::size_t n = casts(trial);
      if (n > *kept_casts) continue;
      kept_casts = n;
    }
    keep = std::move(trial);
    best = std::move(t);
    p.reasons.erase(*it);
  }
  prefer_unscaled(
      o, forced, keep, unscaled, best, [&](const std::set<std::string>& s, const PlanStep& what) {
        return p.passes < o.max_passes ? std::optional<Diagnosis>(run(s, what)) : std::nullopt;
      });
}

// The plan's fields from the best check found and its float32 set.
void Planner::finish(const Diagnosis& best, const std::set<std::string>& best_keep) {
  p.meets = acceptable(best);
  p.final_outputs = best.outputs;
  p.final_check = best;
  p.fp32_nodes.assign(best_keep.begin(), best_keep.end());
  for (const auto& n : unscaled)
    if (!o.check.keep_unscaled.count(n)) p.unscaled_nodes.push_back(n);
  for (auto* v : {&p.fp32_nodes, &p.unscaled_nodes})
    std::sort(v->begin(), v->end(),
              [&](const auto& a, const auto& b) { return position[a] < position[b]; });
  for (auto it = p.reasons.begin(); it != p.reasons.end();)
    it = best_keep.count(it->first) || unscaled.count(it->first) ? std::next(it)
                                                                 : p.reasons.erase(it);
  for (const auto& r : best.nodes) {  // floating compute nodes (kept by name or op type too)
    const auto* info = exec::Registry::global().find(r.op_type);
    if (std::any_of(r.outputs.begin(), r.outputs.end(),
                    [](const TensorRecord& t) { return t.floating; }) &&
        info && info->kind == exec::OpKind::compute)
      ++p.float_nodes, p.low_nodes += r.emulated;
  }
  p.casts = casts(best_keep);
  find_islands(p, p.rewritten, best_keep);
}

// Whether `org` is an overflow of a node (not of a constant or an input).
bool node_overflow(const Origin& org) {
  return org.kind == OriginKind::overflow && org.op_type != "initializer" &&
         org.op_type != "Constant" && org.op_type != "input";
}

}  // namespace

Plan plan(const model::Model& original, const std::vector<std::vector<NamedValue>>& samples,
          const PlanOptions& o) {
  Planner pl(original, samples, o);
  Diagnosis d = pl.run(pl.keep, {.kind = PlanStepKind::as_is});
  std::set<std::string> best_keep = pl.keep;
  Diagnosis best = d;
  std::size_t batch = 1;
  while (!acceptable(d) && pl.p.passes < o.max_passes) {
    // Overflows an exact power-of-two scaling removes: preferred to float32 islands.
    if (std::any_of(d.origins.begin(), d.origins.end(), [&](const Origin& org) {
          return node_overflow(org) && pl.try_scale(org, d);
        })) {
      // A new model: earlier diagnoses no longer apply.
      d = pl.run(pl.keep, {.kind = PlanStepKind::after_scaling});
      best = d, best_keep = pl.keep;
      continue;
    }
    if (!pl.grow(d, batch)) break;  // nothing left in low precision
    d = pl.run(pl.keep, {.kind = PlanStepKind::growing, .fp32 = pl.keep.size()});
    if (acceptable(d) || badness(d) < badness(best)) best = d, best_keep = pl.keep;
  }
  if (acceptable(d)) {
    best = d;
    pl.prune(best);
    best_keep = pl.keep;
  }
  pl.finish(best, best_keep);
  return std::move(pl.p);
}

}  // namespace fpguard::analysis
