#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>
#include <sstream>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/round.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard {

namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  char kind;  // NumPy kind letter
  std::size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::float64, "float64", 'f', 8}, {DType::float32, "float32", 'f', 4},
    {DType::float16, "float16", 'f', 2}, {DType::bfloat16, "bfloat16", 'V', 2},
    {DType::int8, "int8", 'i', 1},       {DType::int16, "int16", 'i', 2},
    {DType::int32, "int32", 'i', 4},     {DType::int64, "int64", 'i', 8},
    {DType::uint8, "uint8", 'u', 1},     {DType::uint16, "uint16", 'u', 2},
    {DType::uint32, "uint32", 'u', 4},   {DType::uint64, "uint64", 'u', 8},
    {DType::bool_, "bool", 'b', 1},      {DType::string, "string", 'U', 0},
};

const DTypeInfo& info(DType d) {
  for (const auto& i : kDTypes)
    if (i.dtype == d) return i;
  FPG_CHECK(false);
  return kDTypes[0];
}

}  // namespace

std::string_view to_string(DType d) {
  return info(d).name;
}
std::size_t itemsize(DType d) {
  return info(d).size;
}

std::size_t element_count(const std::vector<std::int64_t>& shape, const std::string& where) {
  std::size_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw Error(where, "negative dimension " + std::to_string(d) + " in shape");
    if (d != 0 && n > std::numeric_limits<std::size_t>::max() / 16 / static_cast<std::size_t>(d))
      throw Error(where, "shape has too many elements");
    n *= static_cast<std::size_t>(d);
  }
  return n;
}

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)), size_(element_count(shape_, "tensor")) {
  storage_.resize(size_ * itemsize(dtype_), std::byte{0});
  if (dtype_ == DType::string) strings_.resize(size_);
}

Tensor Tensor::uninitialized(DType dtype, std::vector<std::int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.size_ = element_count(t.shape_, "tensor");
  t.storage_.resize(t.size_ * itemsize(dtype));
  if (dtype == DType::string) t.strings_.resize(t.size_);
  return t;
}

void Tensor::reshape(std::vector<std::int64_t> shape) {
  FPG_CHECK(element_count(shape, "tensor") == size_);
  shape_ = std::move(shape);
}

