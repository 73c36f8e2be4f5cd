// Highway implementation of the GEMM kernels declared in experiments/kernels.hpp,
// compiled once per SIMD target and chosen at run time (HWY_DYNAMIC_DISPATCH).
//
// Blocking: a kc x nc panel of B (256 KiB) stays in L2 while every row tile of A passes
// over it; a 4-row x 2-vector tile of C lives in registers for the kc steps of the panel
// and is stored in between, which keeps each element's chain of FMAs in k order. Tails
// use 1-row x 1-vector tiles and finally scalar std::fma, the same operation.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "experiments/gemm_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "experiments/kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace fpguard::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kKc = 256;  // k steps per panel

template <class T>
constexpr size_t PanelCols() {
  return (size_t{256} << 10) / (kKc * sizeof(T));  // a 256 KiB panel of B
}

template <class T>
HWY_INLINE void ScalarTile(const T* a, size_t lda, const T* b, size_t ldb, T* c, size_t ldc,
                           size_t rows, size_t cols, size_t kc, bool load) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < cols; ++j) {
      T acc = load ? c[r * ldc + j] : T(0);
      for (size_t k = 0; k < kc; ++k) acc = std::fma(a[r * lda + k], b[k * ldb + j], acc);
      c[r * ldc + j] = acc;
    }
}

#if HWY_NATIVE_FMA && HWY_TARGET != HWY_SCALAR
// 4 rows x 2 vectors of C: 8 independent FMA chains, enough to hide the FMA latency.
template <class D, class T = hn::TFromD<D>>
HWY_INLINE void Tile4x2(D d, const T* HWY_RESTRICT a, size_t lda, const T* HWY_RESTRICT b,
                        size_t ldb, T* HWY_RESTRICT c, size_t ldc, size_t kc, bool load) {
  const size_t N = hn::Lanes(d);
  auto ld = [&](size_t r, size_t v) {
    return load ? hn::LoadU(d, c + r * ldc + v * N) : hn::Zero(d);
  };
  auto c00 = ld(0, 0), c01 = ld(0, 1), c10 = ld(1, 0), c11 = ld(1, 1);
  auto c20 = ld(2, 0), c21 = ld(2, 1), c30 = ld(3, 0), c31 = ld(3, 1);
  for (size_t k = 0; k < kc; ++k) {
    const auto b0 = hn::LoadU(d, b + k * ldb);
    const auto b1 = hn::LoadU(d, b + k * ldb + N);
    const auto a0 = hn::Set(d, a[k]);
    c00 = hn::MulAdd(a0, b0, c00);
    c01 = hn::MulAdd(a0, b1, c01);
    const auto a1 = hn::Set(d, a[lda + k]);
    c10 = hn::MulAdd(a1, b0, c10);
    c11 = hn::MulAdd(a1, b1, c11);
    const auto a2 = hn::Set(d, a[2 * lda + k]);
    c20 = hn::MulAdd(a2, b0, c20);
    c21 = hn::MulAdd(a2, b1, c21);
    const auto a3 = hn::Set(d, a[3 * lda + k]);
    c30 = hn::MulAdd(a3, b0, c30);
    c31 = hn::MulAdd(a3, b1, c31);
  }
  hn::StoreU(c00, d, c), hn::StoreU(c01, d, c + N);
  hn::StoreU(c10, d, c + ldc), hn::StoreU(c11, d, c + ldc + N);
  hn::StoreU(c20, d, c + 2 * ldc), hn::StoreU(c21, d, c + 2 * ldc + N);
  hn::StoreU(c30, d, c + 3 * ldc), hn::StoreU(c31, d, c + 3 * ldc + N);
}

template <class D, class T = hn::TFromD<D>>
HWY_INLINE void Tile1x1(D d, const T* HWY_RESTRICT a, const T* HWY_RESTRICT b, size_t ldb,
                        T* HWY_RESTRICT c, size_t kc, bool load) {
  auto acc = load ? hn::LoadU(d, c) : hn::Zero(d);
  for (size_t k = 0; k < kc; ++k)
    acc = hn::MulAdd(hn::Set(d, a[k]), hn::LoadU(d, b + k * ldb), acc);
  hn::StoreU(acc, d, c);
}

// Rows [0, rows) x columns [0, cols) of a panel.
template <class T>
HWY_INLINE void Panel(const T* a, size_t lda, const T* b, size_t ldb, T* c, size_t ldc, size_t rows,
                      size_t cols, size_t kc, bool load) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + 4 <= rows; i += 4) {
    size_t j = 0;
    for (; j + 2 * N <= cols; j += 2 * N)
      Tile4x2(d, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, kc, load);
    for (size_t r = i; r < i + 4; ++r) {
      size_t jr = j;
      for (; jr + N <= cols; jr += N)
        Tile1x1(d, a + r * lda, b + jr, ldb, c + r * ldc + jr, kc, load);
      ScalarTile(a + r * lda, lda, b + jr, ldb, c + r * ldc + jr, ldc, 1, cols - jr, kc, load);
    }
  }
  for (; i < rows; ++i) {
    size_t j = 0;
    for (; j + N <= cols; j += N) Tile1x1(d, a + i * lda, b + j, ldb, c + i * ldc + j, kc, load);
    ScalarTile(a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, 1, cols - j, kc, load);
  }
}
#else
template <class T>
HWY_INLINE void Panel(const T* a, size_t lda, const T* b, size_t ldb, T* c, size_t ldc, size_t rows,
                      size_t cols, size_t kc, bool load) {
  ScalarTile(a, lda, b, ldb, c, ldc, rows, cols, kc, load);
}
#endif

