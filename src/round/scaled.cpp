// Quantize-dequantize into scaled formats (OCP MX, NVFP4, scaled FP8): the exact generic
// path. Values are visited one scale group at a time (a block, a channel, the tensor); each
// group's scale comes from its largest finite magnitude, and its values are rounded with the
// scalar round() of the element format. Scale arithmetic is written once, in the carrier
// type T, so float arrays compute their scales in float32 as the hardware and ModelOpt do.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "core/parallel.hpp"
#include "fpguard/error.hpp"
#include "fpguard/round.hpp"
#include "round/fast.hpp"

namespace fpguard {

namespace {

// The tensor seen as [outer, n, inner] around the scales' axis.
struct Dims {
  std::size_t outer = 1, n = 1, inner = 1;
  std::size_t axis = 0;
};

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Dims dims_of(const ScaledLayout& l, std::size_t size) {
  std::vector<std::int64_t> shape = l.shape.empty() ? std::vector<std::int64_t>{1} : l.shape;
  const auto rank = static_cast<int>(shape.size());
  std::uint64_t total = 1;
  for (auto d : shape) {
    if (d < 0) throw Error("shape", "negative dimension in " + shape_text(l.shape));
    total *= static_cast<std::uint64_t>(d);
  }
  if (total != size)
    throw Error("shape",
                shape_text(l.shape) + " does not hold " + std::to_string(size) + " values");
  if (l.axis < -rank || l.axis >= rank)
    throw Error("axis " + std::to_string(l.axis), "out of range for a tensor of rank " +
                                                      std::to_string(rank) + " (shape " +
                                                      shape_text(l.shape) + ")");
  Dims d;
  d.axis = static_cast<std::size_t>(l.axis < 0 ? l.axis + rank : l.axis);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const auto v = static_cast<std::size_t>(shape[i]);
    if (i < d.axis) d.outer *= v;
    if (i == d.axis) d.n = v;
    if (i > d.axis) d.inner *= v;
  }
  return d;
}

// Calls fn(first, stride, count) for each block of `bs` along the axis, in row-major order
// of the scale tensor: the values first + k * stride, k < count.
template <class F>
void for_each_block(const Dims& d, std::size_t bs, F&& fn) {
  for (std::size_t o = 0; o < d.outer; ++o)
    for (std::size_t b = 0; b < d.n; b += bs)
      for (std::size_t i = 0; i < d.inner; ++i)
        fn((o * d.n + b) * d.inner + i, d.inner, std::min(bs, d.n - b));
}

// Calls fn(indices) for each scale group, in row-major order of the scale tensor.
template <class F>
void for_each_group(const Dims& d, const ScaledFormat& f, std::size_t size, F&& fn) {
  std::vector<std::size_t> idx;
  switch (f.scope) {
    case ScaleScope::tensor:
      idx.resize(size);
      std::iota(idx.begin(), idx.end(), std::size_t{0});
      fn(idx);
      return;
    case ScaleScope::channel:
      for (std::size_t c = 0; c < d.n; ++c) {
        idx.clear();
        for (std::size_t o = 0; o < d.outer; ++o)
          for (std::size_t i = 0; i < d.inner; ++i) idx.push_back((o * d.n + c) * d.inner + i);
        fn(idx);
      }
      return;
    case ScaleScope::block:
      for_each_block(d, static_cast<std::size_t>(f.block_size),
                     [&](std::size_t first, std::size_t stride, std::size_t count) {
                       idx.resize(count);
                       for (std::size_t k = 0; k < count; ++k) idx[k] = first + k * stride;
                       fn(idx);
                     });
      return;
  }
}

std::vector<std::int64_t> scale_shape(const ScaledLayout& l, const Dims& d, const ScaledFormat& f) {
  switch (f.scope) {
    case ScaleScope::tensor:
      return {};
    case ScaleScope::channel:
      return {static_cast<std::int64_t>(d.n)};
    case ScaleScope::block: {
      std::vector<std::int64_t> s = l.shape.empty() ? std::vector<std::int64_t>{1} : l.shape;
      const auto bs = static_cast<std::size_t>(f.block_size);
      s[d.axis] = static_cast<std::int64_t>((d.n + bs - 1) / bs);
      return s;
    }
  }
  return {};
}

// The code of element value p (a result of rounding into f's element format).
std::uint16_t element_code(double p, const ScaledFormat& f) {
  if (f.integer_elements)  // k * 2^-6 as the int8 k
    return static_cast<std::uint8_t>(static_cast<std::int8_t>(std::ldexp(p, 6)));
  return static_cast<std::uint16_t>(detail::code_of(p, f.element));
}

// One group's scale, as the values are divided by it and multiplied back.
template <class T>
struct GroupScale {
  bool nan = false;        // decode to NaN (a NaN or inf in a power_of_two / two_level group)
  bool zero = false;       // decode to zeros (a two_level scale of 0)
  int exponent = 0;        // power_of_two: the scale is 2^exponent
  T scale = 1;             // amax: the scale; two_level: the block scale s_b
  T divisor = 1;           // amax: scale; two_level: s_b * s_t
  bool saturated = false;  // two_level: s_b clamped to the scale format's max
  std::uint8_t code = 0;
  double value = 1;  // the scale as a number (ScaledCodes::scale_values)
};

template <class T>
class Quantizer {
 public:
  Quantizer(const ScaledFormat& f, const ScaledOptions& o, std::span<const T> in, std::span<T> out,
            ScaledCodes* codes)
      : f_(f), in_(in), out_(out), codes_(codes), thr_(overflow_threshold(f.element)) {
    sat_.saturate = true;
    if (o.amax) calibrated_ = static_cast<T>(*o.amax);
    if (f.rule == ScaleRule::two_level) {
      // s_t = amax / (element max * scale max), over the tensor's finite values.
      const auto amax = static_cast<T>(detail::finite_absmax(in));
      tensor_scale_ = calibrated_.value_or(amax) / static_cast<T>(f.element.max() * f.scale.max());
      if (codes) codes->tensor_scale = static_cast<double>(tensor_scale_);
    }
  }

