// The GEMM error experiment: draw A and B, round them into the input format (or quantize
// them into a scaled one as the executor does), multiply with the accumulation model,
// round C into the output format, and measure it against the truth computed from the same
// rounded inputs (arithmetic error) and from the unrounded ones (input-rounding error),
// next to the classical bounds and a bound on the input rounding.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <variant>

#include "core/parallel.hpp"
#include "experiments/internal.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/round.hpp"

namespace fpguard {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool parse_int(std::string_view s, std::int64_t& v) {
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, v);
  return r.ec == std::errc{} && r.ptr == end && !s.empty();
}

bool parse_double(std::string_view s, double& v) {
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, v);
  return r.ec == std::errc{} && r.ptr == end && !s.empty() && std::isfinite(v);
}

std::uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::uint64_t{1} << 40;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

// Unit roundoff of nearest rounding into f: 2^-(m+1) = eps/2.
double unit_roundoff(const Format& f) {
  return std::ldexp(1.0, -f.precision_bits());
}

// gamma_n = n u / (1 - n u); +inf when n u >= 1 (no bound).
double gamma(double n, double u) {
  return n * u < 1 ? n * u / (1 - n * u) : kInf;
}

// Whether every value of `acc` is a value of `out` (then rounding to out is exact).
bool holds(const Format& out, const Format& acc) {
  return out.is_signed && out.mantissa_bits >= acc.mantissa_bits && out.emax() >= acc.emax() &&
         out.emin() - out.mantissa_bits <= acc.emin() - acc.mantissa_bits;
}

// The matrix `which` (0: A, 1: B) of sample `sample` of size n.
void draw(std::vector<double>& x, std::int64_t n, const Distribution& d, std::uint64_t seed,
          int sample, int which) {
  const std::uint64_t key =
      splitmix64(splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(n)) ^
                 (static_cast<std::uint64_t>(sample) * 2 + static_cast<std::uint64_t>(which)));
  x.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(n));
  detail::parallel_for(x.size(), 0, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const double u1 = static_cast<double>((splitmix64(key ^ (2 * i)) >> 11) + 1) * 0x1p-53;
      const double u2 = static_cast<double>(splitmix64(key ^ (2 * i + 1)) >> 11) * 0x1p-53;
      if (d.kind == Distribution::Kind::normal)
        x[i] = std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
      else
        x[i] = d.lo + (d.hi - d.lo) * u2;
    }
  });
}

// |A| |B|, rounded up enough to be an upper bound of the exact one.
void abs_product(const std::vector<double>& a, const std::vector<double>& b,
                 std::vector<double>& out, std::int64_t n, int threads) {
  const auto nn = a.size();
  out.resize(nn);
  if (detail::all_float(a) && detail::all_float(b)) {
    std::vector<float> fa(nn), fb(nn), fc(nn);
    for (std::size_t i = 0; i < nn; ++i) fa[i] = std::fabs(static_cast<float>(a[i]));
    for (std::size_t i = 0; i < nn; ++i) fb[i] = std::fabs(static_cast<float>(b[i]));
    detail::sgemm(fa.data(), fb.data(), fc.data(), n, n, n);
    // A float32 sum of n non-negative terms is >= (1 - gamma_n) times the exact one.
    const double up = 1 / (1 - gamma(static_cast<double>(n) + 1, 0x1p-24));
    for (std::size_t i = 0; i < nn; ++i) out[i] = static_cast<double>(fc[i]) * up;
    return;
  }
  std::vector<double> aa(nn), bb(nn);
  for (std::size_t i = 0; i < nn; ++i) aa[i] = std::fabs(a[i]), bb[i] = std::fabs(b[i]);
  gemm_reference(aa, bb, out, n, false, threads);
  const double up = 1 / (1 - gamma(static_cast<double>(n) + 1, 0x1p-53));
  for (auto& v : out) v *= up;
}

bool compensated_reference(const GemmSetup& s) {
  return s.accumulate.precision_bits() > 24;
}

// x rounded into the scalar format f, and the elementwise bound on the rounding error
// |x - fl(x)| <= u |x| + eta (eta: half the smallest subnormal); the bound is left empty
// when a value overflows f (there is none).
void round_scalar(const std::vector<double>& x, std::vector<double>& out,
                  std::vector<double>& bound, const Format& f) {
  out.resize(x.size());
  round(std::span<const double>(x), std::span<double>(out), f);
  const double u = unit_roundoff(f), eta = f.smallest_subnormal() / 2, max = f.max();
  bound.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!(std::fabs(x[i]) <= max)) return bound.clear();
    bound[i] = u * std::fabs(x[i]) + eta;
  }
}

