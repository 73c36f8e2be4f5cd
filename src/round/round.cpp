// The exact generic rounding path. It works on the integer significand of a float64
// (every float32 is one), so it is exact by construction for every format, mode and
// option: no floating-point operation rounds anywhere in it.
#include "fpguard/round.hpp"

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "core/parallel.hpp"
#include "fpguard/error.hpp"
#include "round/fast.hpp"

namespace fpguard {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// 2^k for -1074 <= k <= 1023, built from bits (exact, no libm).
double pow2(int k) {
  if (k >= -1022) return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52);
  return std::bit_cast<double>(std::uint64_t{1} << (k + 1074));
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The random draw for element `index`: independent of thread count and chunking.
std::uint64_t draw(std::uint64_t seed, std::uint64_t index) {
  return splitmix64(splitmix64(seed) ^ index);
}

// Everything round() needs from (Format, RoundOptions), computed once per call site
// rather than once per element.
struct Rounder {
  int m, emin, bias;
  bool is_signed, negative_zero, flush;
  Rounding mode;
  std::uint64_t seed;
  double max, smallest_normal;
  double overflow;  // result for a finite value beyond max (before the sign)
  double infinite;  // result for an infinite input (before the sign)

  Rounder(const Format& f, const RoundOptions& o)
      : m(f.mantissa_bits),
        emin(f.emin()),
        bias(f.bias),
        is_signed(f.is_signed),
        negative_zero(f.has_negative_zero()),
        flush(o.flush_subnormals && f.has_subnormals),
        mode(o.rounding),
        seed(o.seed),
        max(f.max()),
        smallest_normal(f.smallest_normal()) {
    const double saturated_or_nan = (o.saturate || f.always_saturates()) ? max : kNaN;
    overflow = f.has_inf() ? (o.saturate ? max : kInf) : saturated_or_nan;
    infinite = f.has_inf() ? kInf : saturated_or_nan;
  }

  double operator()(double x, std::uint64_t index) const;

 private:
  // |x| = n * 2^q + rem * 2^(q - shift): truncated to whole quanta of 2^q, and the rest.
  struct Truncated {
    std::uint64_t n = 0;
    std::uint64_t rem = 0;  // the dropped bits, as a fraction rem / 2^shift of a quantum
    int shift = 0;          // bits of the significand below the quantum (<= 0: exact)
    bool above_half = false, at_half = false;
  };