Tensor Tensor::view(DType dtype, std::vector<std::int64_t> shape, const std::byte* bytes,
                    std::shared_ptr<const void> owner) {
  FPG_CHECK(dtype != DType::string);
  FPG_CHECK(reinterpret_cast<std::uintptr_t>(bytes) % itemsize(dtype) == 0);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.size_ = element_count(t.shape_, "tensor");
  if (t.size_ == 0) return t;  // nothing to view: an (empty) owned tensor
  FPG_CHECK(bytes != nullptr);
  t.view_ = bytes;
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::view(DType dtype, std::vector<std::int64_t> shape,
                    std::shared_ptr<const FileMap> file, std::size_t offset) {
  const FileMap* f = file.get();
  Tensor t = view(dtype, std::move(shape), f->data() + offset, std::move(file));
  FPG_CHECK(offset + t.nbytes() <= f->size());
  if (t.view_) t.file_ = f;
  return t;
}

Tensor Tensor::view(DType dtype, std::vector<std::int64_t> shape,
                    std::shared_ptr<const FileCopy> copy) {
  const FileCopy* c = copy.get();
  Tensor t = view(dtype, std::move(shape), c->address(), std::move(copy));
  FPG_CHECK(t.nbytes() == c->size() || t.size_ == 0);
  if (t.view_) t.copy_ = c;
  return t;
}

Tensor Tensor::shared(Tensor t) {
  if (t.view_ || t.dtype_ == DType::string || t.size_ == 0) return t;
  auto held = std::make_shared<const Tensor>(std::move(t));
  return view(held->dtype(), held->shape(), held->bytes(), held);
}

void Tensor::own() {
  const std::byte* from = std::as_const(*this).bytes();
  storage_.assign(from, from + size_ * itemsize(dtype_));
  view_ = nullptr;
  owner_.reset();
  file_ = nullptr;
  copy_ = nullptr;
}

void Tensor::release_pages() const {
  release_pages(0, size_);
}

void Tensor::release_pages(std::size_t first, std::size_t count) const {
  const std::size_t item = itemsize(dtype_);
  if (file_)
    file_->release(static_cast<std::size_t>(view_ - file_->data()) + first * item, count * item);
  if (copy_) copy_->release(first * item, count * item);
}

template <class T>
static bool storage_matches(DType d) {
  switch (d) {
    case DType::float64:
      return std::is_same_v<T, double>;
    case DType::float32:
      return std::is_same_v<T, float>;
    case DType::float16:
    case DType::bfloat16:
    case DType::uint16:
      return std::is_same_v<T, std::uint16_t>;
    case DType::int8:
      return std::is_same_v<T, std::int8_t>;
    case DType::int16:
      return std::is_same_v<T, std::int16_t>;
    case DType::int32:
      return std::is_same_v<T, std::int32_t>;
    case DType::int64:
      return std::is_same_v<T, std::int64_t>;
    case DType::uint8:
    case DType::bool_:
      return std::is_same_v<T, std::uint8_t>;
    case DType::uint32:
      return std::is_same_v<T, std::uint32_t>;
    case DType::uint64:
      return std::is_same_v<T, std::uint64_t>;
    case DType::string:
      return std::is_same_v<T, std::string>;
  }
  return false;
}

template <class T>
std::span<T> Tensor::data() {
  FPG_CHECK(storage_matches<std::remove_const_t<T>>(dtype_));
  if constexpr (std::is_same_v<std::remove_const_t<T>, std::string>) {
    return {strings_.data(), size_};
  } else {
    if (view_) own();
    return {reinterpret_cast<T*>(storage_.data()), size_};
  }
}
template <class T>
std::span<const T> Tensor::data() const {
  FPG_CHECK(storage_matches<T>(dtype_));
  if constexpr (std::is_same_v<T, std::string>)
    return {strings_.data(), size_};
  else
    return {reinterpret_cast<const T*>(bytes()), size_};
}

#define FPG_INSTANTIATE(T)                 \
  template std::span<T> Tensor::data<T>(); \
  template std::span<const T> Tensor::data<T>() const;
FPG_INSTANTIATE(double)
FPG_INSTANTIATE(float)
FPG_INSTANTIATE(std::int8_t)
FPG_INSTANTIATE(std::int16_t)
FPG_INSTANTIATE(std::int32_t)
FPG_INSTANTIATE(std::int64_t)
FPG_INSTANTIATE(std::uint8_t)
FPG_INSTANTIATE(std::uint16_t)
FPG_INSTANTIATE(std::uint32_t)
FPG_INSTANTIATE(std::uint64_t)
FPG_INSTANTIATE(std::string)
#undef FPG_INSTANTIATE

void to_double(const Tensor& t, std::span<double> out) {
  FPG_CHECK(out.size() == t.size());
  to_double(t, 0, out);
}

void to_double(const Tensor& t, std::size_t first, std::span<double> out) {
  FPG_CHECK(first <= t.size() && out.size() <= t.size() - first);
  auto copy = [&](auto span) {
    const auto part = span.subspan(first, out.size());
    std::copy(part.begin(), part.end(), out.begin());
  };
  switch (t.dtype()) {
    case DType::float64:
      copy(t.data<double>());
      break;
    case DType::float32:
      copy(t.data<float>());
      break;
    case DType::float16:
    case DType::bfloat16: {
      const Format f = parse_format(t.dtype() == DType::float16 ? "float16" : "bfloat16");
      const auto codes = t.data<std::uint16_t>().subspan(first, out.size());
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = decode(codes[i], f);
      break;
    }
    case DType::int8:
      copy(t.data<std::int8_t>());
      break;
    case DType::int16:
      copy(t.data<std::int16_t>());
      break;
    case DType::int32:
      copy(t.data<std::int32_t>());
      break;
    case DType::int64:
      copy(t.data<std::int64_t>());
      break;
    case DType::uint8:
    case DType::bool_:
      copy(t.data<std::uint8_t>());
      break;
    case DType::uint16:
      copy(t.data<std::uint16_t>());
      break;
    case DType::uint32:
      copy(t.data<std::uint32_t>());
      break;
    case DType::uint64:
      copy(t.data<std::uint64_t>());
      break;
    case DType::string:
      FPG_CHECK(false);  // text has no numeric value
  }
}

// ---- .npy ---------------------------------------------------------------------------

namespace {

constexpr char kMagic[] = "\x93NUMPY";

// The value of `key` in the header dict, as raw text up to the next top-level comma.
std::string dict_value(const std::string& header, const std::string& key,
                       const std::string& where) {
  const std::string k1 = "'" + key + "'";
  auto pos = header.find(k1);
  if (pos == std::string::npos) pos = header.find("\"" + key + "\"");
  if (pos == std::string::npos) throw Error(where, "malformed .npy header: no '" + key + "'");
  pos = header.find(':', pos + k1.size());
  if (pos == std::string::npos) throw Error(where, "malformed .npy header near '" + key + "'");
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  if (pos >= header.size()) throw Error(where, "malformed .npy header near '" + key + "'");
  if (header[pos] == '(') {
    const auto end = header.find(')', pos);
    if (end == std::string::npos) throw Error(where, "malformed .npy header: unclosed shape");
    return header.substr(pos, end - pos + 1);
  }
  if (header[pos] == '\'' || header[pos] == '"') {
    const auto end = header.find(header[pos], pos + 1);
    if (end == std::string::npos) throw Error(where, "malformed .npy header: unclosed string");
    return header.substr(pos + 1, end - pos - 1);
  }
  auto end = header.find_first_of(",}", pos);
  if (end == std::string::npos) throw Error(where, "malformed .npy header near '" + key + "'");
  return header.substr(pos, end - pos);
}

std::vector<std::int64_t> parse_shape(const std::string& text, const std::string& where) {
  std::vector<std::int64_t> shape;
  std::string inner = text.substr(1, text.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(std::remove(item.begin(), item.end(), ' '), item.end());
    if (item.empty()) continue;
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      throw Error(where, "malformed .npy header: bad shape " + text);
    }
    if (used != item.size()) throw Error(where, "malformed .npy header: bad shape " + text);
    shape.push_back(v);
  }
  return shape;
}

// Reads exactly n bytes; false at a premature end. Errors of the underlying source
// propagate (streams of sources that can fail are given exceptions(badbit)).
bool read_exact(std::istream& in, void* dst, std::size_t n) {
  return n == 0 ||
         static_cast<bool>(in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n)));
}

