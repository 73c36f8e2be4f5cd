// The counts of the executor's own quantizing passes, for check (internal header of the
// library: src/exec/scaling.cpp defines it; executor.cpp and analysis/check.cpp use it).
//
// check measures what a scaled precision's scales do to each operand its local run
// quantizes (the counts of scaled_stats), on the very values that run quantizes. The SIMD
// kernels take those counts in their quantizing pass (detail::round_scaled_counting), so
// instead of a second pass over each operand to count, check installs an OperandCounting
// on its thread around a node's local run: while one is installed, the float32 operands
// the executor quantizes anew on that thread are quantized with their counts taken, which
// it keeps by node and input. A copy made before (a value an earlier node read, a weight
// quantized earlier) is not made again, so not counted: check measures those itself.
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <utility>

#include "fpguard/exec.hpp"
#include "fpguard/stats.hpp"

namespace fpguard::exec {

// What makes two quantized copies of one value differ: the format as applied (its scope
// may differ from the named one's), the layout, the static amax and the carrier. The key
// the executor keeps a value's quantized copies by.
std::string scaled_key(const ScaledOperand& op, DType carrier);

class OperandCounting {
 public:
  struct Counted {
    std::string key;          // scaled_key of the copy (a float32 carrier)
    ScaledFormatStats stats;  // the counts alone, as scaled_stats gives them
  };
  OperandCounting();  // this thread's until destroyed
  ~OperandCounting();
  OperandCounting(const OperandCounting&) = delete;
  OperandCounting& operator=(const OperandCounting&) = delete;

  // The one installed on this thread, nullptr when none.
  static OperandCounting* current();
  // round_scaled of input `input` of `node` (float32 values, in a float32 carrier), its
  // counts kept where the fast path takes them.
  void quantize(const model::Node& node, std::size_t input, std::span<const float> x,
                std::span<float> y, const ScaledOperand& op);
  // Those kept for input `input` of `node`; nullptr when none.
  const Counted* find(const model::Node& node, std::size_t input) const;

 private:
  std::map<std::pair<const model::Node*, std::size_t>, Counted> counted_;
  OperandCounting* previous_;
};

}  // namespace fpguard::exec
