// Every one of the 2^32 float32 bit patterns through the SIMD fast path and the exact
// generic path, bit for bit. One gtest (one ctest entry) per format and mode, each
// single-threaded (about 40 s here) so that ctest -j runs them side by side.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <vector>

#include "fpguard/round.hpp"

namespace fpguard {
namespace {

struct Sweep {
  const char* format;
  Rounding rounding;
};

void PrintTo(const Sweep& s, std::ostream* os) {
  *os << s.format << " " << to_string(s.rounding);
}

std::string sweep_name(const ::testing::TestParamInfo<Sweep>& info) {
  const auto& s = info.param;
  std::string mode(to_string(s.rounding));
  for (char& c : mode)
    if (c == '-') c = '_';
  return std::string(s.format) + "_" + mode;
}

class Exhaustive : public ::testing::TestWithParam<Sweep> {};

TEST_P(Exhaustive, FastPathMatchesGeneric) {
  const Sweep& s = GetParam();
  const Format f = parse_format(s.format);
  RoundOptions o;
  o.rounding = s.rounding;
  o.threads = 1;
  ASSERT_TRUE(has_fast_path(f, o));
  constexpr std::uint64_t kChunk = std::uint64_t{1} << 24;  // 3 x 64 MiB buffers
  std::vector<float> in(kChunk), fast(kChunk), generic(kChunk);
  std::uint64_t mismatches = 0;
  for (std::uint64_t base = 0; base < (std::uint64_t{1} << 32); base += kChunk) {
    for (std::uint64_t i = 0; i < kChunk; ++i)
      in[i] = std::bit_cast<float>(static_cast<std::uint32_t>(base + i));
    round_fast(in, fast, f, o);
    round_generic(in, generic, f, o);
    for (std::uint64_t i = 0; i < kChunk; ++i) {
      const auto a = std::bit_cast<std::uint32_t>(fast[i]);
      const auto b = std::bit_cast<std::uint32_t>(generic[i]);
      if (a != b && ++mismatches <= 10)
        ADD_FAILURE() << "x = 0x" << std::hex << static_cast<std::uint32_t>(base + i) << ": fast 0x"
                      << a << ", generic 0x" << b;
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

std::vector<Sweep> sweeps() {
  std::vector<Sweep> v;
  for (const char* f : {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"})
    for (Rounding r : {Rounding::nearest_even, Rounding::toward_zero}) v.push_back({f, r});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Float32, Exhaustive, ::testing::ValuesIn(sweeps()), sweep_name);

}  // namespace
}  // namespace fpguard
