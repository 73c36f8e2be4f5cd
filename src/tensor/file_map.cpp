// Read-only memory maps of whole files: the storage of Tensor views (external data of
// ONNX models, large .npy files) and of NpyReader's pieces.
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
                                             const std::string& where) {
  const ReadOnlyFd file(path, where);
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
  return m;
}

FileMap::~FileMap() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

std::span<std::byte> FileMap::whole_pages(std::size_t offset, std::size_t bytes) const {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t begin = (offset + page - 1) / page * page;
  const std::size_t end = std::min(offset + bytes, size_) / page * page;
  if (!data_ || end <= begin) return {};
  return {const_cast<std::byte*>(data_) + begin, end - begin};
}

void FileMap::release(std::size_t offset, std::size_t bytes) const {
  if (const auto pages = whole_pages(offset, bytes); !pages.empty())
    ::madvise(pages.data(), pages.size(), MADV_DONTNEED);
}

void FileMap::discard(std::size_t offset, std::size_t bytes) const {
  // Replaced by an inaccessible anonymous map that holds no memory: the addresses stay
  // the map's (unmapped, a later mmap could take them, and the destructor's munmap of the
  // whole map would unmap that). Should the kernel refuse, the pages just stay mapped.
  if (const auto pages = whole_pages(offset, bytes); !pages.empty())
    ::mmap(pages.data(), pages.size(), PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

void FileMap::sequential() const {
  if (data_) ::madvise(const_cast<std::byte*>(data_), size_, MADV_SEQUENTIAL);
}

}  // namespace fpguard