  // The significand M (at most 53 bits) of a value M * 2^E, truncated to quanta of 2^q.
  static Truncated truncate(std::uint64_t M, int E, int q);
  // Whether the mode rounds t up to t.n + 1 (q: the quantum's exponent; index: the
  // element's draw, stochastic mode).
  bool rounds_up(const Truncated& t, int q, bool neg, std::uint64_t index) const;
  // The magnitude of a finite result beyond max, by mode (before the sign).
  double beyond_max(bool neg) const;
};

Rounder::Truncated Rounder::truncate(std::uint64_t M, int E, int q) {
  Truncated t;
  t.shift = q - E;
  if (t.shift <= 0) {
    t.n = M << -t.shift;  // exact: at most m + 1 bits
  } else if (t.shift < 64) {
    t.n = M >> t.shift;
    t.rem = M & ((std::uint64_t{1} << t.shift) - 1);
    const std::uint64_t half = std::uint64_t{1} << (t.shift - 1);
    t.above_half = t.rem > half;
    t.at_half = t.rem == half;
  } else {
    t.rem = M;  // far below half a quantum (M < 2^53 <= 2^(shift-1))
  }
  return t;
}

bool Rounder::rounds_up(const Truncated& t, int q, bool neg, std::uint64_t index) const {
  if (t.shift <= 0) return false;  // exact
  switch (mode) {
    case Rounding::nearest_even: {
      // "Even" is the encoding's last bit. With mantissa bits that is n's last bit;
      // without (E8M0) the candidates n = 1 and n = 2 differ in the exponent code.
      bool odd = t.n & 1;
      // Below the lowest binade the lower candidate is zero, whose code is even.
      if (m == 0 && t.at_half) odd = t.n != 0 && ((q + bias) & 1) != 0;
      return t.above_half || (t.at_half && odd);
    }
    case Rounding::toward_zero:
      return false;
    // Directed modes move only inexact values (rem != 0): an exact value stays put.
    case Rounding::up:
      return t.rem != 0 && !neg;
    case Rounding::down:
      return t.rem != 0 && neg;
    case Rounding::stochastic: {
      const std::uint64_t r = draw(seed, index);
      if (t.shift <= 64) return (t.shift == 64 ? r : r >> (64 - t.shift)) < t.rem;
      const int s = t.shift - 64;  // compare on the top 64 bits of a shift-bit draw
      return s < 64 && r < (t.rem >> s);
    }
  }
  return false;
}

double Rounder::beyond_max(bool neg) const {
  switch (mode) {
    case Rounding::toward_zero:
      return max;
    case Rounding::up:
      return neg ? max : overflow;
    case Rounding::down:
      return neg ? overflow : max;
    default:
      return overflow;
  }
}

double Rounder::operator()(double x, std::uint64_t index) const {
  if (std::isnan(x)) return kNaN;
  const bool neg = std::signbit(x);
  if (!is_signed) {
    // E8M0 has neither sign nor zero: nothing <= 0 is representable.
    if (neg || x == 0) return kNaN;
  }
  auto with_sign = [&](double v) {
    if (std::isnan(v)) return kNaN;  // NaN results are the canonical positive quiet NaN
    if (v == 0 && !negative_zero) return 0.0;
    return neg ? -v : v;
  };
  if (std::isinf(x)) return with_sign(infinite);
  if (x == 0) return with_sign(0.0);

  // |x| = M * 2^E with M an integer of at most 53 bits; lg = floor(log2 |x|).
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const int exp_field = static_cast<int>((bits >> 52) & 0x7ff);
  std::uint64_t M = bits & ((std::uint64_t{1} << 52) - 1);
  int E, lg;
  if (exp_field == 0) {
    E = -1074;
    lg = 63 - std::countl_zero(M) - 1074;
  } else {
    M |= std::uint64_t{1} << 52;
    E = exp_field - 1075;
    lg = exp_field - 1023;
  }
  // The quantum (ulp) of the binade |x| falls in, clamped at the lowest binade.
  const int q = std::max(lg, emin) - m;
  const Truncated t = truncate(M, E, q);
  std::uint64_t n = t.n + (rounds_up(t, q, neg, index) ? 1 : 0);  // |result| = n * 2^q
  if (!is_signed && n == 0) n = 1;  // E8M0 cannot reach zero: its smallest value is min
  double v = static_cast<double>(n) * pow2(q);
  if (v > max) v = beyond_max(neg);
  if (flush && v < smallest_normal) v = 0;
  return with_sign(v);
}

}  // namespace

double round(double x, const Format& f, const RoundOptions& o, std::uint64_t index) {
  return Rounder(f, o)(x, index);
}

float round(float x, const Format& f, const RoundOptions& o, std::uint64_t index) {
  return static_cast<float>(round(static_cast<double>(x), f, o, index));
}

std::string_view to_string(Rounding r) {
  switch (r) {
    case Rounding::nearest_even:
      return "nearest-even";
    case Rounding::toward_zero:
      return "toward-zero";
    case Rounding::up:
      return "up";
    case Rounding::down:
      return "down";
    case Rounding::stochastic:
      return "stochastic";
  }
  return "?";
}

const std::vector<std::string>& rounding_names() {
  static const std::vector<std::string> names = {"nearest-even", "toward-zero", "up", "down",
                                                 "stochastic"};
  return names;
}

Rounding parse_rounding(std::string_view name) {
  for (Rounding r : {Rounding::nearest_even, Rounding::toward_zero, Rounding::up, Rounding::down,
                     Rounding::stochastic})
    if (name == to_string(r)) return r;
  std::string msg = "unknown rounding mode";
  if (auto hint = did_you_mean(std::string(name), rounding_names()); !hint.empty())
    msg += "; did you mean '" + hint + "'?";
  else
    msg += " (known: nearest-even, toward-zero, up, down, stochastic)";
  throw Error("rounding '" + std::string(name) + "'", msg);
}

void round_generic(std::span<const float> in, std::span<float> out, const Format& f,
                   const RoundOptions& o) {
  FPG_CHECK(in.size() == out.size());
  const Rounder r(f, o);
  detail::parallel_for(in.size(), o.threads, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) out[i] = static_cast<float>(r(in[i], o.first_index + i));
  });
}

ArrayRounder::ArrayRounder(const Format& f, const RoundOptions& o) : format_(f), options_(o) {
  FPG_CHECK(o.rounding != Rounding::stochastic);
  options_.threads = 1;
  if (const auto p = detail::fast_params(f, o)) fast_ = std::make_shared<detail::FastParams>(*p);
}

