// The functions of fpguard_onnx (the files that see protobuf types), as the executable
// defines them: calls into the ONNX module, loaded on the first of them
// (src/lazy/onnx_module.hpp). They have the declarations of fpguard/model.hpp and
// fpguard/tensor.hpp, so the rest of fpguard calls them as it calls fpguard_onnx's.
#include <dlfcn.h>

#include "fpguard/error.hpp"
#include "lazy/library.hpp"
#include "lazy/onnx_module.hpp"

namespace fpguard {

namespace {

const lazy::OnnxModule& onnx() {
  static const lazy::OnnxModule& m = []() -> const lazy::OnnxModule& {
    constexpr const char* kFile = "libfpguard_onnx.so";
    void* handle = lazy::open_module(kFile, "ONNX", RTLD_NOW | RTLD_LOCAL);
    const auto get =
        reinterpret_cast<const lazy::OnnxModule* (*)()>(dlsym(handle, "fpguard_onnx_module"));
    const lazy::OnnxModule* table = get ? get() : nullptr;
    if (!table || table->version != lazy::kOnnxModuleVersion)
      throw Error(kFile, "not the ONNX module of this fpguard (rebuild it)");
    return *table;
  }();
  return m;
}

}  // namespace

namespace model {

Model load(const std::filesystem::path& path) {
  return onnx().load(path);
}

Model load_from_bytes(const std::string& bytes, const std::string& where,
                      const std::filesystem::path& base_dir) {
  return onnx().load_from_bytes(bytes, where, base_dir);
}

SaveResult save(const Model& m, const std::filesystem::path& path, const SaveOptions& o) {
  return onnx().save(m, path, o);
}

std::string save_to_bytes(const Model& m) {
  return onnx().save_to_bytes(m);
}

std::string save_graph_bytes(const Model& m) {
  return onnx().save_graph_bytes(m);
}

Model load_graph_bytes(const std::string& bytes, const std::string& where) {
  return onnx().load_graph_bytes(bytes, where);
}

OpTyping op_typing(const std::string& op, const std::string& domain, std::int64_t opset) {
  return onnx().op_typing(op, domain, opset);
}

std::map<std::string, int> infer_elem_types(const Model& m) {
  return onnx().infer_elem_types(m);
}

std::map<const Graph*, std::map<std::string, int>> infer_graph_elem_types(const Model& m) {
  return onnx().infer_graph_elem_types(m);
}

}  // namespace model

NamedTensor read_tensor_pb(const std::filesystem::path& path) {
  return onnx().read_tensor_pb(path);
}

NamedTensor read_tensor_pb(std::span<const std::byte> bytes, const std::string& where,
                           const std::string& default_name) {
  return onnx().read_tensor_pb_bytes(bytes, where, default_name);
}

void write_tensor_pb(const std::filesystem::path& path, const NamedTensor& t) {
  onnx().write_tensor_pb(path, t);
}

NamedValue read_sequence_pb(const std::filesystem::path& path) {
  return onnx().read_sequence_pb(path);
}

NamedValue read_optional_pb(const std::filesystem::path& path) {
  return onnx().read_optional_pb(path);
}

}  // namespace fpguard