// UTF-8 <-> the code points of NumPy's unicode dtype. Malformed UTF-8 becomes U+FFFD (as
// Python's "replace" error handler does); code points beyond U+10FFFF read from a file
// too.
std::vector<char32_t> utf32(const std::string& s) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    char32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    bool ok = len > 0 && i + static_cast<std::size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      ok = (b >> 6) == 2;
      cp = cp << 6 | (b & 0x3f);
    }
    out.push_back(ok ? cp : 0xfffd);
    i += ok ? static_cast<std::size_t>(len) : 1;
  }
  return out;
}

std::string utf8(std::span<const char32_t> cps) {
  std::string out;
  for (char32_t cp : cps) {
    if (cp == 0) break;  // NumPy pads with NULs
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | cp >> 6);
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | cp >> 12);
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18 & 0x07));
      out += static_cast<char>(0x80 | (cp >> 12 & 0x3f));
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

// A read-only stream over a byte buffer, without copying it.
class SpanBuf : public std::streambuf {
 public:
  explicit SpanBuf(std::span<const std::byte> b) {
    char* p = const_cast<char*>(reinterpret_cast<const char*>(b.data()));
    setg(p, p, p + b.size());
  }
};

}  // namespace

namespace {

// A .npy header, read and checked against the size of its source.
struct Header {
  const DTypeInfo* type = nullptr;
  bool text = false;        // '<U<n>': item bytes are n UTF-32 code points
  std::size_t item = 0;     // bytes per element in the file
  bool big_endian = false;  // and more than one byte per element
  std::vector<std::int64_t> shape;
  std::string shape_text;
  std::size_t count = 0;
  std::uint64_t data_bytes = 0, available = 0;  // after the header; available: the source's
  std::uint64_t offset = 0;                     // of the data: the header's length
  bool size_known = false;
};

Header read_header(std::istream& in, std::uint64_t size, const std::string& where) {
  char magic[6];
  if (!read_exact(in, magic, 6) || std::memcmp(magic, kMagic, 6) != 0)
    throw Error(where, "not a .npy file (bad magic)");
  unsigned char ver[2];
  if (!read_exact(in, ver, 2)) throw Error(where, "truncated .npy header");
  if (ver[0] < 1 || ver[0] > 3)
    throw Error(where, "unsupported .npy version " + std::to_string(ver[0]));
  std::uint32_t hlen = 0;
  unsigned char lenb[4] = {0, 0, 0, 0};
  const std::size_t len_size = ver[0] == 1 ? 2 : 4;
  if (!read_exact(in, lenb, len_size)) throw Error(where, "truncated .npy header");
  hlen = lenb[0] | lenb[1] << 8 | (ver[0] == 1 ? 0u : (lenb[2] << 16 | lenb[3] << 24));
  if (hlen > (1u << 20))
    throw Error(where, "malformed .npy header: length " + std::to_string(hlen));
  std::string header(hlen, '\0');
  if (!read_exact(in, header.data(), hlen)) throw Error(where, "truncated .npy header");
  const std::uint64_t header_bytes = 8 + len_size + hlen;
  // NumPy writes a Python literal in ASCII (version 3.0 allows UTF-8 only for the field
  // names of structured dtypes, which are refused anyway); anything else is corruption.
  for (std::size_t i = 0; i < header.size(); ++i) {
    const auto c = static_cast<unsigned char>(header[i]);
    if (c >= 0x7f || (c < 0x20 && c != '\n' && c != '\r' && c != '\t')) {
      static constexpr char kHex[] = "0123456789abcdef";
      throw Error(where, std::string("malformed .npy header: byte 0x") + kHex[c >> 4] +
                             kHex[c & 15] + " at offset " + std::to_string(8 + len_size + i) +
                             " is not printable ASCII");
    }
  }

  const std::string descr = dict_value(header, "descr", where);
  const std::string fortran = dict_value(header, "fortran_order", where);
  Header h;
  h.offset = header_bytes;
  h.shape_text = dict_value(header, "shape", where);
  if (fortran.find("True") != std::string::npos)
    throw Error(where, "Fortran-ordered arrays are not supported; save np.ascontiguousarray(a)");
  if (fortran.find("False") == std::string::npos)
    throw Error(where, "malformed .npy header: fortran_order is '" + fortran + "'");
  if (h.shape_text.empty() || h.shape_text.front() != '(')
    throw Error(where, "malformed .npy header: shape is '" + h.shape_text + "'");
  // One message for every dtype we cannot read (object arrays are pickles: never).
  const auto unsupported = [&] {
    return Error(where, "unsupported dtype '" + descr +
                            "' (supported: float64/32/16, int8-64, uint8-64, bool, unicode)");
  };
  if (descr.size() < 3) throw unsupported();
  const char order = descr[0];
  const char kind = descr[1];
  try {
    h.item = std::stoul(descr.substr(2));
  } catch (...) {
    throw unsupported();
  }
  for (const auto& i : kDTypes)
    if (i.kind == kind && i.size == h.item && std::to_string(h.item) == descr.substr(2))
      h.type = &i;
  h.text = kind == 'U' && std::to_string(h.item) == descr.substr(2) && h.item > 0;
  if (h.text) {  // h.item code points of 4 bytes each
    if (h.item > (std::size_t{1} << 20)) throw unsupported();
    h.type = &info(DType::string);
    h.item *= 4;
  }
  if (!h.type || (order != '<' && order != '>' && order != '|' && order != '='))
    throw unsupported();
  h.big_endian = order == '>' && h.item > 1;

  h.shape = parse_shape(h.shape_text, where);
  h.count = element_count(h.shape, where);
  // Checked before allocating: a corrupt header must not make us allocate what the data
  // cannot back. A size of UINT64_MAX means "unknown" (a pipe).
  h.size_known = size != std::numeric_limits<std::uint64_t>::max();
  h.data_bytes = static_cast<std::uint64_t>(h.count) * h.item;
  h.available = size >= header_bytes ? size - header_bytes : 0;
  if (h.size_known && h.data_bytes > h.available)
    throw Error(where, "truncated .npy data: shape " + h.shape_text + " of " + h.type->name +
                           " needs " + std::to_string(h.data_bytes) + " bytes, only " +
                           std::to_string(h.available) + " remain");
  return h;
}

// After the data: reading on to the end lets a checking source (a zip entry's CRC)
// check, and finds stray bytes.
void expect_end(std::istream& in, const Header& h, const std::string& where) {
  if (h.size_known && h.data_bytes < h.available)
    throw Error(where, std::to_string(h.available - h.data_bytes) +
                           " unexpected bytes after the array data (corrupt, or not one array)");
  if (in.peek() != std::char_traits<char>::eof())
    throw Error(where, "unexpected bytes after the array data (corrupt, or not one array)");
}

// Big-endian elements of `item` bytes to native (little-endian) order, in place.
void to_native(std::byte* p, std::size_t n, std::size_t item) {
  for (std::size_t i = 0; i < n; ++i) std::reverse(p + i * item, p + (i + 1) * item);
}

}  // namespace