void ArrayRounder::operator()(const float* in, float* out, std::size_t n) const {
  if (fast_)
    detail::round_fast(in, out, n, *fast_);
  else
    round_generic(std::span<const float>(in, n), std::span<float>(out, n), format_, options_);
}

bool has_fast_path(const Format& f, const RoundOptions& o) {
  return detail::fast_params(f, o).has_value();
}

void round_fast(std::span<const float> in, std::span<float> out, const Format& f,
                const RoundOptions& o) {
  FPG_CHECK(in.size() == out.size());
  const auto p = detail::fast_params(f, o);
  FPG_CHECK(p.has_value());
  detail::parallel_for(in.size(), o.threads, [&](std::size_t b, std::size_t e) {
    detail::round_fast(in.data() + b, out.data() + b, e - b, *p);
  });
}

void round(std::span<const float> in, std::span<float> out, const Format& f,
           const RoundOptions& o) {
  if (has_fast_path(f, o)) return round_fast(in, out, f, o);
  round_generic(in, out, f, o);
}

void round(std::span<const double> in, std::span<double> out, const Format& f,
           const RoundOptions& o) {
  FPG_CHECK(in.size() == out.size());
  const Rounder r(f, o);
  detail::parallel_for(in.size(), o.threads, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) out[i] = r(in[i], o.first_index + i);
  });
}

// ---- what rounding did ----------------------------------------------------------------

namespace {

// Where rounding in a mode overflows, per sign, as the smallest magnitudes of T that do:
// IEEE 754's overflow, the result rounded with an unbounded exponent past max (so also
// where the result is max: truncated, or saturated). Nearest-even from the overflow
// threshold (half a step above max); toward zero from the step above max; up and down
// from just above max on the side they round away from zero, the step above on the
// other; stochastic rounding may send anything above max past it.
template <class T>
struct OverflowBounds {
  T positive, negative;
};

// The smallest T at or above `value` (above it when not `inclusive`): inf past T's range.
template <class T>
T first_at_or_above(double value, bool inclusive) {
  T t = static_cast<T>(value);
  if (static_cast<double>(t) < value || (static_cast<double>(t) == value && !inclusive))
    t = std::nextafter(t, std::numeric_limits<T>::infinity());
  return t;
}

template <class T>
OverflowBounds<T> overflow_bounds(const Format& f, Rounding mode) {
  const double max = f.max(), step = max + pow2(f.emax() - f.mantissa_bits);
  const T above_max = first_at_or_above<T>(max, false), at_step = first_at_or_above<T>(step, true);
  switch (mode) {
    case Rounding::nearest_even:
      return {overflow_from<T>(f), overflow_from<T>(f)};
    case Rounding::toward_zero:
      return {at_step, at_step};
    case Rounding::up:
      return {above_max, at_step};
    case Rounding::down:
      return {at_step, above_max};
    default:
      return {above_max, above_max};
  }
}

// Adds what rounding did to in[0, n) (out: the rounded values) to `c`. Branch-free, so
// that the compiler vectorises it; counts per block fit 32 bits.
template <class T>
void count_block(const T* in, const T* out, std::size_t n, OverflowBounds<T> from, RoundCounts& c) {
  constexpr T kFinite = std::numeric_limits<T>::max();
  std::uint32_t changed = 0, overflow = 0, underflow = 0, nan = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T x = in[i], r = out[i];
    const T ax = std::fabs(x);
    const bool x_nan = x != x, r_nan = r != r;
    const bool x_finite = ax <= kFinite;
    // Finite, and past max when rounded with an unbounded exponent (or sent to inf/NaN
    // otherwise: E8M0's values <= 0).
    const bool past = ax >= (x < 0 ? from.negative : from.positive);
    const bool over = x_finite & (!(std::fabs(r) <= kFinite) | past);
    nan += x_nan;
    overflow += over;
    underflow += (x != 0) & (r == 0);  // x is then finite and not beyond max
    changed += !(r == x) & !(r_nan & x_nan);
  }
  c.changed += changed;
  c.overflow += overflow;
  c.underflow += underflow;
  c.nan += nan;
}

// Elements per block of the fused round-and-count: both arrays' blocks stay in L2.
constexpr std::size_t kCountBlock = std::size_t{1} << 14;

