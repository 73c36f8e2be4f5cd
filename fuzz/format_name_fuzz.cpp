// Format names and custom eXmY[fn|fnuz] spellings, then rounding in the format found.
// Input: a name (at most 64 bytes), optionally followed by '\n', an options byte and
// float32 values.
// For every format the parser accepts:
//   - its canonical name parses back to the same format, and finfo is consistent;
//   - every code taken from the input decodes to a value that encodes back to the same
//     code and that every rounding mode leaves alone (values of the format are exact);
//   - the SIMD fast path (when it applies) equals the exact generic path bit for bit,
//     and encoding an array equals encoding element by element.
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fpguard/format.hpp"
#include "fpguard/round.hpp"
#include "fuzz_util.hpp"

using namespace fpguard;

namespace {

constexpr Rounding kModes[] = {Rounding::nearest_even, Rounding::toward_zero, Rounding::up,
                               Rounding::down, Rounding::stochastic};

bool same_double(double a, double b) {
  return std::isnan(a) ? std::isnan(b)
                       : std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

void check_format(const Format& f) {
  const Format again = parse_format(f.name);
  FUZZ_ASSERT(again == f);
  FUZZ_ASSERT(again.name == f.name);
  const FInfo fi = finfo(f);
  FUZZ_ASSERT(std::isfinite(fi.max) && fi.max > 0);
  FUZZ_ASSERT(fi.smallest_subnormal > 0 && fi.smallest_subnormal <= fi.smallest_normal);
  FUZZ_ASSERT(fi.smallest_normal <= fi.max);
  FUZZ_ASSERT(fi.eps > 0 && fi.eps <= 1);
  (void)to_torch_string(fi);
  FUZZ_ASSERT(encode(fi.max, f) == encode(decode(encode(fi.max, f), f), f));
  FUZZ_ASSERT(decode(encode(fi.max, f), f) == fi.max);
}

void check_code(const Format& f, std::uint64_t code, const RoundOptions& base) {
  const double v = decode(code, f);
  if (std::isnan(v)) {
    FUZZ_ASSERT(std::isnan(decode(encode(v, f), f)) || !f.has_nan());
    return;
  }
  FUZZ_ASSERT(encode(v, f) == code);
  for (Rounding m : kModes) {
    RoundOptions o = base;
    o.rounding = m;
    o.flush_subnormals = false;
    FUZZ_ASSERT(same_double(round(v, f, o, code), v));
  }
}

template <class Code>
void check_encode_array(const std::vector<float>& x, const Format& f, const RoundOptions& o) {
  std::vector<Code> codes(x.size());
  encode(std::span<const float>(x), std::span<Code>(codes), f, o);
  for (std::size_t i = 0; i < x.size(); ++i) FUZZ_ASSERT(codes[i] == encode(x[i], f, o, i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all = fuzz::as_text(data, size);
  const std::size_t nl = all.find('\n');
  const std::string_view name = all.substr(0, nl);
  // Longer names only feed the quadratic "did you mean" search (fuzzed by option_values).
  if (name.size() > 64) return 0;
  std::optional<Format> found;
  try {
    found = parse_format(name);
  } catch (const Error&) {
    return 0;
  }
  const Format& f = *found;
  check_format(f);
  if (nl == std::string_view::npos || nl + 1 >= all.size()) return 0;

  const auto* rest = data + nl + 1;
  const std::size_t rest_size = size - nl - 1;
  RoundOptions o;
  o.rounding = kModes[(rest[0] & 0x7) % 5];
  o.saturate = rest[0] & 0x8;
  o.flush_subnormals = rest[0] & 0x10;
  o.seed = rest[0] >> 5;
  o.threads = 1;
  std::vector<float> x((rest_size - 1) / 4);
  if (!x.empty()) std::memcpy(x.data(), rest + 1, x.size() * 4);
  if (x.size() > 256) x.resize(256);

  // Codes of the format from the same bytes.
  const int bits = f.bits();
  const std::uint64_t mask = bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
  for (std::size_t i = 0; i + 8 <= rest_size - 1 && i < 64 * 8; i += 8) {
    std::uint64_t c = 0;
    std::memcpy(&c, rest + 1 + i, 8);
    check_code(f, c & mask, o);
  }
  for (std::size_t i = 1; i < rest_size && i <= 64; ++i) check_code(f, rest[i] & mask, o);

  std::vector<float> generic(x.size()), fast(x.size()), dispatched(x.size());
  round_generic(std::span<const float>(x), std::span<float>(generic), f, o);
  round(std::span<const float>(x), std::span<float>(dispatched), f, o);
  for (std::size_t i = 0; i < x.size(); ++i) {
    FUZZ_ASSERT(std::bit_cast<std::uint32_t>(generic[i]) ==
                std::bit_cast<std::uint32_t>(dispatched[i]));
    // The scalar path is the same generic path, element by element.
    FUZZ_ASSERT(std::bit_cast<std::uint32_t>(generic[i]) ==
                std::bit_cast<std::uint32_t>(round(x[i], f, o, i)));
  }
  if (has_fast_path(f, o)) {
    round_fast(std::span<const float>(x), std::span<float>(fast), f, o);
    for (std::size_t i = 0; i < x.size(); ++i)
      FUZZ_ASSERT(std::bit_cast<std::uint32_t>(generic[i]) ==
                  std::bit_cast<std::uint32_t>(fast[i]));
  }
  if (bits <= 8)
    check_encode_array<std::uint8_t>(x, f, o);
  else if (bits <= 16)
    check_encode_array<std::uint16_t>(x, f, o);
  return 0;
}
