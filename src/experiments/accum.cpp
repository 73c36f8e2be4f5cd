// Accumulation limits: a running sum S_k = fl(S_{k-1} + v) in a format, when it stops
// growing, and how naive, pairwise and Kahan sums of n copies of v compare.
//
// The stagnation count of float64 is ~2^53 additions, so the walk does not simulate every
// addition: within one binade of the sum, once two consecutive increments are equal, every
// further increment is the same (proof in docs/experiments.md), so the walk jumps to just
// below the binade's end and steps again from there. accum_limits_simulated steps through
// every addition; the tests check that both agree.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>

#include "experiments/internal.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/round.hpp"

namespace fpguard {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_format(const Format& f) {
  if (!f.is_signed)
    throw Error("format '" + f.name + "'",
                "has no sign and no zero: a running sum and its corrections cannot live in it");
  if (!detail::is_float64(f) && !detail::odd_rounding_suffices(f))
    throw Error("format '" + f.name + "'",
                "formats of more than 50 mantissa bits other than float64 are not modelled");
}

struct Step {
  double next;
  bool exact;     // next == S + v exactly
  bool overflow;  // S + v is beyond the format's overflow threshold
};

Step step(double s, double v, const Format& f, const OverflowThreshold& ot) {
  if (detail::is_float64(f)) {
    const double t = s + v;
    const double bb = t - s;
    const double err = (s - (t - bb)) + (v - bb);
    return {t, std::isfinite(t) && err == 0, !std::isfinite(t)};
  }
  const double t = detail::add_odd(s, v);
  const double r = round(t, f);
  const double a = std::fabs(t);
  // add_odd keeps t on the right side of every midpoint of f, the threshold included.
  const bool overflow = a > ot.value || (ot.inclusive && a == ot.value);
  // t is inexact only when odd-rounded, and then never a value of f.
  return {r, r == t, overflow};
}

int binade(double x) {
  return std::ilogb(x);
}

struct Walk {
  double sum = 0;
  std::uint64_t steps = 0;                  // additions done (up to max_steps)
  std::optional<std::uint64_t> stagnation;  // first k with fl(S_k + v) == S_k
  std::optional<std::uint64_t> overflow;    // first k whose addition overflowed
  std::optional<std::uint64_t> first_inexact;
};

// Walks S_0 = start, S_k = fl(S_{k-1} + v) for v > 0, until it stagnates, overflows, or
// max_steps additions are done.
Walk walk(double start, double v, const Format& f, std::uint64_t max_steps, bool fast) {
  const OverflowThreshold ot = overflow_threshold(f);
  Walk w;
  w.sum = start;
  double prev_d = std::numeric_limits<double>::quiet_NaN(), prev_s = start;
  while (w.steps < max_steps) {
    const Step st = step(w.sum, v, f, ot);
    if (!st.exact && !w.first_inexact) w.first_inexact = w.steps;
    if (st.overflow || !std::isfinite(st.next)) {
      w.overflow = w.steps + 1;
      w.sum = st.next;
      return w;
    }
    if (st.next == w.sum) {
      w.stagnation = w.steps;
      return w;
    }
    const double d = st.next - w.sum;  // exact when both are >= v (Sterbenz)
    const double before = w.sum;
    w.sum = st.next;
    ++w.steps;
    // Settled: the last two increments are equal and S_{k-1}, S_k, S_{k+1} share a binade
    // (so they share a quantum), with S >= v so that differences are exact.
    if (fast && prev_s >= v && d == prev_d && binade(prev_s) == binade(before) &&
        binade(before) == binade(w.sum)) {
      const double top = std::min(std::ldexp(1.0, binade(w.sum) + 1), ot.value);
      // Jump j more steps while the exact sum S + v stays below the binade's top.
      const double room = (top - v - w.sum) / d;
      if (room > 3) {
        auto j = static_cast<std::uint64_t>(std::min(room - 2, 0x1p62));
        j = std::min(j, max_steps - w.steps);
        w.sum += static_cast<double>(j) * d;  // exact: multiples of the binade's quantum
        w.steps += j;
      }
    }
    prev_d = d;
    prev_s = before;
  }
  return w;
}

double rel_error(double sum, std::uint64_t n, double v) {
  if (!std::isfinite(sum)) return kInf;
  const double nd = static_cast<double>(n);
  const double hi = nd * v, lo = std::fma(nd, v, -hi);  // n v == hi + lo exactly
  return std::fabs((sum - hi) - lo) / std::fabs(hi);
}

double pairwise(std::uint64_t n, double v, const Format& f, std::map<std::uint64_t, double>* memo) {
  if (n == 1) return v;
  if (memo) {
    if (auto it = memo->find(n); it != memo->end()) return it->second;
  }
  const double r = add_rounded(pairwise(n / 2, v, f, memo), pairwise(n - n / 2, v, f, memo), f);
  if (memo) (*memo)[n] = r;
  return r;
}

double kahan(std::uint64_t n, double v, const Format& f) {
  double s = 0, c = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const double y = add_rounded(v, -c, f);
    const double t = add_rounded(s, y, f);
    c = add_rounded(add_rounded(t, -s, f), -y, f);
    s = t;
    if (!std::isfinite(s)) return s;
  }
  return s;
}

