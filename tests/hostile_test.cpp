// Hostile input, the library side (docs/reliability.md): the memory limit every reader
// checks before allocating (fpguard/limits.hpp), --max-memory's byte sizes, the
// from-memory readers the fuzz harnesses use (they must agree with the file readers),
// zip-bomb refusals, and the interrupt cleanup of write_file_atomic (a signal during a
// write leaves no temporary file). The CLI side is tests/badinput/.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <vector>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard {
namespace {

namespace fs = std::filesystem;

const fs::path kFiles = fs::path(FPGUARD_SOURCE_DIR) / "tests/badinput/files";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// f() must throw an Error at exactly `where` with exactly `what`.
void expect_error(const std::function<void()>& f, const std::string& where,
                  const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no Error; expected " << where << ": " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), where);
    EXPECT_EQ(e.problem(), what);
  }
}

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() /
           ("fpguard_hostile_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    set_memory_limit(0);
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST(ByteSize, Parses) {
  EXPECT_EQ(parse_byte_size("1", "f"), 1u);
  EXPECT_EQ(parse_byte_size("4096", "f"), 4096u);
  EXPECT_EQ(parse_byte_size("4k", "f"), 4096u);
  EXPECT_EQ(parse_byte_size("64M", "f"), std::uint64_t{64} << 20);
  EXPECT_EQ(parse_byte_size("2G", "f"), std::uint64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("2GiB", "f"), std::uint64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("2gb", "f"), std::uint64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("1T", "f"), std::uint64_t{1} << 40);
  EXPECT_EQ(parse_byte_size("100B", "f"), 100u);
  EXPECT_EQ(parse_byte_size("18446744073709551615", "f"), ~std::uint64_t{0});
  EXPECT_EQ(parse_byte_size("16777215T", "f"), std::uint64_t{16777215} << 40);
}

TEST(ByteSize, Refuses) {
  const std::string shape = " is not a byte size (expected N, NK, NM, NG or NT)";
  for (const char* bad : {"", "G", "-1", "1.5G", "1 G", "1P", "1KK", "1iB", "0x10", " 1"})
    expect_error([&] { parse_byte_size(bad, "--max-memory"); }, "--max-memory",
                 std::string("'").append(bad) + "'" + shape);
  expect_error([] { parse_byte_size("0", "--max-memory"); }, "--max-memory",
               "must be more than 0 bytes");
  expect_error([] { parse_byte_size("0K", "--max-memory"); }, "--max-memory",
               "must be more than 0 bytes");
  for (const char* big : {"18446744073709551616", "16777216T", "99999999999999999999999"})
    expect_error([&] { parse_byte_size(big, "--max-memory"); }, "--max-memory",
                 std::string("'").append(big) + "' is too large");
}

TEST(MemoryLimit, DefaultIsTheAvailableMemory) {
  set_memory_limit(0);
  const std::uint64_t available = available_memory();
  EXPECT_GT(available, std::uint64_t{1} << 20);  // Linux: /proc/meminfo is there
  EXPECT_LT(available, ~std::uint64_t{0});
  EXPECT_GT(memory_limit(), std::uint64_t{0});
  set_memory_limit(12345);
  EXPECT_EQ(memory_limit(), 12345u);
  EXPECT_NO_THROW(check_memory(12345, "x"));
  expect_error([] { check_memory(12346, "x"); }, "x",
               "tensor needs 12346 bytes, more than the memory limit of 12345 bytes");
  try {
    check_memory(12346, "x");
  } catch (const Error& e) {
    EXPECT_EQ(e.setting(), "max_memory");  // the CLI words it as its flag
  }
  set_memory_limit(0);
}

// The OpenMP wait chosen at a command's start (fpguard/limits.hpp): /proc/loadavg's
// runnable count, and whether the pool's threads find free CPUs in it.
TEST(OpenMPWait, ReadsTheRunnableCountOfLoadavg) {
  EXPECT_EQ(runnable_tasks("0.61 1.20 1.30 2/234 5678\n"), 2);
  EXPECT_EQ(runnable_tasks("12.00 9.5 7.25 17/1045 99"), 17);
  EXPECT_EQ(runnable_tasks("0.61 1.20 1.30 /234 5678"), -1);
  EXPECT_EQ(runnable_tasks("0.61 1.20 1.30 2"), -1);
  EXPECT_EQ(runnable_tasks("0.61 1.20"), -1);
  EXPECT_EQ(runnable_tasks(""), -1);
  EXPECT_GE(runnable_tasks(), 1);  // this test is running
}

TEST(OpenMPWait, CoresAreFreeWhenEveryThreadFindsOne) {
  // A sequence of counts, one per read; the last repeats.
  const auto reads = [](std::vector<int> counts) {
    return
        [counts, i = std::size_t{0}]() mutable { return counts[std::min(i++, counts.size() - 1)]; };
  };
  std::size_t n = 0;
  const auto counted = [&n](std::function<int()> f) { return [&n, f] { return ++n, f(); }; };
  EXPECT_TRUE(cores_free(2, 2, counted(reads({1}))));  // only this task
  EXPECT_EQ(n, 1u);                                    // read once
  EXPECT_TRUE(cores_free(2, 4, reads({3})));
  EXPECT_FALSE(cores_free(2, 4, reads({4})));
  n = 0;
  EXPECT_FALSE(cores_free(2, 2, counted(reads({2}))));  // a busy core, at every read
  EXPECT_EQ(n, 21u);                                    // for 20 ms
  EXPECT_TRUE(cores_free(2, 2, reads({4, 3, 1})));      // threads that spun for a moment
  EXPECT_FALSE(cores_free(1, 2, reads({-1})));          // unknown
  EXPECT_FALSE(cores_free(2, 2, reads({0})));           // not a count this task can read
}

TEST_F(Hostile, EveryReaderChecksTheLimitBeforeAllocating) {
  const Tensor t(DType::float32, {1024});
  write_npy(dir_ / "a.npy", t);
  write_npz(dir_ / "a.npz", {{"a", t}}, true);
  write_tensor_pb(dir_ / "a.pb", {"a", t});
  set_memory_limit(4096);  // exactly enough
  EXPECT_EQ(read_npy(dir_ / "a.npy").nbytes(), 4096u);
  set_memory_limit(4095);
  const std::string npy = (dir_ / "a.npy").string();
  const std::string need = "tensor needs 4096 bytes, more than the memory limit of 4095 bytes";
  expect_error([&] { read_npy(dir_ / "a.npy"); }, npy, need);
  const std::string bytes = slurp(dir_ / "a.npy");
  expect_error([&] { read_npy(bytes_of(bytes), "mem.npy"); }, "mem.npy", need);
  // A pipe (size unknown): only the limit stands between the header and the allocation.
  std::istringstream pipe(bytes);
  expect_error([&] { read_npy(pipe, ~std::uint64_t{0}, "pipe"); }, "pipe", need);
  // .npz: the entry (header + data) is refused before anything is inflated.
  const std::string npz = (dir_ / "a.npz").string() + ":a.npy";
  expect_error([&] { read_npz(dir_ / "a.npz"); }, npz,
               "refused unread: uncompressed size 4224 bytes exceeds the memory limit of 4095 "
               "bytes");
  // .pb: the file (about the raw_data) is refused before it is parsed.
  const auto pb_size = fs::file_size(dir_ / "a.pb");
  expect_error([&] { read_tensor_pb(dir_ / "a.pb"); }, (dir_ / "a.pb").string(),
               "tensor needs " + std::to_string(pb_size) +
                   " bytes, more than the memory limit of 4095 bytes");
  set_memory_limit(0);
  EXPECT_EQ(read_npz(dir_ / "a.npz").at(0).tensor.nbytes(), 4096u);
  EXPECT_EQ(read_tensor_pb(dir_ / "a.pb").tensor.nbytes(), 4096u);
}

TEST_F(Hostile, FromMemoryReadersAgreeWithFileReaders) {
  std::vector<NamedTensor> tensors;
  for (DType d :
       {DType::float64, DType::float32, DType::float16, DType::int8, DType::uint64, DType::bool_}) {
    Tensor t(d, {2, 3});
    for (std::size_t i = 0; i < t.nbytes(); ++i)
      t.bytes()[i] = std::byte(d == DType::bool_ ? i % 2 : (i * 37 + 11) & 0xff);
    tensors.push_back({std::string(to_string(d)), std::move(t)});
  }
  for (bool compress : {false, true}) {
    const fs::path p = dir_ / (compress ? "d.npz" : "s.npz");
    write_npz(p, tensors, compress);
    const std::string bytes = slurp(p);
    const auto from_file = read_npz(p);
    const auto from_memory = read_npz(bytes_of(bytes), "mem.npz");
    ASSERT_EQ(from_memory.size(), from_file.size());
    for (std::size_t i = 0; i < from_file.size(); ++i) {
      EXPECT_EQ(from_memory[i].name, from_file[i].name);
      EXPECT_EQ(from_memory[i].tensor.shape(), from_file[i].tensor.shape());
      ASSERT_EQ(from_memory[i].tensor.nbytes(), from_file[i].tensor.nbytes());
      EXPECT_EQ(0, std::memcmp(from_memory[i].tensor.bytes(), from_file[i].tensor.bytes(),
                               from_file[i].tensor.nbytes()));
    }
  }
  expect_error([] { read_npz(std::span<const std::byte>(), "empty.npz"); }, "empty.npz",
               "not a .npz file (not a zip archive: Not a zip archive)");

  write_tensor_pb(dir_ / "t.pb", {"", tensors[1].tensor});
  const std::string pb = slurp(dir_ / "t.pb");
  const NamedTensor a = read_tensor_pb(dir_ / "t.pb");
  const NamedTensor b = read_tensor_pb(bytes_of(pb), "mem.pb", "t");
  EXPECT_EQ(a.name, "t");
  EXPECT_EQ(b.name, "t");
  EXPECT_EQ(a.tensor.shape(), b.tensor.shape());
  EXPECT_EQ(0, std::memcmp(a.tensor.bytes(), b.tensor.bytes(), a.tensor.nbytes()));
  expect_error([&] { read_tensor_pb(bytes_of(pb.substr(0, pb.size() - 3)), "cut.pb", "t"); },
               "cut.pb", "not an ONNX TensorProto (corrupt or not protobuf data)");
}

// The committed zip bombs give the same answer from a file and from memory.
TEST(ZipBombs, RefusedUnreadFromFileAndMemory) {
  struct Case {
    const char* file;
    std::uint64_t limit;
    std::string what;
  };
  const Case cases[] = {
      {"bomb_zip64.npz", 0,
       "uncompressed size 1099511627776 bytes exceeds the limit of 4294967296 bytes "
       "(refused unread: possible zip bomb)"},
      {"bomb_ratio.npz", 0,
       "declares 4294967294 bytes uncompressed from 89 compressed bytes, more than deflate "
       "can expand (corrupt, or a zip bomb)"},
      {"bomb_10mb.npz", 1 << 20,
       "refused unread: uncompressed size 10000128 bytes exceeds the memory limit of 1048576 "
       "bytes"},
  };
  for (const auto& c : cases) {
    set_memory_limit(c.limit);
    const fs::path p = kFiles / "npz" / c.file;
    expect_error([&] { read_npz(p); }, p.string() + ":x.npy", c.what);
    const std::string bytes = slurp(p);
    expect_error([&] { read_npz(bytes_of(bytes), "mem"); }, "mem:x.npy", c.what);
  }
  set_memory_limit(0);
  // An honest bomb under the default limit is simply read (10 MB of zeros).
  EXPECT_EQ(read_npz(kFiles / "npz" / "bomb_10mb.npz").at(0).tensor.size(), 2500000u);
}

// Runs `body` in a child process with the interrupt cleanup installed; returns the
// wait status.
int in_child(const std::function<void()>& body, bool ignore_sigint = false) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Whatever the test runner inherited (a background job ignores SIGINT), start from
    // the defaults, or from an ignored SIGINT when that is the case under test.
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
    if (ignore_sigint) ::signal(SIGINT, SIG_IGN);
    install_interrupt_cleanup();
    try {
      body();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(Hostile, AnInterruptedWriteLeavesNoFile) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const int status = in_child([&] {
      write_file_atomic(dir_ / "out.bin", [&](std::ostream& out) {
        out << std::string(1 << 20, 'x');
        out.flush();  // the temporary file exists and holds data
        ::raise(sig);
        out << "never written";
      });
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << sig << ": status " << status;
    EXPECT_EQ(WTERMSIG(status), sig);  // the process dies of the signal, as without us
    EXPECT_EQ(listing(dir_), std::vector<std::string>{}) << "signal " << sig;
  }
}

TEST_F(Hostile, AnIgnoredInterruptStaysIgnored) {
  const int status = in_child(
      [&] {
        write_file_atomic(dir_ / "out.bin", [](std::ostream& out) {
          out << "a";
          ::raise(SIGINT);  // ignored (nohup): the write completes
          out << "b";
        });
      },
      /*ignore_sigint=*/true);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"out.bin"});
  EXPECT_EQ(slurp(dir_ / "out.bin"), "ab");
}

TEST_F(Hostile, NestedWritesAreAllCleanedUp) {
  // 32 writes in progress at once (as many as the cleanup tracks), interrupted in the
  // innermost: every temporary file goes.
  const int status = in_child([&] {
    std::function<void(int)> nest = [&](int depth) {
      write_file_atomic(dir_ / ("f" + std::to_string(depth)), [&](std::ostream& out) {
        out << depth;
        out.flush();
        if (depth == 31)
          ::raise(SIGINT);
        else
          nest(depth + 1);
      });
    };
    nest(0);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(listing(dir_), std::vector<std::string>{});
}

}  // namespace
}  // namespace fpguard
