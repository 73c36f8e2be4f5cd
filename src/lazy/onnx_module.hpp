// The ONNX module's interface: libfpguard_onnx.so holds fpguard_onnx (the files that see
// protobuf types) with libonnx and libprotobuf, and gives the functions that the rest of
// fpguard calls in it as a table. The executable defines those functions as calls through
// the table (src/lazy/onnx.cpp) and loads the module on the first of them: a command
// that reads no ONNX model or TensorProto file starts without libonnx and libprotobuf
// (src/lazy/library.hpp). The module's own calls into fpguard bind to the executable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>

#include "fpguard/model.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::lazy {

// Bumped when the table changes: a module of another version is refused.
constexpr int kOnnxModuleVersion = 1;

// Each entry is the function of fpguard/model.hpp or fpguard/tensor.hpp of its name.
struct OnnxModule {
  int version;
  model::Model (*load)(const std::filesystem::path&);
  model::Model (*load_from_bytes)(const std::string&, const std::string&,
                                  const std::filesystem::path&);
  model::SaveResult (*save)(const model::Model&, const std::filesystem::path&,
                            const model::SaveOptions&);
  std::string (*save_to_bytes)(const model::Model&);
  std::string (*save_graph_bytes)(const model::Model&);
  model::Model (*load_graph_bytes)(const std::string&, const std::string&);
  model::OpTyping (*op_typing)(const std::string&, const std::string&, std::int64_t);
  std::map<std::string, int> (*infer_elem_types)(const model::Model&);
  std::map<const model::Graph*, std::map<std::string, int>> (*infer_graph_elem_types)(
      const model::Model&);
  NamedTensor (*read_tensor_pb)(const std::filesystem::path&);
  NamedTensor (*read_tensor_pb_bytes)(std::span<const std::byte>, const std::string&,
                                      const std::string&);
  void (*write_tensor_pb)(const std::filesystem::path&, const NamedTensor&);
  NamedValue (*read_sequence_pb)(const std::filesystem::path&);
  NamedValue (*read_optional_pb)(const std::filesystem::path&);
};

}  // namespace fpguard::lazy

// The module's one entry point.
extern "C" const fpguard::lazy::OnnxModule* fpguard_onnx_module();