std::string show(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

AccumRow limits(const Format& f, const AccumOptions& o, bool fast) {
  check_format(f);
  double v = round(o.value, f);
  if (!std::isfinite(o.value) || !std::isfinite(v) || v == 0)
    throw Error::in_option(
        "value", "",
        show(o.value) + " is " + (v == 0 ? "zero in " : "not a finite value of ") + f.name);
  double start = round(o.start, f);
  if (!std::isfinite(o.start) || !std::isfinite(start))
    throw Error::in_option("start", "", show(o.start) + " is not a finite value of " + f.name);
  if (o.n > 1'000'000'000)
    throw Error::in_option("n", "", "at most 10^9 terms (the Kahan sum takes one step per term)");
  AccumRow r;
  r.format = f.name;
  r.value = v;
  r.start = start;
  // Nearest-even is symmetric: a negative increment walks the mirror image.
  const double sign = v < 0 ? -1 : 1;
  v *= sign;
  start *= sign;
  if (start == 0) start = 0;  // -0 + v == v: drop the sign of a zero start

  const Walk w = walk(start, v, f, std::numeric_limits<std::uint64_t>::max(), fast);
  r.stagnation_count = w.stagnation;
  r.overflow_count = w.overflow;
  r.exact_count = w.first_inexact.value_or(w.steps);

  r.n = o.n;
  if (r.n == 0) {
    r.n = 100'000;
    while (r.n > 1 && static_cast<double>(r.n) * v > f.max()) r.n /= 10;
  }
  const Walk naive = walk(0.0, v, f, r.n, fast);
  r.naive_rel_error = naive.overflow ? kInf : rel_error(naive.sum, r.n, v);
  std::map<std::uint64_t, double> memo;
  r.pairwise_rel_error = rel_error(pairwise(r.n, v, f, fast ? &memo : nullptr), r.n, v);
  r.kahan_rel_error = rel_error(kahan(r.n, v, f), r.n, v);
  return r;
}

}  // namespace

double add_rounded(double a, double b, const Format& f) {
  if (detail::is_float64(f)) return a + b;
  if (!detail::odd_rounding_suffices(f))
    throw Error("format '" + f.name + "'",
                "formats of more than 50 mantissa bits other than float64 are not modelled");
  return round(detail::add_odd(a, b), f);
}

AccumRow accum_limits(const Format& f, const AccumOptions& o) {
  return limits(f, o, true);
}

AccumRow accum_limits_simulated(const Format& f, const AccumOptions& o) {
  return limits(f, o, false);
}

std::vector<Format> accum_formats() {
  std::vector<Format> out;
  for (const auto& f : named_formats())
    if (f.is_signed) out.push_back(f);
  return out;
}

}  // namespace fpguard
