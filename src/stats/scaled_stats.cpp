// What shared scales do to a tensor: it is quantized with round_scaled (the fast path where
// there is one), then each scale group (round_scaled's own grouping) is compared with what
// it became: values flushed by a neighbour's scale, blocks that underflowed, saturated or
// went NaN, rounding errors, and each block's dynamic range; blocks swamped by one value,
// values clipped far past rounding, and (scaled FP8) values pushed into the subnormals.
// Counts alone (StatsOptions::distribution false) on the fast path come from the quantizing
// pass itself (round_scaled_counting), the same BlockCounts the walk adds up.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "fpguard/stats.hpp"
#include "round/fast.hpp"
#include "stats/kernels.hpp"

namespace fpguard {

namespace {

// The block counts into s.
void put(const detail::BlockCounts& b, ScaledFormatStats& s) {
  s.nonzero = b.nonzero;
  s.flushed = b.flushed;
  s.flushed_blocks = b.flushed_blocks;
  s.swamped = b.swamped;
  s.swamped_blocks = b.swamped_blocks;
  s.underflow = b.underflow;
  s.clipped = b.clipped;
  s.clipped_blocks = b.clipped_blocks;
}

// The counts of round_scaled's own into s.
void put(const ScaledCounts& c, ScaledFormatStats& s) {
  s.blocks = c.scales;
  s.nan_blocks = c.nan_scales;
  s.saturated_blocks = c.saturated_scales;
  s.saturated = c.saturated;
}

// What every ScaledFormatStats of `f` along `axis` holds.
ScaledFormatStats stats_of(const ScaledFormat& f, int axis) {
  ScaledFormatStats s;
  s.format = f;
  s.axis = axis;
  s.element_range_bits = finfo(f).block_range_bits;
  return s;
}

template <class T>
class GroupWalk {
 public:
  // `codes`: the element codes (amax-rule formats), for the subnormal count; else empty.
  GroupWalk(std::span<const T> x, std::span<const T> y, std::span<const std::uint16_t> codes,
            ScaledFormatStats& s)
      : x_(x), y_(y), codes_(codes), s_(s), loss_(detail::half_bits_lost(s.format.element)) {}

  // One group: its indices (for_each_scale_group), or a strided run (for_each_scale_block).
  void operator()(std::span<const std::size_t> idx) {
    walk(idx.size(), [&](std::size_t k) { return idx[k]; });
  }
  void operator()(std::size_t first, std::size_t stride, std::size_t count) {
    walk(count, [=](std::size_t k) { return first + k * stride; });
  }

  void finish() {
    for (std::size_t b = 0; b < ranges_.size(); ++b)
      if (ranges_[b]) s_.block_range_histogram[static_cast<int>(b)] = ranges_[b];
    put(blocks_, s_);
    s_.mean_rel_error = s_.nonzero ? sum_rel_ / static_cast<double>(s_.nonzero) : 0.0;
    const double threshold = kVerdictFraction * static_cast<double>(s_.nonzero);
    if (nonfinite_)
      s_.verdict = Verdict::nonfinite;
    else if (static_cast<double>(s_.flushed) > threshold)
      s_.verdict = Verdict::block_underflow;
    else if (static_cast<double>(s_.underflow) > threshold)
      s_.verdict = Verdict::underflow;
    else if (static_cast<double>(s_.precision_loss) > threshold)
      s_.verdict = Verdict::precision;
    else
      s_.verdict = Verdict::ok;
  }

