// Depthwise 2-D convolution of one plane (ops/depthwise.hpp), compiled once per SIMD target
// and chosen at run time (HWY_DYNAMIC_DISPATCH), like ops/vmath.cpp. The output is made in
// blocks of rows: the input rows a block reads are copied, zero-padded, into a strip small
// enough to stay in the cache (17 rows of 322 floats for a 3 x 3 kernel of stride 2 over
// 320 x 320: 22 KiB), and each output row is computed a vector of outputs at a time,
// its sums kept in a register while every tap adds its product: lanes are independent, Mul
// and Add are not fused, so every target computes the scalar loop's sums.
//
// Channel blocks (channel_block) make the same sums with a vector's lanes as channels, for
// planes whose rows fill few lanes: the input rows are transposed into a strip of
// positions (one vector of channels each), and the outputs transposed back.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/depthwise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "ops/depthwise.hpp"
// ExactV: a fused Relu or HardSwish applied to the outputs' registers (per target).
#include "ops/vmath-inl.hpp"

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

// Whether plane() runs p on its unrolled 3 x 3 kernel (strides 1 or 2).
bool unrolled_3x3(const Plane& p) {
  return p.kernel_h == 3 && p.kernel_w == 3 && p.dil_h == 1 && p.dil_w == 1 &&
         p.stride_h == p.stride_w && (p.stride_w == 1 || p.stride_w == 2);
}

// The padded input rows that `rows` output rows read.
std::int64_t strip_rows(const Plane& p, std::int64_t rows) {
  return (rows - 1) * p.stride_h + (p.kernel_h - 1) * p.dil_h + 1;
}

// A channel block's scratch (channel_block), in floats: the padded input rows that all
// output rows read (pitch positions a row), the taps' weights and the outputs, L floats (one per
// channel) a position or tap; each part a whole number of 64-byte lines, the first aligned.
struct BlockLayout {
  std::int64_t pitch, input, weights, output;
};

constexpr std::int64_t kAlignFloats = 16;

std::int64_t whole_lines(std::int64_t floats) {
  return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}

BlockLayout block_layout(const Plane& p, std::int64_t lanes) {
  BlockLayout b{};
  b.pitch = pitch_of(p);
  b.input = whole_lines(strip_rows(p, p.out_h) * b.pitch * lanes);
  b.weights = whole_lines(p.kernel_h * p.kernel_w * lanes);
  b.output = whole_lines(p.out_h * p.out_w * lanes);
  return b;
}

float* aligned_block(float* scratch) {
  return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) &
                                  ~std::uintptr_t{63});
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
#if !HWY_MEM_OPS_MIGHT_FAULT
    // A row narrower than a vector (a 14 x 14 plane on AVX-512) between pads of at most a
    // vector: one masked load, which reads nothing past the row (the loop below took two
    // thirds of the kernel's time on MobileNetV3's 14 x 14 planes).
    if (in_w < lanes && left <= lanes && right <= lanes) {
      hn::StoreU(zero, d, dst);
      hn::StoreU(hn::MaskedLoad(hn::FirstN(d, static_cast<std::size_t>(in_w)), d, src), d, row);
      hn::StoreU(zero, d, row + in_w);
      continue;
    }
#endif
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

// The bias, then the fused op `act` (if any), then the vector of outputs at `row` (`lanes`
// outputs, or the `rest` of a row: only in a row narrower than a vector).
template <class D, class V>
HWY_INLINE void Put(D d, V acc, const float* bias, std::optional<vmath::Exact> act,
                    std::int64_t rest, float* row) {
  if (bias) acc = hn::Add(acc, hn::Set(d, *bias));
  acc = vmath::HWY_NAMESPACE::ExactV(d, act, acc);
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
                     const float* bias, std::optional<vmath::Exact> act, float* out) {
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
    for (int r = 0; r < R; ++r) Put(d, acc[r], bias, act, out_w - ow, out + r * out_w + ow);
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
                      const float* bias, std::optional<vmath::Exact> act, float* out) {
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
    for (int r = 0; r < R; ++r) Put(d, acc[r], bias, act, out_w - ow, out + r * out_w + ow);
  }
}

