// Depthwise 2-D convolution of one plane (ops/depthwise.hpp), compiled once per SIMD target
// and chosen at run time (HWY_DYNAMIC_DISPATCH), like ops/vmath.cpp. The output is made in
// blocks of rows: the input rows a block reads are copied, zero-padded, into a strip small
// enough to stay in the cache (17 rows of 322 floats for a 3 x 3 kernel of stride 2 over
// 320 x 320: 22 KiB), and each output row is computed a vector of outputs at a time,
// its sums kept in a register while every tap adds its product: lanes are independent, Mul
// and Add are not fused, so every target computes the scalar loop's sums.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/depthwise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <utility>

#include "ops/depthwise.hpp"

#ifndef FPGUARD_OPS_DEPTHWISE_ONCE
#define FPGUARD_OPS_DEPTHWISE_ONCE
namespace fpguard::ops::depthwise {
namespace {

// Output rows per block at most: R rows at once give R independent chains of additions,
// which hide the latency of each (one chain waits for every addition before the next).
constexpr std::int64_t kBlock = 8;
// Floats after a strip's last row that the kernel may read (whole vectors, and with stride
// 2 two of them, past the last output of a row) and the row copy may write.
constexpr std::int64_t kSlack = 256;

// The strip's row pitch: wide enough for every tap of every output, and for the input row
// at its left padding.
std::int64_t pitch_of(const Plane& p) {
  return std::max(p.pad_left + p.in_w, (p.out_w - 1) * p.stride_w + (p.kernel_w - 1) * p.dil_w + 1);
}

// The padded input rows that `rows` output rows read.
std::int64_t strip_rows(const Plane& p, std::int64_t rows) {
  return (rows - 1) * p.stride_h + (p.kernel_h - 1) * p.dil_h + 1;
}

}  // namespace
}  // namespace fpguard::ops::depthwise
#endif

HWY_BEFORE_NAMESPACE();
namespace fpguard::ops::depthwise::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows [first, first + count) of the zero-padded input plane (its row i is input row i -
// pad_top, its column c input column c - pad_left) into the strip, `pitch` floats a row.
// Whole vectors throughout (zeros stored past a row's end are overwritten by the next row,
// or land in the strip's slack); loops of single floats only for pads wider than a vector
// or rows narrower than one.
HWY_INLINE void Fill(const Plane& p, const float* in, std::int64_t first, std::int64_t count,
                     std::int64_t pitch, float* strip) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t in_h = p.in_h, in_w = p.in_w, left = p.pad_left, top = p.pad_top,
                     right = pitch - left - in_w;
  const auto zero = hn::Zero(d);
  const bool narrow = in_w < lanes || left > lanes || right > lanes;
  for (std::int64_t i = 0; i < count; ++i) {
    float* dst = strip + i * pitch;
    const std::int64_t ih = first + i - top;
    if (ih < 0 || ih >= in_h) {
      for (std::int64_t c = 0; c < pitch; c += lanes) hn::StoreU(zero, d, dst + c);
      continue;
    }
    const float* src = in + ih * in_w;
    float* row = dst + left;
    if (narrow) {
      for (std::int64_t c = 0; c < pitch; ++c)
        dst[c] = c >= left && c < left + in_w ? src[c - left] : 0.0f;
      continue;
    }
    hn::StoreU(zero, d, dst);
    std::int64_t c = 0;
    for (; c + lanes <= in_w; c += lanes) hn::StoreU(hn::LoadU(d, src + c), d, row + c);
    if (c < in_w)  // the last vector again, ending at the row's end
      hn::StoreU(hn::LoadU(d, src + in_w - lanes), d, row + in_w - lanes);
    hn::StoreU(zero, d, row + in_w);
  }
}

// The column of the vector of outputs after the one at `ow` in a row of `out_w`: the next
// whole vector; the row's last `lanes` outputs when the next would pass its end (outputs
// computed twice, with the same bits, rather than a masked store: slow on some CPUs); -1
// after the last.
HWY_INLINE std::int64_t NextColumn(std::int64_t ow, std::int64_t out_w, std::int64_t lanes) {
  if (ow + lanes >= out_w) return -1;
  return ow + 2 * lanes <= out_w ? ow + lanes : out_w - lanes;
}

