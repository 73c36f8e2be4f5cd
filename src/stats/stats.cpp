// One pass over the data, in chunks that stay in L1: each chunk is summarised (counts,
// extremes, moments, exponent histogram) and rounded into every requested format, whose
// errors are summarised too. Threads take blocks of chunks as they come free; the
// summaries merge exactly (counts, extremes), stably (moments: Chan et al.'s pairwise
// update, chunk by chunk) or block by block in order (the formats' float sums), so no
// number depends on the threads.
#include "fpguard/stats.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
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

// What the chunks of x add up to: the base summary and each format's errors, and each
// chunk's moments (merged pairwise by the caller).
struct Accumulated {
  BaseAcc base;
  std::vector<FormatAcc> fmt;
  std::vector<Moments> moments;
};

// Called by each thread with the elements it has read, [first, first + count), when it
// is done with them (or null).
using Release = std::function<void(std::size_t first, std::size_t count)>;

// The chunks of a block (1 MiB of float32): the unit in which threads share the work and
// the formats' float sums are added.
constexpr std::size_t kBlockChunks = 64;

// Hands out runs of blocks as threads come free: large runs while much is left, single
// blocks at the end (OpenMP's guided schedule), so that threads end together when one
// starts late (a pool's first start, 2-6 ms on a 2-vCPU VM) or runs slower (a busy core),
// and a thread gives back the pages of a run in one call (each call flushes the other
// core's TLB: inspect of 256 MiB took 62.5 ms with a call per 256 KiB, 47.9 per 4 MiB).
class BlockRuns {
 public:
  BlockRuns(std::size_t blocks, std::size_t threads) : blocks_(blocks), share_(2 * threads) {}
  // The next run [first, first + count); count 0 when no block is left.
  std::pair<std::size_t, std::size_t> take() {
    std::size_t first = next_.load(std::memory_order_relaxed), count = 0;
    do {
      if (first >= blocks_) return {first, 0};
      count = std::max<std::size_t>(1, (blocks_ - first) / share_);
    } while (!next_.compare_exchange_weak(first, first + count, std::memory_order_relaxed));
    return {first, count};
  }

 private:
  std::atomic<std::size_t> next_{0};
  std::size_t blocks_, share_;
};

// The chunks [first, last) of x into `base` (exact: the order does not matter), `fmt` (one
// per format) and `moments`. fused/others: the formats measured with the chunk's summary
// (float32 with a fast rounding path) and the rest, by index.
template <class T>
void accumulate_block(std::span<const T> x, std::size_t first, std::size_t last,
                      const std::vector<Format>& formats,
                      const std::vector<detail::FormatPlan>& plans, detail::Distribution d,
                      BaseAcc& base, std::span<FormatAcc> fmt, std::span<Moments> moments,
                      std::vector<T>& rounded, std::vector<float>& inv) {
  std::vector<detail::FusedFormat> fused;
  std::vector<std::size_t> others;
  for (std::size_t f = 0; f < formats.size(); ++f) {
    // float32: formats with a fast rounding path are measured right after the chunk's
    // summary, while the chunk is in L1.
    if (std::is_same_v<T, float> && plans[f].fast)
      fused.push_back({&*plans[f].fast, &plans[f], &fmt[f]});
    else
      others.push_back(f);
  }
  for (std::size_t c = first; c < last; ++c) {
    const std::size_t b = c * kChunk, len = std::min(kChunk, x.size() - b);
    const std::span<const T> xs = x.subspan(b, len);
    if constexpr (std::is_same_v<T, float>)
      moments[c] = detail::chunk_all(xs, base, fused, inv, d);
    else
      moments[c] = detail::chunk_base(xs, base);
    for (const std::size_t f : others) {
      const std::span<T> r(rounded.data(), len);
      RoundOptions ro;
      ro.threads = 1;
      fpguard::round(xs, r, formats[f], ro);
      detail::chunk_format_fast(xs, std::span<const T>(r), plans[f], fmt[f]);
    }
  }
}

// Threads take runs of blocks as they come free (BlockRuns). Each block's format errors
// are summed apart, and the blocks' sums added in order: every number is the same on any
// number of threads, whichever thread took which block.
template <class T>
Accumulated accumulate(std::span<const T> x, const std::vector<Format>& formats,
                       const StatsOptions& o, const Release& release) {
  const std::size_t n = x.size(), nf = formats.size();
  const std::size_t chunks = (n + kChunk - 1) / kChunk;
  const std::size_t blocks = (chunks + kBlockChunks - 1) / kBlockChunks;
  std::vector<detail::FormatPlan> plans;
  for (const auto& f : formats) plans.push_back(detail::make_plan(f));
  const detail::Distribution distribution = !o.distribution ? detail::Distribution::none
                                            : o.histogram   ? detail::Distribution::full
                                                            : detail::Distribution::moments;
  const auto threads = static_cast<std::size_t>(std::max(1, detail::resolve_threads(o.threads, n)));
  std::vector<BaseAcc> base(std::min(threads, std::max<std::size_t>(blocks, 1)));
  std::vector<FormatAcc> block_fmt(blocks * nf);
  std::vector<Moments> moments(chunks);
  BlockRuns runs(blocks, base.size());
  auto work = [&](std::size_t t) {
    std::vector<T> rounded(kChunk);
    std::vector<float> inv(std::is_same_v<T, float> ? kChunk : 0);
    std::vector<double> max_rel(nf, 0.0);  // seeds each block's search (stats_simd.cpp)
    for (auto [run, count] = runs.take(); count > 0; std::tie(run, count) = runs.take()) {
      for (std::size_t k = run; k < run + count; ++k) {
        const std::span<FormatAcc> fmt(block_fmt.data() + k * nf, nf);
        for (std::size_t f = 0; f < nf; ++f) fmt[f].max_rel_error = max_rel[f];
        const std::size_t first = k * kBlockChunks;
        accumulate_block(x, first, std::min(chunks, first + kBlockChunks), formats, plans,
                         distribution, base[t], fmt, moments, rounded, inv);
        for (std::size_t f = 0; f < nf; ++f) max_rel[f] = fmt[f].max_rel_error;
      }
      const std::size_t first = run * kBlockChunks * kChunk;
      if (release) release(first, std::min(n, (run + count) * kBlockChunks * kChunk) - first);
    }
  };
  // One worker per thread, on the process's OpenMP pool (see core/parallel.hpp).
  detail::parallel_for(
      base.size(), static_cast<int>(base.size()),
      [&](std::size_t t0, std::size_t t1) {
        for (std::size_t t = t0; t < t1; ++t) work(t);
      },
      1);
  Accumulated acc;
  acc.base = std::move(base[0]);
  for (std::size_t t = 1; t < base.size(); ++t) merge_into(acc.base, base[t]);
  acc.fmt.resize(nf);
  for (std::size_t k = 0; k < blocks; ++k)
    for (std::size_t f = 0; f < nf; ++f) merge_into(acc.fmt[f], block_fmt[k * nf + f]);
  acc.moments = std::move(moments);
  return acc;
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
