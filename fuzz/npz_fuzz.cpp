// .npz reader (libzip from memory, each entry streamed into the .npy parser). Whatever
// an entry declares, nothing may be allocated beyond the memory limit.
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
    for (const auto& nt : read_npz(fuzz::as_bytes(data, size), "fuzz.npz")) {
      FUZZ_ASSERT(!nt.name.empty());
      std::vector<double> v(nt.tensor.size());
      to_double(nt.tensor, v);
    }
  });
  return 0;
}
