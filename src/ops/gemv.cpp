// One row times a matrix stored by rows (ops/gemv.hpp), compiled once per SIMD target and
// chosen at run time (HWY_DYNAMIC_DISPATCH), like ops/pointwise.cpp.
//
// Such a product reads each weight once and does one multiply-add with it: it runs at the
// speed the weights stream from memory. Four rows of B are read together (four
// sequential streams, four independent chains of fused multiply-adds), each against the
// same vector of x from the L1 cache. In MobileNetV3, whose weights come from DRAM, its
// classifier and squeeze-excitation layers took 8-12% less time than on oneDNN's sgemm
// (the same with B in the cache: BM_row_gemv; bench/README.md, session 27).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/gemv.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "ops/gemv.hpp"

HWY_BEFORE_NAMESPACE();
namespace fpguard::ops::gemv::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows of B read together at most.
constexpr int kRows = 4;

// y[j] for R rows from b (ldb apart): whole vectors of the k products, then the last
// k % L through zero-padded copies (a zero lane adds +0 to its sum: nothing changes).
template <int R>
HWY_INLINE void Dots(const float* HWY_RESTRICT x, const float* HWY_RESTRICT b, std::int64_t ldb,
                     std::int64_t k, float alpha, float beta, float* HWY_RESTRICT y) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  V acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
  std::int64_t q = 0;
  for (; q + lanes <= k; q += lanes) {
    const V xv = hn::LoadU(d, x + q);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = hn::MulAdd(xv, hn::LoadU(d, b + r * ldb + q), acc[r]);
  }
  if (q < k) {
    const auto rest = static_cast<std::size_t>(k - q);
    HWY_ALIGN float xt[hn::MaxLanes(d)] = {}, bt[hn::MaxLanes(d)] = {};
    std::memcpy(xt, x + q, rest * sizeof(float));
    const V xv = hn::Load(d, xt);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      std::memcpy(bt, b + r * ldb + q, rest * sizeof(float));
      acc[r] = hn::MulAdd(xv, hn::Load(d, bt), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const float s = alpha * hn::GetLane(hn::SumOfLanes(d, acc[r]));
    y[r] = beta == 0.0f ? s : s + beta * y[r];
  }
}

template <std::size_t... I>
constexpr auto DotsTable(std::index_sequence<I...> /*rows - 1*/) {
  return std::array{&Dots<static_cast<int>(I) + 1>...};
}

void RowsImpl(const float* x, const float* b, std::int64_t ldb, std::int64_t k, float alpha,
              float beta, float* y, std::int64_t j0, std::int64_t j1) {
  static constexpr auto kDots = DotsTable(std::make_index_sequence<kRows>());
  for (std::int64_t j = j0; j < j1; j += kRows) {
    const auto rows = std::min<std::int64_t>(kRows, j1 - j);
    kDots[static_cast<std::size_t>(rows - 1)](x, b + j * ldb, ldb, k, alpha, beta, y + j);
  }
}

}  // namespace fpguard::ops::gemv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::ops::gemv {

HWY_EXPORT(RowsImpl);

void rows(const float* x, const float* b, std::int64_t ldb, std::int64_t k, float alpha, float beta,
          float* y, std::int64_t j0, std::int64_t j1) {
  HWY_DYNAMIC_DISPATCH(RowsImpl)(x, b, ldb, k, alpha, beta, y, j0, j1);
}

}  // namespace fpguard::ops::gemv
#endif
