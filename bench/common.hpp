// Shared inputs of the benchmarks; memcpy of the same bytes (bench/main.cpp) is the
// baseline every ratio is taken against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace fpguard::bench {

inline constexpr std::size_t kSmall = 4 << 10;   // 4 KiB: in L1
inline constexpr std::size_t kLarge = 64 << 20;  // 64 MiB: far beyond the last-level cache

// Three kinds of data:
//  0 "typical": N(0, 1), like weights and normalised activations;
//  1 "wide":    N(0, 1) * 2^k, k uniform in [-20, 20], so that a good share of values
//               overflow or fall into the subnormal range of the 8/6/4-bit formats
//               (the kernels' slow lanes);
//  2 "relu":    max(N(0, 1), 0), a ReLU's outputs: half the values exactly 0.
inline const std::vector<float>& input(std::size_t bytes, int kind = 0) {
  static std::vector<float> cache[2][3];
  auto& v = cache[bytes == kSmall ? 0 : 1][kind];
  if (v.empty()) {
    v.resize(bytes / sizeof(float));
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> ex(-20, 20);
    for (auto& x : v)
      x = kind == 0 ? nd(rng) : kind == 1 ? std::ldexp(nd(rng), ex(rng)) : std::max(nd(rng), 0.0f);
  }
  return v;
}

}  // namespace fpguard::bench
