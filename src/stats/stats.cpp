// One pass over the data, in chunks that stay in L1: each chunk is summarised (counts,
// extremes, moments, exponent histogram) and rounded into every requested format, whose
// errors are summarised too. Chunks are spread over threads; their summaries merge
// exactly (counts, extremes) or stably (moments: Chan et al.'s pairwise update).
#include "fpguard/stats.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "core/parallel.hpp"
#include "fpguard/error.hpp"
#include "fpguard/round.hpp"
#include "stats/kernels.hpp"

namespace fpguard {

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::ok:
      return "ok";
    case Verdict::overflow:
      return "overflow";
    case Verdict::underflow:
      return "underflow";
    case Verdict::precision:
      return "precision";
    case Verdict::nonfinite:
      return "nonfinite";
    case Verdict::block_underflow:
      return "block_underflow";
  }
  return "?";
}

namespace {

using detail::BaseAcc;
using detail::FormatAcc;
using detail::merge_into;
using detail::Moments;

// 16 KiB of float32: in L1 with its 1/|x| while every format is measured, and long
// enough that the per-chunk reductions cost little.
constexpr std::size_t kChunk = detail::kMaxChunk;

// Pairwise reduction keeps the rounding error of the merge O(log chunks).
Moments merge_all(std::span<const Moments> m) {
  if (m.empty()) return {};
  if (m.size() == 1) return m[0];
  const std::size_t h = m.size() / 2;
  return detail::merge_moments(merge_all(m.first(h)), merge_all(m.subspan(h)));
}

void merge_into(FormatAcc& a, const FormatAcc& b) {
  a.overflow += b.overflow;
  a.underflow += b.underflow;
  a.subnormal += b.subnormal;
  a.precision_loss += b.precision_loss;
  a.max_abs_error = std::max(a.max_abs_error, b.max_abs_error);
  a.max_rel_error = std::max(a.max_rel_error, b.max_rel_error);
  a.sum_rel_error += b.sum_rel_error;
  a.rel_count += b.rel_count;
}

// The largest power of two 2^k with fits(v * 2^k), as an exact double; 1 when v is 0 or
// not finite. `guess` is a starting k; the search then walks to the exact answer.
template <class Fits>
double power_of_two_scale(double v, int guess, Fits fits) {
  if (!(v > 0) || !std::isfinite(v)) return 1.0;
  int k = guess;
  while (!fits(std::ldexp(v, k))) --k;
  while (fits(std::ldexp(v, k + 1))) ++k;
  return std::ldexp(1.0, k);
}

// What the chunks of x add up to: the base summary and each format's errors, merged over
// the threads, and each chunk's moments (merged pairwise by the caller).
struct Accumulated {
  BaseAcc base;
  std::vector<FormatAcc> fmt;
  std::vector<Moments> moments;
};

// Called by each thread with the elements it has read, [first, first + count), when it
// is done with them (or null).
using Release = std::function<void(std::size_t first, std::size_t count)>;

template <class T>
Accumulated accumulate(std::span<const T> x, const std::vector<Format>& formats,
                       const StatsOptions& o, const Release& release) {
  const std::size_t n = x.size();
  const std::size_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<detail::FormatPlan> plans;
  for (const auto& f : formats) plans.push_back(detail::make_plan(f));

  const int threads = detail::resolve_threads(o.threads, n);
  std::vector<Accumulated> acc(static_cast<std::size_t>(std::max(1, threads)));
  for (auto& a : acc) a.fmt.resize(formats.size());
  std::vector<Moments> moments(chunks);
  const detail::Distribution distribution = !o.distribution ? detail::Distribution::none
                                            : o.histogram   ? detail::Distribution::full
                                                            : detail::Distribution::moments;

  // Threads take contiguous ranges of whole chunks.
  const std::size_t per = (chunks + acc.size() - 1) / acc.size();
  auto work = [&](std::size_t t) {
    auto& a = acc[t];
    std::vector<T> rounded(kChunk);
    // float32: formats with a fast rounding path are measured right after the chunk's
    // summary, while the chunk is in L1.
    std::vector<detail::FusedFormat> fused;
    std::vector<std::size_t> others;
    for (std::size_t f = 0; f < formats.size(); ++f) {
      if (std::is_same_v<T, float> && plans[f].fast)
        fused.push_back({&*plans[f].fast, &plans[f], &a.fmt[f]});
      else
        others.push_back(f);
    }
    std::vector<float> inv(std::is_same_v<T, float> ? kChunk : 0);
    const std::size_t first = std::min(chunks, t * per), last = std::min(chunks, (t + 1) * per);
    for (std::size_t c = first; c < last; ++c) {
      const std::size_t b = c * kChunk, len = std::min(kChunk, n - b);
      const std::span<const T> xs = x.subspan(b, len);
      if constexpr (std::is_same_v<T, float>)
        moments[c] = detail::chunk_all(xs, a.base, fused, inv, distribution);
      else
        moments[c] = detail::chunk_base(xs, a.base);
      for (const std::size_t f : others) {
        const std::span<T> r(rounded.data(), len);
        RoundOptions ro;
        ro.threads = 1;
        fpguard::round(xs, r, formats[f], ro);
        detail::chunk_format_fast(xs, std::span<const T>(r), plans[f], a.fmt[f]);
      }
    }
    if (release && last > first)
      release(first * kChunk, std::min(n, last * kChunk) - first * kChunk);
  };
  // One range of chunks per thread, on the process's OpenMP pool (see core/parallel.hpp).
  detail::parallel_for(
      acc.size(), static_cast<int>(acc.size()),
      [&](std::size_t t0, std::size_t t1) {
        for (std::size_t t = t0; t < t1; ++t) work(t);
      },
      1);
  for (std::size_t t = 1; t < acc.size(); ++t) {
    merge_into(acc[0].base, acc[t].base);
    for (std::size_t f = 0; f < formats.size(); ++f) merge_into(acc[0].fmt[f], acc[t].fmt[f]);
  }
  acc[0].moments = std::move(moments);
  return std::move(acc[0]);
}

// One format's findings from its accumulated errors and the tensor's summary.
FormatStats format_stats(const Format& format, const FormatAcc& a, const TensorStats& ts,
                         bool any_finite, std::uint64_t nonzero, const StatsOptions& o) {
  FormatStats fs;
  fs.format = format;
  fs.overflow = a.overflow;
  fs.underflow = a.underflow;
  fs.subnormal = a.subnormal;
  fs.precision_loss = a.precision_loss;
  fs.max_abs_error = a.max_abs_error;
  fs.max_rel_error = a.max_rel_error;
  fs.mean_rel_error = a.rel_count ? a.sum_rel_error / static_cast<double>(a.rel_count) : 0.0;
  const double fmax = format.max();
  if (!any_finite || ts.absmax == 0) {
    fs.headroom_bits = std::numeric_limits<double>::infinity();
  } else {
    fs.headroom_bits = std::log2(fmax / ts.absmax);
  }
  const double limit = o.margin * fmax;
  const double v = any_finite ? ts.absmax : 0.0;
  const int guess = v > 0 ? static_cast<int>(std::floor(std::log2(limit / v))) : 0;
  fs.scale = power_of_two_scale(v, guess, [&](double y) { return y <= limit; });
  const int guess_sq =
      v > 0 ? static_cast<int>(std::floor(0.5 * std::log2(limit) - std::log2(v))) : 0;
  fs.scale_for_square = power_of_two_scale(v, guess_sq, [&](double y) { return y * y <= limit; });
  const double threshold = kVerdictFraction * static_cast<double>(nonzero);
  if (ts.nan + ts.posinf + ts.neginf > 0)
    fs.verdict = Verdict::nonfinite;
  else if (fs.overflow > 0)
    fs.verdict = Verdict::overflow;
  else if (static_cast<double>(fs.underflow) > threshold)
    fs.verdict = Verdict::underflow;
  else if (static_cast<double>(fs.precision_loss) > threshold)
    fs.verdict = Verdict::precision;
  return fs;
}

template <class T>
Stats run(std::span<const T> x, const std::vector<Format>& formats, const StatsOptions& o,
          const Release& release = nullptr) {
  const Accumulated acc = accumulate(x, formats, o, release);
  Stats s;
  const BaseAcc& b = acc.base;
  s.tensor = detail::summarize(b, x.size(), o.distribution && o.histogram);
  TensorStats& ts = s.tensor;
  const Moments m = merge_all(acc.moments);
  if (m.n && o.distribution) {
    ts.mean = m.mean;
    ts.std = std::sqrt(m.m2 / static_cast<double>(m.n));
  }
  const std::uint64_t nonzero = b.finite - b.zeros;
  for (std::size_t f = 0; f < formats.size(); ++f)
    s.formats.push_back(format_stats(formats[f], acc.fmt[f], ts, b.finite > 0, nonzero, o));
  return s;
}

}  // namespace