Tensor read_npy(std::istream& in, std::uint64_t size, const std::string& where) {
  const Header h = read_header(in, size, where);
  check_memory(h.data_bytes, where);  // a pipe, or a file larger than memory
  Tensor t =
      h.text ? Tensor(h.type->dtype, h.shape) : Tensor::uninitialized(h.type->dtype, h.shape);
  std::vector<char32_t> chars;
  if (h.text) chars.resize(h.count * h.item / 4);
  if (!read_exact(in, h.text ? static_cast<void*>(chars.data()) : t.bytes(),
                  h.text ? chars.size() * 4 : t.nbytes()))
    throw Error(where, "truncated .npy data: shape " + h.shape_text + " needs " +
                           std::to_string(h.data_bytes) + " bytes");
  expect_end(in, h, where);
  if (h.text) {
    if (h.big_endian)
      for (auto& c : chars) c = __builtin_bswap32(static_cast<std::uint32_t>(c));
    const std::size_t width = h.item / 4;
    auto out = t.data<std::string>();
    for (std::size_t i = 0; i < h.count; ++i)
      out[i] = utf8(std::span<const char32_t>(chars.data() + i * width, width));
    return t;
  }
  if (h.big_endian) to_native(t.bytes(), h.count, h.item);
  return t;
}

