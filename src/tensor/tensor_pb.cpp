// ONNX TensorProto .pb files. The protobuf types stay in this file: tensor.hpp shows only
// fpguard types (DESIGN: the model layer is the only other place that sees them).
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/tensor.hpp"
#include "tensor/tensor_pb.hpp"

namespace fpguard {

// raw_data is little-endian, as is every Tensor's storage.
static_assert(std::endian::native == std::endian::little);

using detail::find_pb_type;
using detail::pb_type;
using detail::PbType;

namespace {

// The typed field that holds values of `d` when raw_data is not used.
enum class Field { float_data, int32_data, int64_data, double_data, uint64_data };

Field typed_field(DType d) {
  switch (d) {
    case DType::float32:
      return Field::float_data;
    case DType::float64:
      return Field::double_data;
    case DType::int64:
      return Field::int64_data;
    case DType::uint32:
    case DType::uint64:
      return Field::uint64_data;
    default:
      return Field::int32_data;  // 8/16-bit types, float16/bfloat16 bits, bool, int32
  }
}

const char* field_name(Field f) {
  switch (f) {
    case Field::float_data:
      return "float_data";
    case Field::int32_data:
      return "int32_data";
    case Field::int64_data:
      return "int64_data";
    case Field::double_data:
      return "double_data";
    case Field::uint64_data:
      return "uint64_data";
  }
  return "";
}

int field_size(const onnx::TensorProto& p, Field f) {
  switch (f) {
    case Field::float_data:
      return p.float_data_size();
    case Field::int32_data:
      return p.int32_data_size();
    case Field::int64_data:
      return p.int64_data_size();
    case Field::double_data:
      return p.double_data_size();
    case Field::uint64_data:
      return p.uint64_data_size();
  }
  return 0;
}

// Copies `values` into `out`, refusing any outside [lo, hi] (int32_data and uint64_data
// carry narrower types, and nothing but a broken writer puts 300 in a uint8's slot).
template <class T, class Values>
void narrow_into(const Values& values, std::span<T> out, std::int64_t lo, std::uint64_t hi,
                 const char* field, const char* type, const std::string& where) {
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    bool in_range = false;
    if constexpr (std::is_signed_v<decltype(v)>)
      in_range = v >= lo && (v < 0 || static_cast<std::uint64_t>(v) <= hi);
    else
      in_range = static_cast<std::uint64_t>(v) <= hi;
    if (!in_range)
      throw Error(where, std::string(field) + "[" + std::to_string(i) + "] = " + std::to_string(v) +
                             " is out of range for " + type);
    out[static_cast<std::size_t>(i)] = static_cast<T>(v);
  }
}

// Where a tensor's raw_data is: in p, taken over when `take` is p itself (instead of
// copied), or in the buffer p was parsed from (`mapped`; p holds none).
struct RawSource {
  onnx::TensorProto* take = nullptr;
  const detail::RawInBuffer* mapped = nullptr;
};

bool has_raw_data(const onnx::TensorProto& p, const RawSource& src) {
  return src.mapped || p.has_raw_data();
}

// A STRING tensor: string_data only (raw_data cannot hold strings).
Tensor string_tensor(const onnx::TensorProto& p, const std::vector<std::int64_t>& dims,
                     std::size_t n, bool has_raw, const std::string& where) {
  if (has_raw) throw Error(where, "STRING tensor has raw_data (expected string_data)");
  if (static_cast<std::size_t>(p.string_data_size()) != n)
    throw Error(where, "string_data has " + std::to_string(p.string_data_size()) +
                           " values, but dims " + detail::dims_text(dims) + " need " +
                           std::to_string(n));
  Tensor t(DType::string, dims);
  std::copy(p.string_data().begin(), p.string_data().end(), t.data<std::string>().begin());
  return t;
}

// Exactly one place may hold the values: raw_data or the dtype's own typed field.
void check_one_value_field(const onnx::TensorProto& p, bool has_raw, const PbType& type,
                           Field field, const std::string& where) {
  for (Field f : {Field::float_data, Field::int32_data, Field::int64_data, Field::double_data,
                  Field::uint64_data}) {
    if (field_size(p, f) == 0) continue;
    if (has_raw) throw Error(where, std::string("has both raw_data and ") + field_name(f));
    if (f != field)
      throw Error(where, std::string(type.name) + " tensor has values in " + field_name(f) +
                             " (expected raw_data or " + field_name(field) + ")");
  }
  if (p.string_data_size() > 0)
    throw Error(where, std::string(type.name) + " tensor has values in string_data");
}

// Unaligned values of at least this many bytes are a FileCopy (each costs the process a
// mapping, and its map a hole); smaller ones are copied.
constexpr std::size_t kFileCopyBytes = std::size_t{1} << 16;

// raw_data left in a parse's buffer: a view of the file's map where aligned for `dtype`,
// else a FileCopy (read from the file when first read, its pages given back like the
// map's) or for small values a copy (the map's pages of it then given back).
Tensor from_buffer(const detail::RawInBuffer& raw, DType dtype,
                   const std::vector<std::int64_t>& dims, const std::string& where) {
  const std::byte* bytes = raw.buffer + raw.offset;
  if (raw.map) {
    FPG_CHECK(raw.buffer == raw.map->data() && raw.offset <= raw.map->size() &&
              raw.size <= raw.map->size() - raw.offset);
    if (reinterpret_cast<std::uintptr_t>(bytes) % itemsize(dtype) == 0)
      return Tensor::view(dtype, dims, raw.map, raw.offset);
  }
  check_memory(raw.size, where);
  if (raw.map && raw.size >= kFileCopyBytes) {
    auto copy = std::make_shared<const FileCopy>(raw.map, raw.offset, raw.size, where);
    // The map's pages of it are never read (the copy reads the file): out of the map
    // (FileMap::discard), or a neighbour viewed in the map would bring some of them back.
    raw.map->discard(raw.offset, raw.size);
    return Tensor::view(dtype, dims, std::move(copy));
  }
  Tensor t = Tensor::uninitialized(dtype, dims);  // written in full below
  if (raw.size > 0) std::memcpy(t.bytes(), bytes, raw.size);
  if (raw.map) raw.map->release(raw.offset, raw.size);
  return t;
}

// The values of raw_data, from `src`.
Tensor from_raw_data(const onnx::TensorProto& p, const PbType& type,
                     const std::vector<std::int64_t>& dims, std::size_t n, const RawSource& src,
                     const std::string& where) {
  const DType dtype = *type.dtype;
  const std::size_t want = n * itemsize(dtype);
  const std::size_t have = src.mapped ? src.mapped->size : p.raw_data().size();
  if (have != want)
    throw Error(where, "raw_data has " + std::to_string(have) + " bytes, but dims " +
                           detail::dims_text(dims) + " of " + type.name + " need " +
                           std::to_string(want));
  Tensor t;
  if (src.mapped) {
    t = from_buffer(*src.mapped, dtype, dims, where);
  } else {
    std::shared_ptr<const std::string> taken;
    if (src.take && want > 0) taken.reset(src.take->release_raw_data());  // p's now empty
    const auto* raw =
        reinterpret_cast<const std::byte*>(taken ? taken->data() : p.raw_data().data());
    if (taken && reinterpret_cast<std::uintptr_t>(raw) % itemsize(dtype) == 0) {
      t = Tensor::view(dtype, dims, raw, std::move(taken));
    } else {
      check_memory(want, where);
      t = Tensor::uninitialized(dtype, dims);  // written in full below
      if (want > 0) std::memcpy(t.bytes(), raw, want);
    }
  }
  if (dtype == DType::bool_) {
    const auto v = std::as_const(t).data<std::uint8_t>();
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] > 1)
        throw Error(where, "raw_data[" + std::to_string(i) + "] = " + std::to_string(v[i]) +
                               " is not a BOOL (0 or 1)");
  }
  return t;
}

