// 2-D max pooling of one plane without indices (ops/maxpool.hpp), compiled once per SIMD
// target and chosen at run time (HWY_DYNAMIC_DISPATCH), like ops/depthwise.cpp. Separable:
// a 3 x 3 pool of stride 2 folds three columns per input row, then three rows per output
// row, where the scalar path read the nine taps of every output; a vector of outputs folds
// its taps in a register, and a tap of stride 2 is the even lanes of a deinterleaving load.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/maxpool.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "ops/maxpool.hpp"

HWY_BEFORE_NAMESPACE();
namespace fpguard::ops::maxpool::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// take() on every lane.
template <class V>
V Take(V v, V acc) {
  return hn::IfThenElse(hn::Or(hn::Gt(v, acc), hn::IsNaN(v)), v, acc);
}

// Tap p's values for outputs [i, i + N): p[i * S], for S = 1 or 2 (the even lanes of a
// deinterleaving load, which reads p[(i + N) * 2 - 1] too).
template <std::int64_t S, class D, class T>
hn::Vec<D> At(D d, const T* p, std::int64_t i) {
  if constexpr (S == 1) {
    return hn::LoadU(d, p + i);
  } else {
    hn::Vec<D> even, odd;
    hn::LoadInterleaved2(d, p + 2 * i, even, odd);
    return even;
  }
}

// dst[i] = the fold with take() of taps[t][i * S] over t in [0, count), in order, for i in
// [0, n): a vector of outputs at a time, its fold in a register; the last vector overlaps
// the one before (it is made again, the same). Reads nothing past taps[t][(n - 1) * S].
template <std::int64_t S, class T>
void FoldVectors(const T* const* taps, std::size_t count, std::int64_t n, T* dst) {
  const hn::ScalableTag<T> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  const auto fold = [&](std::int64_t i, auto at) {
    auto acc = at(taps[0], i);
    for (std::size_t t = 1; t < count; ++t) acc = Take(at(taps[t], i), acc);
    hn::StoreU(acc, d, dst + i);
  };
  const auto tap = [&](const T* p, std::int64_t i) { return At<S>(d, p, i); };
  // With S = 2, vector i's load reads the odd partner of its last lane: within the taps
  // while i + N < n. The last vector takes the odd lanes of the load ending at the last tap.
  std::int64_t i = 0;
  for (; S == 1 ? i + N <= n : i + N < n; i += N) fold(i, tap);
  if (i == n) return;
  if constexpr (S == 1) {
    fold(n - N, tap);
  } else {
    fold(n - N, [&](const T* p, std::int64_t j) {
      hn::Vec<decltype(d)> even, odd;
      hn::LoadInterleaved2(d, p + 2 * j - 1, even, odd);
      return odd;
    });
  }
}

// FoldVectors for strides 1 and 2 over more than a vector of outputs; otherwise one output
// at a time.
template <class T>
void Fold(const T* const* taps, std::size_t count, std::int64_t stride, std::int64_t n, T* dst) {
  const auto N = static_cast<std::int64_t>(hn::Lanes(hn::ScalableTag<T>()));
  if (stride == 1 && n >= N) return FoldVectors<1>(taps, count, n, dst);
  if (stride == 2 && n > N) return FoldVectors<2>(taps, count, n, dst);
  for (std::int64_t i = 0; i < n; ++i) {
    T acc = taps[0][i * stride];
    for (std::size_t t = 1; t < count; ++t) acc = take(taps[t][i * stride], acc);
    dst[i] = acc;
  }
}

