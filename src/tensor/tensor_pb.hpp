// Internal: the TensorProto <-> Tensor conversions shared by tensor_pb.cpp (standalone
// .pb files) and the model layer (initializers, Constant values, attributes). Only files
// that already see protobuf types include this (the files of the ONNX module,
// src/lazy/onnx_module.hpp); the table of element types is in tensor/elem_types.hpp.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

#include "fpguard/tensor.hpp"
#include "tensor/elem_types.hpp"

namespace fpguard::detail {

// The values of `p` (raw_data or its typed field); Error(where, ...) for what
// read_tensor_pb refuses. External data must have been resolved into raw_data first.
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& where);
// The same, taking p's raw_data over instead of copying it (p is left without it): the
// tensor views the taken buffer (Tensor::view), so a parsed model's weights are held once.
Tensor take_tensor_from_proto(onnx::TensorProto& p, const std::string& where);
// Sets dims, data_type and raw_data of `p` (its name is left alone).
void tensor_to_proto(const Tensor& t, onnx::TensorProto& p);

}  // namespace fpguard::detail
