// round_dump: the generic rounding path as a byte stream, for comparisons with other
// libraries (torch_exhaustive_test.py). For the float32 bit patterns
// START, START + STRIDE, ..., (COUNT of them, wrapping modulo 2^32) it writes to stdout
// the uint16 codes of the format, in native byte order:
//   round_dump FORMAT START COUNT [STRIDE]
// The values go through fpguard::round_generic (never a fast path) and the carriers are
// then encoded; encoding a value of the format is exact, so the codes are those of the
// generic path's results.
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fpguard/error.hpp"
#include "fpguard/format.hpp"
#include "fpguard/round.hpp"

namespace {

std::uint64_t parse_u64(std::string_view s, const char* what) {
  std::uint64_t v = 0;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2), base = 16;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (r.ec != std::errc{} || r.ptr != s.data() + s.size())
    throw fpguard::Error(what, "not an unsigned integer: '" + std::string(s) + "'");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: round_dump FORMAT START COUNT [STRIDE]\n");
    return 2;
  }
  try {
    const fpguard::Format f = fpguard::parse_format(argv[1]);
    if (f.bits() > 16)
      throw fpguard::Error(argv[1], "round_dump writes uint16 codes: 16 bits at most");
    const std::uint64_t start = parse_u64(argv[2], "START");
    const std::uint64_t count = parse_u64(argv[3], "COUNT");
    const std::uint64_t stride = argc == 5 ? parse_u64(argv[4], "STRIDE") : 1;
    fpguard::RoundOptions o;
    o.threads = 1;  // the reader runs on the other core

    constexpr std::size_t kBlock = std::size_t{1} << 20;
    std::vector<float> in(kBlock), carriers(kBlock);
    std::vector<std::uint16_t> codes(kBlock);
    for (std::uint64_t done = 0; done < count;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, count - done));
      for (std::size_t i = 0; i < n; ++i)
        in[i] = std::bit_cast<float>(static_cast<std::uint32_t>(start + (done + i) * stride));
      const std::span<const float> src(in.data(), n);
      const std::span<float> dst(carriers.data(), n);
      fpguard::round_generic(src, dst, f, o);
      fpguard::encode(std::span<const float>(carriers.data(), n),
                      std::span<std::uint16_t>(codes.data(), n), f, o);
      if (std::fwrite(codes.data(), sizeof(std::uint16_t), n, stdout) != n) {
        std::fprintf(stderr, "round_dump: write failed\n");
        return 1;
      }
      done += n;
    }
    return std::fflush(stdout) == 0 ? 0 : 1;
  } catch (const fpguard::Error& e) {
    std::fprintf(stderr, "round_dump: error: %s\n", e.what());
    return 2;
  }
}
