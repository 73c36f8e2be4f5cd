// Resource limits for reading files that come from anywhere. Every reader checks a
// tensor's declared size against memory_limit() before allocating it, so a file that
// claims terabytes (or just more than this machine has) is refused with an Error naming
// the file instead of the process being killed by the kernel. The limit is process-wide:
// the CLI sets it from `--max-memory`; by default it is the memory available when first
// asked (MemAvailable, or less where a cgroup limit leaves less).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace fpguard {

// The most bytes one tensor read from a file may occupy.
std::uint64_t memory_limit();
// Sets the limit; 0 restores the default (available memory).
void set_memory_limit(std::uint64_t bytes);
// Memory this process can still use: /proc/meminfo MemAvailable, lowered to what the
// cgroup (v2 memory.max, v1 memory.limit_in_bytes) leaves; UINT64_MAX when unknown.
std::uint64_t available_memory();
// The cores this process may run on (sched_getaffinity: what taskset, a cpuset or mpirun's
// binding of a rank leaves it), at least 1: the default thread count. Read once, unless
// set_available_cores set it.
int available_cores();
// Sets what available_cores() returns (at least 1): the CLI under mpirun gives each rank
// its share of cores that several ranks on one machine may run on.
void set_available_cores(int cores);
// Calls task(i) for each i in [0, n), side by side on up to `threads` threads (0:
// available_cores()) of the pool the library's parallel loops run on (OpenMP's:
// src/core/parallel.hpp), in contiguous runs of i per thread. The first exception a task
// throws is rethrown here (the rest of that thread's run is skipped).
void parallel_tasks(std::size_t n, int threads, const std::function<void(std::size_t)>& task);
// Ends that pool's idle threads (OpenMP 5's omp_pause_resource_all; a later parallel loop
// starts them again): for a program with no parallel work ahead, whose idle threads would
// otherwise spin for milliseconds (libgomp's default wait, where prefer_bounded_openmp_wait
// did not take effect: merge).
void release_idle_threads();

// Throws Error(where, "tensor needs N bytes, more than the memory limit of M bytes"),
// governed_by("max_memory"), when `bytes` exceeds memory_limit().
void check_memory(std::uint64_t bytes, const std::string& where);

// "1073741824", "512K", "64M", "2G", "1T" (binary multiples; a trailing "B" or "iB" is
// allowed, case is not significant). Throws Error(where, ...) for anything else, for 0,
// and for values that overflow 64 bits.
std::uint64_t parse_byte_size(std::string_view text, const std::string& where);

// Process-wide allocator policy for programs that run models (the CLI, the benchmarks):
// glibc keeps freed blocks of up to 256 MiB for reuse instead of returning them to the
// kernel, so the tensors a run frees and allocates again node after node are not faulted
// in afresh each time (in the bench transformer this was ~10% of a check). Peak memory is
// unchanged: what is kept is what the run had already used.
void reuse_freed_memory();

// Process-wide OpenMP policy for programs that run models, chosen at their start unless the
// user chose one (OMP_WAIT_POLICY or GOMP_SPINCOUNT set). Threads waiting at a barrier or
// for work spin libgomp's default 300,000 iterations, then sleep, when every thread of the
// pool finds a CPU that nothing else is running on (cores_free); otherwise
// GOMP_SPINCOUNT=kOpenMPSpins. A long spin wins microseconds per parallel region on free
// cores (up to 1.3x on MobileNetV3's many small layers) and loses everything when a core is
// busy: a spinning thread holds the core its descheduled partner needs (bench/README.md:
// 2-thread runs 1.5-2x slower with one core busy, 10x under load). Sleeping at once
// (OMP_WAIT_POLICY=passive) pays a futex wake per region; the short spin sits between
// (bench/README.md, "Idle at the end of the tenth session", "The spin chosen at start"). Returns
// whether it set the variable. libgomp reads its environment once, when it is loaded,
// before main() (and glibc's initializer, which runs before libgomp's, resets the
// environment that an executable's .preinit_array changed), so a program that gets true
// must start again for it to take effect: the CLI re-executes itself for the commands that
// run models (tools/fpguard/main.cpp). Load that arrives after the start is not seen.
inline constexpr const char* kOpenMPSpins = "1000";
bool prefer_bounded_openmp_wait();

// Whether `threads` threads would each find a free CPU among `cpus`: `runnable()` counts
// the tasks the kernel could run now, this one included (the 4th field of /proc/loadavg).
// A count that says no is read again, every millisecond for 20 ms, and the fewest counts:
// another runtime's threads that spin for a while after their work (ONNX Runtime's, for
// about 25 ms after a run) or a short-lived process are not a busy core; a program that
// computes is runnable at every read. A count below 0 (unknown) says no.
bool cores_free(int threads, int cpus, const std::function<int()>& runnable);
// The 4th field of /proc/loadavg ("0.61 1.20 1.30 2/234 5678": 2), or -1.
int runnable_tasks(std::string_view loadavg);
int runnable_tasks();

}  // namespace fpguard