// The file's map when its array can be used in place: little-endian data of a regular
// file, aligned for its elements, all of it in the file. Null otherwise (then the data is
// read, with read's errors).
std::shared_ptr<const FileMap> map_array(const std::filesystem::path& path, const Header& h) {
  if (!h.size_known || h.text || h.big_endian || h.data_bytes == 0 || h.offset % h.item != 0)
    return nullptr;
  try {
    auto m = FileMap::open(path, path.string());
    return m->size() >= h.offset + h.data_bytes ? m : nullptr;
  } catch (const Error&) {
    return nullptr;
  }
}

// Arrays of at least this many bytes are read from a regular file as a view of its memory
// map (no copy, and pages that were never touched cost no memory); smaller ones are read.
constexpr std::uint64_t kMapBytes = std::uint64_t{1} << 20;

struct NpyReader::State {
  std::ifstream in;
  Header header;
  std::size_t left = 0;  // elements not read yet
  // The file's memory map (see map_array), or null: then pieces are read into `buffer`.
  std::shared_ptr<const FileMap> file;
  std::size_t released = 0;  // bytes from the map's start given back (FileMap::release)
  std::vector<std::byte> buffer;
};

NpyReader::NpyReader(const std::filesystem::path& path)
    : where_(path.string()), state_(std::make_unique<State>()) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(where_, "is a directory, not a .npy file");
  state_->in.open(path, std::ios::binary);
  if (!state_->in) throw Error(where_, std::string("cannot open: ") + std::strerror(errno));
  std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) size = std::numeric_limits<std::uint64_t>::max();  // not a regular file
  state_->header = read_header(state_->in, size, where_);
  if (state_->header.text)
    throw Error(where_, "string arrays are read whole (read_npy), not in pieces");
  state_->left = state_->header.count;
  state_->file = map_array(path, state_->header);
  // Data past the array is found now when it cannot be found by reading to the end.
  if (state_->file) {
    state_->file->sequential();
    const auto end = state_->header.offset + state_->header.data_bytes;
    expect_end(state_->in.seekg(static_cast<std::streamoff>(end)), state_->header, where_);
  }
}

