// 1x1 convolutions with few input channels (ops/pointwise.hpp), compiled once per SIMD
// target and chosen at run time (HWY_DYNAMIC_DISPATCH), like ops/depthwise.cpp.
//
// y = w x on NCHW is a GEMM whose B (x: k rows of a whole plane each) has rows 400 KiB
// apart on a 320 x 320 plane: the rows a GEMM kernel reads together fall into the same
// cache sets. So a panel of the k rows, a few hundred columns wide, is first copied
// together (zero-padded to whole tiles); every tile of outputs, 6 rows x 2 vectors (12
// independent chains, in registers for all of k), reads it from the cache and is stored
// into y's rows (a last part of a tile through a buffer); the fused op then runs over
// those rows' part of the panel while it is in the L1 cache. (Storing the tiles together in
// a buffer first and copying them out took 7-26% longer on DBNet's and MobileNetV3's
// layers: bench/README.md, session 22.) Each output keeps one chain of fused
// multiply-adds over k in order, whichever tile computes it: the same bits on every
// target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/pointwise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>

#include "ops/pointwise.hpp"
// ExactV: a fused Relu or HardSwish applied to the tiles' registers (per target).
#include "ops/vmath-inl.hpp"

#ifndef FPGUARD_OPS_POINTWISE_ONCE
#define FPGUARD_OPS_POINTWISE_ONCE
namespace fpguard::ops::pointwise {
namespace {

// Output rows per tile at most: 6 x 2 accumulators, 2 panel vectors and a broadcast fill
// AVX2's 16 registers.
constexpr int kRows = 6;
// The floats of a panel and its outputs together: 192 KiB, well inside an L2 cache.
constexpr std::int64_t kPanelFloats = 48 << 10;

}  // namespace
}  // namespace fpguard::ops::pointwise
#endif

HWY_BEFORE_NAMESPACE();
namespace fpguard::ops::pointwise::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows [0, k) of x's columns [c0, c0 + width) into the panel, `pitch` floats a row, zeros
// after each row's width.
HWY_INLINE void Pack(const float* x, std::int64_t k, std::int64_t n, std::int64_t c0,
                     std::int64_t width, std::int64_t pitch, float* panel) {
  for (std::int64_t q = 0; q < k; ++q) {
    float* row = panel + q * pitch;
    std::memcpy(row, x + q * n + c0, static_cast<std::size_t>(width) * sizeof(float));
    std::fill(row + width, row + pitch, 0.0f);
  }
}

// The scalar chains of rows [0, rows) x columns [0, cols) (targets without a fused
// multiply-add).
HWY_INLINE void ScalarTile(const float* w, std::int64_t k, const float* panel, std::int64_t pitch,
                           const float* bias, float* y, std::int64_t n, int rows,
                           std::int64_t cols) {
  for (int r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) {
      float acc = 0.0f;
      for (std::int64_t q = 0; q < k; ++q) acc = std::fma(w[r * k + q], panel[q * pitch + j], acc);
      y[r * n + j] = bias ? acc + bias[r] : acc;
    }
}

#if HWY_NATIVE_FMA && HWY_TARGET != HWY_SCALAR
// R rows of outputs (rows n floats apart) from the panel's `width` columns (whole tiles),
// 2 vectors at a time; the fused op `act`, when there is one, applied before storing.
template <int R>
HWY_INLINE void Tile(const float* HWY_RESTRICT w, std::int64_t k, const float* HWY_RESTRICT panel,
                     std::int64_t pitch, const float* bias, std::optional<vmath::Exact> act,
                     float* HWY_RESTRICT y, std::int64_t n, std::int64_t width) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t j = 0; j < width; j += 2 * lanes) {
    V lo[R], hi[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) lo[r] = hi[r] = hn::Zero(d);
    const float* col = panel + j;
    for (std::int64_t q = 0; q < k; ++q) {
      const V b0 = hn::Load(d, col + q * pitch);
      const V b1 = hn::Load(d, col + q * pitch + lanes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const V a = hn::Set(d, w[r * k + q]);
        lo[r] = hn::MulAdd(a, b0, lo[r]);
        hi[r] = hn::MulAdd(a, b1, hi[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if (bias) {
        const V b = hn::Set(d, bias[r]);
        lo[r] = hn::Add(lo[r], b);
        hi[r] = hn::Add(hi[r], b);
      }
      hn::StoreU(vmath::HWY_NAMESPACE::ExactV(d, act, lo[r]), d, y + r * n + j);
      hn::StoreU(vmath::HWY_NAMESPACE::ExactV(d, act, hi[r]), d, y + r * n + j + lanes);
    }
  }
}

// Tile<R> for R = 1 .. kRows, by R - 1.
template <std::size_t... I>
constexpr auto TileTable(std::index_sequence<I...> /*rows - 1*/) {
  return std::array{&Tile<static_cast<int>(I) + 1>...};
}
#endif

// Rows [0, m) of outputs, from `out` (`pitch` floats a row) to y's columns [c0, c0 +
// width).
HWY_INLINE void CopyOut(const float* out, std::int64_t pitch, std::int64_t m, std::int64_t width,
                        float* y, std::int64_t n, std::int64_t c0) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t i = 0; i < m; ++i) {
    const float* src = out + i * pitch;
    float* dst = y + i * n + c0;
    std::int64_t j = 0;
    for (; j + lanes <= width; j += lanes) hn::StoreU(hn::Load(d, src + j), d, dst + j);
    std::memcpy(dst + j, src + j, static_cast<std::size_t>(width - j) * sizeof(float));
  }
}

