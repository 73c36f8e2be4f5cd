// The order in which a dot product's products are added (AccumulationOrder): what the
// executor's MatMul/Gemm/Conv emulation and the gemm_error experiment (experiments.hpp)
// share, in a header of its own so the executor does not depend on the experiments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fpguard {

// The order in which the n products of a dot product are added.
struct AccumulationOrder {
  enum class Kind {
    library,     // oneDNN's sgemm on the carriers: float32 accumulation, the library's
                 // own blocked order (products of inputs of <= 12 bits are exact in fp32)
    sequential,  // s = fl(s + a_k b_k), k = 0 .. n-1
    pairwise,    // a binary tree over the n products
    blocked,     // K-chunks summed sequentially in the accumulation format, the chunk
                 // sums added in the wider of float32 and that format (tensor cores)
  };
  Kind kind = Kind::sequential;
  std::int64_t block = 0;  // K of blocked:K
  bool operator==(const AccumulationOrder&) const = default;
};
// "library", "sequential", "pairwise", "blocked:K" (K >= 1), or "auto" (nullopt: let
// make_gemm_setup choose); throws Error("--accumulation") with a "did you mean".
std::optional<AccumulationOrder> parse_accumulation_order(std::string_view s);
std::string to_string(const AccumulationOrder& o);

}  // namespace fpguard