// Any column stride: one output at a time, the same sums (the fused op through a vector of
// one lane).
HWY_INLINE void ScalarRows(const Plane& p, std::int64_t pitch, const float* strip,
                           std::int64_t rows, const float* w, const float* bias,
                           std::optional<vmath::Exact> act, float* out) {
  const hn::CappedTag<float, 1> d1;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t ow = 0; ow < p.out_w; ++ow) {
      float acc = 0.0f;
      for (std::int64_t kh = 0; kh < p.kernel_h; ++kh)
        for (std::int64_t kw = 0; kw < p.kernel_w; ++kw)
          acc += w[kh * p.kernel_w + kw] *
                 strip[(r * p.stride_h + kh * p.dil_h) * pitch + ow * p.stride_w + kw * p.dil_w];
      if (bias) acc += *bias;
      out[r * p.out_w + ow] = hn::GetLane(vmath::HWY_NAMESPACE::ExactV(d1, act, hn::Set(d1, acc)));
    }
}

// R rows on the kernel for the geometry: K > 0 the unrolled K x K one, S == 0 the scalar.
template <int S, int R, int K>
void Block(const Plane& p, std::int64_t pitch, const float* strip, const float* w,
           const float* bias, std::optional<vmath::Exact> act, float* out) {
  if constexpr (S == 0)
    ScalarRows(p, pitch, strip, R, w, bias, act, out);
  else if constexpr (K == 0)
    Rows<S, R>(p, pitch, strip, w, bias, act, out);
  else
    RowsK<S, R, K>(p, pitch, strip, w, bias, act, out);
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
                       std::optional<vmath::Exact> act, float* out, float* strip) {
  static constexpr auto kBlocks = BlockTable<S, K>(std::make_index_sequence<kBlock>());
  const std::int64_t pitch = pitch_of(p);
  for (std::int64_t oh = 0; oh < p.out_h; oh += kBlock) {
    const std::int64_t rows = std::min(kBlock, p.out_h - oh);
    Fill(p, in, oh * p.stride_h, strip_rows(p, rows), pitch, strip);
    kBlocks[static_cast<std::size_t>(rows - 1)](p, pitch, strip, w, bias, act, out + oh * p.out_w);
  }
}

// A 3 x 3 kernel without dilation and with equal strides (most depthwise layers) on the
// unrolled kernel; any other in loops (5 x 5 too: unrolled, its 25 taps and 8 rows do not
// fit the registers, and it ran 10-20% slower).
template <int S>
HWY_INLINE void Kernels(const Plane& p, const float* in, const float* w, const float* bias,
                        std::optional<vmath::Exact> act, float* out, float* strip) {
  if (unrolled_3x3(p)) return Blocks<S, 3>(p, in, w, bias, act, out, strip);
  Blocks<S, 0>(p, in, w, bias, act, out, strip);
}

void PlaneImpl(const Plane& p, const float* in, const float* w, const float* bias,
               std::optional<vmath::Exact> act, float* out, float* strip) {
  if (p.stride_w == 1) return Kernels<1>(p, in, w, bias, act, out, strip);
  if (p.stride_w == 2) return Kernels<2>(p, in, w, bias, act, out, strip);
  Blocks<0, 0>(p, in, w, bias, act, out, strip);
}

// ---- Channel blocks: a vector's lanes are channels ----

std::size_t BlockChannelsImpl() {
#if HWY_TARGET == HWY_SCALAR
  return 1;
#else
  return hn::Lanes(hn::ScalableTag<float>());
#endif
}

#if HWY_TARGET != HWY_SCALAR
// The number whose log2(L) low bits are i's reversed (L a power of two).
constexpr std::size_t Reversed(std::size_t i, std::size_t lanes) {
  std::size_t r = 0;
  for (std::size_t b = 1; b < lanes; b <<= 1, i >>= 1) r = r << 1 | (i & 1);
  return r;
}

