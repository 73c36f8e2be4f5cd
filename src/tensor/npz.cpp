// .npz archives through libzip. Entries are parsed as they are decompressed (a stream
// over the zip entry feeds the one .npy parser), so no entry is held twice in memory,
// and each entry is read to its end, where libzip checks its CRC and size.
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <istream>
#include <memory>
#include <set>
#include <streambuf>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/round.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard {

namespace {

std::string zip_code_message(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string m = zip_error_strerror(&e);
  zip_error_fini(&e);
  return m;
}

struct ArchiveCloser {
  void operator()(zip_t* z) const { zip_discard(z); }  // read-only: nothing to write back
};
using Archive = std::unique_ptr<zip_t, ArchiveCloser>;

// The decompressed bytes of one entry as a stream buffer. A libzip failure (CRC error,
// unsupported method, corrupt data) throws Error; the istream reading from it has
// exceptions(badbit) so that the Error reaches the caller unchanged.
class ZipEntryBuf : public std::streambuf {
 public:
  ZipEntryBuf(zip_t* z, zip_uint64_t index, std::string where) : where_(std::move(where)) {
    file_ = zip_fopen_index(z, index, 0);
    if (!file_) throw Error(where_, std::string("cannot read entry: ") + zip_strerror(z));
  }
  ~ZipEntryBuf() override { zip_fclose(file_); }
  ZipEntryBuf(const ZipEntryBuf&) = delete;
  ZipEntryBuf& operator=(const ZipEntryBuf&) = delete;

 protected:
  int_type underflow() override {
    const zip_int64_t got = zip_fread(file_, buffer_, sizeof buffer_);
    if (got < 0) throw Error(where_, std::string("corrupt entry: ") + zip_file_strerror(file_));
    if (got == 0) return traits_type::eof();
    setg(buffer_, buffer_, buffer_ + got);
    return traits_type::to_int_type(buffer_[0]);
  }

 private:
  std::string where_;
  zip_file_t* file_ = nullptr;
  char buffer_[1 << 16];
};

}  // namespace

namespace {

std::string open_error(int code) {
  return code == ZIP_ER_NOZIP || code == ZIP_ER_INCONS
             ? "not a .npz file (not a zip archive: " + zip_code_message(code) + ")"
             : "cannot open: " + zip_code_message(code);
}

// Both read_npz overloads: every entry of an open archive.
std::vector<NamedTensor> read_archive(zip_t* archive, const std::string& where,
                                      std::uint64_t max_entry_bytes) {
  Archive z(archive);
  const zip_int64_t count = zip_get_num_entries(z.get(), 0);
  std::vector<NamedTensor> out;
  std::set<std::string> seen;
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto index = static_cast<zip_uint64_t>(i);
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z.get(), index, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME))
      throw Error(where, "cannot read entry " + std::to_string(i) + ": " + zip_strerror(z.get()));
    const std::string entry = st.name;
    const std::string entry_where = where + ":" + entry;
    if (!entry.empty() && entry.back() == '/') continue;  // a directory entry holds nothing
    if (entry.size() <= 4 || entry.compare(entry.size() - 4, 4, ".npy") != 0)
      throw Error(entry_where, "not a .npy entry (an .npz holds only name.npy entries)");
    const std::string name = entry.substr(0, entry.size() - 4);
    if (!seen.insert(name).second) throw Error(entry_where, "duplicate entry in the archive");
    if (!(st.valid & ZIP_STAT_SIZE))
      throw Error(entry_where, "the archive does not record the entry's size");
    // Before anything is decompressed: a small archive may declare (or expand to) far
    // more than memory holds. The .npy parser then allocates no more than this size
    // and reads at most one 64 KiB chunk beyond it (to find the end).
    if (st.size > max_entry_bytes)
      throw Error(entry_where, "uncompressed size " + std::to_string(st.size) +
                                   " bytes exceeds the limit of " +
                                   std::to_string(max_entry_bytes) +
                                   " bytes (refused unread: possible zip bomb)");
    // Deflate expands at most 1032:1 (and a stored entry not at all): a declared size
    // beyond that is a lie, found here instead of after allocating for it.
    // (size > comp_size * 1032 + 1024, written so that nothing overflows.)
    const bool stored = st.comp_method == ZIP_CM_STORE;
    if ((st.valid & ZIP_STAT_COMP_SIZE) && (st.valid & ZIP_STAT_COMP_METHOD) &&
        (stored || st.comp_method == ZIP_CM_DEFLATE) &&
        (stored ? st.size > st.comp_size
                : st.size > 1024 && (st.size - 1025) / 1032 >= st.comp_size))
      throw Error(entry_where, "declares " + std::to_string(st.size) + " bytes uncompressed from " +
                                   std::to_string(st.comp_size) + " compressed bytes, more than " +
                                   (stored ? "a stored entry holds" : "deflate can expand") +
                                   " (corrupt, or a zip bomb)");
    if (st.size > memory_limit())
      throw Error(entry_where, "refused unread: uncompressed size " + std::to_string(st.size) +
                                   " bytes exceeds the memory limit of " +
                                   std::to_string(memory_limit()) + " bytes")
          .governed_by("max_memory");
    ZipEntryBuf buf(z.get(), index, entry_where);
    std::istream in(&buf);
    in.exceptions(std::ios::badbit);
    out.push_back({name, read_npy(in, st.size, entry_where)});
  }
  return out;
}

}  // namespace

