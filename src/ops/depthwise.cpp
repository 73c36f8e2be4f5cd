// Depthwise 2-D convolution of one plane (ops/depthwise.hpp), compiled once per SIMD target
// and chosen at run time (HWY_DYNAMIC_DISPATCH), like ops/vmath.cpp. Each output row is
// computed a vector of outputs at a time, its sums kept in a register while every tap adds
// its product: lanes are independent, Mul and Add are not fused, so every target computes
// the scalar loop's sums.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/depthwise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

#include "ops/depthwise.hpp"

HWY_BEFORE_NAMESPACE();
namespace fpguard::ops::depthwise::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Output rows [oh, oh + R) with row stride S: 1 (contiguous loads) or 2 (the even lanes
// of two vectors). R rows at once give R independent chains of additions, which hide the
// latency of each (one chain waits for every addition before the next); on small planes
// (7 x 7) one block covers the whole plane.
template <int S, int R>
HWY_INLINE void Rows(const Plane& p, const float* padded, const float* w, const float* bias,
                     std::int64_t oh, float* out) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  HWY_ALIGN float tail[hn::MaxLanes(d)];
  for (std::int64_t ow = 0; ow < p.out_w; ow += lanes) {
    V acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
    for (std::int64_t kh = 0; kh < p.kernel_h; ++kh)
      for (std::int64_t kw = 0; kw < p.kernel_w; ++kw) {
        const V wv = hn::Set(d, w[kh * p.kernel_w + kw]);
        const float* src =
            padded + (oh * p.stride_h + kh * p.dil_h) * p.pitch + ow * S + kw * p.dil_w;
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const float* at = src + r * p.stride_h * p.pitch;
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
    for (int r = 0; r < R; ++r) {
      if (bias) acc[r] = hn::Add(acc[r], hn::Set(d, *bias));
      float* row = out + (oh + r) * p.out_w;
      if (ow + lanes <= p.out_w) {
        hn::StoreU(acc[r], d, row + ow);
      } else {
        hn::Store(acc[r], d, tail);
        std::copy(tail, tail + (p.out_w - ow), row + ow);
      }
    }
  }
}

// Blocks of 8 rows, then one block of the rest.
template <int S>
HWY_INLINE void Strided(const Plane& p, const float* padded, const float* w, const float* bias,
                        float* out) {
  std::int64_t oh = 0;
  for (; oh + 8 <= p.out_h; oh += 8) Rows<S, 8>(p, padded, w, bias, oh, out);
  switch (p.out_h - oh) {
    case 7:
      return Rows<S, 7>(p, padded, w, bias, oh, out);
    case 6:
      return Rows<S, 6>(p, padded, w, bias, oh, out);
    case 5:
      return Rows<S, 5>(p, padded, w, bias, oh, out);
    case 4:
      return Rows<S, 4>(p, padded, w, bias, oh, out);
    case 3:
      return Rows<S, 3>(p, padded, w, bias, oh, out);
    case 2:
      return Rows<S, 2>(p, padded, w, bias, oh, out);
    case 1:
      return Rows<S, 1>(p, padded, w, bias, oh, out);
    default:
      return;
  }
}

// Any other stride: one output at a time, the same sums.
HWY_INLINE void Scalar(const Plane& p, const float* padded, const float* w, const float* bias,
                       float* out) {
  for (std::int64_t oh = 0; oh < p.out_h; ++oh)
    for (std::int64_t ow = 0; ow < p.out_w; ++ow) {
      float acc = 0.0f;
      for (std::int64_t kh = 0; kh < p.kernel_h; ++kh)
        for (std::int64_t kw = 0; kw < p.kernel_w; ++kw)
          acc +=
              w[kh * p.kernel_w + kw] *
              padded[(oh * p.stride_h + kh * p.dil_h) * p.pitch + ow * p.stride_w + kw * p.dil_w];
      out[oh * p.out_w + ow] = bias ? acc + *bias : acc;
    }
}

void PlaneImpl(const Plane& p, const float* padded, const float* w, const float* bias, float* out) {
  if (p.stride_w == 1) return Strided<1>(p, padded, w, bias, out);
  if (p.stride_w == 2) return Strided<2>(p, padded, w, bias, out);
  Scalar(p, padded, w, bias, out);
}

}  // namespace fpguard::ops::depthwise::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::ops::depthwise {

HWY_EXPORT(PlaneImpl);

void plane(const Plane& p, const float* padded, const float* w, const float* bias, float* out) {
  HWY_DYNAMIC_DISPATCH(PlaneImpl)(p, padded, w, bias, out);
}

}  // namespace fpguard::ops::depthwise
#endif