// x (n x n, row-major) quantized into f as the executor quantizes MatMul operand `which`
// (0: A, 1: B; exec::scaled_operand): round_scaled on float32 carriers, blocks along K (A's
// rows, B's columns), a channel: format per tensor for A and per column of B. The bound
// on |x - value| of a group with scale S (s_b s_t for two-level scales) and largest
// magnitude amax is max(h S, amax - M S) (S = 0: amax), h half the element format's top
// quantum and M its max, plus 5 2^-24 amax for the float32 carriers (docs/experiments.md
// derives it); left empty for a NaN scale.
void round_scaled_operand(const std::vector<double>& x, std::vector<double>& out,
                          std::vector<double>& bound, std::int64_t n, const ScaledFormat& f,
                          int which) {
  ScaledFormat g = f;
  ScaledLayout l{.shape = {n, n}, .axis = which == 0 ? 1 : 0};
  if (f.scope == ScaleScope::channel) {
    if (which == 0)
      g.scope = ScaleScope::tensor;  // an activation: one scale per tensor
    else
      l.axis = 1;  // a weight: one scale per output column
  }
  std::vector<float> fx(x.size()), fy(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) fx[i] = static_cast<float>(x[i]);
  ScaledCodes codes;
  round_scaled(std::span<const float>(fx), std::span<float>(fy), l, g, {}, &codes);
  out.assign(fy.begin(), fy.end());
  const double h = std::ldexp(1.0, g.element.emax() - g.element.mantissa_bits - 1);
  const double max = g.element.max(), slop = 5 * 0x1p-24;
  bound.assign(x.size(), 0);
  std::size_t group = 0;
  bool finite = true;
  for_each_scale_group(l, g, x.size(), [&](std::span<const std::size_t> idx) {
    double amax = 0, s = codes.scale_values[group++];
    for (std::size_t i : idx) amax = std::max(amax, std::fabs(x[i]));
    if (g.rule == ScaleRule::two_level) s *= codes.tensor_scale;
    finite = finite && std::isfinite(s);
    const double e = (s > 0 ? std::max(h * s, amax - max * s) : amax) + slop * amax;
    for (std::size_t i : idx) bound[i] = e;
  });
  if (!finite) bound.clear();
}

// Operand `which` of the setup's input rounding, with its elementwise error bound.
void round_input(const std::vector<double>& x, std::vector<double>& out, std::vector<double>& bound,
                 std::int64_t n, const GemmSetup& s, int which) {
  if (s.scaled)
    round_scaled_operand(x, out, bound, n, *s.scaled, which);
  else
    round_scalar(x, out, bound, s.input);
}

// E_A (|B| + E_B) + |A| E_B >= |A_rounded B_rounded - A B| elementwise, rounded up.
void input_bound(GemmMatrices& m, const std::vector<double>& ea, const std::vector<double>& eb,
                 int threads) {
  m.input_bound.clear();
  if (ea.empty() || eb.empty()) return;
  constexpr double up = 1 + 0x1p-51;
  std::vector<double> t(eb.size()), p, q;
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = (std::fabs(m.b[i]) + eb[i]) * up;
  abs_product(ea, t, p, m.n, threads);
  abs_product(m.a, eb, q, m.n, threads);
  m.input_bound.resize(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) m.input_bound[i] = (p[i] + q[i]) * up;
}

}  // namespace

// ---- parsing ------------------------------------------------------------------------

std::string to_string(const AccumulationOrder& o) {
  switch (o.kind) {
    case AccumulationOrder::Kind::library:
      return "library";
    case AccumulationOrder::Kind::sequential:
      return "sequential";
    case AccumulationOrder::Kind::pairwise:
      return "pairwise";
    case AccumulationOrder::Kind::blocked:
      return "blocked:" + std::to_string(o.block);
  }
  return "?";
}

