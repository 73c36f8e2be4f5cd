// Tensors and their files. A Tensor holds contiguous, C-ordered storage of one DType;
// values of 16-bit float dtypes are stored as their real 16-bit patterns. The storage is
// owned, or a read-only view of bytes kept alive by a shared owner (a file's memory map,
// a buffer taken over from a parser): copies of a view share it, and the first write
// access copies it into owned storage (copy on write), so a mapped file is never written. Tensors
// are read from and written to .npy files, .npz archives (zip, stored or deflated), ONNX
// TensorProto .pb files and directories of .npy/.pb files (ONNX test_data_set_N). Every
// bad file throws fpguard::Error naming the file (and the archive entry); no zip or
// protobuf type appears here.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fpguard {

enum class DType {
  float64,
  float32,
  float16,
  bfloat16,
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  bool_,
  // Text (ONNX STRING): each element a std::string of UTF-8, held apart from the byte
  // storage (itemsize 0, data<std::string>()). Only ops registered to take strings see
  // them (exec::kStrings); NumPy writes them as its unicode dtype '<U<n>'.
  string,
};
std::string_view to_string(DType d);  // NumPy spelling: "float32", "bool", ...; "string"
std::size_t itemsize(DType d);

namespace detail {
// Leaves new elements uninitialised (std::vector would zero them), for storage that is
// about to be overwritten in full.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
}  // namespace detail

class FileMap;
class FileCopy;

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::vector<std::int64_t> shape);  // zero-filled
  // Storage left uninitialised: for a result the caller writes in full (no zero-fill pass).
  static Tensor uninitialized(DType dtype, std::vector<std::int64_t> shape);

  // A view of `bytes` (size() * itemsize(dtype) of them, aligned for the dtype), which
  // `owner` keeps alive and nobody writes while it lives. Not for strings.
  static Tensor view(DType dtype, std::vector<std::int64_t> shape, const std::byte* bytes,
                     std::shared_ptr<const void> owner);
  // A view of `file`'s map from byte `offset` on (aligned for the dtype, inside the file).
  static Tensor view(DType dtype, std::vector<std::int64_t> shape,
                     std::shared_ptr<const FileMap> file, std::size_t offset);
  // A view of `copy`'s values (size() * itemsize(dtype) bytes of them).
  static Tensor view(DType dtype, std::vector<std::int64_t> shape,
                     std::shared_ptr<const FileCopy> copy);
  // `t` as a view of its own storage, which the view and its copies then share (writing
  // through one copies it first, as for any view): for a value copied many times, such as
  // an input that every run of an executor copies into its values. Views, strings and empty
  // tensors come back as they are.
  static Tensor shared(Tensor t);

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  // The same elements under another shape of as many (FPG_CHECK), nothing copied.
  void reshape(std::vector<std::int64_t> shape);
  std::size_t size() const { return size_; }  // number of elements
  std::size_t nbytes() const { return view_ ? size_ * itemsize(dtype_) : storage_.size(); }
  // Write access: a view is first copied into owned storage (read through a const Tensor
  // to avoid that).
  std::byte* bytes() {
    if (view_) own();
    return storage_.data();
  }
  // (A view of a FileCopy reads its values from the file here when they are not held.)
  const std::byte* bytes() const;
  // Where the values are, without reading them: what identifies a weight in caches.
  const void* address() const { return view_ ? view_ : storage_.data(); }
  // Whether the storage is a view (nothing written through this tensor since it was made).
  bool is_view() const { return view_ != nullptr; }
  // Whether it is a view of a file's map or of a FileCopy: its pages can be given back
  // (release_pages).
  bool maps_file() const { return file_ != nullptr || copy_ != nullptr; }
  // The FileCopy it views, or null.
  const FileCopy* file_copy() const { return copy_; }
  // For a view of a file's map or of a FileCopy: gives its pages back to the kernel
  // (FileMap::release, FileCopy::release), for a reader that has made its own copy (a
  // weight reordered for oneDNN); read again through bytes() or data(), they come back
  // from the file (a FileCopy's read through a pointer taken before are zeros). Nothing
  // for other tensors.
  void release_pages() const;
  // The same for the elements [first, first + count) only (the whole pages inside them):
  // for readers that give back what each thread has read.
  void release_pages(std::size_t first, std::size_t count) const;

  // Typed views; T must match the dtype's storage type (FPG_CHECK): std::string for
  // DType::string.
  template <class T>
  std::span<T> data();
  template <class T>
  std::span<const T> data() const;

 private:
  void own();  // a view -> owned storage holding the same bytes

  DType dtype_ = DType::float32;
  std::vector<std::int64_t> shape_;
  std::size_t size_ = 0;
  std::vector<std::byte, detail::DefaultInitAllocator<std::byte>> storage_;  // empty for a view
  std::vector<std::string> strings_;                                         // DType::string only
  const std::byte* view_ = nullptr;    // a view's bytes, or null
  std::shared_ptr<const void> owner_;  // what keeps them alive
  const FileMap* file_ = nullptr;      // owner_, when it is a file's map
  const FileCopy* copy_ = nullptr;     // owner_, when it is a FileCopy
};