// The bias, then the vector of outputs at `row` (`lanes` outputs, or the `rest` of a row:
// only in a row narrower than a vector).
template <class D, class V>
HWY_INLINE void Put(D d, V acc, const float* bias, std::int64_t rest, float* row) {
  if (bias) acc = hn::Add(acc, hn::Set(d, *bias));
  if (rest >= static_cast<std::int64_t>(hn::Lanes(d)))
    hn::StoreU(acc, d, row);
  else
    hn::BlendedStore(acc, hn::FirstN(d, static_cast<std::size_t>(rest)), d, row);
}

// R output rows from the strip (its row 0: the first output row's first tap row), any
// kernel, dilation and row stride, column stride S: 1 (contiguous loads) or 2 (the even
// lanes of two vectors). A plane of 8 rows or fewer is one block.
template <int S, int R>
HWY_INLINE void Rows(const Plane& p, std::int64_t pitch, const float* strip, const float* w,
                     const float* bias, float* out) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t row_step = p.stride_h * pitch, out_w = p.out_w;
  for (std::int64_t ow = 0; ow >= 0; ow = NextColumn(ow, out_w, lanes)) {
    V acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
    for (std::int64_t kh = 0; kh < p.kernel_h; ++kh)
      for (std::int64_t kw = 0; kw < p.kernel_w; ++kw) {
        const V wv = hn::Set(d, w[kh * p.kernel_w + kw]);
        const float* src = strip + kh * p.dil_h * pitch + ow * S + kw * p.dil_w;
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const float* at = src + r * row_step;
          V x;
          if constexpr (S == 1) {
            x = hn::LoadU(d, at);
          } else {
            V odd;
            hn::LoadInterleaved2(d, at, x, odd);
          }
          acc[r] = hn::Add(acc[r], hn::Mul(wv, x));
        }
      }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) Put(d, acc[r], bias, out_w - ow, out + r * out_w + ow);
  }
}

// Rows for a K x K kernel without dilation, strides S in both directions, walked by input
// row: each strip row j is loaded once (its K taps' vectors) and added into every output
// row r that reads it (kh = j - S * r), so the taps' offsets are constants and no vector is
// loaded twice in a block. Output r still takes its taps in order, kh then kw (j ascending
// is kh ascending): the same sums. With stride 2, one deinterleaving load gives two taps,
// kw and kw + 1 (its even and odd lanes).
template <int S, int R, int K>
HWY_INLINE void RowsK(const Plane& p, std::int64_t pitch, const float* strip, const float* w,
                      const float* bias, float* out) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  constexpr int J = S * (R - 1) + K;  // strip rows the block reads
  const std::int64_t out_w = p.out_w;
  for (std::int64_t ow = 0; ow >= 0; ow = NextColumn(ow, out_w, lanes)) {
    V acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
#pragma GCC unroll 24
    for (int j = 0; j < J; ++j) {
      const float* src = strip + j * pitch + ow * S;
      V x[K];
      if constexpr (S == 1) {
#pragma GCC unroll 8
        for (int kw = 0; kw < K; ++kw) x[kw] = hn::LoadU(d, src + kw);
      } else {
#pragma GCC unroll 8
        for (int kw = 0; kw < K; kw += 2) {
          V odd;
          hn::LoadInterleaved2(d, src + kw, x[kw], odd);
          if (kw + 1 < K) x[kw + 1] = odd;
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int kh = j - S * r;
        if (kh < 0 || kh >= K) continue;
#pragma GCC unroll 8
        for (int kw = 0; kw < K; ++kw)
          acc[r] = hn::Add(acc[r], hn::Mul(hn::Set(d, w[kh * K + kw]), x[kw]));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) Put(d, acc[r], bias, out_w - ow, out + r * out_w + ow);
  }
}

// Any column stride: one output at a time, the same sums.
HWY_INLINE void ScalarRows(const Plane& p, std::int64_t pitch, const float* strip,
                           std::int64_t rows, const float* w, const float* bias, float* out) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t ow = 0; ow < p.out_w; ++ow) {
      float acc = 0.0f;
      for (std::int64_t kh = 0; kh < p.kernel_h; ++kh)
        for (std::int64_t kw = 0; kw < p.kernel_w; ++kw)
          acc += w[kh * p.kernel_w + kw] *
                 strip[(r * p.stride_h + kh * p.dil_h) * pitch + ow * p.stride_w + kw * p.dil_w];
      out[r * p.out_w + ow] = bias ? acc + *bias : acc;
    }
}

