// .npy parser: arbitrary bytes as a file (size known) and as a pipe (size unknown). A
// tensor it accepts must survive write-then-read unchanged and be readable as doubles.
#include <istream>
#include <limits>
#include <streambuf>
#include <string>

#include "fpguard/limits.hpp"
#include "fpguard/tensor.hpp"
#include "fuzz_util.hpp"

using namespace fpguard;

namespace {

class SpanBuf : public std::streambuf {
 public:
  explicit SpanBuf(std::span<const std::byte> b) {
    char* p = const_cast<char*>(reinterpret_cast<const char*>(b.data()));
    setg(p, p, p + b.size());
  }
};

void check_round_trip(const Tensor& t) {
  std::string file = npy_header(t, "fuzz.npy");
  file.append(reinterpret_cast<const char*>(t.bytes()), t.nbytes());
  const Tensor back =
      read_npy(std::span(reinterpret_cast<const std::byte*>(file.data()), file.size()), "again");
  FUZZ_ASSERT(back.dtype() == t.dtype());
  FUZZ_ASSERT(back.shape() == t.shape());
  FUZZ_ASSERT(back.nbytes() == t.nbytes());
  FUZZ_ASSERT(std::equal(t.bytes(), t.bytes() + t.nbytes(), back.bytes()));
  std::vector<double> v(t.size());
  to_double(t, v);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_memory_limit(fuzz::kFuzzMemoryLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = fuzz::as_bytes(data, size);
  fuzz::expect_errors_only([&] { check_round_trip(read_npy(bytes, "fuzz.npy")); });
  fuzz::expect_errors_only([&] {
    SpanBuf buf(bytes);
    std::istream in(&buf);
    check_round_trip(read_npy(in, std::numeric_limits<std::uint64_t>::max(), "pipe.npy"));
  });
  return 0;
}