// Runs `fn(b, e, counts)` over blocks of [0, n) on the threads, and sums the counts.
template <class Fn>
RoundCounts count_blocks(std::size_t n, int threads, Fn&& fn) {
  std::mutex m;
  RoundCounts total;
  total.values = n;
  detail::parallel_for(n, threads, [&](std::size_t b, std::size_t e) {
    RoundCounts c;
    for (std::size_t k = b; k < e; k += kCountBlock) fn(k, std::min(e, k + kCountBlock), c);
    const std::lock_guard<std::mutex> lock(m);
    total.changed += c.changed;
    total.overflow += c.overflow;
    total.underflow += c.underflow;
    total.nan += c.nan;
  });
  return total;
}

template <class T>
RoundCounts count_rounding_impl(std::span<const T> in, std::span<const T> out, const Format& f,
                                int threads, Rounding mode) {
  FPG_CHECK(in.size() == out.size());
  const auto from = overflow_bounds<T>(f, mode);
  return count_blocks(in.size(), threads, [&](std::size_t b, std::size_t e, RoundCounts& c) {
    count_block(in.data() + b, out.data() + b, e - b, from, c);
  });
}

template <class T>
RoundCounts round_and_count_impl(std::span<const T> in, std::span<T> out, const Format& f,
                                 const RoundOptions& o) {
  FPG_CHECK(in.size() == out.size());
  const auto from = overflow_bounds<T>(f, o.rounding);
  const bool in_place = in.data() == out.data();  // (a partial overlap is not allowed)
  return count_blocks(in.size(), o.threads, [&](std::size_t b, std::size_t e, RoundCounts& c) {
    RoundOptions piece = o;
    piece.threads = 1;  // the blocks are the parallel unit
    piece.first_index = o.first_index + b;
    thread_local std::vector<T> kept;  // the input of a block rounded in place
    const T* x = in.data() + b;
    if (in_place) {
      kept.assign(x, x + (e - b));
      x = kept.data();
    }
    round(in.subspan(b, e - b), out.subspan(b, e - b), f, piece);
    count_block(x, out.data() + b, e - b, from, c);
  });
}

}  // namespace

RoundCounts count_rounding(std::span<const float> in, std::span<const float> out, const Format& f,
                           int threads, Rounding mode) {
  return count_rounding_impl(in, out, f, threads, mode);
}
RoundCounts count_rounding(std::span<const double> in, std::span<const double> out, const Format& f,
                           int threads, Rounding mode) {
  return count_rounding_impl(in, out, f, threads, mode);
}
RoundCounts round_and_count(std::span<const float> in, std::span<float> out, const Format& f,
                            const RoundOptions& o) {
  return round_and_count_impl(in, out, f, o);
}
RoundCounts round_and_count(std::span<const double> in, std::span<double> out, const Format& f,
                            const RoundOptions& o) {
  return round_and_count_impl(in, out, f, o);
}

// ---- bit patterns -------------------------------------------------------------------

namespace {

std::uint64_t nan_code(const Format& f) {
  const int m = f.mantissa_bits, e = f.exponent_bits;
  switch (f.nan) {
    case NanEncoding::ieee:  // positive quiet NaN: exponent all ones, top mantissa bit
      return ((std::uint64_t{1} << e) - 1) << m | (m > 0 ? std::uint64_t{1} << (m - 1) : 0);
    case NanEncoding::fn:
      return (std::uint64_t{1} << (e + m)) - 1;
    case NanEncoding::fnuz:
      return std::uint64_t{1} << (e + m);
    case NanEncoding::none:
      break;
  }
  return (std::uint64_t{1} << (e + m)) - 1;  // no NaN: +max, the documented stand-in
}

}  // namespace

namespace detail {

std::uint64_t code_of(double v, const Format& f) {
  if (std::isnan(v)) return nan_code(f);
  const int m = f.mantissa_bits, e = f.exponent_bits;
  const std::uint64_t sign = (f.is_signed && std::signbit(v) && (v != 0 || f.has_negative_zero()))
                                 ? std::uint64_t{1} << (e + m)
                                 : 0;
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | ((std::uint64_t{1} << e) - 1) << m;
  if (a == 0) return sign;
  int lg;
  std::frexp(a, &lg);
  --lg;  // a = 1.x * 2^lg
  std::uint64_t exp_code, mant;
  if (lg < f.emin()) {  // subnormal: exponent code 0, a = mant * 2^(emin - m)
    exp_code = 0;
    mant = static_cast<std::uint64_t>(a / pow2(f.emin() - m));
  } else {
    exp_code = static_cast<std::uint64_t>(lg + f.bias);
    mant = static_cast<std::uint64_t>(a / pow2(lg - m)) - (std::uint64_t{1} << m);
  }
  return sign | exp_code << m | mant;
}

}  // namespace detail

