// Tensors and the .npy file format. A Tensor owns contiguous, C-ordered storage of one
// DType; values of 16-bit float dtypes are stored as their real 16-bit patterns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fpguard {

enum class DType {
  float64, float32, float16, bfloat16,
  int8, int16, int32, int64,
  uint8, uint16, uint32, uint64,
  bool_,
};
std::string_view to_string(DType d);  // NumPy spelling: "float32", "bool", ...
std::size_t itemsize(DType d);

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::vector<std::int64_t> shape);  // zero-filled

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t size() const { return size_; }  // number of elements
  std::size_t nbytes() const { return storage_.size(); }
  std::byte* bytes() { return storage_.data(); }
  const std::byte* bytes() const { return storage_.data(); }

  // Typed views; T must match the dtype's storage type (FPG_CHECK).
  template <class T> std::span<T> data();
  template <class T> std::span<const T> data() const;

 private:
  DType dtype_ = DType::float32;
  std::vector<std::int64_t> shape_;
  std::size_t size_ = 0;
  std::vector<std::byte> storage_;
};

// Every element as a double (exact for every dtype but int64/uint64 beyond 2^53);
// `out` must have t.size() elements.
void to_double(const Tensor& t, std::span<double> out);

// Number of elements of `shape`; throws Error(where, ...) for negative dims or a product
// that does not fit in memory sizes.
std::size_t element_count(const std::vector<std::int64_t>& shape, const std::string& where);

// .npy files (format versions 1.0, 2.0, 3.0). Little- and big-endian data are read
// (big-endian is converted on load); Fortran order, object and other dtypes are refused
// with an Error naming the file.
Tensor read_npy(const std::filesystem::path& path);
// Written atomically (temporary file + rename).
void write_npy(const std::filesystem::path& path, const Tensor& t);

}  // namespace fpguard
