// Internal: ONNX's element types (TensorProto.DataType) as a table, without protobuf. The
// model layer, the TensorProto files and every refusal that names a type read it; the
// `fpguard` executable loads libonnx only when it parses protobuf (src/lazy/onnx.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpguard/tensor.hpp"

namespace fpguard::detail {

// TensorProto.DataType: code, name and our DType (none where we cannot hold it), including
// codes newer than the libonnx we build with, so that every refusal can name the type.
// The one table of ONNX element types; the model layer uses it too.
struct PbType {
  int code;
  const char* name;
  std::optional<DType> dtype;
};
const PbType* find_pb_type(int code);  // nullptr for an unknown code
const PbType& pb_type(DType d);
// Dims as refusals write them: "[2, 3]".
std::string dims_text(const std::vector<std::int64_t>& dims);

}  // namespace fpguard::detail