// Each input row folded over the columns each output column reads (`cols`: in_h rows of
// out_w): columns whose taps all lie inside the row as vectors along it, the rest (padding)
// one by one. `taps`: the caller's scratch for kernel_w pointers.
template <class T>
void Columns(const Plane& p, const T* plane, T* cols, std::vector<const T*>& taps) {
  const auto iw_n = p.in_w, ow_n = p.out_w, kw_n = p.kernel_w;
  const auto sw = p.stride_w, dw = p.dil_w, pw = p.pad_left;
  // Columns [lo, hi): ow * sw - pw >= 0 and ow * sw - pw + (kw_n - 1) * dw < iw_n.
  const std::int64_t lo = std::min((pw + sw - 1) / sw, ow_n);
  const std::int64_t last = iw_n - 1 - (kw_n - 1) * dw + pw;
  const std::int64_t hi = last < 0 ? lo : std::clamp(last / sw + 1, lo, ow_n);
  taps.resize(static_cast<std::size_t>(kw_n));
  for (std::int64_t ih = 0; ih < p.in_h; ++ih) {
    const T* src = plane + ih * iw_n;
    T* row = cols + ih * ow_n;
    const auto one = [&](std::int64_t ow) {
      bool first = true;
      for (std::int64_t kw = 0; kw < kw_n; ++kw) {
        const auto iw = ow * sw - pw + kw * dw;
        if (iw < 0 || iw >= iw_n) continue;
        row[ow] = first ? src[iw] : take(src[iw], row[ow]);
        first = false;
      }
    };
    for (std::int64_t ow = 0; ow < lo; ++ow) one(ow);
    for (std::int64_t ow = hi; ow < ow_n; ++ow) one(ow);
    if (lo == hi) continue;
    for (std::int64_t kw = 0; kw < kw_n; ++kw)
      taps[static_cast<std::size_t>(kw)] = src + lo * sw - pw + kw * dw;  // column lo's tap
    Fold(taps.data(), taps.size(), sw, hi - lo, row + lo);
  }
}

template <class T>
void Pool(const Plane& p, const T* in, T* out, T* cols) {
  const auto ow_n = p.out_w;
  std::vector<const T*> taps;
  taps.reserve(static_cast<std::size_t>(std::max(p.kernel_w, p.kernel_h)));
  Columns(p, in, cols, taps);
  for (std::int64_t oh = 0; oh < p.out_h; ++oh) {
    T* row = out + oh * ow_n;
    taps.clear();
    for (std::int64_t kh = 0; kh < p.kernel_h; ++kh) {
      const auto ih = oh * p.stride_h - p.pad_top + kh * p.dil_h;
      if (ih >= 0 && ih < p.in_h) taps.push_back(cols + ih * ow_n);
    }
    if (taps.empty())
      std::fill(row, row + ow_n, -std::numeric_limits<T>::infinity());
    else
      Fold(taps.data(), taps.size(), 1, ow_n, row);
  }
}

void PlaneF32(const Plane& p, const float* in, float* out, float* cols) {
  Pool(p, in, out, cols);
}
void PlaneF64(const Plane& p, const double* in, double* out, double* cols) {
  Pool(p, in, out, cols);
}

}  // namespace fpguard::ops::maxpool::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::ops::maxpool {

HWY_EXPORT(PlaneF32);
HWY_EXPORT(PlaneF64);

bool separable(const Plane& p) {
  for (std::int64_t ow = 0; ow < p.out_w; ++ow) {
    bool reads = false;
    for (std::int64_t kw = 0; kw < p.kernel_w && !reads; ++kw) {
      const auto iw = ow * p.stride_w - p.pad_left + kw * p.dil_w;
      reads = iw >= 0 && iw < p.in_w;
    }
    if (!reads) return false;
  }
  return true;
}

std::size_t scratch_values(const Plane& p) {
  return static_cast<std::size_t>(p.in_h * p.out_w);
}

void plane(const Plane& p, const float* in, float* out, float* scratch) {
  HWY_DYNAMIC_DISPATCH(PlaneF32)(p, in, out, scratch);
}

void plane(const Plane& p, const double* in, double* out, double* scratch) {
  HWY_DYNAMIC_DISPATCH(PlaneF64)(p, in, out, scratch);
}

}  // namespace fpguard::ops::maxpool
#endif  // HWY_ONCE
