// The ONNX model loader: protobuf bytes -> IR -> validation (opsets, unique producers,
// defined inputs, attribute types against the schema, initializer sizes, external data
// refused outside a directory that does not exist), then the graph analyses check and
// plan start with (topological order, unsupported ops, display names) and a save/load
// round trip. Nothing is run.
#include <string>

#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/model.hpp"
#include "fuzz_util.hpp"

using namespace fpguard;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_memory_limit(fuzz::kFuzzMemoryLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::filesystem::path nowhere = "/nonexistent/fpguard-fuzz";
  fuzz::expect_errors_only([&] {
    const model::Model m = model::load_from_bytes(bytes, "fuzz.onnx", nowhere);
    const auto order = model::topological_order(m.graph, "fuzz.onnx");
    FUZZ_ASSERT(order.size() == m.graph.nodes.size());
    (void)exec::unsupported_ops(m.graph);
    const auto names = analysis::display_names(m);
    FUZZ_ASSERT(names.size() == m.graph.nodes.size());
    const model::Model again =
        model::load_from_bytes(model::save_to_bytes(m), "again.onnx", nowhere);
    FUZZ_ASSERT(again.graph.nodes.size() == m.graph.nodes.size());
    FUZZ_ASSERT(again.graph.initializers.size() == m.graph.initializers.size());
  });
  return 0;
}