void ColumnsImpl(const float* w, const float* x, const float* bias, float* y, std::int64_t m,
                 std::int64_t k, std::int64_t n, std::int64_t c0, std::int64_t c1,
                 const Epilogue* epilogue, float* scratch) {
  const hn::ScalableTag<float> d;
  const auto tile = 2 * static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t width = c1 - c0, pitch = (width + tile - 1) / tile * tile;
#if HWY_NATIVE_FMA && HWY_TARGET != HWY_SCALAR
  const std::int64_t whole = width / tile * tile;
  const std::optional<vmath::Exact> act = exact_of(epilogue);  // applied by the tiles
#else
  const std::int64_t whole = width;  // (ScalarTile writes any width)
  const std::optional<vmath::Exact> act;
#endif
  // Aligned loads from the panel: the scratch's start rounded up to 64 bytes (its slack),
  // the pitch whole tiles. After the panel, the outputs of a last partial tile.
  auto* panel = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) &
                                         ~std::uintptr_t{63});
  float* out = panel + k * pitch;
  Pack(x, k, n, c0, width, pitch, panel);
  for (std::int64_t i = 0; i < m; i += kRows) {
    const int rows = static_cast<int>(std::min<std::int64_t>(kRows, m - i));
    const float* wi = w + i * k;
    const float* bi = bias ? bias + i : nullptr;
#if HWY_NATIVE_FMA && HWY_TARGET != HWY_SCALAR
    // Whole tiles straight into Y's rows; a last part of a tile into `out`, copied below.
    static constexpr auto kTiles = TileTable(std::make_index_sequence<kRows>());
    const auto tiles = kTiles[static_cast<std::size_t>(rows - 1)];
    if (whole > 0) tiles(wi, k, panel, pitch, bi, act, y + i * n + c0, n, whole);
    if (whole < width) tiles(wi, k, panel + whole, pitch, bi, act, out + i * tile, tile, tile);
#else
    ScalarTile(wi, k, panel, pitch, bi, y + i * n + c0, n, rows, width);
#endif
    // These rows' part of a last tile, then the fused op on these rows while they are in
    // the L1 cache (after all of the panel's rows, from L2, it took 18% of a 16 -> 64 layer
    // over 112 x 112), unless the tiles applied it.
    if (whole < width) CopyOut(out + i * tile, tile, rows, width - whole, y + i * n, n, c0 + whole);
    if (epilogue && !act)
      for (std::int64_t r = i; r < i + rows; ++r)
        (*epilogue)(y + r * n + c0, static_cast<std::size_t>(width), 1);
  }
}

}  // namespace fpguard::ops::pointwise::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::ops::pointwise {

HWY_EXPORT(ColumnsImpl);

std::int64_t panel_columns(std::int64_t m, std::int64_t k) {
  return std::clamp<std::int64_t>(kPanelFloats / std::max<std::int64_t>(m + k, 1) / 64 * 64, 64,
                                  4096);
}

std::size_t scratch_floats(std::int64_t m, std::int64_t k) {
  return static_cast<std::size_t>((m + k) * panel_columns(m, k)) + 16;
}

void columns(const float* w, const float* x, const float* bias, float* y, std::int64_t m,
             std::int64_t k, std::int64_t n, std::int64_t c0, std::int64_t c1,
             const Epilogue* epilogue, float* scratch) {
  HWY_DYNAMIC_DISPATCH(ColumnsImpl)(w, x, bias, y, m, k, n, c0, c1, epilogue, scratch);
}

}  // namespace fpguard::ops::pointwise
#endif
