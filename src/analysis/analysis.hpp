// Internal to the analysis layer: what the lockstep run hands to origin finding and to
// the rules.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fpguard/analysis.hpp"

namespace fpguard::analysis {

// Where a value comes from, looking through data-movement nodes.
struct Source {
  enum Kind { emulated_node, float32_node, constant, graph_input } kind = graph_input;
  std::string name;                // node, initializer or input name
  std::optional<std::size_t> pos;  // topological position for nodes
};

// Gives `p` the check's scaled precision (CheckOptions::scaled), if any, with `amax`.
void scale_policy(exec::PrecisionPolicy& p, const CheckOptions& o, const ActivationAmax& amax);

struct Context {
  const model::Model& m;
  const CheckOptions& o;
  Diagnosis diag{};
  const std::vector<std::size_t>& order;  // main-graph position -> node index (the executor's)
  // Positions (of diag.nodes) cover every node, subgraphs included: each body's nodes
  // (then_branch before else_branch) come right before the control-flow node that runs
  // them. Per position: the node; a body node as a copy named by its path whose inputs and
  // outputs are value keys (see below).
  std::vector<const model::Node*> nodes{};
  std::deque<model::Node> body_nodes{};           // those copies
  std::vector<std::size_t> main_pos{};            // main-graph position -> position
  std::map<std::string, std::size_t> path_pos{};  // body node path -> position
  // Per position: the values it reads, as keys: its inputs, what its subgraphs capture, and
  // for a control-flow node its bodies' outputs (which become its outputs).
  std::vector<std::vector<std::string>> reads{};
  // Values are known by keys: their name in the main graph, "<body prefix><name>" in a body
  // ("If_0/then_branch/y"); a body reading an outer value uses the outer key.
  std::vector<std::optional<Format>> formats{};   // per position: the node's format
  std::vector<bool> data_movement{};              // per position
  std::map<std::string, std::size_t> producer{};  // value -> position of its producer
  // Per value, over all samples: reference absmax (also of inputs and weights) and the
  // smallest non-zero |value|.
  std::map<std::string, double> absmax{};
  std::map<std::string, double> min_abs_nonzero{};
  std::set<std::string> seen{};          // values whose finite reference values were recorded
  std::vector<NodeFirsts> firsts{};      // per position (CheckState::firsts)
  std::vector<std::size_t> sets{};       // the input sets run (global indices)
  std::vector<Comparison> output_cmp{};  // graph outputs: emulated vs reference
  std::vector<std::vector<Comparison>> element_cmp{};      // sequence outputs': per element
  std::vector<ConstantScan> constants{};                   // floating constants, scanned once
  std::set<std::string> initializers{};                    // their keys (subgraphs' too)
  std::map<std::string, const Tensor*> constant_values{};  // initializers and Constant values
  std::map<std::string, bool> constant_nonfinite{};        // scanned constants: inf/NaN present
  // The ONNX element type of every value shape inference types (model::infer_graph_elem_types),
  // by key, subgraphs included, for models that hold a 16-bit value anywhere; empty otherwise.
  std::map<std::string, int> elem_types{};
  // A scaled precision's calibrated activation amax (exec::calibrate_activations).
  ActivationAmax activation_amax{};
  // Input set 0's graph outputs as the lockstep ran it, for the accuracy origins (which
  // would run it again): the reference's (reference_outputs) and, for a model without
  // 16-bit storage (where the emulated run is the one they run: every node but --keep-fp32
  // in the format), the emulated run's; empty where this check did not run set 0 (one
  // finished from partial results).
  std::vector<Value> first_reference{};
  std::vector<NamedValue> first_emulated{};

  Source source_of(const std::string& value) const;
  // Gives `p` the check's scaled precision (CheckOptions::scaled), if any, with its
  // calibrated activation scales.
  void scale(exec::PrecisionPolicy& p) const;
};

// The graph outputs of a finished reference session as compared: float64 carriers as
// they are (the truth run), other tensors as stored (floating ones converted to float32),
// sequences and optionals as they are.
std::vector<Value> reference_outputs(const exec::Session& ref);
// One input set's graph output (global index `set`): the emulated value `e` against the
// reference `r` (compare_values, with max_scaled), added to its verdict's counts
// (nonfinite; with atol/rtol, outside_tolerance; a mismatch), to its comparison `cmp` and,
// for a sequence, to its elements' (element_cmp, grown with v.elements).
void record_output(const Value& r, const Value& e, std::size_t set, const CheckOptions& o,
                   OutputVerdict& v, Comparison& cmp, std::vector<Comparison>& element_cmp);
// An output's verdict from its comparison over all input sets, and its elements' from
// theirs (the counts recorded already). Errors over no finite pair are NaN: no value.
void judge(const Comparison& c, const std::vector<Comparison>& elements, const CheckOptions& o,
           OutputVerdict& v);
// Adds `b`'s counts and element comparisons to `a`'s (the verdicts of one output in two
// check states); the mismatch of the earlier set stays.
void merge_output(OutputVerdict& a, std::vector<Comparison>& a_elements, const OutputVerdict& b,
                  const std::vector<Comparison>& b_elements);
// Fills diag.origins (may run the model again: accuracy contributions, on the input set
// `sample` returns, called only when there are candidates).
// (`reference`: the reference run's executor, asked for only then.)
void find_origins(Context& ctx, const std::function<const exec::Executor&()>& reference,
                  const std::function<std::vector<NamedValue>()>& sample);
// Throws an Error for an id that names no rule.
void check_rule_ids(const std::set<std::string>& ids);
// Fills diag.rules, each finding with its margin and severity.
void apply_rules(Context& ctx);
// Fills each node's damage (after find_origins: accuracy origins carry theirs).
void assess_damage(Context& ctx);

}  // namespace fpguard::analysis
