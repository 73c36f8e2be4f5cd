// The other names and values the command line parses: rounding modes, integer types,
// byte sizes (--max-memory) and the "did you mean" search behind every unknown name.
// What is accepted must round-trip through its canonical spelling.
#include <string>

#include "fpguard/error.hpp"
#include "fpguard/format.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/round.hpp"
#include "fuzz_util.hpp"

using namespace fpguard;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(fuzz::as_text(data, size));
  fuzz::expect_errors_only([&] {
    const Rounding r = parse_rounding(text);
    FUZZ_ASSERT(parse_rounding(to_string(r)) == r);
    FUZZ_ASSERT(text == to_string(r));
  });
  fuzz::expect_errors_only([&] {
    const IInfo i = iinfo(text);
    FUZZ_ASSERT(iinfo(i.dtype).bits == i.bits);
    FUZZ_ASSERT(i.min <= 0 && i.max > 0);
  });
  fuzz::expect_errors_only([&] {
    const std::uint64_t n = parse_byte_size(text, "--max-memory");
    FUZZ_ASSERT(n > 0);
    FUZZ_ASSERT(parse_byte_size(std::to_string(n), "again") == n);
  });
  const std::string hint = did_you_mean(text, format_names());
  FUZZ_ASSERT(hint.empty() || find_format(hint).has_value());
  return 0;
}
