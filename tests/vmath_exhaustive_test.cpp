// Every one of the 2^32 float32 bit patterns through each vmath function, on the Highway
// target run-time dispatch picks on this machine, against the double-precision C library
// rounded to float32: within 4 ULP (4 * 2^-149 for subnormal results), NaN and infinities
// exact. (Every other compiled target is checked on strided sweeps by vmath_test.cpp; all
// five targets here took 14 minutes, too long for `make test`.) One gtest (one ctest
// entry) per function, single-threaded, so that ctest -j runs them side by side; each
// prints its worst input.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "vmath_check.hpp"

namespace fpguard::test::vmath {
namespace {

class VmathExhaustive : public ::testing::TestWithParam<Fn> {};

TEST_P(VmathExhaustive, WithinFourUlpOnDispatchedTarget) {
  TargetGuard guard;
  Checker checker(GetParam(), /*all_targets=*/false);
  constexpr std::uint64_t kChunk = std::uint64_t{1} << 20;
  std::vector<float> in(kChunk);
  for (std::uint64_t base = 0; base < (std::uint64_t{1} << 32); base += kChunk) {
    for (std::uint64_t i = 0; i < kChunk; ++i)
      in[i] = std::bit_cast<float>(static_cast<std::uint32_t>(base + i));
    checker.check(in);
  }
  std::cout << checker.summary();
  checker.expect_within(kMaxUlp, "over all 2^32 inputs");
}

INSTANTIATE_TEST_SUITE_P(All, VmathExhaustive, ::testing::ValuesIn(kAllFns),
                         [](const ::testing::TestParamInfo<Fn>& info) {
                           return std::string(name(info.param));
                         });

}  // namespace
}  // namespace fpguard::test::vmath
