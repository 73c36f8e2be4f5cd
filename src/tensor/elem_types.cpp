// ONNX's element types without protobuf (tensor/elem_types.hpp), and the names of value
// kinds (fpguard/tensor.hpp).
#include "tensor/elem_types.hpp"

#include "fpguard/error.hpp"

namespace fpguard {

std::string_view to_string(ValueKind k) {
  switch (k) {
    case ValueKind::tensor:
      return "tensor";
    case ValueKind::sequence:
      return "sequence";
    case ValueKind::none:
      return "empty optional";
  }
  return "?";
}

namespace detail {

// TensorProto.DataType, including codes newer than the libonnx we build with, so that
// every refusal can name the type.
constexpr PbType kPbTypes[] = {
    {0, "UNDEFINED", std::nullopt},       {1, "FLOAT", DType::float32},
    {2, "UINT8", DType::uint8},           {3, "INT8", DType::int8},
    {4, "UINT16", DType::uint16},         {5, "INT16", DType::int16},
    {6, "INT32", DType::int32},           {7, "INT64", DType::int64},
    {8, "STRING", DType::string},         {9, "BOOL", DType::bool_},
    {10, "FLOAT16", DType::float16},      {11, "DOUBLE", DType::float64},
    {12, "UINT32", DType::uint32},        {13, "UINT64", DType::uint64},
    {14, "COMPLEX64", std::nullopt},      {15, "COMPLEX128", std::nullopt},
    {16, "BFLOAT16", DType::bfloat16},    {17, "FLOAT8E4M3FN", std::nullopt},
    {18, "FLOAT8E4M3FNUZ", std::nullopt}, {19, "FLOAT8E5M2", std::nullopt},
    {20, "FLOAT8E5M2FNUZ", std::nullopt}, {21, "UINT4", std::nullopt},
    {22, "INT4", std::nullopt},           {23, "FLOAT4E2M1", std::nullopt},
    {24, "FLOAT8E8M0", std::nullopt},
};

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

const PbType* find_pb_type(int code) {
  for (const auto& t : kPbTypes)
    if (t.code == code) return &t;
  return nullptr;
}

const PbType& pb_type(DType d) {
  for (const auto& t : kPbTypes)
    if (t.dtype == d) return t;
  FPG_CHECK(false);
  return kPbTypes[0];
}

}  // namespace detail

}  // namespace fpguard
