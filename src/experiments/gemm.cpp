// The matrix products of the GEMM experiment: the truth (double, or Dot2), and the
// accumulation model (exact products, every addition rounded into a format, in a given
// order). The exact emulation here is the definition; the vectorised kernels
// (gemm_simd.cpp) and oneDNN are fast paths for float32/float64 accumulation.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/parallel.hpp"
#include "experiments/internal.hpp"
#include "experiments/kernels.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/round.hpp"

namespace fpguard {

namespace detail {

double add_odd(double a, double b) {
  const double s = a + b;
  if (!std::isfinite(s)) return s;
  const double bb = s - a;
  const double err = (a - (s - bb)) + (b - bb);  // TwoSum: a + b == s + err exactly
  std::uint64_t u = std::bit_cast<std::uint64_t>(s);
  if (err == 0 || (u & 1)) return s;
  // s is even and inexact: step one ulp toward the exact sum (round to odd).
  u = (err > 0) == (s > 0) ? u + 1 : u - 1;
  return std::bit_cast<double>(u);
}

bool odd_rounding_suffices(const Format& f) {
  // Round-to-odd at 53 bits then nearest at p bits is exact when p <= 51, at every
  // magnitude the format reaches (its quantum is >= 4x float64's there).
  return f.mantissa_bits <= 50 && f.emin() - f.mantissa_bits >= -1072;
}

bool is_float64(const Format& f) {
  return f == parse_format("float64");
}
bool is_float32(const Format& f) {
  return f == parse_format("float32");
}

Format outer_format(const Format& acc) {
  return acc.precision_bits() >= 24 ? acc : parse_format("float32");
}

int thread_count(int requested, std::size_t rows) {
  const int t = requested > 0 ? requested : available_cores();
  return static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(t), std::max<std::size_t>(rows, 1)));
}

bool all_narrow(std::span<const double> x) {
  constexpr std::uint64_t kLow = (std::uint64_t{1} << 27) - 1;  // 53 - 26 bits
  for (double v : x)
    if (std::isfinite(v) && (std::bit_cast<std::uint64_t>(v) & kLow) != 0) return false;
  return true;
}

bool all_float(std::span<const double> x) {
  for (double v : x)
    if (static_cast<double>(static_cast<float>(v)) != v && !std::isnan(v)) return false;
  return true;
}

void sgemm(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k,
           std::int64_t n) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + m * n, 0.0f);
    return;
  }
  const dnnl_status_t st = dnnl_sgemm('N', 'N', m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
  FPG_CHECK(st == dnnl_success);
}

}  // namespace detail

