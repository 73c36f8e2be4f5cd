#include "fpguard/io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <system_error>
#include <thread>

#include "fpguard/error.hpp"

namespace fpguard {

namespace fs = std::filesystem;

namespace {

// Temporary files of the writes in progress, for the signal handler. The handler may run
// at any instruction, so it reads only lock-free atomics and fixed char arrays, and
// calls only unlink and raise (async-signal-safe). A write that finds no free slot still
// works; an interrupt would then leave its temporary file.
struct TempSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled in, 2 holds a live temporary path
  // (Initialized, so that the slots are constant-initialized zeros: uninitialized, they
  // took a dynamic initializer that touched each slot's page at every start.)
  char path[PATH_MAX] = {};
};
static_assert(std::atomic<int>::is_always_lock_free);
constexpr int kTempSlots = 32;
TempSlot g_temps[kTempSlots];

class TempRegistration {
 public:
  explicit TempRegistration(const fs::path& tmp) {
    const std::string& p = tmp.native();
    if (p.size() >= PATH_MAX) return;
    for (int i = 0; i < kTempSlots; ++i) {
      int expected = 0;
      if (!g_temps[i].state.compare_exchange_strong(expected, 1)) continue;
      std::memcpy(g_temps[i].path, p.c_str(), p.size() + 1);
      g_temps[i].state.store(2);
      slot_ = i;
      return;
    }
  }
  ~TempRegistration() {
    if (slot_ >= 0) g_temps[slot_].state.store(0);
  }
  TempRegistration(const TempRegistration&) = delete;
  TempRegistration& operator=(const TempRegistration&) = delete;

 private:
  int slot_ = -1;
};

extern "C" void remove_temps_and_die(int sig) {
  for (auto& t : g_temps)
    if (t.state.load() == 2) ::unlink(t.path);
  // SA_RESETHAND restored the default action; the signal is blocked while we run, so it
  // is delivered, and kills the process, as soon as we return.
  ::raise(sig);
}

// Test hook (tests/badinput/interrupt_test.py): hold a finished temporary file this many
// milliseconds before the rename, so that a signal lands there deterministically.
void test_delay_before_rename() {
  if (const char* ms = std::getenv("FPGUARD_TEST_WRITE_DELAY_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

}  // namespace

void install_interrupt_cleanup() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = remove_temps_and_die;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

ReadOnlyFd::ReadOnlyFd(const fs::path& path, const std::string& where)
    : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
  if (fd_ < 0) throw Error(where, std::string("cannot open: ") + std::strerror(errno));
}

ReadOnlyFd::~ReadOnlyFd() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// The temporary file beside `path` that `fill` writes, renamed over `path` when complete;
// on any exception it is removed and `path` is untouched.
void replace_atomically(const fs::path& path, const std::function<void(const fs::path&)>& fill) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(path.string(), "cannot write: directory '" + dir.string() + "' does not exist");
  if (fs::is_directory(path, ec)) throw Error(path.string(), "cannot write: it is a directory");
  std::random_device rd;
  std::string tmp_name = ".";  // appended piecewise: g++ 12 -O3 warns on a + chain here
  tmp_name += path.filename().string();
  tmp_name += ".tmp";
  tmp_name += std::to_string(rd() % 1000000);
  const fs::path tmp = dir / tmp_name;
  const TempRegistration registered(tmp);  // before the file exists: no window
  try {
    fill(tmp);
    test_delay_before_rename();
    fs::rename(tmp, path, ec);
    if (ec) throw Error(path.string(), "cannot write: " + ec.message());
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
}

// A descriptor or a memory map, closed or unmapped when this goes out of scope.
struct Closing {
  int fd = -1;
  void* map = nullptr;
  std::size_t size = 0;
  Closing() = default;
  Closing(const Closing&) = delete;
  Closing& operator=(const Closing&) = delete;
  ~Closing() {
    if (map) ::munmap(map, size);
    if (fd >= 0) ::close(fd);
  }
};

std::size_t page_size() {
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

void write_file_atomic(const fs::path& path, const std::function<void(std::ostream&)>& write) {
  replace_atomically(path, [&](const fs::path& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path.string(), std::string("cannot write: ") + std::strerror(errno));
    write(out);
    out.flush();
    if (!out) throw Error(path.string(), "write failed (disk full?)");
  });
}

void MappedOutput::release(std::size_t offset, std::size_t n) const {
  const std::size_t page = page_size();
  const auto base = reinterpret_cast<std::uintptr_t>(bytes_.data());  // page-aligned
  const std::size_t begin = (offset + page - 1) / page * page;
  const std::size_t end = std::min(offset + n, bytes_.size()) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(base + begin), end - begin, MADV_DONTNEED);
}

void write_file_mapped(const fs::path& path, std::size_t size,
                       const std::function<void(const MappedOutput&)>& fill) {
  replace_atomically(path, [&](const fs::path& tmp) {
    Closing file;
    file.fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (file.fd < 0)
      throw Error(path.string(), std::string("cannot write: ") + std::strerror(errno));
    if (size == 0) return fill(MappedOutput({}));
    // Blocks first: a write through the map to a block the disk cannot give is a SIGBUS.
    if (const int e = ::posix_fallocate(file.fd, 0, static_cast<off_t>(size)); e != 0)
      throw Error(path.string(), std::string("cannot write ") + std::to_string(size) +
                                     " bytes: " + std::strerror(e));
    file.map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, file.fd, 0);
    if (file.map == MAP_FAILED) {
      file.map = nullptr;
      throw Error(path.string(), std::string("cannot map for writing: ") + std::strerror(errno));
    }
    file.size = size;
    fill(MappedOutput({static_cast<std::byte*>(file.map), size}));
  });
}

void check_not_same_file(const fs::path& input, const fs::path& output, const std::string& flag) {
  std::error_code ec;
  const bool same = fs::exists(output, ec)
                        ? fs::equivalent(input, output, ec)
                        : fs::weakly_canonical(input, ec) == fs::weakly_canonical(output, ec);
  if (same)
    throw Error(flag,
                "output '" + output.string() + "' is the input file; refusing to overwrite it");
}

void check_output_file(const fs::path& input, const fs::path& output, const std::string& flag) {
  check_not_same_file(input, output, flag);
  std::error_code ec;
  std::string out = "'";  // appended piecewise: g++ 12 -O3 warns on a + chain here
  out += output.string();
  out += "'";
  if (fs::is_directory(output, ec)) throw Error(flag, out + " is a directory");
  const fs::path dir = output.has_parent_path() ? output.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw Error(flag, "cannot write " + out + ": directory '" + dir.string() + "' does not exist");
  // The write at the end creates a temporary file beside the output: try that now.
  std::random_device rd;
  std::string probe_name = ".";
  probe_name += output.filename().string();
  probe_name += ".probe";
  probe_name += std::to_string(rd() % 1000000);
  const fs::path probe = dir / probe_name;
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) throw Error(flag, "cannot write " + out + ": " + std::strerror(errno));
  ::close(fd);
  fs::remove(probe, ec);
}

}  // namespace fpguard