NpyReader::~NpyReader() = default;

DType NpyReader::dtype() const {
  return state_->header.type->dtype;
}
const std::vector<std::int64_t>& NpyReader::shape() const {
  return state_->header.shape;
}
std::size_t NpyReader::size() const {
  return state_->header.count;
}

std::span<const std::byte> NpyReader::next(std::size_t max_elements) {
  State& st = *state_;
  const std::size_t item = st.header.item;
  const std::size_t n = std::min(st.left, max_elements);
  if (st.file) {
    const std::size_t at =
        static_cast<std::size_t>(st.header.offset) + (st.header.count - st.left) * item;
    // The pieces already handed out leave this process's memory (the page cache keeps
    // them): resident memory stays at about one piece whatever the file's size.
    if (at > st.released) {
      st.file->release(st.released, at - st.released);
      st.released = at;
    }
    st.left -= n;
    return {st.file->data() + at, n * item};
  }
  st.buffer.resize(n * item);
  return {st.buffer.data(), read(st.buffer) * item};
}

std::size_t NpyReader::read(std::span<std::byte> dst) {
  State& st = *state_;
  const Header& h = st.header;
  const std::size_t n = std::min(st.left, dst.size() / h.item);
  if (st.file) {
    const auto piece = next(n);
    std::memcpy(dst.data(), piece.data(), piece.size());
    return n;
  }
  if (!read_exact(st.in, dst.data(), n * h.item))
    throw Error(where_, "truncated .npy data: shape " + h.shape_text + " needs " +
                            std::to_string(h.data_bytes) + " bytes");
  if (h.big_endian) to_native(dst.data(), n, h.item);
  st.left -= n;
  if (st.left == 0 && n > 0) expect_end(st.in, h, where_);
  return n;
}

Tensor read_npy(std::span<const std::byte> bytes, const std::string& where) {
  SpanBuf buf(bytes);
  std::istream in(&buf);
  return read_npy(in, bytes.size(), where);
}

