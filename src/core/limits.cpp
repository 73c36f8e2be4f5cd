#include "fpguard/limits.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "core/parallel.hpp"
#include "fpguard/error.hpp"

namespace fpguard {

namespace {

constexpr std::uint64_t kUnknown = std::numeric_limits<std::uint64_t>::max();

std::atomic<std::uint64_t> g_limit{0};  // 0: not set, use available_memory()

// The first word of a small file as an unsigned number; kUnknown when the file is
// absent or says "max".
std::uint64_t read_number(const char* path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word.empty() || !std::isdigit(static_cast<unsigned char>(word[0])))
    return kUnknown;
  try {
    return std::stoull(word);
  } catch (...) {
    return kUnknown;
  }
}

std::uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream ss(line.substr(13));
    std::uint64_t kib = 0;
    if (ss >> kib) return kib * 1024;
  }
  return kUnknown;
}

// What the cgroup still allows; a container is killed at its cgroup limit, long before
// the host's MemAvailable is reached.
std::uint64_t cgroup_headroom() {
  std::uint64_t limit = read_number("/sys/fs/cgroup/memory.max");  // v2
  std::uint64_t used = read_number("/sys/fs/cgroup/memory.current");
  if (limit == kUnknown) {  // v1
    limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    used = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
  }
  if (limit == kUnknown || limit >= (std::uint64_t{1} << 62)) return kUnknown;  // unlimited
  if (used == kUnknown) return limit;
  return used < limit ? limit - used : 0;
}

}  // namespace

namespace {
std::atomic<int> g_cores{0};  // 0: not set, read the affinity
}  // namespace

int available_cores() {
  static const int affinity = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }();
  const int set = g_cores.load(std::memory_order_relaxed);
  return set > 0 ? set : affinity;
}

void set_available_cores(int cores) {
  g_cores.store(std::max(1, cores), std::memory_order_relaxed);
}

void parallel_tasks(std::size_t n, int threads, const std::function<void(std::size_t)>& task) {
  const auto t =
      std::min<std::size_t>(n, static_cast<std::size_t>(threads > 0 ? threads : available_cores()));
  detail::parallel_for(
      n, static_cast<int>(std::max<std::size_t>(t, 1)),
      [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) task(i);
      },
      1);
}

void release_idle_threads() {
  omp_pause_resource_all(omp_pause_soft);
}

std::uint64_t available_memory() {
  const std::uint64_t a = mem_available(), c = cgroup_headroom();
  return a < c ? a : c;
}

std::uint64_t memory_limit() {
  std::uint64_t v = g_limit.load(std::memory_order_relaxed);
  if (v == 0) {
    v = available_memory();
    std::uint64_t expected = 0;  // the first answer sticks, so every check agrees
    if (!g_limit.compare_exchange_strong(expected, v)) v = expected;
  }
  return v;
}

void set_memory_limit(std::uint64_t bytes) {
  g_limit.store(bytes, std::memory_order_relaxed);
}

void check_memory(std::uint64_t bytes, const std::string& where) {
  const std::uint64_t limit = memory_limit();
  if (bytes > limit)
    throw Error(where, "tensor needs " + std::to_string(bytes) +
                           " bytes, more than the memory limit of " + std::to_string(limit) +
                           " bytes")
        .governed_by("max_memory");
}

std::uint64_t parse_byte_size(std::string_view text, const std::string& where) {
  const std::string shown(text);
  auto bad = [&]() {
    return Error(where, "'" + shown + "' is not a byte size (expected N, NK, NM, NG or NT)");
  };
  std::size_t i = 0;
  std::uint64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const auto d = static_cast<std::uint64_t>(text[i] - '0');
    if (n > (kUnknown - d) / 10) throw Error(where, "'" + shown + "' is too large");
    n = n * 10 + d;
    ++i;
  }
  if (i == 0) throw bad();
  std::string suffix;
  for (; i < text.size(); ++i)
    suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  int shift = 0;
  if (!suffix.empty()) {
    static constexpr const char* kUnits = "KMGT";
    const auto unit = std::string_view(kUnits).find(suffix[0]);
    if (unit != std::string_view::npos) {
      shift = 10 * static_cast<int>(unit + 1);
      suffix.erase(0, 1);
      if (suffix == "IB") suffix.clear();
    }
    if (suffix == "B") suffix.clear();
    if (!suffix.empty()) throw bad();
  }
  if (n == 0) throw Error(where, "must be more than 0 bytes");
  if (shift > 0 && n > (kUnknown >> shift)) throw Error(where, "'" + shown + "' is too large");
  return n << shift;
}

void reuse_freed_memory() {
  // Blocks below 256 MiB come from the heap (not mmap), and the heap's top is trimmed only
  // beyond 1 GiB of free space.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

int runnable_tasks(std::string_view loadavg) {
  // "0.61 1.20 1.30 2/234 5678": the field after the third space, up to its '/'.
  std::size_t at = 0;
  for (int field = 0; field < 3; ++field) {
    at = loadavg.find(' ', at);
    if (at == std::string_view::npos) return -1;
    ++at;
  }
  int n = 0;
  const auto* end = loadavg.data() + loadavg.size();
  const auto [p, ec] = std::from_chars(loadavg.data() + at, end, n);
  return ec == std::errc() && p != end && *p == '/' ? n : -1;
}

int runnable_tasks() {
  char buf[128];
  const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const auto n = read(fd, buf, sizeof(buf));
  close(fd);
  return n > 0 ? runnable_tasks(std::string_view(buf, static_cast<std::size_t>(n))) : -1;
}

bool cores_free(int threads, int cpus, const std::function<int()>& runnable) {
  constexpr int kReads = 21;  // 20 ms
  for (int i = 0; i < kReads; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const int others = runnable() - 1;  // this task is running
    if (others >= 0 && others + threads <= cpus) return true;
  }
  return false;
}

bool prefer_bounded_openmp_wait() {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return false;
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (cores_free(available_cores(), cpus, [] { return runnable_tasks(); })) return false;
  return setenv("GOMP_SPINCOUNT", kOpenMPSpins, 0) == 0;
}

}  // namespace fpguard
