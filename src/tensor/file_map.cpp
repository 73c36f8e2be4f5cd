// Read-only memory maps of whole files: the storage of Tensor views (external data of
// ONNX models, large .npy files) and of NpyReader's pieces; and FileCopy, the values a map
// holds unaligned, in memory of their own that reads the file again.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard {

std::shared_ptr<const FileMap> FileMap::open(const std::filesystem::path& path,
                                             const std::string& where, Keep keep) {
  ReadOnlyFd file(path, where);
  const int fd = file.get();
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw Error(where, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error(where, "not a regular file (cannot be memory-mapped)");
  std::shared_ptr<FileMap> m(new FileMap);
  // The size fstat gave on this descriptor is the size mapped: every range checked against
  // it lies inside the file.
  m->size_ = static_cast<std::size_t>(st.st_size);
  if (m->size_ == 0) return m;
  void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) throw Error(where, std::string("cannot map: ") + std::strerror(errno));
  m->data_ = static_cast<const std::byte*>(p);
  if (keep == Keep::map_and_descriptor) m->fd_ = file.release();
  return m;
}

FileMap::~FileMap() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t page_size() {
  return static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// The whole pages of the mapped [base, base + limit) inside [offset, offset + bytes)
// (empty when none).
std::span<std::byte> whole_pages(const std::byte* base, std::size_t limit, std::size_t offset,
                                 std::size_t bytes) {
  const std::size_t page = page_size();
  const std::size_t begin = (offset + page - 1) / page * page;
  const std::size_t end = std::min(offset + bytes, limit) / page * page;
  if (!base || end <= begin) return {};
  return {const_cast<std::byte*>(base) + begin, end - begin};
}

}  // namespace

void FileMap::release(std::size_t offset, std::size_t bytes) const {
  if (const auto pages = whole_pages(data_, size_, offset, bytes); !pages.empty())
    ::madvise(pages.data(), pages.size(), MADV_DONTNEED);
}

void FileMap::discard(std::size_t offset, std::size_t bytes) const {
  // Replaced by an inaccessible anonymous map that holds no memory: the addresses stay
  // the map's (unmapped, a later mmap could take them, and the destructor's munmap of the
  // whole map would unmap that). Should the kernel refuse, the pages just stay mapped.
  if (const auto pages = whole_pages(data_, size_, offset, bytes); !pages.empty())
    ::mmap(pages.data(), pages.size(), PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

void FileMap::sequential() const {
  if (data_) ::madvise(const_cast<std::byte*>(data_), size_, MADV_SEQUENTIAL);
}

int FileMap::read(std::size_t offset, std::size_t bytes, std::byte* to) const {
  FPG_CHECK(fd_ >= 0);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, to, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return kEnded;
    const auto got = static_cast<std::size_t>(n);
    to += got;
    offset += got;
    bytes -= got;
  }
  return 0;
}

FileCopy::FileCopy(std::shared_ptr<const FileMap> file, std::size_t offset, std::size_t bytes,
                   std::string where)
    : file_(std::move(file)), offset_(offset), size_(bytes), where_(std::move(where)) {
  FPG_CHECK(bytes > 0 && offset <= file_->size() && bytes <= file_->size() - offset);
  const std::size_t page = page_size();
  mapped_ = (bytes + page - 1) / page * page;
  void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error(where_, "cannot map " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
  data_ = static_cast<std::byte*>(p);
  // Huge pages where the kernel can: filling 4 KiB pages one fault at a time took most of
  // the time of reading a FileCopy.
  if (mapped_ >= kHugePage) ::madvise(data_, mapped_, MADV_HUGEPAGE);
}

FileCopy::~FileCopy() {
  ::munmap(data_, mapped_);
}

void FileCopy::fill() const {
  const std::lock_guard lock(fill_);
  if (held_.load(std::memory_order_relaxed)) return;
  if (const int e = file_->read(offset_, size_, data_); e != 0)
    throw Error(where_, "cannot read " + std::to_string(size_) + " bytes at offset " +
                            std::to_string(offset_) + ": " +
                            (e == FileMap::kEnded ? "the file has changed since it was loaded"
                                                  : std::strerror(e)));
  held_.store(true, std::memory_order_release);
}

void FileCopy::release(std::size_t offset, std::size_t bytes) const {
  if (offset >= size_) return;
  // A range to the values' end takes the last page whole: its tail past them is nobody's.
  const std::size_t n = offset + bytes >= size_ ? mapped_ - offset : bytes;
  const auto pages = whole_pages(data_, mapped_, offset, n);
  if (pages.empty()) return;
  held_.store(false, std::memory_order_release);
  ::madvise(pages.data(), pages.size(), MADV_DONTNEED);
}

}  // namespace fpguard
