// libfpguard_onnx.so's entry point: the table of its functions (src/lazy/onnx_module.hpp).
#include "lazy/onnx_module.hpp"

extern "C" __attribute__((visibility("default"))) const fpguard::lazy::OnnxModule*
fpguard_onnx_module() {
  using namespace fpguard;
  static const lazy::OnnxModule table{
      .version = lazy::kOnnxModuleVersion,
      .load = &model::load,
      .load_from_bytes = &model::load_from_bytes,
      .save = &model::save,
      .save_to_bytes = &model::save_to_bytes,
      .save_graph_bytes = &model::save_graph_bytes,
      .load_graph_bytes = &model::load_graph_bytes,
      .op_typing = &model::op_typing,
      .infer_elem_types = &model::infer_elem_types,
      .infer_graph_elem_types = &model::infer_graph_elem_types,
      .read_tensor_pb = static_cast<NamedTensor (*)(const std::filesystem::path&)>(&read_tensor_pb),
      .read_tensor_pb_bytes = static_cast<NamedTensor (*)(
          std::span<const std::byte>, const std::string&, const std::string&)>(&read_tensor_pb),
      .write_tensor_pb = &write_tensor_pb,
      .read_sequence_pb = &read_sequence_pb,
      .read_optional_pb = &read_optional_pb,
  };
  return &table;
}
