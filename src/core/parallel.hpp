// A minimal parallel-for over index ranges, for array kernels. Internal header.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace fpguard::detail {

// Below this many elements a second thread costs more than it saves.
inline constexpr std::size_t kParallelThreshold = std::size_t{1} << 18;

inline int resolve_threads(int requested, std::size_t n) {
  if (requested > 0) return requested;
  if (n < kParallelThreshold) return 1;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min<std::size_t>(hw, n / (kParallelThreshold / 2)));
}

// Calls fn(begin, end) on contiguous chunks of [0, n); chunk boundaries are multiples of
// `align` so SIMD kernels see aligned tails only at the very end.
template <class Fn>
void parallel_for(std::size_t n, int threads, Fn&& fn, std::size_t align = 64) {
  const int t = resolve_threads(threads, n);
  if (t <= 1 || n == 0) {
    fn(std::size_t{0}, n);
    return;
  }
  std::size_t chunk = (n + static_cast<std::size_t>(t) - 1) / static_cast<std::size_t>(t);
  chunk = (chunk + align - 1) / align * align;
  std::vector<std::thread> pool;
  for (std::size_t b = chunk; b < n; b += chunk)
    pool.emplace_back([&fn, b, e = std::min(n, b + chunk)] { fn(b, e); });
  fn(std::size_t{0}, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

}  // namespace fpguard::detail