// A file's bytes mapped read-only (MAP_PRIVATE), shared by the tensors that view them and
// unmapped when the last of them goes. Every byte of [data, data + size) exists in the file
// as it was when mapped (reading it cannot fault, unless the file is truncated meanwhile).
class FileMap {
 public:
  // What a map keeps open besides the map: the file's descriptor too, for read() (a map
  // that FileCopies read from; each descriptor kept counts against the process's limit).
  enum class Keep { map, map_and_descriptor };
  // Error(where, ...) when the file cannot be opened, is not a regular file or cannot be
  // mapped. An empty file maps to size 0 (data null).
  static std::shared_ptr<const FileMap> open(const std::filesystem::path& path,
                                             const std::string& where, Keep keep = Keep::map);
  ~FileMap();
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  // Gives [offset, offset + bytes) back to the kernel (MADV_DONTNEED; whole pages inside the
  // range): read again, they come back from the page cache (the file is not changed).
  void release(std::size_t offset, std::size_t bytes) const;
  // Takes the whole pages inside [offset, offset + bytes) out of the map, which nothing may
  // read again: a range copied out, whose pages the kernel would otherwise map back in
  // with a neighbour's (it maps a large folio of the page cache whole when one page of it
  // faults). Reading them afterwards faults (SIGSEGV).
  void discard(std::size_t offset, std::size_t bytes) const;
  // Tells the kernel the map is read front to back (MADV_SEQUENTIAL: more read-ahead).
  void sequential() const;
  // Reads [offset, offset + bytes) of the file into `to` (pread: the map, discarded
  // ranges included, is not touched): 0, the errno of a read that failed, or kEnded when
  // the file now ends before the range's end. Only for a map opened with
  // Keep::map_and_descriptor (FPG_CHECK).
  static constexpr int kEnded = -1;
  int read(std::size_t offset, std::size_t bytes, std::byte* to) const;

 private:
  FileMap() = default;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;  // the file, open for read() (Keep::map_and_descriptor), or -1
};

// A range of a file's map in memory of its own, page-aligned: values that the map holds
// at an address unfit for their type (ONNX does not align raw_data). Like a map's, its
// pages can be given back (release) and come back when read again: read from the file
// (FileMap::read). Nothing is read before the values are first asked for.
class FileCopy {
 public:
  // Error(where, ...) when the memory cannot be mapped. [offset, offset + bytes) lies in
  // `file`'s map (FPG_CHECK); bytes > 0.
  FileCopy(std::shared_ptr<const FileMap> file, std::size_t offset, std::size_t bytes,
           std::string where);
  ~FileCopy();
  FileCopy(const FileCopy&) = delete;
  FileCopy& operator=(const FileCopy&) = delete;
  // The values, read from the file first where not held: Error(where, ...) when the file
  // has become shorter since it was mapped. Safe from several threads at once.
  const std::byte* data() const {
    if (!held_.load(std::memory_order_acquire)) fill();
    return data_;
  }
  const std::byte* address() const { return data_; }
  std::size_t size() const { return size_; }
  // Whether the values are held (read and not given back since).
  bool held() const { return held_.load(std::memory_order_acquire); }
  // Gives the whole pages inside [offset, offset + bytes) back to the kernel; the next
  // data() reads the values again. Not while another thread reads them.
  void release(std::size_t offset, std::size_t bytes) const;

 private:
  void fill() const;
  std::shared_ptr<const FileMap> file_;
  std::size_t offset_;
  std::size_t size_;
  std::size_t mapped_;  // size_ rounded up to whole pages
  std::byte* data_;
  std::string where_;
  mutable std::atomic<bool> held_{false};
  mutable std::mutex fill_;
};

inline const std::byte* Tensor::bytes() const {
  if (copy_) return copy_->data();
  return view_ ? view_ : storage_.data();
}