 private:
  // The group of the `count` values at(0), ..., at(count - 1).
  template <class At>
  void walk(std::size_t count, At at) {
    double amax = 0, amin = std::numeric_limits<double>::infinity();
    double top = 0;  // the largest magnitude the block decodes to
    for (std::size_t k = 0; k < count; ++k)
      if (const T y = y_[at(k)]; std::isfinite(y))
        top = std::max(top, std::abs(static_cast<double>(y)));
    std::uint64_t zeroed = 0, nonzero = 0, clipped = 0;
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t i = at(k);
      const auto x = static_cast<double>(x_[i]), y = static_cast<double>(y_[i]);
      if (!std::isfinite(x)) {
        nonfinite_ = true;
        continue;
      }
      const double err = std::abs(y - x);
      if (std::isnan(y)) continue;  // a NaN block: no error to measure
      s_.max_abs_error = std::max(s_.max_abs_error, err);
      if (x == 0) continue;
      ++nonzero;
      clipped += detail::clipped_past(std::abs(x), top, loss_);
      if (!codes_.empty() && y != 0) {
        const double e = std::abs(decode(codes_[i], s_.format.element));
        s_.subnormal += e > 0 && e < s_.format.element.smallest_normal();
      }
      amax = std::max(amax, std::abs(x));
      amin = std::min(amin, std::abs(x));
      zeroed += y == 0;
      const double rel = err / std::abs(x);
      s_.max_rel_error = std::max(s_.max_rel_error, rel);
      sum_rel_ += rel;
      s_.precision_loss += rel > loss_;
    }
    blocks_.add_block(nonzero, zeroed, clipped);
    if (amax > 0) {
      const double bits = std::log2(amax / amin);
      const auto floor = static_cast<std::size_t>(bits);  // bits >= 0: amax >= amin
      if (floor >= ranges_.size()) ranges_.resize(floor + 1);
      ++ranges_[floor];
      s_.max_block_range_bits = std::max(s_.max_block_range_bits, bits);
    }
  }

  std::span<const T> x_, y_;
  std::span<const std::uint16_t> codes_;
  ScaledFormatStats& s_;
  double loss_;  // relative error past which half the element's bits are lost
  double sum_rel_ = 0;
  detail::BlockCounts blocks_;
  bool nonfinite_ = false;
  std::vector<std::uint64_t> ranges_;  // block_range_histogram by floor, merged by finish
};

template <class T>
ScaledFormatStats run(std::span<const T> x, const ScaledLayout& l, const ScaledFormat& f,
                      const StatsOptions& o, std::optional<double> amax) {
  ScaledFormatStats s = stats_of(f, l.axis);
  ScaledOptions so;
  so.threads = o.threads;
  so.amax = amax;
  // Amax-rule formats take the generic path anyway (no fast path): their codes cost little.
  ScaledCodes codes;
  const bool subnormals = f.rule == ScaleRule::amax;
  if constexpr (std::is_same_v<T, float>) {
    detail::BlockCounts b;
    if (!o.distribution)
      if (const auto c = detail::round_scaled_counting(x, {}, l, f, so, b))
        return detail::counted_stats(f, l.axis, *c, b);
  }
  std::vector<T> y(x.size());
  put(round_scaled(x, std::span<T>(y), l, f, so, subnormals ? &codes : nullptr), s);
  GroupWalk<T> walk(x, y, codes.codes, s);
  if (f.scope == ScaleScope::block)
    for_each_scale_block(l, f, x.size(),
                         [&](std::size_t first, std::size_t stride, std::size_t count) {
                           walk(first, stride, count);
                         });
  else
    for_each_scale_group(l, f, x.size(), [&](std::span<const std::size_t> idx) { walk(idx); });
  walk.finish();
  if (!o.distribution) {  // the counts alone, whichever path measured them
    s.precision_loss = 0;
    s.max_abs_error = s.max_rel_error = s.mean_rel_error = 0;
    s.block_range_histogram.clear();
    s.max_block_range_bits = 0;
    s.verdict = Verdict::ok;
  }
  return s;
}

}  // namespace

namespace detail {

ScaledFormatStats counted_stats(const ScaledFormat& f, int axis, const ScaledCounts& c,
                                const BlockCounts& b) {
  ScaledFormatStats s = stats_of(f, axis);
  put(c, s);
  put(b, s);
  return s;
}

}  // namespace detail

ScaledFormatStats scaled_stats(std::span<const float> x, const ScaledLayout& l,
                               const ScaledFormat& f, const StatsOptions& o,
                               std::optional<double> amax) {
  return run(x, l, f, o, amax);
}

ScaledFormatStats scaled_stats(std::span<const double> x, const ScaledLayout& l,
                               const ScaledFormat& f, const StatsOptions& o,
                               std::optional<double> amax) {
  return run(x, l, f, o, amax);
}

ScaledFormatStats scaled_stats(const Tensor& t, const ScaledFormat& f, int axis,
                               const StatsOptions& o) {
  const ScaledLayout l{.shape = t.shape(), .axis = axis};
  return detail::with_real_values(t, [&](auto x) { return scaled_stats(x, l, f, o); });
}

}  // namespace fpguard