  void group(const std::vector<std::size_t>& idx, ScaledCounts& c) {
    T amax = 0;
    bool nonfinite = false;
    for (std::size_t i : idx) {
      const T x = in_[i];
      if (std::isfinite(x))
        amax = std::max(amax, std::abs(x));
      else
        nonfinite = true;
    }
    const GroupScale<T> s = choose(amax, nonfinite);
    bool saturated = false;
    for (std::size_t i : idx) saturated |= element(i, s, c);
    ++c.scales;
    c.nan_scales += s.nan;
    c.saturated_scales += saturated || s.saturated;
    if (codes_) {
      codes_->scale_codes.push_back(s.code);
      codes_->scale_values.push_back(s.value);
    }
  }

 private:
  GroupScale<T> choose(T amax, bool nonfinite) const {
    GroupScale<T> s;
    switch (f_.rule) {
      case ScaleRule::power_of_two:
        if (nonfinite) return nan_scale();
        // floor(log2 0) is -inf: an all-zero block takes the smallest scale.
        s.exponent = amax == 0 ? f_.scale.emin()
                               : std::clamp(std::ilogb(amax) - f_.element.emax(), f_.scale.emin(),
                                            f_.scale.emax());
        s.value = std::ldexp(1.0, s.exponent);
        s.code = static_cast<std::uint8_t>(encode(s.value, f_.scale));
        return s;
      case ScaleRule::amax:
        if (calibrated_ && f_.scope == ScaleScope::tensor) amax = *calibrated_;
        s.scale = s.divisor = amax == 0 ? T(1) : amax / static_cast<T>(f_.element.max());
        s.value = static_cast<double>(s.scale);
        return s;
      case ScaleRule::two_level:
        return two_level(amax, nonfinite);
    }
    return s;
  }

  GroupScale<T> nan_scale() const {
    GroupScale<T> s;
    s.nan = true;
    s.value = std::numeric_limits<double>::quiet_NaN();
    s.code = static_cast<std::uint8_t>(encode(s.value, f_.scale));
    return s;
  }

  GroupScale<T> two_level(T amax, bool nonfinite) const {
    if (nonfinite) return nan_scale();
    GroupScale<T> s;
    s.zero = tensor_scale_ == 0;
    if (!s.zero) {
      const T raw = amax / (static_cast<T>(f_.element.max()) * tensor_scale_);
      s.saturated = raw > static_cast<T>(f_.scale.max());
      s.scale = static_cast<T>(round(static_cast<double>(raw), f_.scale, sat_));
      s.divisor = s.scale * tensor_scale_;
      s.zero = s.scale == 0 || s.divisor == 0;
    }
    if (s.zero) s.scale = 0;
    s.value = static_cast<double>(s.scale);
    s.code = static_cast<std::uint8_t>(encode(s.value, f_.scale));
    return s;
  }

