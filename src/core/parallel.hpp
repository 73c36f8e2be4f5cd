// A minimal parallel-for over index ranges, for array kernels. Internal header: the
// files that include it are compiled with -fopenmp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>

#include <strings.h>

#include <omp.h>

namespace fpguard::detail {

// Below this many elements a second thread costs more than it saves. A parallel region
// costs a few microseconds on a pool whose threads spin while they wait, but a futex wake
// and a sleep on each side (tens of microseconds on a VM) on a pool that waits passively
// (OMP_WAIT_POLICY=passive): there each thread's share must be 4x larger to pay
// (bench/README.md, "check's threads"). The `fpguard` command's bounded spin
// (prefer_bounded_openmp_wait) counts as spinning.
inline std::size_t parallel_threshold() {
  static const std::size_t threshold = [] {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    const bool passive = policy && strcasecmp(policy, "passive") == 0;
    return passive ? std::size_t{1} << 18 : std::size_t{1} << 16;
  }();
  return threshold;
}

inline int resolve_threads(int requested, std::size_t n) {
  if (requested > 0) return requested;
  const std::size_t threshold = parallel_threshold();
  if (n < threshold) return 1;
  // The pool's size: all cores, or what --threads set (omp_set_num_threads, through the
  // executor), so "automatic" never exceeds the user's choice.
  const auto pool = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
  return static_cast<int>(std::min<std::size_t>(pool, n / (threshold / 2)));
}

// The pool's thread count (what oneDNN's primitives and resolve_threads read) set to
// `threads` for the life of the object, and restored after: work too small to pay for
// waking the pool's sleeping threads runs on the calling thread alone.
class PoolThreads {
 public:
  explicit PoolThreads(int threads) : saved_(omp_get_max_threads()) {
    if (threads != saved_) omp_set_num_threads(threads);
  }
  ~PoolThreads() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
  }
  PoolThreads(const PoolThreads&) = delete;
  PoolThreads& operator=(const PoolThreads&) = delete;

 private:
  int saved_;
};

// Calls fn(begin, end) on contiguous chunks of [0, n); chunk boundaries are multiples of
// `align` so SIMD kernels see aligned tails only at the very end. The chunks run on
// OpenMP's thread pool, the one oneDNN's GEMMs use: its workers are already running (and
// spin a while after each GEMM), so a parallel loop neither creates threads nor competes
// with idle workers for the cores. The first exception thrown by fn is rethrown here.
template <class Fn>
void parallel_for(std::size_t n, int threads, Fn&& fn, std::size_t align = 64) {
  const int t = resolve_threads(threads, n);
  if (t <= 1 || n == 0) {
    fn(std::size_t{0}, n);
    return;
  }
  std::size_t chunk = (n + static_cast<std::size_t>(t) - 1) / static_cast<std::size_t>(t);
  chunk = (chunk + align - 1) / align * align;
  const auto pieces = static_cast<std::int64_t>((n + chunk - 1) / chunk);
  std::exception_ptr error;
#pragma omp parallel for num_threads(t) schedule(static, 1)
  for (std::int64_t i = 0; i < pieces; ++i) {
    const std::size_t b = static_cast<std::size_t>(i) * chunk;
    try {
      fn(b, std::min(n, b + chunk));
    } catch (...) {
#pragma omp critical(fpguard_parallel_for_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace fpguard::detail