namespace {

// Carrier type T holds the products exactly and rounds to odd with >= 2 bits to spare
// over the accumulation format: double (the definition) or float (the fast path, see
// float_emulation_applies).
template <class T>
struct RowAdder {
  Format acc;
  bool native;  // the accumulation format is T itself: the hardware op is the rounding
  RoundOptions o;
  std::vector<T> tmp;
  RowAdder(const Format& f, std::size_t n)
      : acc(f),
        native(std::is_same_v<T, double> ? detail::is_float64(f) : detail::is_float32(f)),
        tmp(n) {
    o.threads = 1;
  }
  // out[j] = fl(x[j] + y[j]); out may alias x or y.
  void add(const T* x, const T* y, T* out, std::size_t n) {
    if (native) {
      for (std::size_t j = 0; j < n; ++j) out[j] = x[j] + y[j];
      return;
    }
    detail::add_odd_rows(x, y, tmp.data(), n);
    round(std::span<const T>(tmp.data(), n), std::span<T>(out, n), acc, o);
  }
  // s[j] = fl(s[j] + a * b[j]), the product exact (fused multiply-add).
  void fma_row(T a, const T* b, T* s, std::size_t n) {
    if (native) {
      for (std::size_t j = 0; j < n; ++j) s[j] = std::fma(a, b[j], s[j]);
      return;
    }
    detail::add_odd_fma_rows(a, b, s, tmp.data(), n);
    round(std::span<const T>(tmp.data(), n), std::span<T>(s, n), acc, o);
  }
  void round_row(T* x, std::size_t n) {
    if (!native) round(std::span<const T>(x, n), std::span<T>(x, n), acc, o);
  }
};

void check_emulable(const Format& acc, std::span<const double> a, std::span<const double> b) {
  if (detail::is_float64(acc)) return;
  if (!detail::odd_rounding_suffices(acc))
    throw Error::in_option(
        "accumulate", acc.name,
        "accumulating in a format of more than 51 bits other than float64 is not modelled");
  if (!detail::all_narrow(a) || !detail::all_narrow(b))
    throw Error::in_option(
        "accumulate", acc.name,
        "inputs of more than 26 significant bits have no exact product; accumulate them "
        "in float64");
}

// Whether the emulation may run in float carriers and give the double emulation's
// results bit for bit: every product exact in float32 (inputs of <= 12 significant bits,
// products normal and finite), and round-to-odd at 24 bits safe for the accumulation
// format (<= 22 bits, float32's range, a SIMD rounding path).
bool float_emulation_applies(const Format& acc, const AccumulationOrder& order,
                             std::span<const double> a, std::span<const double> b) {
  if (detail::is_float64(acc) || detail::is_float32(acc)) return false;
  if (acc.precision_bits() > 22 || !has_fast_path(acc)) return false;
  // blocked:K adds chunk sums in float32: exact in float carriers.
  (void)order;
  double lo[2] = {INFINITY, INFINITY}, hi[2] = {0, 0};
  int which = 0;
  for (auto m : {a, b}) {
    for (double v : m) {
      if (!std::isfinite(v)) return false;
      if (v == 0) continue;
      const auto f = static_cast<float>(v);
      if (static_cast<double>(f) != v) return false;
      if ((std::bit_cast<std::uint32_t>(f) & 0xfffu) != 0) return false;  // > 12 bits
      lo[which] = std::min(lo[which], std::fabs(v));
      hi[which] = std::max(hi[which], std::fabs(v));
    }
    ++which;
  }
  if (hi[0] == 0 || hi[1] == 0) return true;
  return hi[0] * hi[1] < 0x1p126 && lo[0] * lo[1] >= 0x1p-126;
}

// Rows [r0, r1) of the exact emulation: A is m x kd, B kd x n, C m x n (row-major).
template <class T>
void emulate_rows(const T* a, const T* b, T* c, std::size_t kd, std::size_t n, std::size_t r0,
                  std::size_t r1, const Format& acc, const AccumulationOrder& order) {
  using Kind = AccumulationOrder::Kind;
  RowAdder<T> add(acc, n);
  if (order.kind == Kind::sequential || order.kind == Kind::library) {
    for (std::size_t i = r0; i < r1; ++i) {
      T* s = c + i * n;
      std::fill(s, s + n, T(0));
      for (std::size_t k = 0; k < kd; ++k) add.fma_row(a[i * kd + k], b + k * n, s, n);
    }
  } else if (order.kind == Kind::blocked) {
    RowAdder<T> add_outer(detail::outer_format(acc), n);
    std::vector<T> s(n);
    const auto K = static_cast<std::size_t>(order.block);
    for (std::size_t i = r0; i < r1; ++i) {
      T* total = c + i * n;
      std::fill(total, total + n, T(0));
      for (std::size_t k0 = 0; k0 < kd; k0 += K) {
        std::fill(s.begin(), s.end(), T(0));
        for (std::size_t k = k0; k < std::min(kd, k0 + K); ++k)
          add.fma_row(a[i * kd + k], b + k * n, s.data(), n);
        add_outer.add(total, s.data(), total, n);
      }
    }
  } else {  // pairwise: a binary counter of partial sums; leaves are the exact products
    struct Node {
      int level;
      std::vector<T> v;
    };
    for (std::size_t i = r0; i < r1; ++i) {
      std::vector<Node> stack;
      for (std::size_t k = 0; k < kd; ++k) {
        Node leaf{0, std::vector<T>(n)};
        const T aik = a[i * kd + k];
        for (std::size_t j = 0; j < n; ++j) leaf.v[j] = aik * b[k * n + j];
        stack.push_back(std::move(leaf));
        while (stack.size() >= 2 &&
               stack[stack.size() - 1].level == stack[stack.size() - 2].level) {
          Node right = std::move(stack.back());
          stack.pop_back();
          Node& left = stack.back();
          add.add(left.v.data(), right.v.data(), left.v.data(), n);
          ++left.level;
        }
      }
      while (stack.size() >= 2) {  // n not a power of two: fold the rest right to left
        Node right = std::move(stack.back());
        stack.pop_back();
        Node& left = stack.back();
        add.add(left.v.data(), right.v.data(), left.v.data(), n);
        left.level = std::max(left.level, right.level) + 1;
      }
      T* out = c + i * n;
      if (stack.empty()) {
        std::fill(out, out + n, T(0));
      } else {
        std::copy(stack[0].v.begin(), stack[0].v.end(), out);
        if (stack[0].level == 0) add.round_row(out, n);  // n == 1: a bare product
      }
    }
  }
}

// A GEMM's dimensions: A is m x k, B k x n, C m x n, all row-major.
struct Dims {
  std::size_t m, k, n;
};

template <class T>
void emulate(std::span<const double> a, std::span<const double> b, std::span<double> c, Dims d,
             const Format& acc, const AccumulationOrder& order, int threads) {
  std::vector<T> ta(a.begin(), a.end()), tb(b.begin(), b.end()), tc(d.m * d.n);
  detail::parallel_for(
      d.m, detail::thread_count(threads, d.m),
      [&](std::size_t r0, std::size_t r1) {
        emulate_rows(ta.data(), tb.data(), tc.data(), d.k, d.n, r0, r1, acc, order);
      },
      1);
  std::copy(tc.begin(), tc.end(), c.begin());
}

Dims check_sizes(std::span<const double> a, std::span<const double> b, std::span<double> c,
                 std::int64_t m, std::int64_t k, std::int64_t n) {
  FPG_CHECK(m >= 0 && k >= 0 && n >= 0);
  const Dims d{static_cast<std::size_t>(m), static_cast<std::size_t>(k),
               static_cast<std::size_t>(n)};
  FPG_CHECK(a.size() == d.m * d.k && b.size() == d.k * d.n && c.size() == d.m * d.n);
  return d;
}

template <class T>
void fma_rows(const std::vector<T>& a, const std::vector<T>& b, std::vector<T>& c, Dims d,
              std::size_t k0, std::size_t kc, bool accumulate, int threads) {
  detail::parallel_for(
      d.m, detail::thread_count(threads, d.m),
      [&](std::size_t r0, std::size_t r1) {
        detail::gemm_fma(a.data() + r0 * d.k + k0, d.k, b.data() + k0 * d.n, d.n,
                         c.data() + r0 * d.n, d.n, r1 - r0, d.n, kc, accumulate);
      },
      4);
}

// float32 or float64 accumulation, sequential or blocked, through the FMA kernels.
template <class T>
void fast_accumulate(std::span<const double> a, std::span<const double> b, std::span<double> c,
                     Dims d, const AccumulationOrder& order, int threads) {
  std::vector<T> ta(a.begin(), a.end()), tb(b.begin(), b.end()), tc(d.m * d.n);
  if (order.kind == AccumulationOrder::Kind::sequential) {
    fma_rows(ta, tb, tc, d, 0, d.k, false, threads);
  } else {
    std::vector<T> chunk(d.m * d.n);
    std::fill(tc.begin(), tc.end(), T(0));
    const auto K = static_cast<std::size_t>(order.block);
    for (std::size_t k0 = 0; k0 < d.k; k0 += K) {
      fma_rows(ta, tb, chunk, d, k0, std::min(K, d.k - k0), false, threads);
      for (std::size_t i = 0; i < d.m * d.n; ++i) tc[i] += chunk[i];  // the outer format is T
    }
  }
  std::copy(tc.begin(), tc.end(), c.begin());
}

// NaN results (overflowed sums) are the canonical positive quiet NaN, as round() makes
// them, whichever path produced them (x86 arithmetic makes negative ones).
void canonical_nan(std::span<double> c) {
  for (auto& v : c)
    if (std::isnan(v)) v = std::numeric_limits<double>::quiet_NaN();
}

void accumulate_any(std::span<const double> a, std::span<const double> b, std::span<double> c,
                    Dims d, const Format& accumulate, const AccumulationOrder& order, int threads);

}  // namespace