  // Quantizes value i; returns whether it saturated.
  bool element(std::size_t i, const GroupScale<T>& s, ScaledCounts& c) {
    const T x = in_[i];
    ++c.values;
    c.nan += !std::isfinite(x);
    double q = 0;  // x over its scale
    T y = 0;
    if (s.nan) {
      y = std::numeric_limits<T>::quiet_NaN();
    } else if (!s.zero) {
      q = f_.rule == ScaleRule::power_of_two ? std::ldexp(static_cast<double>(x), -s.exponent)
                                             : static_cast<double>(x / s.divisor);
    }
    const double p = round(q, f_.element, sat_);
    if (!s.nan) y = decode_value(p, s);
    const double aq = std::abs(q);
    const bool saturated =
        std::isfinite(x) && (aq > thr_.value || (thr_.inclusive && aq == thr_.value));
    c.saturated += saturated;
    c.underflow += std::isfinite(x) && x != 0 && y == 0;
    c.changed +=
        !(std::isnan(x) && std::isnan(y)) && !(x == y && std::signbit(x) == std::signbit(y));
    out_[i] = y;
    if (codes_) codes_->codes.push_back(s.nan ? std::uint16_t{0} : element_code(p, f_));
    return saturated;
  }

  T decode_value(double p, const GroupScale<T>& s) const {
    switch (f_.rule) {
      case ScaleRule::power_of_two:
        return static_cast<T>(std::ldexp(p, s.exponent));
      case ScaleRule::amax:
        return static_cast<T>(p) * s.scale;
      case ScaleRule::two_level:
        return static_cast<T>(p) * s.scale * tensor_scale_;
    }
    return 0;
  }