// Every element as a double (exact for every dtype but int64/uint64 beyond 2^53);
// `out` must have t.size() elements. Not for strings (FPG_CHECK).
void to_double(const Tensor& t, std::span<double> out);
// The same for the elements [first, first + out.size()) (inside the tensor: FPG_CHECK).
void to_double(const Tensor& t, std::size_t first, std::span<double> out);

// Number of elements of `shape`; throws Error(where, ...) for negative dims or a product
// that does not fit in memory sizes.
std::size_t element_count(const std::vector<std::int64_t>& shape, const std::string& where);

// A tensor with the name it has in a file set: an .npz key, a TensorProto name, a stem.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// ---- values ---------------------------------------------------------------------------
// A graph value that need not be a tensor: a tensor, a sequence of tensors (ONNX
// seq(tensor)), or an empty optional (ONNX optional(T) holding nothing). An optional that
// holds something is simply that tensor or sequence: no op tells the two apart
// (OptionalHasElement is true for both, OptionalGetElement returns either).
enum class ValueKind : std::uint8_t { tensor, sequence, none };
std::string_view to_string(ValueKind k);  // "tensor", "sequence", "empty optional"

struct Value {
  ValueKind kind = ValueKind::tensor;
  Tensor tensor;              // kind tensor
  std::vector<Tensor> items;  // kind sequence, in order

  Value() = default;
  Value(Tensor t) : tensor(std::move(t)) {}  // NOLINT: a tensor is a value
  static Value sequence(std::vector<Tensor> items) {
    Value v;
    v.kind = ValueKind::sequence;
    v.items = std::move(items);
    return v;
  }
  static Value none() {
    Value v;
    v.kind = ValueKind::none;
    return v;
  }
  bool is_tensor() const { return kind == ValueKind::tensor; }
};

struct NamedValue {
  std::string name;
  Value value;
};

// ---- .npy ----------------------------------------------------------------------------
// .npy files (format versions 1.0, 2.0, 3.0). Little- and big-endian data are read
// (big-endian is converted on load); Fortran order, object and other dtypes are refused
// with an Error naming the file. The file must hold exactly one array: a header that asks
// for more data than the file holds is refused before any allocation, and bytes after
// the array are an error.
Tensor read_npy(const std::filesystem::path& path);
// The same parser on a byte buffer; `where` names it in errors ("a.npz:x.npy").
Tensor read_npy(std::span<const std::byte> bytes, const std::string& where);
// The same parser on a stream holding `size` bytes from its current position (the whole
// of a file or an archive entry); the stream is read to its end, so a source that checks
// itself there (a zip entry's CRC) gets to.
Tensor read_npy(std::istream& in, std::uint64_t size, const std::string& where);
// Written atomically (temporary file + rename). bfloat16 is refused: NumPy has no such
// dtype (write its bits as uint16). Strings are written as NumPy's '<U<n>' (UTF-32, n the
// longest element's code points) and read back from '<U<n>' (or '>U<n>') as UTF-8.
void write_npy(const std::filesystem::path& path, const Tensor& t);
// The .npy header for `t` (magic, version, dict, padding): a .npy file is this followed
// by t.bytes(). Throws Error(where, ...) for bfloat16 and strings (write_npy only).
std::string npy_header(const Tensor& t, const std::string& where);
// The same for an array of `dtype` and `shape` written piece by piece (after the header,
// the elements in C order, little-endian).
std::string npy_header(DType dtype, const std::vector<std::int64_t>& shape,
                       const std::string& where);

// A .npy file read piece by piece, for arrays one does not want in memory at once. The
// header is read and checked on construction, with read_npy's errors (a regular file's
// bytes past the array too); strings are refused (read_npy reads them).
class NpyReader {
 public:
  explicit NpyReader(const std::filesystem::path& path);
  ~NpyReader();
  NpyReader(const NpyReader&) = delete;
  NpyReader& operator=(const NpyReader&) = delete;
  DType dtype() const;
  const std::vector<std::int64_t>& shape() const;
  std::size_t size() const;  // elements
  // Reads the next elements (as many as fit in `dst`, up to those left) into `dst` in
  // native byte order; returns how many; 0 at the end. Reading the last element checks
  // that nothing follows the array.
  std::size_t read(std::span<std::byte> dst);
  // The next elements (up to `max_elements`) in native byte order, without a copy where
  // the file allows: a view into its memory map (little-endian data of a regular file),
  // else into a buffer the reader owns. Valid until the next call; empty at the end.
  std::span<const std::byte> next(std::size_t max_elements);

 private:
  struct State;
  std::string where_;
  std::unique_ptr<State> state_;
};