template <class T>
HWY_INLINE void Gemm(const T* a, size_t lda, const T* b, size_t ldb, T* c, size_t ldc, size_t m,
                     size_t n, size_t k, bool accumulate) {
  constexpr size_t kNc = PanelCols<T>();
  if (k == 0) {
    if (!accumulate)
      for (size_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  for (size_t p = 0; p < k; p += kKc) {
    const size_t kc = std::min(kKc, k - p);
    const bool load = accumulate || p > 0;
    for (size_t j = 0; j < n; j += kNc)
      Panel(a + p, lda, b + p * ldb + j, ldb, c + j, ldc, m, std::min(kNc, n - j), kc, load);
  }
}

void GemmF32(const float* a, size_t lda, const float* b, size_t ldb, float* c, size_t ldc, size_t m,
             size_t n, size_t k, bool accumulate) {
  Gemm(a, lda, b, ldb, c, ldc, m, n, k, accumulate);
}
void GemmF64(const double* a, size_t lda, const double* b, size_t ldb, double* c, size_t ldc,
             size_t m, size_t n, size_t k, bool accumulate) {
  Gemm(a, lda, b, ldb, c, ldc, m, n, k, accumulate);
}

// ---- Dot2 ----------------------------------------------------------------------------

// One compensated step: (s, e) += a b exactly up to the final rounding of s + e.
HWY_INLINE void Dot2Scalar(double a, double b, double& s, double& e) {
  const double p = a * b;
  const double pe = std::fma(a, b, -p);
  const double t = s + p;
  const double z = t - s;
  e += pe + ((s - (t - z)) + (p - z));
  s = t;
}

#if HWY_NATIVE_FMA && HWY_TARGET != HWY_SCALAR
template <class D, class V = hn::Vec<D>>
HWY_INLINE void Dot2Step(V a, V b, V& s, V& e) {
  const V p = hn::Mul(a, b);
  const V pe = hn::MulSub(a, b, p);
  const V t = hn::Add(s, p);
  const V z = hn::Sub(t, s);
  e = hn::Add(e, hn::Add(pe, hn::Add(hn::Sub(s, hn::Sub(t, z)), hn::Sub(p, z))));
  s = t;
}
#endif

void GemmDot2(const double* a, size_t lda, const double* b, size_t ldb, double* hi, double* lo,
              size_t ldc, size_t m, size_t n, size_t k) {
  constexpr size_t kNc = PanelCols<double>();
  for (size_t p = 0; p < k; p += kKc) {
    const size_t kc = std::min(kKc, k - p);
    for (size_t j0 = 0; j0 < n; j0 += kNc) {
      const size_t cols = std::min(kNc, n - j0);
      for (size_t i = 0; i < m; ++i) {
        const double* ar = a + i * lda + p;
        const double* bp = b + p * ldb + j0;
        double* h = hi + i * ldc + j0;
        double* l = lo + i * ldc + j0;
        size_t j = 0;
#if HWY_NATIVE_FMA && HWY_TARGET != HWY_SCALAR
        const hn::ScalableTag<double> d;
        using D = decltype(d);
        const size_t N = hn::Lanes(d);
        for (; j + 2 * N <= cols; j += 2 * N) {
          auto s0 = hn::LoadU(d, h + j), s1 = hn::LoadU(d, h + j + N);
          auto e0 = hn::LoadU(d, l + j), e1 = hn::LoadU(d, l + j + N);
          for (size_t kk = 0; kk < kc; ++kk) {
            const auto av = hn::Set(d, ar[kk]);
            Dot2Step<D>(av, hn::LoadU(d, bp + kk * ldb + j), s0, e0);
            Dot2Step<D>(av, hn::LoadU(d, bp + kk * ldb + j + N), s1, e1);
          }
          hn::StoreU(s0, d, h + j), hn::StoreU(s1, d, h + j + N);
          hn::StoreU(e0, d, l + j), hn::StoreU(e1, d, l + j + N);
        }
#endif
        for (; j < cols; ++j)
          for (size_t kk = 0; kk < kc; ++kk) Dot2Scalar(ar[kk], bp[kk * ldb + j], h[j], l[j]);
      }
    }
  }
}

// ---- round-to-odd sums -----------------------------------------------------------------

template <class T, class U>
HWY_INLINE T AddOddScalar(T a, T b) {
  const T s = a + b;
  const T bb = s - a;
  const T err = (a - (s - bb)) + (b - bb);  // TwoSum: a + b == s + err exactly
  U u;
  std::memcpy(&u, &s, sizeof u);
  if (err == 0 || (u & 1) || !std::isfinite(s)) return s;
  u = (err > 0) == (s > 0) ? u + 1 : u - 1;  // one ulp toward the exact sum
  T r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

#if HWY_TARGET != HWY_SCALAR
template <class D, class V = hn::Vec<D>>
HWY_INLINE V AddOddVec(D d, V a, V b) {
  const hn::RebindToUnsigned<D> du;
  using TU = hn::TFromD<decltype(du)>;
  const V s = hn::Add(a, b);
  const V bb = hn::Sub(s, a);
  const V err = hn::Add(hn::Sub(a, hn::Sub(s, bb)), hn::Sub(b, bb));
  const auto u = hn::BitCast(du, s);
  const auto one = hn::Set(du, TU{1});
  constexpr TU kExp = static_cast<TU>(sizeof(TU) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  const auto exp_mask = hn::Set(du, kExp);
  const auto even = hn::Eq(hn::And(u, one), hn::Zero(du));
  const auto finite = hn::Ne(hn::And(u, exp_mask), exp_mask);
  const auto inexact = hn::RebindMask(du, hn::Ne(err, hn::Zero(d)));
  const auto fix = hn::And(hn::And(even, finite), inexact);
  // err and s of the same sign: one ulp up in magnitude (+1), else down (-1).
  const auto sign = hn::Set(du, TU{1} << (sizeof(TU) * 8 - 1));
  const auto same = hn::Eq(hn::And(hn::Xor(hn::BitCast(du, err), u), sign), hn::Zero(du));
  const auto step = hn::IfThenElse(same, one, hn::Set(du, static_cast<TU>(~TU{0})));
  return hn::BitCast(d, hn::IfThenElse(fix, hn::Add(u, step), u));
}
#endif

template <class T>
HWY_INLINE void AddOddRows(const T* x, const T* y, T* out, size_t n) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  size_t j = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  for (; j + N <= n; j += N)
    hn::StoreU(AddOddVec(d, hn::LoadU(d, x + j), hn::LoadU(d, y + j)), d, out + j);
#endif
  for (; j < n; ++j) out[j] = AddOddScalar<T, U>(x[j], y[j]);
}

template <class T>
HWY_INLINE void AddOddFmaRows(T a, const T* b, const T* s, T* out, size_t n) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  size_t j = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const auto av = hn::Set(d, a);
  for (; j + N <= n; j += N)
    hn::StoreU(AddOddVec(d, hn::LoadU(d, s + j), hn::Mul(av, hn::LoadU(d, b + j))), d, out + j);
#endif
  for (; j < n; ++j) out[j] = AddOddScalar<T, U>(s[j], a * b[j]);
}

void AddOddF32(const float* x, const float* y, float* out, size_t n) {
  AddOddRows(x, y, out, n);
}
void AddOddF64(const double* x, const double* y, double* out, size_t n) {
  AddOddRows(x, y, out, n);
}
void AddOddFmaF32(float a, const float* b, const float* s, float* out, size_t n) {
  AddOddFmaRows(a, b, s, out, n);
}
void AddOddFmaF64(double a, const double* b, const double* s, double* out, size_t n) {
  AddOddFmaRows(a, b, s, out, n);
}

}  // namespace fpguard::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fpguard::detail {

HWY_EXPORT(GemmF32);
HWY_EXPORT(GemmF64);
HWY_EXPORT(GemmDot2);
HWY_EXPORT(AddOddF32);
HWY_EXPORT(AddOddF64);
HWY_EXPORT(AddOddFmaF32);
HWY_EXPORT(AddOddFmaF64);

void add_odd_rows(const float* x, const float* y, float* out, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(AddOddF32)(x, y, out, n);
}
void add_odd_rows(const double* x, const double* y, double* out, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(AddOddF64)(x, y, out, n);
}
void add_odd_fma_rows(float a, const float* b, const float* s, float* out, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(AddOddFmaF32)(a, b, s, out, n);
}
void add_odd_fma_rows(double a, const double* b, const double* s, double* out, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(AddOddFmaF64)(a, b, s, out, n);
}

void gemm_fma(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
              std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(GemmF32)(a, lda, b, ldb, c, ldc, m, n, k, accumulate);
}
void gemm_fma(const double* a, std::size_t lda, const double* b, std::size_t ldb, double* c,
              std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(GemmF64)(a, lda, b, ldb, c, ldc, m, n, k, accumulate);
}
void gemm_dot2(const double* a, std::size_t lda, const double* b, std::size_t ldb, double* hi,
               double* lo, std::size_t ldc, std::size_t m, std::size_t n, std::size_t k) {
  HWY_DYNAMIC_DISPATCH(GemmDot2)(a, lda, b, ldb, hi, lo, ldc, m, n, k);
}

}  // namespace fpguard::detail
#endif
