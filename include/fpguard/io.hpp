// File output that never leaves a partial file and never overwrites an input: data is
// written to a temporary file beside the target and renamed over it when complete.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <utility>

namespace fpguard {

// Writes `path` atomically: `write` fills a stream; on any exception the temporary file
// is removed and the target is untouched. Throws Error naming `path` when the directory
// is missing or the file cannot be written.
void write_file_atomic(const std::filesystem::path& path,
                       const std::function<void(std::ostream&)>& write);

// The bytes of a file that write_file_mapped is writing: a shared memory map of it.
class MappedOutput {
 public:
  explicit MappedOutput(std::span<std::byte> bytes) : bytes_(bytes) {}
  std::span<std::byte> bytes() const { return bytes_; }
  // Unmaps the whole pages inside [offset, offset + n), written: they stay in the page
  // cache and the file, and this process's resident memory stays at what it is writing.
  void release(std::size_t offset, std::size_t n) const;

 private:
  std::span<std::byte> bytes_;
};

// Writes `path` atomically as write_file_atomic does, as a file of exactly `size` bytes
// that `fill` writes in place through a shared memory map of the temporary file: the
// bytes go straight into the page cache, not through a buffer and write(2). The file's
// blocks are allocated before `fill` runs, so a full disk is an Error naming `path`,
// never a SIGBUS.
void write_file_mapped(const std::filesystem::path& path, std::size_t size,
                       const std::function<void(const MappedOutput&)>& fill);

// Makes SIGINT, SIGTERM and SIGHUP remove the temporary files of the writes in progress
// before the process dies of the signal as it would have (exit status 128+N in a shell),
// so an interrupted run leaves no partial output. Signals the process ignores (nohup)
// stay ignored. Idempotent; the CLI calls it first thing.
void install_interrupt_cleanup();

// Throws Error(flag, ...) when `output` names the same file as `input` (an input file is
// never overwritten).
void check_not_same_file(const std::filesystem::path& input, const std::filesystem::path& output,
                         const std::string& flag);

// Refuses, before any work is done, an output file that the end of a run could not
// write: the input itself (as check_not_same_file), an existing directory, a missing
// directory, or one where no file can be created (a probe file is created and removed
// again). Each Error names `flag`.
void check_output_file(const std::filesystem::path& input, const std::filesystem::path& output,
                       const std::string& flag);

// A file opened for reading (close-on-exec), closed when this goes out of scope: the one
// way the library opens a file descriptor it reads from (memory maps, model parsing).
class ReadOnlyFd {
 public:
  // Throws Error(where, "cannot open: <reason>").
  ReadOnlyFd(const std::filesystem::path& path, const std::string& where);
  ~ReadOnlyFd();
  ReadOnlyFd(const ReadOnlyFd&) = delete;
  ReadOnlyFd& operator=(const ReadOnlyFd&) = delete;
  int get() const { return fd_; }
  // The descriptor, now the caller's to close.
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// SHA-256 (FIPS 180-4), as lowercase hex: what identifies a model, its external data and an
// input set in the partial results of a sharded check.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t n);
  std::string hex();  // finishes the hash (the object is spent)

 private:
  void block(const unsigned char* p);
  std::array<std::uint32_t, 8> state_;
  std::array<unsigned char, 64> buffer_{};
  std::size_t used_ = 0;
  std::uint64_t length_ = 0;
};
// The SHA-256 of a file's bytes; Error(path) when it cannot be read.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace fpguard