// The values of the dtype's typed field (float_data, int32_data, ...), narrowed and
// range-checked where the field is wider than the type.
Tensor from_typed_field(const onnx::TensorProto& p, const PbType& type, Field field,
                        const std::vector<std::int64_t>& dims, std::size_t n,
                        const std::string& where) {
  const DType dtype = *type.dtype;
  const auto count = static_cast<std::size_t>(field_size(p, field));
  if (count != n)
    throw Error(where, std::string(field_name(field)) + " has " + std::to_string(count) +
                           " values, but dims " + detail::dims_text(dims) + " of " + type.name +
                           " need " + std::to_string(n) + (count == 0 ? " (no data)" : ""));
  check_memory(n * itemsize(dtype), where);
  Tensor t(dtype, dims);
  const char* fname = field_name(field);
  switch (dtype) {
    case DType::float32:
      std::copy(p.float_data().begin(), p.float_data().end(), t.data<float>().begin());
      break;
    case DType::float64:
      std::copy(p.double_data().begin(), p.double_data().end(), t.data<double>().begin());
      break;
    case DType::int64:
      std::copy(p.int64_data().begin(), p.int64_data().end(), t.data<std::int64_t>().begin());
      break;
    case DType::uint64:
      std::copy(p.uint64_data().begin(), p.uint64_data().end(), t.data<std::uint64_t>().begin());
      break;
    case DType::uint32:
      narrow_into(p.uint64_data(), t.data<std::uint32_t>(), 0, UINT32_MAX, fname, type.name, where);
      break;
    case DType::int32:
      std::copy(p.int32_data().begin(), p.int32_data().end(), t.data<std::int32_t>().begin());
      break;
    case DType::int16:
      narrow_into(p.int32_data(), t.data<std::int16_t>(), INT16_MIN, INT16_MAX, fname, type.name,
                  where);
      break;
    case DType::int8:
      narrow_into(p.int32_data(), t.data<std::int8_t>(), INT8_MIN, INT8_MAX, fname, type.name,
                  where);
      break;
    case DType::uint16:
    case DType::float16:
    case DType::bfloat16:  // the 16-bit pattern, zero-extended
      narrow_into(p.int32_data(), t.data<std::uint16_t>(), 0, UINT16_MAX, fname, type.name, where);
      break;
    case DType::uint8:
      narrow_into(p.int32_data(), t.data<std::uint8_t>(), 0, UINT8_MAX, fname, type.name, where);
      break;
    case DType::bool_:
      narrow_into(p.int32_data(), t.data<std::uint8_t>(), 0, 1, fname, type.name, where);
      break;
    case DType::string:
      FPG_CHECK(false);  // read from string_data
  }
  return t;
}

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& where,
                         const RawSource& src = {}) {
  if (p.data_location() == onnx::TensorProto::EXTERNAL || p.external_data_size() > 0)
    throw Error(where,
                "tensor data is stored externally (data_location EXTERNAL), which a standalone "
                ".pb does not support; load it with the model that references it");
  if (p.has_segment()) throw Error(where, "segmented tensors are not supported");
  const PbType* type = find_pb_type(p.data_type());
  if (!type || !type->dtype) {
    const std::string name = type ? type->name : "unknown";
    throw Error(where, "unsupported data_type " + name + " (" + std::to_string(p.data_type()) +
                           "); supported: FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT8-64, "
                           "UINT8-64, BOOL, STRING");
  }
  const std::vector<std::int64_t> dims(p.dims().begin(), p.dims().end());
  const std::size_t n = element_count(dims, where);  // refuses negative dims
  const bool has_raw = has_raw_data(p, src);
  if (*type->dtype == DType::string) return string_tensor(p, dims, n, has_raw, where);
  const Field field = typed_field(*type->dtype);
  check_one_value_field(p, has_raw, *type, field, where);
  if (has_raw) return from_raw_data(p, *type, dims, n, src, where);
  return from_typed_field(p, *type, field, dims, n, where);
}