Tensor read_npy(const std::filesystem::path& path) {
  const std::string where = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(where, "is a directory, not a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(where, std::string("cannot open: ") + std::strerror(errno));
  std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) size = std::numeric_limits<std::uint64_t>::max();  // not a regular file
  if (size != std::numeric_limits<std::uint64_t>::max() && size >= kMapBytes) {
    const Header h = read_header(in, size, where);
    if (h.data_bytes >= kMapBytes)
      if (auto file = map_array(path, h)) {
        expect_end(in.seekg(static_cast<std::streamoff>(h.offset + h.data_bytes)), h, where);
        return Tensor::view(h.type->dtype, h.shape, std::move(file), h.offset);
      }
    in.seekg(0);
  }
  return read_npy(in, size, where);
}

namespace {

std::string header_with(const std::vector<std::int64_t>& dims, const std::string& descr);

// A string tensor's .npy data: every element as `width` UTF-32LE code points (NUL-padded),
// width the longest element's length (at least 1, as NumPy's '<U1' for empty strings).
std::vector<char32_t> npy_text(const Tensor& t, std::size_t& width) {
  std::vector<std::vector<char32_t>> cps;
  width = 1;
  for (const auto& s : t.data<std::string>()) {
    cps.push_back(utf32(s));
    width = std::max(width, cps.back().size());
  }
  std::vector<char32_t> out(cps.size() * width, 0);
  for (std::size_t i = 0; i < cps.size(); ++i)
    std::copy(cps[i].begin(), cps[i].end(), out.begin() + static_cast<std::ptrdiff_t>(i * width));
  return out;
}

}  // namespace

std::string npy_header(const Tensor& t, const std::string& where) {
  return npy_header(t.dtype(), t.shape(), where);
}

std::string npy_header(DType dtype, const std::vector<std::int64_t>& shape,
                       const std::string& where) {
  std::string descr;
  switch (dtype) {
    case DType::bool_:
      descr = "|b1";
      break;
    case DType::int8:
      descr = "|i1";
      break;
    case DType::uint8:
      descr = "|u1";
      break;
    case DType::bfloat16:
      throw Error(where, "NumPy has no bfloat16 dtype; write its bits as uint16");
    case DType::string:
      throw Error(where, "string tensors are written by write_npy only");
    default:
      descr = std::string("<") + info(dtype).kind + std::to_string(itemsize(dtype));
  }
  return header_with(shape, descr);
}

namespace {

std::string header_with(const std::vector<std::int64_t>& dims, const std::string& descr) {
  std::string shape = "(";
  for (auto d : dims) shape += std::to_string(d) + ", ";
  if (dims.size() > 1)
    shape.resize(shape.size() - 1), shape.back() = ')';
  else if (dims.size() == 1)
    shape.pop_back(), shape.back() = ',', shape += ")";
  else
    shape += ")";
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Version 1.0 has a 2-byte header length; NumPy moves to 2.0 (4 bytes) beyond it.
  std::size_t prefix = 10;
  if (header.size() + 1 + (64 - (prefix + header.size() + 1) % 64) % 64 > 0xffff) prefix = 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back(prefix == 10 ? 1 : 2);
  out.push_back(0);
  for (std::size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header;
}

}  // namespace

void write_npy(const std::filesystem::path& path, const Tensor& t) {
  if (t.dtype() == DType::string) {
    std::size_t width = 1;
    const auto chars = npy_text(t, width);
    const std::string header = header_with(t.shape(), "<U" + std::to_string(width));
    write_file_atomic(path, [&](std::ostream& out) {
      out.write(header.data(), static_cast<std::streamsize>(header.size()));
      out.write(reinterpret_cast<const char*>(chars.data()),
                static_cast<std::streamsize>(chars.size() * 4));
    });
    return;
  }
  const std::string header = npy_header(t, path.string());
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(t.bytes()), static_cast<std::streamsize>(t.nbytes()));
  });
}

}  // namespace fpguard