namespace {

using detail::code_of;

template <class In, class Out>
void encode_array(std::span<const In> in, std::span<Out> out, const Format& f,
                  const RoundOptions& o) {
  FPG_CHECK(in.size() == out.size());
  FPG_CHECK(f.bits() <= static_cast<int>(8 * sizeof(Out)));
  const Rounder r(f, o);
  detail::parallel_for(in.size(), o.threads, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i)
      out[i] = static_cast<Out>(code_of(r(static_cast<double>(in[i]), o.first_index + i), f));
  });
}

}  // namespace

OverflowThreshold overflow_threshold(const Format& f) {
  // Half an ulp of max above max; the tie rounds to the even code.
  OverflowThreshold t;
  t.value = f.max() + pow2(f.emax() - f.mantissa_bits - 1);
  t.inclusive = (code_of(f.max(), f) & 1) != 0;
  return t;
}

double underflow_threshold(const Format& f) {
  return f.is_signed ? f.smallest_subnormal() / 2 : 0.0;
}

template <class T>
T overflow_from(const Format& f) {
  const OverflowThreshold t = overflow_threshold(f);
  return first_at_or_above<T>(t.value, t.inclusive);
}

template <class T>
T zero_up_to(const Format& f) {
  const double zero = underflow_threshold(f);
  T t = static_cast<T>(zero);
  if (static_cast<double>(t) > zero) t = std::nextafter(t, T{0});
  return t;
}

template float overflow_from<float>(const Format&);
template double overflow_from<double>(const Format&);
template float zero_up_to<float>(const Format&);
template double zero_up_to<double>(const Format&);

std::uint64_t encode(double x, const Format& f, const RoundOptions& o, std::uint64_t index) {
  return code_of(round(x, f, o, index), f);
}

double decode(std::uint64_t code, const Format& f) {
  const int m = f.mantissa_bits, e = f.exponent_bits;
  code &= f.bits() == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << f.bits()) - 1;
  const bool neg = f.is_signed && ((code >> (e + m)) & 1);
  const std::uint64_t exp_code = (code >> m) & ((std::uint64_t{1} << e) - 1);
  const std::uint64_t mant = code & ((std::uint64_t{1} << m) - 1);
  const std::uint64_t top = (std::uint64_t{1} << e) - 1;
  switch (f.nan) {
    case NanEncoding::ieee:
      if (exp_code == top) return mant ? kNaN : (neg ? -kInf : kInf);
      break;
    case NanEncoding::fn:
      if (exp_code == top && mant == (std::uint64_t{1} << m) - 1) return kNaN;
      break;
    case NanEncoding::fnuz:
      if (neg && exp_code == 0 && mant == 0) return kNaN;
      break;
    case NanEncoding::none:
      break;
  }
  double a;
  if (exp_code == 0 && f.has_subnormals)
    a = static_cast<double>(mant) * pow2(f.emin() - m);
  else
    a = static_cast<double>((std::uint64_t{1} << m) | mant) *
        pow2(static_cast<int>(exp_code) - f.bias - m);
  return neg ? -a : a;
}

void encode(std::span<const float> in, std::span<std::uint8_t> out, const Format& f,
            const RoundOptions& o) {
  encode_array(in, out, f, o);
}
void encode(std::span<const float> in, std::span<std::uint16_t> out, const Format& f,
            const RoundOptions& o) {
  FPG_CHECK(in.size() == out.size());
  if (const auto p = detail::fast_params(f, o); p && p->ieee_half) {
    std::atomic<bool> native = true;  // the same answer on every thread
    detail::parallel_for(in.size(), o.threads, [&](std::size_t b, std::size_t e) {
      if (!detail::half_bits(in.data() + b, out.data() + b, e - b)) native = false;
    });
    if (native) return;
  }
  encode_array(in, out, f, o);
}
void encode(std::span<const double> in, std::span<std::uint8_t> out, const Format& f,
            const RoundOptions& o) {
  encode_array(in, out, f, o);
}
void encode(std::span<const double> in, std::span<std::uint16_t> out, const Format& f,
            const RoundOptions& o) {
  encode_array(in, out, f, o);
}
void encode(std::span<const double> in, std::span<std::uint32_t> out, const Format& f,
            const RoundOptions& o) {
  encode_array(in, out, f, o);
}
void encode(std::span<const double> in, std::span<std::uint64_t> out, const Format& f,
            const RoundOptions& o) {
  encode_array(in, out, f, o);
}

}  // namespace fpguard