std::vector<NamedTensor> read_npz(const std::filesystem::path& path,
                                  std::uint64_t max_entry_bytes) {
  const std::string where = path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error(where, "cannot open: " + std::string(std::strerror(ENOENT)));
  if (std::filesystem::is_directory(path, ec)) throw Error(where, "cannot open: is a directory");
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &code);
  if (!z) throw Error(where, open_error(code));
  return read_archive(z, where, max_entry_bytes);
}

std::vector<NamedTensor> read_npz(std::span<const std::byte> bytes, const std::string& where,
                                  std::uint64_t max_entry_bytes) {
  // libzip takes an empty buffer for an empty archive, but an empty file for no archive
  // at all (as NumPy does): the file's answer, for both.
  if (bytes.empty()) throw Error(where, open_error(ZIP_ER_NOZIP));
  zip_error_t error;
  zip_error_init(&error);
  // libzip reads the buffer in place (no copy).
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  if (!src) {
    const std::string m = zip_error_strerror(&error);
    zip_error_fini(&error);
    throw Error(where, "cannot open: " + m);
  }
  zip_t* z = zip_open_from_source(src, ZIP_RDONLY, &error);
  if (!z) {
    zip_source_free(src);  // on failure the source is still ours
    const int code = zip_error_code_zip(&error);
    zip_error_fini(&error);
    throw Error(where, open_error(code));
  }
  zip_error_fini(&error);
  return read_archive(z, where, max_entry_bytes);
}

namespace {

struct SourceFree {
  void operator()(zip_source_t* s) const { zip_source_free(s); }
};
using Source = std::unique_ptr<zip_source_t, SourceFree>;

}  // namespace