// protobuf refuses messages of 2 GiB or more.
constexpr std::uint64_t kMaxMessageBytes = INT_MAX;

}  // namespace

namespace {

// Parses one `Proto` from the file at `path`, refusing what cannot be held; `what` names
// the message type in errors.
template <class Proto>
Proto parse_pb_file(const std::filesystem::path& path, const char* what) {
  const std::string where = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(where, "cannot open: is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(where, std::string("cannot open: ") + std::strerror(errno));
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size >= kMaxMessageBytes)
    throw Error(where, "file of " + std::to_string(size) + " bytes is too large for " + what +
                           " (protobuf's limit is 2 GiB)");
  // The values are about the whole file (raw_data), held once by protobuf and once by
  // the Tensor: refuse before parsing what the second copy could not hold.
  if (!ec) check_memory(size, where);
  // Parsed from the stream: the file is not held a third time as a string.
  Proto p;
  if (!p.ParseFromIstream(&in)) {
    if (in.bad()) throw Error(where, "read failed");
    throw Error(where, std::string("not ") + what + " (corrupt or not protobuf data)");
  }
  return p;
}

std::vector<Tensor> sequence_from_proto(const onnx::SequenceProto& p, const std::string& where) {
  if (p.elem_type() != onnx::SequenceProto::TENSOR &&
      !(p.elem_type() == onnx::SequenceProto::UNDEFINED && p.tensor_values_size() > 0))
    throw Error(where, "a sequence of " +
                           (p.elem_type() == onnx::SequenceProto::UNDEFINED
                                ? std::string("unknown elements")
                                : onnx::SequenceProto::DataType_Name(
                                      static_cast<onnx::SequenceProto::DataType>(p.elem_type()))) +
                           " (only sequences of tensors are supported)");
  std::vector<Tensor> items;
  for (int i = 0; i < p.tensor_values_size(); ++i)
    items.push_back(
        tensor_from_proto(p.tensor_values(i), where + ": element " + std::to_string(i)));
  return items;
}

}  // namespace