// R rows on the kernel for the geometry: K > 0 the unrolled K x K one, S == 0 the scalar.
template <int S, int R, int K>
void Block(const Plane& p, std::int64_t pitch, const float* strip, const float* w,
           const float* bias, float* out) {
  if constexpr (S == 0)
    ScalarRows(p, pitch, strip, R, w, bias, out);
  else if constexpr (K == 0)
    Rows<S, R>(p, pitch, strip, w, bias, out);
  else
    RowsK<S, R, K>(p, pitch, strip, w, bias, out);
}

// Block<S, R, K> for R = 1 .. kBlock, by R - 1.
template <int S, int K, std::size_t... I>
constexpr auto BlockTable(std::index_sequence<I...> /*rows - 1*/) {
  return std::array{&Block<S, static_cast<int>(I) + 1, K>...};
}

// The plane in blocks of kBlock output rows, then one block of the rest, each from its
// strip.
template <int S, int K>
HWY_INLINE void Blocks(const Plane& p, const float* in, const float* w, const float* bias,
                       float* out, float* strip) {
  static constexpr auto kBlocks = BlockTable<S, K>(std::make_index_sequence<kBlock>());
  const std::int64_t pitch = pitch_of(p);
  for (std::int64_t oh = 0; oh < p.out_h; oh += kBlock) {
    const std::int64_t rows = std::min(kBlock, p.out_h - oh);
    Fill(p, in, oh * p.stride_h, strip_rows(p, rows), pitch, strip);
    kBlocks[static_cast<std::size_t>(rows - 1)](p, pitch, strip, w, bias, out + oh * p.out_w);
  }
}

// A 3 x 3 kernel without dilation and with equal strides (most depthwise layers) on the
// unrolled kernel; any other in loops (5 x 5 too: unrolled, its 25 taps and 8 rows do not
// fit the registers, and it ran 10-20% slower).
template <int S>
HWY_INLINE void Kernels(const Plane& p, const float* in, const float* w, const float* bias,
                        float* out, float* strip) {
  if (p.kernel_h == 3 && p.kernel_w == 3 && p.dil_h == 1 && p.dil_w == 1 && p.stride_h == S)
    return Blocks<S, 3>(p, in, w, bias, out, strip);
  Blocks<S, 0>(p, in, w, bias, out, strip);
}

void PlaneImpl(const Plane& p, const float* in, const float* w, const float* bias, float* out,
               float* strip) {
  if (p.stride_w == 1) return Kernels<1>(p, in, w, bias, out, strip);
  if (p.stride_w == 2) return Kernels<2>(p, in, w, bias, out, strip);
  Blocks<0, 0>(p, in, w, bias, out, strip);
}

}  // namespace fpguard::ops::depthwise::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::ops::depthwise {

HWY_EXPORT(PlaneImpl);

std::size_t scratch_floats(const Plane& p) {
  return static_cast<std::size_t>(strip_rows(p, std::min(kBlock, p.out_h)) * pitch_of(p) + kSlack);
}

void plane(const Plane& p, const float* in, const float* w, const float* bias, float* out,
           float* scratch) {
  HWY_DYNAMIC_DISPATCH(PlaneImpl)(p, in, w, bias, out, scratch);
}

}  // namespace fpguard::ops::depthwise
#endif