void write_npz(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
               bool compress) {
  const std::string where = path.string();
  std::set<std::string> names;
  std::vector<std::string> headers;
  headers.reserve(tensors.size());
  for (const auto& t : tensors) {
    if (t.name.empty()) throw Error(where, "a tensor has an empty name");
    if (!names.insert(t.name).second) throw Error(where, "two tensors are named '" + t.name + "'");
    headers.push_back(npy_header(t.tensor, where + ":" + t.name + ".npy"));
  }

  if (tensors.empty()) {  // libzip writes no file for an empty archive; NumPy writes this
    static constexpr char kEmptyZip[22] = {'P', 'K', 5, 6};  // end of central directory
    write_file_atomic(path, [](std::ostream& out) { out.write(kEmptyZip, sizeof kEmptyZip); });
    return;
  }

  // The archive is built in memory (entries point at the tensors, uncopied) and then
  // written through write_file_atomic, which owns the temporary-file-and-rename rules.
  zip_error_t error;
  zip_error_init(&error);
  Source archive(zip_source_buffer_create(nullptr, 0, 0, &error));
  if (!archive)
    throw Error(where, std::string("cannot create archive: ") + zip_error_strerror(&error));
  zip_source_keep(archive.get());  // outlives zip_close, which would otherwise free it
  zip_t* z = zip_open_from_source(archive.get(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  if (!z) {
    zip_source_free(archive.get());  // undo the keep
    throw Error(where, std::string("cannot create archive: ") + zip_error_strerror(&error));
  }
  auto fail = [&](const std::string& what) {
    const std::string message = what + ": " + zip_strerror(z);
    zip_discard(z);
    throw Error(where, message);
  };
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].tensor;
    const zip_buffer_fragment_t fragments[2] = {
        {reinterpret_cast<zip_uint8_t*>(headers[i].data()), headers[i].size()},
        {reinterpret_cast<zip_uint8_t*>(const_cast<std::byte*>(t.bytes())), t.nbytes()},
    };
    zip_source_t* entry = zip_source_buffer_fragment(z, fragments, t.nbytes() == 0 ? 1 : 2, 0);
    if (!entry) fail("cannot add '" + tensors[i].name + "'");
    const std::string entry_name = tensors[i].name + ".npy";
    const zip_int64_t index = zip_file_add(z, entry_name.c_str(), entry, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(entry);
      fail("cannot add '" + entry_name + "'");
    }
    if (zip_set_file_compression(z, static_cast<zip_uint64_t>(index),
                                 compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0)
      fail("cannot set compression of '" + entry_name + "'");
  }
  if (zip_close(z) != 0) fail("cannot write archive");

  if (zip_source_open(archive.get()) != 0)
    throw Error(where, std::string("cannot read back archive: ") +
                           zip_error_strerror(zip_source_error(archive.get())));
  write_file_atomic(path, [&](std::ostream& out) {
    char buffer[1 << 16];
    for (;;) {
      const zip_int64_t got = zip_source_read(archive.get(), buffer, sizeof buffer);
      if (got < 0)
        throw Error(where, std::string("cannot read back archive: ") +
                               zip_error_strerror(zip_source_error(archive.get())));
      if (got == 0) break;
      out.write(buffer, static_cast<std::streamsize>(got));
    }
  });
  zip_source_close(archive.get());
}

namespace {

DType scaled_code_dtype(const ScaledFormat& f) {
  if (f.integer_elements) return DType::int8;
  return f.element.bits() <= 8 ? DType::uint8 : DType::uint16;
}

}  // namespace

// The codes of a scaled format as .npz entries: codes, scales (codes, or float values for
// the amax rule) and, for two-level scales, global_scale.
std::vector<NamedTensor> scaled_code_tensors(const ScaledCodes& c, const ScaledFormat& f,
                                             DType input, const std::vector<std::int64_t>& shape) {
  std::vector<NamedTensor> out;
  const DType code_type = scaled_code_dtype(f);
  Tensor codes = Tensor::uninitialized(code_type, shape);
  if (code_type == DType::uint16)
    std::copy(c.codes.begin(), c.codes.end(), codes.data<std::uint16_t>().begin());
  else
    for (std::size_t i = 0; i < c.codes.size(); ++i)
      codes.bytes()[i] = static_cast<std::byte>(c.codes[i]);
  out.push_back({"codes", std::move(codes)});
  if (f.rule == ScaleRule::amax) {
    Tensor scales(input, c.scale_shape);
    for (std::size_t i = 0; i < c.scale_values.size(); ++i) {
      if (input == DType::float32)
        scales.data<float>()[i] = static_cast<float>(c.scale_values[i]);
      else
        scales.data<double>()[i] = c.scale_values[i];
    }
    out.push_back({"scales", std::move(scales)});
  } else {
    Tensor scales(DType::uint8, c.scale_shape);
    std::copy(c.scale_codes.begin(), c.scale_codes.end(), scales.data<std::uint8_t>().begin());
    out.push_back({"scales", std::move(scales)});
  }
  if (f.rule == ScaleRule::two_level) {
    Tensor g(DType::float32, {});
    g.data<float>()[0] = static_cast<float>(c.tensor_scale);
    out.push_back({"global_scale", std::move(g)});
  }
  return out;
}

}  // namespace fpguard