NamedTensor read_tensor_pb(const std::filesystem::path& path) {
  auto p = parse_pb_file<onnx::TensorProto>(path, "an ONNX TensorProto");
  std::string name = p.name().empty() ? path.stem().string() : p.name();
  return {std::move(name), tensor_from_proto(p, path.string(), RawSource{.take = &p})};
}

NamedValue read_sequence_pb(const std::filesystem::path& path) {
  const auto p = parse_pb_file<onnx::SequenceProto>(path, "an ONNX SequenceProto");
  std::string name = p.name().empty() ? path.stem().string() : p.name();
  return {std::move(name), Value::sequence(sequence_from_proto(p, path.string()))};
}

NamedValue read_optional_pb(const std::filesystem::path& path) {
  const auto p = parse_pb_file<onnx::OptionalProto>(path, "an ONNX OptionalProto");
  const std::string where = path.string();
  std::string name = p.name().empty() ? path.stem().string() : p.name();
  if (p.has_tensor_value()) return {std::move(name), tensor_from_proto(p.tensor_value(), where)};
  if (p.has_sequence_value())
    return {std::move(name), Value::sequence(sequence_from_proto(p.sequence_value(), where))};
  if (p.elem_type() != onnx::OptionalProto::UNDEFINED &&
      p.elem_type() != onnx::OptionalProto::TENSOR &&
      p.elem_type() != onnx::OptionalProto::SEQUENCE)
    throw Error(where, "an optional of " +
                           onnx::OptionalProto::DataType_Name(
                               static_cast<onnx::OptionalProto::DataType>(p.elem_type())) +
                           " (only optionals of tensors and sequences are supported)");
  return {std::move(name), Value::none()};
}

NamedTensor read_tensor_pb(std::span<const std::byte> bytes, const std::string& where,
                           const std::string& default_name) {
  if (bytes.size() >= kMaxMessageBytes)
    throw Error(where, std::to_string(bytes.size()) +
                           " bytes are too many for a TensorProto (protobuf's limit is 2 GiB)");
  onnx::TensorProto p;
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw Error(where, "not an ONNX TensorProto (corrupt or not protobuf data)");
  std::string name = p.name().empty() ? default_name : p.name();
  return {std::move(name), tensor_from_proto(p, where)};
}

void write_tensor_pb(const std::filesystem::path& path, const NamedTensor& t) {
  const std::string where = path.string();
  // Leave room for the dims, name and tags around raw_data.
  if (t.tensor.nbytes() + t.name.size() + 1024 >= kMaxMessageBytes)
    throw Error(where, "tensor of " + std::to_string(t.tensor.nbytes()) +
                           " bytes is too large for a TensorProto (protobuf's limit is 2 GiB)");
  onnx::TensorProto p;
  p.set_name(t.name);
  detail::tensor_to_proto(t.tensor, p);
  std::string bytes;
  if (!p.SerializeToString(&bytes)) throw Error(where, "cannot serialize the TensorProto");
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  });
}

namespace detail {

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& where) {
  return fpguard::tensor_from_proto(p, where);
}

Tensor take_tensor_from_proto(onnx::TensorProto& p, const std::string& where) {
  return fpguard::tensor_from_proto(p, where, RawSource{.take = &p});
}

Tensor tensor_from_proto(const onnx::TensorProto& p, const RawInBuffer& raw,
                         const std::string& where) {
  return fpguard::tensor_from_proto(p, where, RawSource{.mapped = &raw});
}

void tensor_to_proto(const Tensor& t, onnx::TensorProto& p) {
  p.clear_dims();
  for (auto d : t.shape()) p.add_dims(d);
  p.set_data_type(pb_type(t.dtype()).code);
  if (t.dtype() == DType::string) {
    p.clear_string_data();
    for (const auto& s : t.data<std::string>()) p.add_string_data(s);
    return;
  }
  p.set_raw_data(reinterpret_cast<const char*>(t.bytes()), t.nbytes());
}

}  // namespace detail

}  // namespace fpguard
