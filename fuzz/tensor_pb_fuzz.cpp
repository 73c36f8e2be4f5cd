// ONNX TensorProto reader (protobuf bytes -> Tensor). An accepted tensor's byte count
// must match its shape and dtype.
#include "fpguard/limits.hpp"
#include "fpguard/tensor.hpp"
#include "fuzz_util.hpp"

using namespace fpguard;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_memory_limit(fuzz::kFuzzMemoryLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::expect_errors_only([&] {
    const NamedTensor nt = read_tensor_pb(fuzz::as_bytes(data, size), "fuzz.pb", "fuzz");
    FUZZ_ASSERT(!nt.name.empty());
    const Tensor& t = nt.tensor;
    FUZZ_ASSERT(t.nbytes() == element_count(t.shape(), "shape") * itemsize(t.dtype()));
    // A string tensor (STRING TensorProtos are read since the string ops) has no numeric
    // value: to_double's precondition excludes it.
    if (t.dtype() == DType::string) {
      FUZZ_ASSERT(t.data<std::string>().size() == t.size());
      return;
    }
    std::vector<double> v(t.size());
    to_double(t, v);
  });
  return 0;
}
