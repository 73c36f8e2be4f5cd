// Internal: the TensorProto <-> Tensor conversions shared by tensor_pb.cpp (standalone
// .pb files) and the model layer (initializers, Constant values, attributes). Only files
// that already see protobuf types include this.
#pragma once

#include <onnx/onnx_pb.h>

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

// The values of `p` (raw_data or its typed field); Error(where, ...) for what
// read_tensor_pb refuses. External data must have been resolved into raw_data first.
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& where);
// The same, taking p's raw_data over instead of copying it (p is left without it): the
// tensor views the taken buffer (Tensor::view), so a parsed model's weights are held once.
Tensor take_tensor_from_proto(onnx::TensorProto& p, const std::string& where);
// Sets dims, data_type and raw_data of `p` (its name is left alone).
void tensor_to_proto(const Tensor& t, onnx::TensorProto& p);

}  // namespace fpguard::detail
