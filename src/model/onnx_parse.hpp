// Internal to the model layer: a ModelProto parsed from a buffer (a file's memory map), the
// initializers' and constants' raw_data left in it instead of copied into the proto.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <span>
#include <string>
#include <unordered_map>

namespace fpguard::model {

// Where a TensorProto's raw_data lies in the buffer (the proto itself holds none).
struct RawRange {
  std::size_t offset = 0;
  std::size_t size = 0;
};

// The TensorProtos of a parsed model whose raw_data stayed in the buffer: graph initializers
// and tensor attributes (Constant values), in subgraphs too. The keys point into the
// ModelProto they were parsed into.
using MappedRaw = std::unordered_map<const onnx::TensorProto*, RawRange>;

// Parses `buffer` (a whole serialized ModelProto) into `mp` as protobuf would, but for
// those raw_data fields, whose places it returns. Error(where, "not an ONNX model ...") for
// what protobuf refuses (2 GiB or more too).
MappedRaw parse_mapped(std::span<const std::byte> buffer, onnx::ModelProto& mp,
                       const std::string& where);

}  // namespace fpguard::model