std::optional<AccumulationOrder> parse_accumulation_order(std::string_view s) {
  using Kind = AccumulationOrder::Kind;
  const std::string option = "accumulation";
  if (s == "auto") return std::nullopt;
  if (s == "library") return AccumulationOrder{Kind::library, 0};
  if (s == "sequential") return AccumulationOrder{Kind::sequential, 0};
  if (s == "pairwise") return AccumulationOrder{Kind::pairwise, 0};
  const auto colon = s.find(':');
  const std::string head(s.substr(0, colon));
  if (head == "blocked") {
    std::int64_t k = 0;
    if (colon == std::string_view::npos)
      throw Error::in_option(option, "",
                             "'blocked' needs a chunk size: blocked:K, e.g. blocked:32");
    if (!parse_int(s.substr(colon + 1), k) || k < 1)
      throw Error::in_option(option, "", "'" + std::string(s) + "': K must be an integer >= 1");
    return AccumulationOrder{Kind::blocked, k};
  }
  std::string msg = "unknown accumulation order '" + std::string(s) + "'";
  if (auto hint = did_you_mean(head, {"auto", "library", "sequential", "pairwise", "blocked"});
      !hint.empty())
    msg += "; did you mean '" + (hint == "blocked" ? std::string("blocked:K") : hint) + "'?";
  else
    msg += " (known: auto, library, sequential, pairwise, blocked:K)";
  throw Error::in_option(option, "", msg);
}

std::string to_string(const Distribution& d) {
  if (d.kind == Distribution::Kind::normal) return "normal";
  char buf[96];
  std::snprintf(buf, sizeof buf, "uniform:%.17g:%.17g", d.lo, d.hi);
  return buf;
}

Distribution parse_distribution(std::string_view s) {
  const std::string option = "distribution";
  if (s == "normal") return {};
  const auto c1 = s.find(':');
  const std::string head(s.substr(0, c1));
  if (head == "uniform") {
    const auto c2 = c1 == std::string_view::npos ? c1 : s.find(':', c1 + 1);
    Distribution d;
    d.kind = Distribution::Kind::uniform;
    if (c2 == std::string_view::npos || !parse_double(s.substr(c1 + 1, c2 - c1 - 1), d.lo) ||
        !parse_double(s.substr(c2 + 1), d.hi))
      throw Error::in_option(option, "",
                             "'" + std::string(s) + "': write uniform:LO:HI with finite numbers");
    if (!(d.lo < d.hi))
      throw Error::in_option(option, "", "'" + std::string(s) + "': LO must be below HI");
    return d;
  }
  std::string msg = "unknown distribution '" + std::string(s) + "'";
  if (auto hint = did_you_mean(head, {"normal", "uniform"}); !hint.empty())
    msg += "; did you mean '" + (hint == "uniform" ? std::string("uniform:LO:HI") : hint) + "'?";
  else
    msg += " (known: normal, uniform:LO:HI)";
  throw Error::in_option(option, "", msg);
}

std::optional<Format> parse_format_or_same(std::string_view s) {
  if (s == "same") return std::nullopt;
  return parse_format(s);
}

std::uint64_t gemm_error_bytes(std::int64_t n) {
  // A, B, their rounded copies, C, C_ref, C_ref(unrounded), |A||B|, the input bound, and
  // up to four more for float copies, the Dot2 compensation and blocked chunks.
  const auto nn = static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(n);
  // The input-rounding bound adds E_A, E_B, |B| + E_B and two products at its peak.
  return 17 * nn * sizeof(double);
}

std::vector<std::int64_t> parse_sizes(std::string_view s) {
  const std::string option = "sizes";
  std::vector<std::int64_t> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const auto comma = std::min(s.find(',', pos), s.size());
    const std::string_view item = s.substr(pos, comma - pos);
    std::int64_t n = 0;
    if (!parse_int(item, n) || n < 1)
      throw Error::in_option(option, "", "'" + std::string(item) + "' is not a positive integer");
    // 2^24: beyond it even one n x n matrix would not fit in any machine's memory.
    const std::uint64_t need = n <= (std::int64_t{1} << 24) ? gemm_error_bytes(n) : ~0ull;
    const std::uint64_t have = physical_memory();
    if (need > have)
      throw Error::in_option(option, "",
                             "n = " + std::to_string(n) + " needs " +
                                 (need == ~0ull ? std::string("more than 2^64 bytes")
                                                : std::to_string(need >> 20) + " MiB") +
                                 " of memory; this machine has " + std::to_string(have >> 20) +
                                 " MiB");
    out.push_back(n);
    pos = comma + 1;
  }
  return out;
}

// ---- setup --------------------------------------------------------------------------

