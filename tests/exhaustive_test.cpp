// Every one of the 2^32 float32 bit patterns through the SIMD fast path and the exact
// generic path, bit for bit; and every float32 an OCP MX element can be asked to round
// (below 2^(emax+1) in magnitude) through the MX fast path against the element's generic
// rounding. One gtest (one ctest entry) per format and mode, each single-threaded (about
// 40 s here) so that ctest -j runs them side by side.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "fpguard/format.hpp"
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

// OCP MX blocks scaled by 2^0 (each holds an anchor 2^emax and 31 values below 2^(emax+1)
// in magnitude) round each value as round_generic rounds it into the element format,
// saturating: every float32 of magnitude below 2^(emax+1), both signs, float32 subnormals
// and zeros included, which is the whole domain of x / scale, so the element rounding of
// round_scaled's fast path for whole finite blocks (FiniteRounder) is checked exhaustively.
class MxExhaustive : public ::testing::TestWithParam<const char*> {};

TEST_P(MxExhaustive, WholeBlocksRoundLikeTheElement) {
  const ScaledFormat f = parse_scaled_format(GetParam());
  RoundOptions sat;
  sat.saturate = true;
  sat.threads = 1;
  const float anchor = std::ldexp(1.0f, f.element.emax());
  const std::uint64_t end = std::bit_cast<std::uint32_t>(2 * anchor);  // magnitudes below
  constexpr std::size_t kBlocks = std::size_t{1} << 19, kPer = 31;
  std::vector<float> sweep(kBlocks * kPer), want(sweep.size()), blocks(kBlocks * 32),
      got(blocks.size());
  const ScaledLayout l{.shape = {static_cast<std::int64_t>(kBlocks), 32}};
  std::uint64_t mismatches = 0;
  for (std::uint64_t base = 0; base < 2 * end; base += sweep.size()) {
    for (std::size_t i = 0; i < sweep.size(); ++i) {
      const std::uint64_t u = std::min(base + i, 2 * end - 1);  // the last chunk repeats
      sweep[i] =
          std::bit_cast<float>(static_cast<std::uint32_t>(u < end ? u : (u - end) | 0x80000000u));
    }
    round_generic(sweep, want, f.element, sat);
    for (std::size_t b = 0; b < kBlocks; ++b) {
      blocks[b * 32] = anchor;
      std::copy_n(&sweep[b * kPer], kPer, &blocks[b * 32 + 1]);
    }
    (void)round_scaled(blocks, got, l, f, {.threads = 1});
    for (std::size_t i = 0; i < sweep.size(); ++i) {
      const auto a = std::bit_cast<std::uint32_t>(got[i / kPer * 32 + 1 + i % kPer]);
      const auto w = std::bit_cast<std::uint32_t>(want[i]);
      if (a != w && ++mismatches <= 10)
        ADD_FAILURE() << "x = 0x" << std::hex << std::bit_cast<std::uint32_t>(sweep[i])
                      << ": block 0x" << a << ", element 0x" << w;
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Mx, MxExhaustive,
                         ::testing::Values("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3",
                                           "mxfp4_e2m1", "mxint8"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace fpguard