void gemm_reference(std::span<const double> a, std::span<const double> b, std::span<double> c,
                    std::int64_t n, bool compensated, int threads) {
  check_sizes(a, b, c, n, n, n);
  const auto un = static_cast<std::size_t>(n);
  const int t = detail::thread_count(threads, un);
  if (!compensated) {
    detail::parallel_for(
        un, t,
        [&](std::size_t r0, std::size_t r1) {
          detail::gemm_fma(a.data() + r0 * un, un, b.data(), un, c.data() + r0 * un, un, r1 - r0,
                           un, un, false);
        },
        4);
    return;
  }
  std::vector<double> lo(un * un, 0.0);
  std::fill(c.begin(), c.end(), 0.0);
  detail::parallel_for(
      un, t,
      [&](std::size_t r0, std::size_t r1) {
        detail::gemm_dot2(a.data() + r0 * un, un, b.data(), un, c.data() + r0 * un,
                          lo.data() + r0 * un, un, r1 - r0, un, un);
      },
      4);
  for (std::size_t i = 0; i < un * un; ++i) c[i] += lo[i];
}

void gemm_accumulate_generic(std::span<const double> a, std::span<const double> b,
                             std::span<double> c, std::int64_t n, const Format& accumulate,
                             const AccumulationOrder& order, int threads) {
  const Dims d = check_sizes(a, b, c, n, n, n);
  check_emulable(accumulate, a, b);
  AccumulationOrder o = order;
  if (o.kind == AccumulationOrder::Kind::library) {
    // The library's own order is not known; the emulation of its float32 accumulation is
    // the sequential one (tests compare them within the bound, not bit for bit).
    o.kind = AccumulationOrder::Kind::sequential;
  }
  emulate<double>(a, b, c, d, accumulate, o, threads);
  canonical_nan(c);
}