GemmSetup make_gemm_setup(const Format& input, const std::optional<Format>& accumulate,
                          const std::optional<Format>& output,
                          const std::optional<AccumulationOrder>& order) {
  using Kind = AccumulationOrder::Kind;
  if (!input.is_signed)
    throw Error("format '" + input.name + "'",
                "has no sign and no zero: it cannot hold the entries of a matrix");
  GemmSetup s;
  s.input = input;
  s.accumulate = accumulate.value_or(input);
  s.output = output.value_or(input);
  if (input.precision_bits() > 26) s.accumulate = parse_format("float64");
  if (!s.accumulate.is_signed)
    throw Error::in_option("accumulate", s.accumulate.name,
                           "an accumulator needs a sign and a zero");
  if (!s.output.is_signed)
    throw Error::in_option("output", s.output.name, "the output needs a sign and a zero");
  if (!detail::is_float64(s.accumulate) && !detail::odd_rounding_suffices(s.accumulate))
    throw Error::in_option(
        "accumulate", s.accumulate.name,
        "accumulating in a format of more than 51 bits other than float64 is not modelled");
  // float32 holds every value of the input format: library accumulation applies.
  const bool float_inputs = input.precision_bits() <= 24 && input.emax() <= 127 &&
                            input.emin() - input.mantissa_bits >= -149;
  if (order) {
    s.order = *order;
    if (s.order.kind == Kind::library) {
      if (!detail::is_float32(s.accumulate))
        throw Error::in_option("accumulation", "library",
                               "oneDNN's sgemm accumulates in float32, not " + s.accumulate.name +
                                   "; use sequential, pairwise or blocked:K");
      if (!float_inputs)
        throw Error::in_option(
            "accumulation", "library",
            "float32 cannot hold every value of " + input.name + "; use sequential");
    }
  } else {
    s.order.kind =
        detail::is_float32(s.accumulate) && float_inputs ? Kind::library : Kind::sequential;
  }
  return s;
}

GemmSetup make_gemm_setup(const ScaledFormat& input, const std::optional<Format>& accumulate,
                          const std::optional<Format>& output,
                          const std::optional<AccumulationOrder>& order) {
  GemmSetup s = make_gemm_setup(parse_format("float32"), accumulate, output, order);
  s.scaled = input;
  return s;
}

GemmSetup make_gemm_setup(const GemmInput& input, const std::optional<Format>& accumulate,
                          const std::optional<Format>& output,
                          const std::optional<AccumulationOrder>& order) {
  return std::visit([&](const auto& f) { return make_gemm_setup(f, accumulate, output, order); },
                    input);
}

// ---- one experiment -----------------------------------------------------------------

namespace {

// The parts of GemmMatrices that do not depend on the setup.
struct Drawn {
  std::vector<double> a, b, c_unrounded;
};

Drawn draw_sample(std::int64_t n, const Distribution& d, std::uint64_t seed, int sample,
                  int threads) {
  Drawn r;
  draw(r.a, n, d, seed, sample, 0);
  draw(r.b, n, d, seed, sample, 1);
  r.c_unrounded.resize(r.a.size());
  gemm_reference(r.a, r.b, r.c_unrounded, n, false, threads);
  return r;
}

// Takes the drawn matrices over (no copies: memory is what limits n); give_back returns
// them for the next setup. Overflowed outputs are counted; non-finite accumulations too.
GemmMatrices run_setup(Drawn&& dr, std::int64_t n, const GemmSetup& s, int threads) {
  GemmMatrices m;
  m.n = n;
  m.a = std::move(dr.a);
  m.b = std::move(dr.b);
  m.c_ref_unrounded = std::move(dr.c_unrounded);
  const auto nn = m.a.size();
  {
    std::vector<double> ea, eb;
    round_input(m.a, m.a_rounded, ea, n, s, 0);
    round_input(m.b, m.b_rounded, eb, n, s, 1);
    input_bound(m, ea, eb, threads);
  }
  m.c_ref.resize(nn);
  gemm_reference(m.a_rounded, m.b_rounded, m.c_ref, n, compensated_reference(s), threads);
  abs_product(m.a_rounded, m.b_rounded, m.abs_ab, n, threads);
  m.c.resize(nn);
  gemm_accumulate(m.a_rounded, m.b_rounded, m.c, n, s.accumulate, s.order, threads);
  const OverflowThreshold ot = overflow_threshold(s.output);
  for (double v : m.c)
    if (!std::isfinite(v) || std::fabs(v) > ot.value || (ot.inclusive && std::fabs(v) == ot.value))
      ++m.overflow;
  round(std::span<const double>(m.c), std::span<double>(m.c), s.output);
  return m;
}

// input_rounding_error needs the plain double truth of the rounded inputs; c_ref is that
// unless it is the compensated one.
double input_rounding_error(const GemmMatrices& m, const GemmSetup& s, int threads) {
  if (m.a == m.a_rounded && m.b == m.b_rounded) return 0;
  const std::vector<double>* ref = &m.c_ref;
  std::vector<double> plain;
  if (compensated_reference(s)) {
    plain.resize(m.c_ref.size());
    gemm_reference(m.a_rounded, m.b_rounded, plain, m.n, false, threads);
    ref = &plain;
  }
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref->size(); ++i) {
    const double d = (*ref)[i] - m.c_ref_unrounded[i];
    num += d * d;
    den += m.c_ref_unrounded[i] * m.c_ref_unrounded[i];
  }
  return den > 0 ? std::sqrt(num / den) : (num > 0 ? kInf : 0.0);
}

