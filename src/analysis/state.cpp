// Merging check states (include/fpguard/analysis.hpp, "sharded checks"): counts add,
// extremes take the extreme, histograms add, sums add as double-doubles, and what only
// the first occurrence sets keeps the one of the earliest input set. Merging is
// associative and commutative: the parts of a sharded check merge, in any order, into the
// state one check over all sets keeps.
#include <algorithm>

#include "analysis.hpp"
#include "fpguard/error.hpp"

namespace fpguard::analysis {

namespace {

// A value's reference range, kept only where finite values were seen.
void merge_tensor(TensorRecord& a, bool a_seen, const TensorRecord& b, bool b_seen) {
  a.floating = a.floating || b.floating;
  if (b_seen) {
    a.ref_min = a_seen ? std::min(a.ref_min, b.ref_min) : b.ref_min;
    a.ref_max = a_seen ? std::max(a.ref_max, b.ref_max) : b.ref_max;
  }
  a.ref_absmax = std::max(a.ref_absmax, b.ref_absmax);
  a.ref_nonfinite += b.ref_nonfinite;
  for (const auto& [e, n] : b.exponent_histogram) a.exponent_histogram[e] += n;
  a.propagated.merge(b.propagated);
  a.local.merge(b.local);
  if (a.original.empty()) a.original = b.original;
  a.against_original.merge(b.against_original);
}

// The boundary inputs of both, each where it was first seen, in the order they were.
void merge_boundaries(NodeRecord& a, NodeFirsts& af, const NodeRecord& b, const NodeFirsts& bf) {
  std::vector<std::pair<std::string, std::size_t>> all;
  std::size_t i = 0, j = 0;
  auto take = [&](const NodeRecord& r, const NodeFirsts& f, std::size_t& k) {
    const auto it = std::find_if(all.begin(), all.end(),
                                 [&](const auto& x) { return x.first == r.boundary_inputs[k]; });
    if (it == all.end()) all.emplace_back(r.boundary_inputs[k], f.boundary[k]);
    ++k;
  };
  // Both lists are in first-seen order, so their sets ascend: a merge by set.
  while (i < a.boundary_inputs.size() || j < b.boundary_inputs.size()) {
    if (j == b.boundary_inputs.size() ||
        (i < a.boundary_inputs.size() && af.boundary[i] <= bf.boundary[j]))
      take(a, af, i);
    else
      take(b, bf, j);
  }
  a.boundary_inputs.clear();
  af.boundary.clear();
  for (auto& [name, set] : all) {
    a.boundary_inputs.push_back(std::move(name));
    af.boundary.push_back(set);
  }
}

// Both nodes' scaled operands, matched by input index, in input order.
void merge_scaled(std::vector<ScaledOperandRecord>& a, const std::vector<ScaledOperandRecord>& b) {
  for (const auto& x : b) {
    auto it = std::find_if(a.begin(), a.end(),
                           [&](const ScaledOperandRecord& y) { return y.input == x.input; });
    if (it == a.end())
      a.push_back(x);
    else
      it->merge(x);
  }
  std::sort(a.begin(), a.end(), [](const ScaledOperandRecord& x, const ScaledOperandRecord& y) {
    return x.input < y.input;
  });
}

void merge_node(NodeRecord& a, NodeFirsts& af, const NodeRecord& b, const NodeFirsts& bf,
                const std::set<std::string>& a_seen, const std::set<std::string>& b_seen) {
  a.runs += b.runs;
  if (bf.overflow < af.overflow) {
    a.first_overflow_iteration = b.first_overflow_iteration;
    af.overflow = bf.overflow;
  }
  if (bf.shapes < af.shapes) {
    a.input_shapes = b.input_shapes;
    af.shapes = bf.shapes;
  }
  a.inputs_nonfinite = a.inputs_nonfinite || b.inputs_nonfinite;
  a.input_error = std::max(a.input_error, b.input_error);
  a.input_absmax = std::max(a.input_absmax, b.input_absmax);
  merge_boundaries(a, af, b, bf);
  merge_scaled(a.scaled_operands, b.scaled_operands);
  for (std::size_t i = 0; i < a.outputs.size(); ++i) {
    const std::string& key = a.outputs[i].name;
    merge_tensor(a.outputs[i], a_seen.count(key) > 0, b.outputs[i], b_seen.count(key) > 0);
  }
}

}  // namespace

void ScaledOperandRecord::merge(const ScaledOperandRecord& o) {
  if (value.empty()) value = o.value;
  if (format.empty()) format = o.format;
  weight = weight || o.weight;
  nonzero += o.nonzero;
  blocks += o.blocks;
  flushed += o.flushed;
  flushed_blocks += o.flushed_blocks;
  swamped += o.swamped;
  swamped_blocks += o.swamped_blocks;
  underflow += o.underflow;
  subnormal += o.subnormal;
  saturated += o.saturated;
  saturated_blocks += o.saturated_blocks;
  clipped += o.clipped;
  clipped_blocks += o.clipped_blocks;
}

void merge(CheckState& into, const CheckState& from) {
  bool same = into.nodes.size() == from.nodes.size() && into.firsts.size() == into.nodes.size() &&
              from.firsts.size() == from.nodes.size() &&
              into.output_cmp.size() == from.output_cmp.size() &&
              into.verdicts.size() == from.verdicts.size() &&
              into.verdicts.size() == into.output_cmp.size() &&
              into.element_cmp.size() == into.verdicts.size() &&
              from.element_cmp.size() == from.verdicts.size();
  for (std::size_t i = 0; same && i < into.nodes.size(); ++i)
    same = into.nodes[i].name == from.nodes[i].name &&
           into.nodes[i].outputs.size() == from.nodes[i].outputs.size();
  if (!same) throw Error("merge", "the check states are of different graphs");
  std::vector<std::size_t> both;
  std::set_intersection(into.sets.begin(), into.sets.end(), from.sets.begin(), from.sets.end(),
                        std::back_inserter(both));
  if (!both.empty())
    throw Error("merge", "input set " + std::to_string(both.front()) + " is in both states");
  for (std::size_t i = 0; i < into.nodes.size(); ++i)
    merge_node(into.nodes[i], into.firsts[i], from.nodes[i], from.firsts[i], into.seen, from.seen);
  for (std::size_t i = 0; i < into.output_cmp.size(); ++i) {
    into.output_cmp[i].merge(from.output_cmp[i]);
    merge_output(into.verdicts[i], into.element_cmp[i], from.verdicts[i], from.element_cmp[i]);
  }
  for (const auto& [k, v] : from.absmax) {
    auto [it, fresh] = into.absmax.try_emplace(k, v);
    if (!fresh) it->second = std::max(it->second, v);
  }
  for (const auto& [k, v] : from.min_abs_nonzero) {
    auto [it, fresh] = into.min_abs_nonzero.try_emplace(k, v);
    if (!fresh) it->second = std::min(it->second, v);
  }
  into.seen.insert(from.seen.begin(), from.seen.end());
  if (into.constants.empty()) into.constants = from.constants;  // (static: the same in both)
  std::vector<std::size_t> sets;
  std::merge(into.sets.begin(), into.sets.end(), from.sets.begin(), from.sets.end(),
             std::back_inserter(sets));
  into.sets = std::move(sets);
}

}  // namespace fpguard::analysis