void gemm_accumulate(std::span<const double> a, std::span<const double> b, std::span<double> c,
                     std::int64_t n, const Format& accumulate, const AccumulationOrder& order,
                     int threads) {
  gemm_accumulate(a, b, c, n, n, n, accumulate, order, threads);
}

void gemm_accumulate(std::span<const double> a, std::span<const double> b, std::span<double> c,
                     std::int64_t m, std::int64_t k, std::int64_t n, const Format& accumulate,
                     const AccumulationOrder& order, int threads) {
  accumulate_any(a, b, c, check_sizes(a, b, c, m, k, n), accumulate, order, threads);
  canonical_nan(c);
}

namespace {

void accumulate_any(std::span<const double> a, std::span<const double> b, std::span<double> c,
                    Dims d, const Format& accumulate, const AccumulationOrder& order, int threads) {
  using Kind = AccumulationOrder::Kind;
  if (order.kind == Kind::library) {
    if (!detail::is_float32(accumulate))
      throw Error::in_option("accumulation", "library",
                             "oneDNN's sgemm accumulates in float32, not " + accumulate.name);
    if (!detail::all_float(a) || !detail::all_float(b))
      throw Error::in_option("accumulation", "library", "the inputs are not all float32 values");
    std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end()), fc(d.m * d.n);
    detail::sgemm(fa.data(), fb.data(), fc.data(), static_cast<std::int64_t>(d.m),
                  static_cast<std::int64_t>(d.k), static_cast<std::int64_t>(d.n));
    std::copy(fc.begin(), fc.end(), c.begin());
    return;
  }
  if (order.kind == Kind::sequential || order.kind == Kind::blocked) {
    if (detail::is_float64(accumulate)) return fast_accumulate<double>(a, b, c, d, order, threads);
    if (detail::is_float32(accumulate) && detail::all_float(a) && detail::all_float(b))
      return fast_accumulate<float>(a, b, c, d, order, threads);
  }
  if (float_emulation_applies(accumulate, order, a, b))
    return emulate<float>(a, b, c, d, accumulate, order, threads);
  check_emulable(accumulate, a, b);
  AccumulationOrder o = order;
  if (o.kind == Kind::library) o.kind = Kind::sequential;
  emulate<double>(a, b, c, d, accumulate, o, threads);
}

}  // namespace

}  // namespace fpguard
