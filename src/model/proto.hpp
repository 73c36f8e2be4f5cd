// Internal to the model layer: model::Model -> ONNX ModelProto.
#pragma once

#include <onnx/onnx_pb.h>

#include "fpguard/model.hpp"

namespace fpguard::model {

// The model as a ModelProto, every tensor inline (raw_data). `types_only`: large tensors
// keep their type and dims but not their values (a proto for shape inference, which reads
// only small tensors' values, without a copy of the weights).
onnx::ModelProto to_proto(const Model& m, bool types_only);

}  // namespace fpguard::model
