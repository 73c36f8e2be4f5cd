// Internal: the TensorProto <-> Tensor conversions shared by tensor_pb.cpp (standalone
// .pb files) and the model layer (initializers, Constant values, attributes). Only files
// that already see protobuf types include this (the files of the ONNX module,
// src/lazy/onnx_module.hpp); the table of element types is in tensor/elem_types.hpp.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <memory>
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
// raw_data that a parse left in its buffer (model/onnx_parse.hpp): bytes [offset, offset +
// size) of `buffer`, which is `map`'s when the buffer is a file's map.
struct RawInBuffer {
  const std::byte* buffer = nullptr;
  std::shared_ptr<const FileMap> map;
  std::size_t offset = 0;
  std::size_t size = 0;
};
// The values of `p`, whose raw_data is `raw` (p itself holds none): a view of the file's
// map where the bytes are aligned for the type, else a copy (the map's pages of them then
// given back).
Tensor tensor_from_proto(const onnx::TensorProto& p, const RawInBuffer& raw,
                         const std::string& where);
// Sets dims, data_type and raw_data of `p` (its name is left alone).
void tensor_to_proto(const Tensor& t, onnx::TensorProto& p);

}  // namespace fpguard::detail