// ---- .npz ----------------------------------------------------------------------------
// The largest uncompressed entry read_npz accepts by default: an entry declaring more is
// refused before anything is decompressed (a zip bomb cannot exhaust memory).
inline constexpr std::uint64_t kNpzMaxEntryBytes = std::uint64_t{4} << 30;  // 4 GiB

// .npz archives as np.savez / np.savez_compressed write them: one .npy per entry (stored
// or deflated), entry "x.npy" -> tensor "x", in archive order. Entries that are not
// .npy files, duplicate names, corrupt data (CRC), entries larger than
// `max_entry_bytes` or memory_limit() (fpguard/limits.hpp), and declared sizes that the
// compressed data cannot expand to are Errors naming "archive.npz:entry.npy".
std::vector<NamedTensor> read_npz(const std::filesystem::path& path,
                                  std::uint64_t max_entry_bytes = kNpzMaxEntryBytes);
// The same reader on an archive held in memory (read in place); `where` names it.
std::vector<NamedTensor> read_npz(std::span<const std::byte> bytes, const std::string& where,
                                  std::uint64_t max_entry_bytes = kNpzMaxEntryBytes);
// Written atomically; tensor "x" -> entry "x.npy", deflated when `compress`. Names must be
// unique and non-empty; bfloat16 is refused as for write_npy.
void write_npz(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
               bool compress);
struct ScaledCodes;   // fpguard/round.hpp
struct ScaledFormat;  // fpguard/format.hpp
// The encoding of a scaled format (round_scaled's ScaledCodes of a tensor of dtype `input`
// and shape `shape`) as `fpguard round --encode` writes it and fpguard.encode returns it:
// "codes" (int8 for MXINT8, else uint8 up to 8 bits, uint16), "scales" (their codes as
// uint8, or for the amax rule their values in `input`'s dtype) and, for two-level scales,
// "global_scale" (a float32 scalar): the entries of the .npz.
std::vector<NamedTensor> scaled_code_tensors(const ScaledCodes& c, const ScaledFormat& f,
                                             DType input, const std::vector<std::int64_t>& shape);

// ---- ONNX TensorProto (.pb) ----------------------------------------------------------
// One serialized onnx.TensorProto, as in ONNX test_data_set_N/input_0.pb. Every DType is
// read from raw_data (little-endian) or from its typed field (float_data, int32_data --
// which holds float16/bfloat16 bits, int8/16, uint8/16 and bool --, int64_data,
// double_data, uint64_data). The name is TensorProto.name, or else the file stem.
// Refused with an Error naming the file: other data types (STRING, COMPLEX64,
// FLOAT8E4M3FN, ...), external data, segments, data that does not match the dims,
// negative dims, out-of-range typed values and corrupt protobuf.
NamedTensor read_tensor_pb(const std::filesystem::path& path);
// The same reader on serialized bytes; `where` names them in errors and `default_name`
// is the name when TensorProto.name is empty.
NamedTensor read_tensor_pb(std::span<const std::byte> bytes, const std::string& where,
                           const std::string& default_name);
// Written atomically with raw_data, as onnx.numpy_helper.from_array does.
void write_tensor_pb(const std::filesystem::path& path, const NamedTensor& t);

// One serialized onnx.SequenceProto (of tensors) or onnx.OptionalProto (of a tensor or a
// sequence of tensors), as in the test_data_set of a graph input of sequence or optional
// type; the tensors are read as read_tensor_pb reads them. The name is the proto's, or
// else the file stem. Sequences of maps or of sequences are refused.
NamedValue read_sequence_pb(const std::filesystem::path& path);
NamedValue read_optional_pb(const std::filesystem::path& path);

// ---- sets of tensors -----------------------------------------------------------------
// Every .npy and .pb file directly in `dir` (other files are ignored), in the natural
// order of the file names (input_2 before input_10: an ONNX test_data_set's order is the
// graph-input order). A .npy is named by its stem, a .pb as read_tensor_pb says. Two
// files giving the same name, or no tensor file at all, are Errors naming the directory.
std::vector<NamedTensor> read_tensor_dir(const std::filesystem::path& dir);
// "Natural" order: digit runs compare as numbers (input_2 before input_10, the order of an
// ONNX test_data_set's files and of a directory of sets), leading zeros aside (fewer
// first), the rest byte by byte. A strict total order.
bool natural_less(std::string_view a, std::string_view b);
// Dispatches on what `path` is: a directory (read_tensor_dir), .npy (one tensor named by
// the stem), .npz, or .pb; anything else is an Error naming it.
std::vector<NamedTensor> read_tensors(const std::filesystem::path& path);

}  // namespace fpguard