// The input-rounding bound's normwise value and its elementwise violations: an element
// violates it when |C_ref - C_ref(unrounded)| exceeds it by more than both truths' own
// errors, 2 gamma_(n+1)(2^-53) (|A_r||B_r| + |A||B|), with |A||B| <= |A_r||B_r| + 2 bound.
void input_bound_metrics(const GemmMatrices& m, GemmErrorRow& r) {
  r.input_rounding_bound = kInf;
  double bound2 = 0, unrounded2 = 0;
  for (double v : m.c_ref_unrounded) unrounded2 += v * v;
  if (m.input_bound.empty() || unrounded2 == 0) return;
  const double slack_g = 2 * gamma(static_cast<double>(m.n) + 1, 0x1p-53);
  std::uint64_t violations = 0;
  for (std::size_t i = 0; i < m.input_bound.size(); ++i) {
    const double b = m.input_bound[i];
    bound2 += b * b;
    const double e = std::fabs(m.c_ref[i] - m.c_ref_unrounded[i]);
    if (!(e <= b + slack_g * (2 * m.abs_ab[i] + 2 * b))) ++violations;
  }
  r.input_rounding_bound = std::sqrt(bound2 / unrounded2);
  r.input_bound_violations = violations;
}

GemmErrorRow metrics(const GemmMatrices& m, const GemmSetup& s) {
  GemmErrorRow r;
  r.size = m.n;
  r.format = s.scaled ? s.scaled->name : s.input.name;
  r.accumulate = s.accumulate.name;
  r.accumulation = to_string(s.order);
  r.output = s.output.name;
  r.samples = 1;
  const double n = static_cast<double>(m.n);
  const double u =
      s.order.kind == AccumulationOrder::Kind::library ? 0x1p-24 : unit_roundoff(s.accumulate);
  const Format acc =
      s.order.kind == AccumulationOrder::Kind::library ? parse_format("float32") : s.accumulate;
  const bool exact_out = holds(s.output, acc);
  const double u_out = exact_out ? 0 : unit_roundoff(s.output);
  const double eta_out = exact_out ? 0 : s.output.smallest_subnormal() / 2;
  const double g = gamma(n, u);

  double max_ref = 0;
  for (double v : m.c_ref) max_ref = std::max(max_ref, std::fabs(v));
  r.rel_floor = std::max(u, u_out) * max_ref;

  double sum_abs = 0, max_abs = 0, max_rel = 0, err2 = 0, ref2 = 0, absab2 = 0;
  std::uint64_t violations = 0;
  const std::uint64_t overflow = m.overflow;
  const double slack_g = 2 * gamma(n + 1, 0x1p-53);
  for (std::size_t i = 0; i < m.c.size(); ++i) {
    const double c = m.c[i], ref = m.c_ref[i], ab = m.abs_ab[i];
    const double e = std::fabs(c - ref);
    sum_abs += e;
    if (!(e <= max_abs)) max_abs = e;  // NaN sticks
    const double rel = e == 0 ? 0.0 : e / std::max(std::fabs(ref), r.rel_floor);
    if (!(rel <= max_rel)) max_rel = rel;
    err2 += e * e;
    ref2 += ref * ref;
    absab2 += ab * ab;
    const double bound = g * (1 + u_out) * ab + u_out * std::fabs(ref) + eta_out + slack_g * ab +
                         0x1p-52 * std::fabs(ref);
    if (!(e <= bound)) ++violations;
  }
  const double nn = static_cast<double>(m.c.size());
  r.mean_abs_error = nn > 0 ? sum_abs / nn : 0;
  r.max_abs_error = max_abs;
  r.max_rel_error = max_rel;
  const double ref_norm = std::sqrt(ref2), absab_norm = std::sqrt(absab2);
  r.normwise_error = ref_norm > 0 ? std::sqrt(err2) / ref_norm : (err2 > 0 ? kInf : 0.0);
  const double out_terms = u_out * ref_norm + n * eta_out;
  r.bound_deterministic =
      std::isfinite(g) ? (g * (1 + u_out) * absab_norm + out_terms) / ref_norm : kInf;
  r.bound_probabilistic = (std::sqrt(n) * u * absab_norm + out_terms) / ref_norm;
  // C_ref == 0 (every product rounded away): no relative bound.
  if (ref_norm == 0) r.bound_deterministic = r.bound_probabilistic = kInf;
  r.overflow = overflow;
  if (std::isfinite(g) && overflow == 0) r.bound_violations = violations;
  input_bound_metrics(m, r);
  return r;
}

}  // namespace