namespace detail {

namespace {

// The histogram bins [lo, hi) an accumulator can have counted in: those of its finite
// nonzero values, from its smallest |value| to its largest (its other bins are 0).
std::pair<std::size_t, std::size_t> hist_bins(const BaseAcc& a) {
  if (!std::isfinite(a.min_abs_nonzero)) return {0, 0};
  const double absmax = std::max(std::fabs(a.min), std::fabs(a.max));
  return {static_cast<std::size_t>(floor_log2(a.min_abs_nonzero) - kHistOffset),
          static_cast<std::size_t>(floor_log2(absmax) - kHistOffset) + 1};
}

}  // namespace

void merge_into(BaseAcc& a, const BaseAcc& b) {
  a.nan += b.nan;
  a.posinf += b.posinf;
  a.neginf += b.neginf;
  a.zeros += b.zeros;
  a.finite += b.finite;
  a.min = std::min(a.min, b.min);
  a.max = std::max(a.max, b.max);
  a.min_abs_nonzero = std::min(a.min_abs_nonzero, b.min_abs_nonzero);
  const auto [lo, hi] = hist_bins(b);
  for (std::size_t i = lo; i < hi; ++i) a.hist[i] += b.hist[i];
}

TensorStats summarize(const BaseAcc& b, std::uint64_t n, bool histogram) {
  TensorStats ts;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ts.count = n;
  ts.nan = b.nan;
  ts.posinf = b.posinf;
  ts.neginf = b.neginf;
  ts.zeros = b.zeros;
  const bool any_finite = b.finite > 0;
  ts.min = any_finite ? b.min : nan;
  ts.max = any_finite ? b.max : nan;
  ts.absmax = any_finite ? std::max(std::fabs(b.min), std::fabs(b.max)) : nan;
  ts.min_abs_nonzero = std::isfinite(b.min_abs_nonzero) ? b.min_abs_nonzero : nan;
  ts.mean = ts.std = nan;
  const auto [lo, hi] = histogram ? hist_bins(b) : std::pair<std::size_t, std::size_t>{0, 0};
  for (std::size_t i = lo; i < hi; ++i)
    if (b.hist[i]) ts.exponent_histogram[static_cast<int>(i) + kHistOffset] = b.hist[i];
  return ts;
}

}  // namespace detail

Stats stats(std::span<const float> x, const std::vector<Format>& formats, const StatsOptions& o) {
  return run(x, formats, o);
}
Stats stats(std::span<const double> x, const std::vector<Format>& formats, const StatsOptions& o) {
  return run(x, formats, o);
}

Stats stats(const Tensor& t, const std::vector<Format>& formats, const StatsOptions& o) {
  // StatsOptions::release_pages: unmapped whole at the end, 256 MiB of 4 KiB pages took
  // 6-9 ms of serial page-table work (bench/README.md, inspect). (Nothing for tensors that
  // are not a file's view.)
  Release release;
  if (o.release_pages)
    release = [&t](std::size_t first, std::size_t count) { t.release_pages(first, count); };
  if (t.dtype() == DType::float32) return run(t.data<float>(), formats, o, release);
  if (t.dtype() == DType::float64) return run(t.data<double>(), formats, o, release);
  return detail::with_real_values(t, [&](auto x) { return stats(x, formats, o); });
}

}  // namespace fpguard
