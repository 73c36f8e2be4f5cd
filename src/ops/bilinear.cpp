// Linear Resize's rows (ops/bilinear.hpp), compiled once per SIMD target and chosen at run
// time (HWY_DYNAMIC_DISPATCH), like ops/depthwise.cpp. A vector of outputs at a time: the
// expanded source rows make every operand a contiguous load, the lanes are independent and
// Mul and Add are not fused, so every target computes the scalar loop's sums.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/bilinear.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "ops/bilinear.hpp"

HWY_BEFORE_NAMESPACE();
namespace fpguard::ops::bilinear::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The sum at x as the header says, one output.
template <class T>
HWY_INLINE void One(const Taps& t, std::int64_t x, T* dst) {
  double acc = 0;
  acc += t.wy0 * t.w0[x] * t.a0[x];
  acc += t.wy0 * t.w1[x] * t.a1[x];
  acc += t.wy1 * t.w0[x] * t.b0[x];
  acc += t.wy1 * t.w1[x] * t.b1[x];
  dst[x] = static_cast<T>(acc);
}

// The vector of sums `acc` at dst, rounded to T. Highway's emulated targets saturate
// infinities and overflows when demoting to float (the cast, and x86's conversion, give
// infinity): there each lane is cast.
template <class D>
HWY_INLINE void Put(D d, hn::Vec<D> acc, float* dst) {
#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
  HWY_ALIGN double lanes[hn::MaxLanes(d)];
  hn::Store(acc, d, lanes);
  for (std::size_t i = 0; i < hn::Lanes(d); ++i) dst[i] = static_cast<float>(lanes[i]);
#else
  hn::StoreU(hn::DemoteTo(hn::Rebind<float, D>(), acc), hn::Rebind<float, D>(), dst);
#endif
}
template <class D>
HWY_INLINE void Put(D d, hn::Vec<D> acc, double* dst) {
  hn::StoreU(acc, d, dst);
}

// Whole vectors along the row; the last one ends at the row's end (outputs computed twice,
// with the same bits, rather than a masked store). A row narrower than a vector: One.
template <class T>
HWY_INLINE void Row(const Taps& t, std::int64_t n, T* HWY_RESTRICT dst) {
  const hn::ScalableTag<double> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  if (n < lanes) {
    for (std::int64_t x = 0; x < n; ++x) One(t, x, dst);
    return;
  }
  // Local restrict pointers: else every store to dst reloads them from t.
  const double* HWY_RESTRICT a0 = t.a0;
  const double* HWY_RESTRICT a1 = t.a1;
  const double* HWY_RESTRICT b0 = t.b0;
  const double* HWY_RESTRICT b1 = t.b1;
  const double* HWY_RESTRICT cw0 = t.w0;
  const double* HWY_RESTRICT cw1 = t.w1;
  const auto wy0 = hn::Set(d, t.wy0), wy1 = hn::Set(d, t.wy1);
  for (std::int64_t x = 0;; x += lanes) {
    if (x + lanes > n) x = n - lanes;
    const auto w0 = hn::LoadU(d, cw0 + x), w1 = hn::LoadU(d, cw1 + x);
    auto acc = hn::Zero(d);
    acc = hn::Add(acc, hn::Mul(hn::Mul(wy0, w0), hn::LoadU(d, a0 + x)));
    acc = hn::Add(acc, hn::Mul(hn::Mul(wy0, w1), hn::LoadU(d, a1 + x)));
    acc = hn::Add(acc, hn::Mul(hn::Mul(wy1, w0), hn::LoadU(d, b0 + x)));
    acc = hn::Add(acc, hn::Mul(hn::Mul(wy1, w1), hn::LoadU(d, b1 + x)));
    Put(d, acc, dst + x);
    if (x + lanes == n) break;
  }
}

void RowF(const Taps& t, std::int64_t n, float* dst) {
  Row(t, n, dst);
}
void RowD(const Taps& t, std::int64_t n, double* dst) {
  Row(t, n, dst);
}

}  // namespace fpguard::ops::bilinear::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::ops::bilinear {

HWY_EXPORT(RowF);
HWY_EXPORT(RowD);

void row(const Taps& t, std::int64_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(RowF)(t, n, dst);
}
void row(const Taps& t, std::int64_t n, double* dst) {
  HWY_DYNAMIC_DISPATCH(RowD)(t, n, dst);
}

namespace {

// A scalar loop: AVX2's gathers (of 4 floats, widened) made dbnet's 2x upsampling 35%
// slower on Zen 3.
template <class T>
void expand_row(const T* HWY_RESTRICT src, const std::int32_t* HWY_RESTRICT c0,
                const std::int32_t* HWY_RESTRICT c1, std::int64_t n, double* HWY_RESTRICT e0,
                double* HWY_RESTRICT e1) {
  for (std::int64_t x = 0; x < n; ++x) {
    e0[x] = static_cast<double>(src[c0[x]]);
    e1[x] = static_cast<double>(src[c1[x]]);
  }
}

}  // namespace

void expand(const float* src, const std::int32_t* c0, const std::int32_t* c1, std::int64_t n,
            double* e0, double* e1) {
  expand_row(src, c0, c1, n, e0, e1);
}
void expand(const double* src, const std::int32_t* c0, const std::int32_t* c1, std::int64_t n,
            double* e0, double* e1) {
  expand_row(src, c0, c1, n, e0, e1);
}

}  // namespace fpguard::ops::bilinear
#endif