// Transposes the L x L block whose row i is held in v[Reversed(i)]: afterwards
// v[Reversed(j)] holds its column j. Each stage pairs the vectors that differ in one bit
// of their index (kBit, then the bits below it) and keeps the even and the odd lanes of
// each pair: log2(L) stages of L permutes, unrolled, in registers.
template <std::size_t kBit, class D, class V>
HWY_INLINE void Transpose(D d, V* v) {
  constexpr std::size_t kLanes = hn::MaxLanes(D());
#pragma GCC unroll 16
  for (std::size_t i = 0; i < kLanes; ++i)
    if (!(i & kBit)) {
      const V lo = v[i], hi = v[i | kBit];
      v[i] = hn::ConcatEven(d, hi, lo);
      v[i | kBit] = hn::ConcatOdd(d, hi, lo);
    }
  if constexpr (kBit > 1) Transpose<kBit / 2>(d, v);
}

template <class D, class V>
HWY_INLINE void Transpose(D d, V* v) {
  constexpr std::size_t kLanes = hn::MaxLanes(D());
  if constexpr (kLanes > 1) Transpose<kLanes / 2>(d, v);
}

// The first n (<= L) floats at p, the rest of the vector unspecified: a masked load where
// that reads nothing past p + n, else through a copy.
template <class D>
HWY_INLINE hn::Vec<D> LoadFirst(D d, const float* p, std::size_t n) {
  if (n == hn::Lanes(d)) return hn::LoadU(d, p);
#if HWY_MEM_OPS_MIGHT_FAULT
  HWY_ALIGN float tmp[hn::MaxLanes(d)] = {};
  std::copy(p, p + n, tmp);
  return hn::Load(d, tmp);
#else
  return hn::MaskedLoad(hn::FirstN(d, n), d, p);
#endif
}

// The first n (<= L) lanes of v to p, nothing written past p + n.
template <class D>
HWY_INLINE void StoreFirst(D d, hn::Vec<D> v, float* p, std::size_t n) {
  if (n == hn::Lanes(d)) return hn::StoreU(v, d, p);
#if HWY_MEM_OPS_MIGHT_FAULT
  HWY_ALIGN float tmp[hn::MaxLanes(d)];
  hn::Store(v, d, tmp);
  std::copy(tmp, tmp + n, p);
#else
  hn::BlendedStore(v, hn::FirstN(d, n), d, p);
#endif
}

// Columns [c0, c0 + n) (n <= L) of `rows` (<= L) rows, row i at src + i * stride,
// transposed: column j (row i's value in lane i; lanes from `rows` on repeat the last row's)
// to dst + j * dst_step.
template <class D>
HWY_INLINE void Gather(D d, const float* src, std::int64_t stride, std::size_t rows,
                       std::int64_t c0, std::size_t n, float* dst, std::int64_t dst_step) {
  constexpr std::size_t kLanes = hn::MaxLanes(D());
  hn::Vec<D> v[kLanes];
#pragma GCC unroll 16
  for (std::size_t i = 0; i < kLanes; ++i)
    v[Reversed(i, kLanes)] =
        LoadFirst(d, src + static_cast<std::int64_t>(std::min(i, rows - 1)) * stride + c0, n);
  Transpose(d, v);
#pragma GCC unroll 16
  for (std::size_t j = 0; j < kLanes; ++j)
    if (j < n) hn::Store(v[Reversed(j, kLanes)], d, dst + static_cast<std::int64_t>(j) * dst_step);
}

// Rows [q0, q0 + n) (n <= L) of o (L floats a row) transposed: lane j of row q0 + i to
// out + j * out_stride + q0 + i, for the first `lanes_out` lanes j.
template <class D>
HWY_INLINE void Scatter(D d, const float* o, std::int64_t q0, std::size_t n, std::size_t lanes_out,
                        float* out, std::int64_t out_stride) {
  constexpr std::size_t kLanes = hn::MaxLanes(D());
  hn::Vec<D> v[kLanes];
#pragma GCC unroll 16
  for (std::size_t i = 0; i < kLanes; ++i)  // (rows past n: the last again)
    v[Reversed(i, kLanes)] = hn::Load(d, o + (q0 + static_cast<std::int64_t>(std::min(i, n - 1))) *
                                                 static_cast<std::int64_t>(kLanes));
  Transpose(d, v);
#pragma GCC unroll 16
  for (std::size_t j = 0; j < kLanes; ++j)
    if (j < lanes_out)
      StoreFirst(d, v[Reversed(j, kLanes)], out + static_cast<std::int64_t>(j) * out_stride + q0,
                 n);
}