  const ScaledFormat& f_;
  std::span<const T> in_;
  std::span<T> out_;
  ScaledCodes* codes_;
  OverflowThreshold thr_;
  RoundOptions sat_;
  T tensor_scale_ = 1;
  std::optional<T> calibrated_;
};

template <class T>
ScaledCounts round_scaled_generic(std::span<const T> in, std::span<T> out, const ScaledLayout& l,
                                  const ScaledFormat& f, const ScaledOptions& o,
                                  ScaledCodes* codes) {
  FPG_CHECK(in.size() == out.size());
  const Dims d = dims_of(l, in.size());
  if (codes) {
    *codes = ScaledCodes{};
    codes->codes.reserve(in.size());
    codes->scale_shape = scale_shape(l, d, f);
  }
  // Groups read only their own values, so `out` aliasing `in` is safe group by group; the
  // two_level tensor scale is taken before any group is written.
  Quantizer<T> q(f, o, in, out, codes);
  ScaledCounts c;
  std::vector<std::uint16_t> ordered;
  for_each_group(d, f, in.size(), [&](const std::vector<std::size_t>& idx) { q.group(idx, c); });
  if (codes) {
    // Codes were appended group by group: put each back at its value's position.
    ordered.resize(in.size());
    std::size_t k = 0;
    for_each_group(d, f, in.size(), [&](const std::vector<std::size_t>& idx) {
      for (std::size_t i : idx) ordered[i] = codes->codes[k++];
    });
    codes->codes = std::move(ordered);
  }
  return c;
}

// ---- the fast paths: OCP MX and two-level (NVFP4) blocks, float32 ------------------------
// The SIMD kernels of scaled_simd.cpp (blocks along a contiguous axis, one block at a time;
// along a strided axis, one block per lane), equal to the generic path bit for bit. MX:
//  - x * 2^-e is exact unless it falls below float32's normal range (2^-126), where the
//    element format (smallest subnormal >= 2^-100, asked below) rounds it to 0 either way;
//  - p * 2^e is one rounding of the exact product, as the generic path's double product
//    cast to float.
// Two-level: the same float32 operations in the same order as the generic path (its
// divisions and products are float32 ones); the roundings are round_fast's.
using detail::BlockCounts;
using detail::MxParams;
using detail::TwoLevelParams;

std::optional<MxParams> mx_fast(const ScaledFormat& f) {
  if (f.rule != ScaleRule::power_of_two || f.scope != ScaleScope::block ||
      f.element.smallest_subnormal() < std::ldexp(1.0, -100))
    return std::nullopt;
  RoundOptions sat;
  sat.saturate = true;
  const auto p = detail::fast_params(f.element, sat);
  if (!p) return std::nullopt;
  const OverflowThreshold t = overflow_threshold(f.element);
  return MxParams{.p = *p,
                  .emax = f.element.emax(),
                  .lo = f.scale.emin(),
                  .hi = f.scale.emax(),
                  .thr = static_cast<float>(t.value),
                  .inclusive = t.inclusive,
                  .loss = detail::half_bits_lost(f.element)};
}

void add(ScaledCounts& a, const ScaledCounts& b) {
  a.values += b.values;
  a.changed += b.changed;
  a.saturated += b.saturated;
  a.underflow += b.underflow;
  a.nan += b.nan;
  a.scales += b.scales;
  a.nan_scales += b.nan_scales;
  a.saturated_scales += b.saturated_scales;
}

// Two-level formats (NVFP4) whose element and scale formats have fast roundings: the
// kernel's parameters but the tensor scale (two_level_params fills it).
std::optional<TwoLevelParams> two_level_fast(const ScaledFormat& f) {
  if (f.rule != ScaleRule::two_level || f.scope != ScaleScope::block) return std::nullopt;
  RoundOptions sat;
  sat.saturate = true;
  const auto e = detail::fast_params(f.element, sat), s = detail::fast_params(f.scale, sat);
  if (!e || !s) return std::nullopt;
  const OverflowThreshold t = overflow_threshold(f.element);
  return TwoLevelParams{.element = *e,
                        .scale = *s,
                        .scale_max = static_cast<float>(f.scale.max()),
                        .thr = static_cast<float>(t.value),
                        .inclusive = t.inclusive,
                        .loss = detail::half_bits_lost(f.element)};
}

// The tensor scale as the generic path takes it: s_t = amax / (element max * scale max)
// in float32, amax the calibrated one or the tensor's largest finite magnitude.
TwoLevelParams two_level_params(TwoLevelParams t, const ScaledFormat& f, std::span<const float> in,
                                const ScaledOptions& o) {
  const auto amax = static_cast<float>(o.amax ? *o.amax : detail::finite_absmax(in));
  t.tensor_scale = amax / static_cast<float>(f.element.max() * f.scale.max());
  t.span = static_cast<float>(f.element.max()) * t.tensor_scale;
  return t;
}

// Blocks along a contiguous axis (d.inner == 1) by rows, rows(in, out, rows, n, counts,
// block counts or nullptr); a tensor of few long rows is cut into rows of whole blocks first.
// With `blocks`, the block counts are added to it; an empty `out` is not written.
template <class Rows>
ScaledCounts fast_rows(std::span<const float> in, std::span<float> out, const Dims& d,
                       std::size_t bs, int threads, const Rows& kernel, BlockCounts* blocks) {
  ScaledCounts total;
  std::size_t rows = d.outer, n = d.n;
  constexpr std::size_t kPiece = 4096;
  if (rows < 64 && n % bs == 0 && n > kPiece) {
    const std::size_t per = std::max<std::size_t>(1, kPiece / bs) * bs;
    if (n % per == 0) {
      rows *= n / per;
      n = per;
    }
  }
  detail::parallel_for(
      rows, threads == 0 ? detail::resolve_threads(0, in.size()) : threads,
      [&](std::size_t r0, std::size_t r1) {
        ScaledCounts c;
        BlockCounts b;
        kernel(in.data() + r0 * n, out.empty() ? nullptr : out.data() + r0 * n, r1 - r0, n, c,
               blocks ? &b : nullptr);
#pragma omp critical(fpguard_mx_counts)
        {
          add(total, c);
          if (blocks) blocks->add(b);
        }
      },
      1);
  return total;
}

// Blocks along a strided axis (d.inner > 1), in tasks of one block row of up to kColumns
// columns each: columns(in, out, block length, stride, width, counts, block counts or
// nullptr); with `blocks`, the block counts are added to it; an empty `out` is not written.
template <class Columns>
ScaledCounts fast_columns(std::span<const float> in, std::span<float> out, const Dims& d,
                          std::size_t bs, int threads, const Columns& kernel, BlockCounts* blocks) {
  constexpr std::size_t kColumns = 256;
  const std::size_t rows = (d.n + bs - 1) / bs, chunks = (d.inner + kColumns - 1) / kColumns;
  ScaledCounts total;
  detail::parallel_for(
      d.outer * rows * chunks, threads == 0 ? detail::resolve_threads(0, in.size()) : threads,
      [&](std::size_t u0, std::size_t u1) {
        ScaledCounts c;
        BlockCounts bc;
        for (std::size_t u = u0; u < u1; ++u) {
          const std::size_t chunk = u % chunks, b = u / chunks % rows, o = u / chunks / rows;
          const std::size_t at = (o * d.n + b * bs) * d.inner + chunk * kColumns;
          kernel(in.data() + at, out.empty() ? nullptr : out.data() + at,
                 std::min(bs, d.n - b * bs), d.inner,
                 std::min(kColumns, d.inner - chunk * kColumns), c, blocks ? &bc : nullptr);
        }
#pragma omp critical(fpguard_mx_counts)
        {
          add(total, c);
          if (blocks) blocks->add(bc);
        }
      },
      1);
  return total;
}

// Blocks along a strided axis narrower than a vector of lanes (d.inner < kNarrow: a Conv
// weight's kernel positions along its input channels), on which the columns kernel would
// run a few lanes loaded piecemeal. A block row ((outer o, block b): len x inner values,
// contiguous) is a columns layout of `inner` blocks side by side; the block rows of the
// same b of `group` consecutive o are copied side by side into one of group x inner
// columns (whole vectors of lanes where the sizes allow), quantized by the columns kernel
// (columns(in, out, block length, stride, width, counts, block counts or nullptr)), and
// copied back. `blocks` and `out` as fast_rows; `out` may alias `in` (a group is read
// before it is written).
constexpr std::size_t kNarrow = 16;

template <class Columns>
ScaledCounts fast_narrow(std::span<const float> in, std::span<float> out, const Dims& d,
                         std::size_t bs, int threads, const Columns& kernel, BlockCounts* blocks) {
  const std::size_t per_row = (d.n + bs - 1) / bs, w = d.inner;
  // lcm(w, 16) columns are whole vectors of 16 lanes; at least 128 of them.
  const std::size_t whole = kNarrow / std::gcd(w, kNarrow);
  const std::size_t group = whole * std::max<std::size_t>(1, 128 / (whole * w));
  const std::size_t groups = (d.outer + group - 1) / group;
  ScaledCounts total;
  detail::parallel_for(
      per_row * groups, threads == 0 ? detail::resolve_threads(0, in.size()) : threads,
      [&](std::size_t u0, std::size_t u1) {
        ScaledCounts c;
        BlockCounts bc;
        std::vector<float> x(bs * group * w), y(out.empty() ? 0 : bs * group * w);
        for (std::size_t u = u0; u < u1; ++u) {
          const std::size_t b = u % per_row, o0 = u / per_row * group;
          const std::size_t len = std::min(bs, d.n - b * bs), g = std::min(group, d.outer - o0);
          const std::size_t width = g * w;
          const auto at = [&](std::size_t o) { return (o * d.n + b * bs) * w; };
          for (std::size_t o = 0; o < g; ++o)
            for (std::size_t k = 0; k < len; ++k)
              std::memcpy(&x[k * width + o * w], &in[at(o0 + o) + k * w], w * sizeof(float));
          kernel(x.data(), y.empty() ? nullptr : y.data(), len, width, width, c,
                 blocks ? &bc : nullptr);
          if (!y.empty())
            for (std::size_t o = 0; o < g; ++o)
              for (std::size_t k = 0; k < len; ++k)
                std::memcpy(&out[at(o0 + o) + k * w], &y[k * width + o * w], w * sizeof(float));
        }
#pragma omp critical(fpguard_mx_counts)
        {
          add(total, c);
          if (blocks) blocks->add(bc);
        }
      },
      1);
  return total;
}

// The SIMD kernels for `f`, if it has them: rows or columns as the layout asks; with
// `blocks`, the block counts added to it.
// `count` false: the values alone where the kernels can skip the counts (OCP MX), which
// are then not returned in full.
std::optional<ScaledCounts> fast_path(std::span<const float> in, std::span<float> out,
                                      const Dims& d, const ScaledFormat& f, const ScaledOptions& o,
                                      BlockCounts* blocks = nullptr, bool count = true) {
  const auto bs = static_cast<std::size_t>(f.block_size);
  const auto run = [&](const auto& rows, const auto& columns) {
    if (d.inner == 1) return fast_rows(in, out, d, bs, o.threads, rows, blocks);
    if (d.inner < kNarrow) return fast_narrow(in, out, d, bs, o.threads, columns, blocks);
    return fast_columns(in, out, d, bs, o.threads, columns, blocks);
  };
  using std::size_t;
  using C = ScaledCounts;
  using B = BlockCounts;
  if (auto m = mx_fast(f)) {
    m->count = count || blocks;
    return run([&](const float* x, float* y, size_t rows, size_t n, C& c,
                   B* b) { detail::mx_round_fast(x, y, rows, n, bs, *m, c, b); },
               [&](const float* x, float* y, size_t len, size_t stride, size_t width, C& c, B* b) {
                 detail::mx_round_columns(x, y, len, stride, width, *m, c, b);
               });
  }
  if (const auto k = two_level_fast(f)) {
    const TwoLevelParams t = two_level_params(*k, f, in, o);
    return run([&](const float* x, float* y, size_t rows, size_t n, C& c,
                   B* b) { detail::two_level_round_fast(x, y, rows, n, bs, t, c, b); },
               [&](const float* x, float* y, size_t len, size_t stride, size_t width, C& c, B* b) {
                 detail::two_level_round_columns(x, y, len, stride, width, t, c, b);
               });
  }
  return std::nullopt;
}

// Whether every value an OCP MX block of `f` decodes to is exact in float32, down to the
// smallest element times the smallest scale: then a value over its block's scale is its
// element exactly.
bool decodes_exactly(const ScaledFormat& f) {
  return std::ilogb(f.element.smallest_subnormal()) + f.scale.emin() >= -149;
}

// The encoding of OCP MX blocks from the values the fast path wrote (`out`, which may
// have overwritten the input). A block's scale exponent is its largest decoded magnitude's
// floor(log2) less emax, clamped as the scale is: the same as its input maximum's, since
// that value over the scale lies in [2^emax, 2^(emax+1)) and rounds (saturating) within it,
// unless the clamp raised the scale (then both clamp), or the block is zeros (lo). A
// block of NaNs held a NaN or an inf (the others decode finite). Needs decodes_exactly.
void mx_codes(std::span<const float> out, const Dims& d, const ScaledFormat& f,
              ScaledCodes& codes) {
  codes.codes.resize(out.size());
  const int emax = f.element.emax(), lo = f.scale.emin(), hi = f.scale.emax();
  for_each_block(
      d, static_cast<std::size_t>(f.block_size),
      [&](std::size_t first, std::size_t stride, std::size_t count) {
        float top = 0;
        bool nan = false;
        for (std::size_t k = 0; k < count; ++k) {
          const float y = out[first + k * stride];
          nan |= std::isnan(y);
          top = std::max(top, std::abs(y));
        }
        const int e = top == 0 ? lo : std::clamp(std::ilogb(top) - emax, lo, hi);
        const double scale = nan ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, e);
        codes.scale_codes.push_back(static_cast<std::uint8_t>(encode(scale, f.scale)));
        codes.scale_values.push_back(scale);
        for (std::size_t k = 0; k < count; ++k) {
          const std::size_t i = first + k * stride;
          codes.codes[i] =
              nan ? std::uint16_t{0} : element_code(std::ldexp(static_cast<double>(out[i]), -e), f);
        }
      });
}