GemmMatrices gemm_matrices(std::int64_t n, const GemmSetup& s, const Distribution& d,
                           std::uint64_t seed, int sample, int threads) {
  return run_setup(draw_sample(n, d, seed, sample, threads), n, s, threads);
}

GemmErrorRow gemm_error_row(const GemmMatrices& m, const GemmSetup& s) {
  GemmErrorRow r = metrics(m, s);
  r.input_rounding_error = input_rounding_error(m, s, 0);
  return r;
}

std::vector<GemmErrorRow> gemm_error(const GemmErrorOptions& o) {
  if (o.samples < 1) throw Error::in_option("samples", "", "must be at least 1");
  if (o.sizes.empty()) throw Error::in_option("sizes", "", "no size given");
  std::vector<GemmInput> formats = o.formats;
  if (formats.empty())
    for (const char* f : {"float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2", "float32"})
      formats.push_back(parse_format(f));
  std::vector<GemmSetup> setups;
  for (const auto& f : formats)
    setups.push_back(make_gemm_setup(f, o.accumulate, o.output, o.order));
  for (auto n : o.sizes)
    if (n < 1)
      throw Error::in_option("sizes", "", "'" + std::to_string(n) + "' is not a positive integer");

  std::vector<GemmErrorRow> rows;
  for (const auto n : o.sizes) {
    std::vector<GemmErrorRow> agg(setups.size());
    for (int sample = 0; sample < o.samples; ++sample) {
      Drawn dr = draw_sample(n, o.distribution, o.seed, sample, o.threads);
      for (std::size_t f = 0; f < setups.size(); ++f) {
        GemmMatrices m = run_setup(std::move(dr), n, setups[f], o.threads);
        GemmErrorRow r = metrics(m, setups[f]);
        r.input_rounding_error = input_rounding_error(m, setups[f], o.threads);
        dr = {std::move(m.a), std::move(m.b), std::move(m.c_ref_unrounded)};
        GemmErrorRow& a = agg[f];
        if (sample == 0) {
          a = r;
          continue;
        }
        // Means are summed here and divided below; maxima and counts combine directly.
        a.mean_abs_error += r.mean_abs_error;
        a.normwise_error += r.normwise_error;
        a.input_rounding_error += r.input_rounding_error;
        a.input_rounding_bound += r.input_rounding_bound;
        a.bound_deterministic += r.bound_deterministic;
        a.bound_probabilistic += r.bound_probabilistic;
        for (auto [dst, src] : {std::pair{&a.max_abs_error, r.max_abs_error},
                                {&a.max_rel_error, r.max_rel_error},
                                {&a.rel_floor, r.rel_floor}})
          if (!(*dst >= src)) *dst = std::isnan(*dst) ? *dst : src;
        a.overflow += r.overflow;
        for (auto [dst, src] : {std::pair{&a.bound_violations, &r.bound_violations},
                                {&a.input_bound_violations, &r.input_bound_violations}}) {
          if (*dst && *src)
            **dst += **src;
          else
            dst->reset();
        }
      }
    }
    for (auto& a : agg) {
      const double k = o.samples;
      a.samples = o.samples;
      a.mean_abs_error /= k;
      a.normwise_error /= k;
      a.input_rounding_error /= k;
      a.input_rounding_bound /= k;
      a.bound_deterministic /= k;
      a.bound_probabilistic /= k;
      rows.push_back(a);
    }
  }
  return rows;
}

}  // namespace fpguard