// R outputs of row oh (counted from the strip's first) from column ow on, into o's row oh
// (the strip of padded input rows `t`, `pitch` positions a row, L channels a position; the
// taps' weights `wt`, L a tap): for each lane the sum from 0 of the taps' products in order
// (kh, then kw), then + bias, as Rows computes one plane's.
template <int R, class D>
HWY_INLINE void Outputs(D d, const Plane& p, const float* t, std::int64_t pitch, const float* wt,
                        const hn::Vec<D>* bias, std::optional<vmath::Exact> act, std::int64_t oh,
                        std::int64_t ow, float* o) {
  using V = hn::Vec<D>;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  V acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
  const std::int64_t step = p.stride_w * lanes;
  for (std::int64_t kh = 0; kh < p.kernel_h; ++kh) {
    const float* row = t + ((oh * p.stride_h + kh * p.dil_h) * pitch + ow * p.stride_w) * lanes;
    for (std::int64_t kw = 0; kw < p.kernel_w; ++kw) {
      const V wv = hn::Load(d, wt + (kh * p.kernel_w + kw) * lanes);
      const float* x = row + kw * p.dil_w * lanes;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r] = hn::Add(acc[r], hn::Mul(wv, hn::Load(d, x + r * step)));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (bias) acc[r] = hn::Add(acc[r], *bias);
    hn::Store(vmath::HWY_NAMESPACE::ExactV(d, act, acc[r]), d, o + (oh * p.out_w + ow + r) * lanes);
  }
}

// Outputs<R> for R = 1 .. kBlock, by R - 1.
template <class D, std::size_t... I>
constexpr auto OutputsTable(std::index_sequence<I...> /*outputs - 1*/) {
  return std::array{&Outputs<static_cast<int>(I) + 1, D>...};
}
#endif