template <class T>
ScaledCounts round_scaled_impl(std::span<const T> in, std::span<T> out, const ScaledLayout& l,
                               const ScaledFormat& f, const ScaledOptions& o, ScaledCodes* codes) {
  if constexpr (std::is_same_v<T, float>) {
    FPG_CHECK(in.size() == out.size());
    const Dims d = dims_of(l, in.size());
    const bool fast_codes = codes && mx_fast(f) && decodes_exactly(f);
    if ((!codes || fast_codes) && !o.generic)
      if (const auto c = fast_path(in, out, d, f, o)) {
        if (codes) {
          *codes = ScaledCodes{};
          codes->scale_shape = scale_shape(l, d, f);
          mx_codes(out, d, f, *codes);
        }
        return *c;
      }
  }
  return round_scaled_generic(in, out, l, f, o, codes);
}

}  // namespace

ScaledCounts round_scaled(std::span<const float> in, std::span<float> out, const ScaledLayout& l,
                          const ScaledFormat& f, const ScaledOptions& o, ScaledCodes* codes) {
  return round_scaled_impl(in, out, l, f, o, codes);
}

ScaledCounts round_scaled(std::span<const double> in, std::span<double> out, const ScaledLayout& l,
                          const ScaledFormat& f, const ScaledOptions& o, ScaledCodes* codes) {
  return round_scaled_impl(in, out, l, f, o, codes);
}

