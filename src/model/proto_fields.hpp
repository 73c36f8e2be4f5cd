// Internal to the model layer: ONNX protobuf fields newer than the libonnx we build with
// (Debian's 1.12), read and written as protobuf unknown fields by their numbers.
#pragma once

namespace fpguard::model {

// NodeProto.metadata_props (ONNX 1.16): repeated StringStringEntryProto.
inline constexpr int kNodeMetadataField = 22;

}  // namespace fpguard::model