void ChannelBlockImpl(const Plane& p, std::int64_t channels, std::int64_t oh0, std::int64_t oh1,
                      const float* in, std::int64_t in_stride, const float* w, const float* bias,
                      float* out, std::int64_t out_stride, const Epilogue* epilogue,
                      float* scratch) {
#if HWY_TARGET == HWY_SCALAR
  (void)p, (void)channels, (void)oh0, (void)oh1, (void)in, (void)in_stride, (void)w, (void)bias,
      (void)out, (void)out_stride, (void)epilogue, (void)scratch;
#else
  using D = hn::ScalableTag<float>;
  const D d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const BlockLayout b = block_layout(p, lanes);
  float* t = aligned_block(scratch);
  float* wt = t + b.input;
  float* o = wt + b.weights;
  // The padded input rows that output rows [oh0, oh1) read, from padded row r0: zero rows
  // above and below the input, zero columns left and right of it.
  const std::int64_t r0 = oh0 * p.stride_h, strip = strip_rows(p, oh1 - oh0);
  const auto zero = hn::Zero(d);
  const auto rows = static_cast<std::size_t>(channels);
  for (std::int64_t r = 0; r < strip; ++r) {
    float* row = t + r * b.pitch * lanes;
    const std::int64_t ih = r0 + r - p.pad_top;
    const bool inside = ih >= 0 && ih < p.in_h;
    for (std::int64_t c = 0; c < b.pitch; ++c)
      if (!inside || c < p.pad_left || c >= p.pad_left + p.in_w)
        hn::Store(zero, d, row + c * lanes);
    if (inside)
      for (std::int64_t c0 = 0; c0 < p.in_w; c0 += lanes)
        Gather(d, in + ih * p.in_w, in_stride, rows, c0,
               static_cast<std::size_t>(std::min(lanes, p.in_w - c0)),
               row + (p.pad_left + c0) * lanes, lanes);
  }
  const std::int64_t taps = p.kernel_h * p.kernel_w;
  for (std::int64_t c0 = 0; c0 < taps; c0 += lanes)
    Gather(d, w, taps, rows, c0, static_cast<std::size_t>(std::min(lanes, taps - c0)),
           wt + c0 * lanes, lanes);
  const hn::Vec<D> bias_v = bias ? LoadFirst(d, bias, rows) : hn::Zero(d);
  static constexpr auto kOutputs = OutputsTable<D>(std::make_index_sequence<kBlock>());
  const std::optional<vmath::Exact> act = exact_of(epilogue);  // applied by Outputs
  for (std::int64_t oh = 0; oh < oh1 - oh0; ++oh)
    for (std::int64_t ow = 0; ow < p.out_w; ow += kBlock)
      kOutputs[static_cast<std::size_t>(std::min(kBlock, p.out_w - ow) - 1)](
          d, p, t, b.pitch, wt, bias ? &bias_v : nullptr, act, oh, ow, o);
  const std::int64_t positions = (oh1 - oh0) * p.out_w;
  if (epilogue && !act) (*epilogue)(o, static_cast<std::size_t>(positions * lanes), 1);
  // Back to the channels' planes, L positions (rows of o) at a time.
  for (std::int64_t q0 = 0; q0 < positions; q0 += lanes)
    Scatter(d, o, q0, static_cast<std::size_t>(std::min(lanes, positions - q0)), rows,
            out + oh0 * p.out_w, out_stride);
#endif
}

}  // namespace fpguard::ops::depthwise::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::ops::depthwise {

HWY_EXPORT(PlaneImpl);
HWY_EXPORT(BlockChannelsImpl);
HWY_EXPORT(ChannelBlockImpl);

std::size_t scratch_floats(const Plane& p) {
  return static_cast<std::size_t>(strip_rows(p, std::min(kBlock, p.out_h)) * pitch_of(p) + kSlack);
}

void plane(const Plane& p, const float* in, const float* w, const float* bias,
           const Epilogue* epilogue, float* out, float* scratch) {
  // A Relu or HardSwish on the outputs' registers, any other op on the plane after.
  const std::optional<vmath::Exact> act = exact_of(epilogue);
  HWY_DYNAMIC_DISPATCH(PlaneImpl)(p, in, w, bias, act, out, scratch);
  if (epilogue && !act) (*epilogue)(out, static_cast<std::size_t>(p.out_h * p.out_w), 1);
}

std::size_t block_channels() {
  // (Asked each time, not kept: a test may change the dispatched target.)
  return HWY_DYNAMIC_DISPATCH(BlockChannelsImpl)();
}

std::size_t block_scratch_floats(const Plane& p) {
  const auto b = block_layout(p, static_cast<std::int64_t>(block_channels()));
  return static_cast<std::size_t>(b.input + b.weights + b.output) + kAlignFloats;
}

bool prefer_block(const Plane& p) {
  const auto lanes = static_cast<std::int64_t>(block_channels());
  constexpr std::size_t kMaxScratch = (512 << 10) / sizeof(float);
  if (lanes < 16 || block_scratch_floats(p) > kMaxScratch) return false;
  return p.out_w < lanes || (!unrolled_3x3(p) && p.out_h * p.out_w <= 32 * 32);
}

void channel_block(const Plane& p, std::int64_t channels, std::int64_t oh0, std::int64_t oh1,
                   const float* in, std::int64_t in_stride, const float* w, const float* bias,
                   float* out, std::int64_t out_stride, const Epilogue* epilogue, float* scratch) {
  HWY_DYNAMIC_DISPATCH(ChannelBlockImpl)
  (p, channels, oh0, oh1, in, in_stride, w, bias, out, out_stride, epilogue, scratch);
}

}  // namespace fpguard::ops::depthwise
#endif