namespace detail {

double finite_absmax(std::span<const double> xs) {
  // (float32's is SIMD, in scaled_simd.cpp.) No early exits: a loop the compiler vectorises.
  constexpr double big = std::numeric_limits<double>::max();
  double m = 0;
  for (const double x : xs) {
    const double a = std::fabs(x);
    m = std::max(m, a <= big ? a : 0.0);  // inf and NaN count as 0
  }
  return m;
}

}  // namespace detail

void for_each_scale_group(const ScaledLayout& l, const ScaledFormat& f, std::size_t size,
                          const std::function<void(std::span<const std::size_t>)>& fn) {
  for_each_group(dims_of(l, size), f, size, [&](const std::vector<std::size_t>& idx) {
    fn(std::span<const std::size_t>(idx));
  });
}

void for_each_scale_block(const ScaledLayout& l, const ScaledFormat& f, std::size_t size,
                          const std::function<void(std::size_t, std::size_t, std::size_t)>& fn) {
  FPG_CHECK(f.scope == ScaleScope::block);
  for_each_block(dims_of(l, size), static_cast<std::size_t>(f.block_size), fn);
}

namespace detail {

void BlockCounts::add_block(std::uint64_t n, std::uint64_t zeroed, std::uint64_t c) {
  nonzero += n;
  clipped += c;
  clipped_blocks += c > 0;
  if (zeroed > 0 && zeroed < n) {  // and a non-zero value of the block stayed non-zero
    flushed += zeroed;
    ++flushed_blocks;
    if (2 * zeroed >= n) {
      swamped += zeroed;
      ++swamped_blocks;
    }
  } else {
    underflow += zeroed;
  }
}

void BlockCounts::add(const BlockCounts& b) {
  nonzero += b.nonzero;
  flushed += b.flushed;
  flushed_blocks += b.flushed_blocks;
  swamped += b.swamped;
  swamped_blocks += b.swamped_blocks;
  underflow += b.underflow;
  clipped += b.clipped;
  clipped_blocks += b.clipped_blocks;
}

double half_bits_lost(const Format& element) {
  return std::exp2(-0.5 * element.precision_bits());
}

std::optional<ScaledCounts> round_scaled_counting(std::span<const float> in, std::span<float> out,
                                                  const ScaledLayout& l, const ScaledFormat& f,
                                                  const ScaledOptions& o, BlockCounts& b) {
  FPG_CHECK(out.empty() || in.size() == out.size());
  return fast_path(in, out, dims_of(l, in.size()), f, o, &b);
}

void round_scaled_values(std::span<const float> in, std::span<float> out, const ScaledLayout& l,
                         const ScaledFormat& f, const ScaledOptions& o) {
  FPG_CHECK(in.size() == out.size());
  if (!o.generic && fast_path(in, out, dims_of(l, in.size()), f, o, nullptr, false)) return;
  (void)round_scaled(in, out, l, f, o);
}

}  // namespace detail

bool has_fast_path(const ScaledFormat& f, const ScaledLayout& l) {
  std::size_t size = 1;
  for (auto d : l.shape) size *= static_cast<std::size_t>(std::max<std::int64_t>(d, 0));
  (void)dims_of(l, size);  // throws for a bad layout
  return mx_fast(f).has_value() || two_level_fast(f).has_value();
}

}  // namespace fpguard
