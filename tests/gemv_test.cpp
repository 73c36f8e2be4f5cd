// The one-row product kernel (src/ops/gemv.cpp) on every SIMD target compiled in that this
// CPU runs: the products it sums (exact on small integers, whatever the order), its
// accuracy against a double sum, and bits that do not depend on how the columns are split.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/gemv.hpp"
#include "targets.hpp"

namespace {

namespace gemv = fpguard::ops::gemv;

// Row lengths around the vector widths (4, 8, 16 lanes) and the tails after them; numbers of
// rows around the kernel's groups of four.
const std::vector<std::int64_t> kLengths = {1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 100, 255};
const std::vector<std::int64_t> kRows = {1, 2, 3, 4, 5, 9, 13};

// Small integers: every product and partial sum is exact, so y must be the integer dot
// product (then times alpha, plus beta times the old y) whatever the order of the sums;
// rows `ldb` apart with garbage between them, and guards after y.
TEST(Gemv, SumsTheRightProductsExactly) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-8, 8);
  fpguard::test::on_every_target([&] {
    for (const auto k : kLengths)
      for (const auto n : kRows)
        for (const float beta : {0.0f, 2.0f}) {
          SCOPED_TRACE(::testing::Message() << k << " x " << n << ", beta " << beta);
          const std::int64_t ldb = k + 5;
          std::vector<float> x(static_cast<std::size_t>(k)), b(static_cast<std::size_t>(n * ldb)),
              y(static_cast<std::size_t>(n + 3), 1e30f);
          for (float& v : x) v = static_cast<float>(small(rng));
          for (float& v : b) v = static_cast<float>(small(rng));
          for (std::int64_t j = 0; j < n; ++j) y[static_cast<std::size_t>(j)] = 3.0f;
          gemv::rows(x.data(), b.data(), ldb, k, 0.5f, beta, y.data(), 0, n);
          for (std::int64_t j = 0; j < n; ++j) {
            double dot = 0;
            for (std::int64_t q = 0; q < k; ++q)
              dot += double{x[static_cast<std::size_t>(q)]} *
                     double{b[static_cast<std::size_t>(j * ldb + q)]};
            EXPECT_EQ(y[static_cast<std::size_t>(j)], 0.5 * dot + (beta != 0 ? beta * 3.0 : 0))
                << "row " << j;
          }
          for (std::int64_t j = n; j < n + 3; ++j) EXPECT_EQ(y[static_cast<std::size_t>(j)], 1e30f);
        }
  });
}

// Random normal values: within the bound of a float32 sum of k products (k + 2 roundings
// of at most 2^-24 of the sum of |products| each) of the double dot product, and the same
// bits when the columns are computed in one call, one at a time, or in two uneven parts
// (as threads split them).
TEST(Gemv, IsAccurateAndTheSameForAnySplitOfTheColumns) {
  std::mt19937 rng(6);
  std::normal_distribution<float> normal;
  fpguard::test::on_every_target([&] {
    for (const auto k : kLengths)
      for (const auto n : kRows) {
        SCOPED_TRACE(::testing::Message() << k << " x " << n);
        std::vector<float> x(static_cast<std::size_t>(k)), b(static_cast<std::size_t>(n * k));
        for (float& v : x) v = normal(rng);
        for (float& v : b) v = normal(rng);
        std::vector<float> whole(static_cast<std::size_t>(n)), single(whole), parts(whole);
        gemv::rows(x.data(), b.data(), k, k, 1.0f, 0.0f, whole.data(), 0, n);
        for (std::int64_t j = 0; j < n; ++j)
          gemv::rows(x.data(), b.data(), k, k, 1.0f, 0.0f, single.data(), j, j + 1);
        gemv::rows(x.data(), b.data(), k, k, 1.0f, 0.0f, parts.data(), 0, n / 3);
        gemv::rows(x.data(), b.data(), k, k, 1.0f, 0.0f, parts.data(), n / 3, n);
        for (std::int64_t j = 0; j < n; ++j) {
          const auto i = static_cast<std::size_t>(j);
          double dot = 0, magnitude = 0;
          for (std::int64_t q = 0; q < k; ++q) {
            const double p = double{x[static_cast<std::size_t>(q)]} *
                             double{b[static_cast<std::size_t>(j * k + q)]};
            dot += p, magnitude += std::fabs(p);
          }
          EXPECT_LE(std::fabs(whole[i] - dot), static_cast<double>(k + 2) * 0x1p-24 * magnitude)
              << "row " << j;
          EXPECT_EQ(std::bit_cast<std::uint32_t>(whole[i]), std::bit_cast<std::uint32_t>(single[i]))
              << "row " << j;
          EXPECT_EQ(std::bit_cast<std::uint32_t>(whole[i]), std::bit_cast<std::uint32_t>(parts[i]))
              << "row " << j;
        }
      }
  });
}

}  // namespace
