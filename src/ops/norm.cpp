// Softmax, LogSoftmax and LayerNormalization (written once over the carrier type, float32 or
// float64).
#include <cmath>
#include <span>

#include "core/parallel.hpp"
#include "ops/ops.hpp"
#include "ops/vmath.hpp"

namespace fpguard::ops {

namespace {

// e[k] = exp(v[k] - max) for one contiguous row of n values; returns the max (NaN when a
// value is NaN) and sets sum to the sum of the e[k].
template <class T>
T row_softmax_exp(const T* v, T* e, std::size_t n, T& sum) {
  if (n == 0) return sum = 0, T{0};
  if constexpr (std::is_same_v<T, float>) {
    const float m = vmath::max_of(v, n);
    sum = vmath::exp_shifted_sum(v, m, e, n);
    return m;
  } else {
    T m = -INFINITY;
    for (std::size_t k = 0; k < n; ++k) m = std::isnan(v[k]) || v[k] > m ? v[k] : m;
    sum = 0;
    for (std::size_t k = 0; k < n; ++k) sum += e[k] = std::exp(v[k] - m);
    return m;
  }
}

// Softmax before opset 13 flattens to 2-D at `axis` (default 1); from 13 it works along
// one axis (default -1).
template <class T, bool log>
void softmax(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  const auto& s = x.shape();
  const auto rank = static_cast<std::int64_t>(s.size());
  std::int64_t outer, len, inner;
  if (ctx.opset < 13) {
    const auto axis = norm_axis(ctx, ctx.node.attr_int("axis", 1), std::max<std::int64_t>(rank, 1));
    outer = product(s, 0, static_cast<std::size_t>(axis));
    len = product(s, static_cast<std::size_t>(axis));
    inner = 1;
  } else {
    const auto axis = norm_axis(ctx, ctx.node.attr_int("axis", -1), rank);
    outer = product(s, 0, static_cast<std::size_t>(axis));
    len = s[static_cast<std::size_t>(axis)];
    inner = product(s, static_cast<std::size_t>(axis) + 1);
  }
  auto in = x.data<T>();
  auto out = ctx.out_uninit(0, carrier_dtype<T>(), s).template data<T>();
  // One softmax of `len` values, `inner` apart, from in into out (row = first element).
  auto one = [&](std::size_t row, std::vector<T>& buf) {
    const T* src = in.data() + row;
    T* dst = out.data() + row;
    const auto n = static_cast<std::size_t>(len), stride = static_cast<std::size_t>(inner);
    // Contiguous rows are used in place; strided ones are gathered into buf first.
    const T* v = src;
    T* e = dst;
    if (stride != 1) {
      buf.resize(2 * n);
      for (std::size_t k = 0; k < n; ++k) buf[k] = src[k * stride];
      v = buf.data(), e = buf.data() + n;
    }
    T sum = 0;
    const T m = row_softmax_exp(v, e, n, sum);
    if constexpr (log) {
      const T ls = std::log(sum);
      for (std::size_t k = 0; k < n; ++k) e[k] = v[k] - m - ls;
    } else {
      for (std::size_t k = 0; k < n; ++k) e[k] /= sum;
    }
    if (stride != 1)
      for (std::size_t k = 0; k < n; ++k) dst[k * stride] = e[k];
  };
  const auto rows = static_cast<std::size_t>(outer * inner);
  detail::parallel_for(
      rows, detail::resolve_threads(ctx.threads > 1 ? 0 : 1, in.size()),
      [&](std::size_t lo, std::size_t hi) {
        std::vector<T> buf;
        for (std::size_t r = lo; r < hi; ++r) {
          const std::size_t o = r / static_cast<std::size_t>(inner),
                            i = r % static_cast<std::size_t>(inner);
          one(o * static_cast<std::size_t>(len * inner) + i, buf);
        }
      },
      1);
}

template <class T>
void layer_norm(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& scale = ctx.in(1);
  require_float(ctx, x);
  const auto& s = x.shape();
  const auto rank = static_cast<std::int64_t>(s.size());
  const auto axis = norm_axis(ctx, ctx.node.attr_int("axis", -1), rank);
  const T eps = ctx.node.attr_float("epsilon", 1e-5f);
  const auto outer = product(s, 0, static_cast<std::size_t>(axis));
  const auto len = product(s, static_cast<std::size_t>(axis));
  const Shape norm_shape(s.begin() + axis, s.end());
  // Scale and B broadcast to the normalized shape.
  auto expand = [&](const Tensor& t, const char* name) {
    require_float(ctx, t, name);
    if (broadcast_shapes(ctx, t.shape(), norm_shape) != norm_shape)
      ctx.fail(std::string(name) + " of shape " + shape_str(t.shape()) + " does not broadcast to " +
               shape_str(norm_shape));
    std::vector<T> v(static_cast<std::size_t>(len));
    const auto st = broadcast_strides(t.shape(), norm_shape);
    auto d = t.data<T>();
    for (std::int64_t k = 0; k < len; ++k) {
      std::int64_t rem = k, off = 0;
      for (std::size_t j = norm_shape.size(); j-- > 0;)
        off += (rem % norm_shape[j]) * st[j], rem /= norm_shape[j];
      v[static_cast<std::size_t>(k)] = d[static_cast<std::size_t>(off)];
    }
    return v;
  };
  const auto g = expand(scale, "Scale");
  const auto b =
      ctx.has(2) ? expand(ctx.in(2), "B") : std::vector<T>(static_cast<std::size_t>(len), 0.0f);
  Shape stat_shape(s.begin(), s.begin() + axis);
  for (std::int64_t d = axis; d < rank; ++d) stat_shape.push_back(1);
  auto in = x.data<T>();
  auto out = ctx.out_uninit(0, carrier_dtype<T>(), s).template data<T>();
  std::span<T> mean_out, inv_out;
  if (ctx.outputs.size() > 1)
    mean_out = ctx.out(1, carrier_dtype<T>(), stat_shape).template data<T>();
  if (ctx.outputs.size() > 2)
    inv_out = ctx.out(2, carrier_dtype<T>(), stat_shape).template data<T>();
  // Rows on the threads; each row's sums as the reductions take them (add_in_eights: eight
  // interleaved partial sums, vectorised), so its bits do not depend on the split.
  detail::parallel_for(
      static_cast<std::size_t>(outer), detail::resolve_threads(ctx.threads > 1 ? 0 : 1, in.size()),
      [&](std::size_t lo, std::size_t hi) {
        for (auto o = static_cast<std::int64_t>(lo); o < static_cast<std::int64_t>(hi); ++o) {
          const T* row = in.data() + o * len;
          const T mean = add_in_eights(T{0}, row, len, [](T v) { return v; }) / static_cast<T>(len);
          const T var =
              add_in_eights(T{0}, row, len, [mean](T v) { return (v - mean) * (v - mean); }) /
              static_cast<T>(len);
          const T inv = 1.0f / std::sqrt(var + eps);
          T* y = out.data() + o * len;
          for (std::int64_t k = 0; k < len; ++k)
            y[k] = (row[k] - mean) * inv * g[static_cast<std::size_t>(k)] +
                   b[static_cast<std::size_t>(k)];
          if (!mean_out.empty()) mean_out[static_cast<std::size_t>(o)] = mean;
          if (!inv_out.empty()) inv_out[static_cast<std::size_t>(o)] = inv;
        }
      },
      1);
}

// Per-channel (axis 1) affine normalisation with given statistics; in training mode
// (opset 14+) with the batch's statistics, also returning the updated running ones.
template <class T>
void batch_norm(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  const auto& s = x.shape();
  if (s.size() < 2) ctx.fail("input must have rank >= 2");
  const bool training = ctx.node.attr_int("training_mode", 0) != 0;
  if (!training && ctx.node.outputs.size() > 1 && !ctx.node.outputs[1].empty())
    ctx.fail("running statistics outputs need training_mode = 1");
  const T eps = ctx.node.attr_float("epsilon", 1e-5f);
  const T momentum = ctx.node.attr_float("momentum", 0.9f);
  const auto c = s[1], inner = product(s, 2), n = s[0];
  std::vector<std::span<const T>> p;
  for (std::size_t i = 1; i <= 4; ++i) {
    require_float(ctx, ctx.in(i));
    if (ctx.in(i).size() != static_cast<std::size_t>(c))
      ctx.fail("parameter " + std::to_string(i) + " must have C values");
    p.push_back(ctx.in(i).template data<T>());
  }
  auto in = x.data<T>();
  std::vector<T> mean(p[2].begin(), p[2].end()), var(p[3].begin(), p[3].end());
  if (training) {
    const double count = static_cast<double>(n * inner);
    for (std::int64_t ch = 0; ch < c; ++ch) {
      double sum = 0, sq = 0;
      for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t i = 0; i < inner; ++i) {
          const double v = in[static_cast<std::size_t>((b * c + ch) * inner + i)];
          sum += v, sq += v * v;
        }
      const double m = sum / count;
      mean[static_cast<std::size_t>(ch)] = static_cast<T>(m);
      var[static_cast<std::size_t>(ch)] = static_cast<T>(std::max(0.0, sq / count - m * m));
    }
  }
  // Every element is written; (image, channel) planes are split across the threads (the
  // same arithmetic per element whatever the split: DBNet's 24 x 320 x 320 took 1.9 ms on
  // one thread into a zero-filled output), and a fused op is applied to each plane while
  // it is in the cache.
  T* out = ctx.out_uninit(0, carrier_dtype<T>(), s).template data<T>().data();
  const auto* epilogue = std::is_same_v<T, float> ? ctx.epilogue : nullptr;
  std::vector<T> inv(static_cast<std::size_t>(c));
  for (std::size_t k = 0; k < inv.size(); ++k) inv[k] = 1.0f / std::sqrt(var[k] + eps);
  const auto plane = static_cast<std::size_t>(inner);
  if (plane > 0)  // (an empty output has no storage to offset)
    detail::parallel_for(
        static_cast<std::size_t>(n * c) * plane, ctx.threads > 1 ? 0 : 1,
        [&](std::size_t lo, std::size_t hi) {
          for (std::size_t q = lo / plane; q < hi / plane; ++q) {
            const std::size_t k = q % static_cast<std::size_t>(c), first = q * plane;
            const T m = mean[k], f = inv[k], g = p[0][k], b = p[1][k];
            for (std::size_t i = first; i < first + plane; ++i) out[i] = (in[i] - m) * f * g + b;
            if constexpr (std::is_same_v<T, float>)
              if (epilogue) (*epilogue)(out + first, plane, 1);
          }
        },
        plane);
  if (training)
    for (std::size_t o = 1; o < 3 && o < ctx.outputs.size(); ++o) {
      auto r = ctx.out(o, carrier_dtype<T>(), {c}).template data<T>();
      const auto& cur = o == 1 ? mean : var;
      for (std::size_t k = 0; k < r.size(); ++k)
        r[k] = p[o + 1][k] * momentum + cur[k] * (1 - momentum);
    }
}

// Mean and variance over each (n, c) plane (InstanceNormalization) or over groups of
// channels (GroupNormalization), then scale and bias per channel.
template <class T>
void normalize_groups(KernelContext& ctx, std::int64_t groups, bool per_group_affine) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  const auto& s = x.shape();
  if (s.size() < 2) ctx.fail("input must have rank >= 2");
  const T eps = ctx.node.attr_float("epsilon", 1e-5f);
  const auto n = s[0], c = s[1], inner = product(s, 2);
  if (groups <= 0 || c % groups) ctx.fail("channels are not a multiple of num_groups");
  const auto cg = c / groups, len = cg * inner;
  const Tensor& scale = ctx.in(1);
  const Tensor& bias = ctx.in(2);
  const auto np = static_cast<std::size_t>(per_group_affine ? groups : c);
  if (scale.size() != np || bias.size() != np) ctx.fail("scale and B have the wrong size");
  auto g = scale.data<T>(), b = bias.data<T>();
  auto in = x.data<T>();
  auto out = ctx.out(0, carrier_dtype<T>(), s).template data<T>();
  for (std::int64_t bi = 0; bi < n; ++bi)
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      const auto base = static_cast<std::size_t>((bi * groups + gi) * len);
      double mean = 0, var = 0;
      for (std::int64_t i = 0; i < len; ++i) mean += in[base + static_cast<std::size_t>(i)];
      mean /= static_cast<double>(len);
      for (std::int64_t i = 0; i < len; ++i) {
        const double d = in[base + static_cast<std::size_t>(i)] - mean;
        var += d * d;
      }
      var /= static_cast<double>(len);
      const T inv = static_cast<T>(1.0 / std::sqrt(var + eps));
      for (std::int64_t i = 0; i < len; ++i) {
        const auto ch = static_cast<std::size_t>(per_group_affine ? gi : gi * cg + i / inner);
        const auto at = base + static_cast<std::size_t>(i);
        out[at] = (in[at] - static_cast<T>(mean)) * inv * g[ch] + b[ch];
      }
    }
}

template <class T>
void instance_norm(KernelContext& ctx) {
  normalize_groups<T>(ctx, ctx.in(0).shape().size() >= 2 ? ctx.in(0).shape()[1] : 1, false);
}

template <class T>
void group_norm(KernelContext& ctx) {
  const auto groups = ctx.node.attr_int("num_groups", 0);
  // Opset 18 has scale/bias per group; opset 21 per channel.
  normalize_groups<T>(ctx, groups, ctx.opset < 21);
}

template <class T>
void mean_variance_norm(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  const auto& s = x.shape();
  const auto rank = static_cast<std::int64_t>(s.size());
  const auto axes = ctx.node.attr_ints("axes", {0, 2, 3});
  std::vector<bool> red(s.size(), false);
  for (auto a : axes) red[static_cast<std::size_t>(norm_axis(ctx, a, rank))] = true;
  Shape kept(s);
  for (std::size_t d = 0; d < s.size(); ++d)
    if (red[d]) kept[d] = 1;
  const auto st = broadcast_strides(kept, s);
  const auto nk = product(kept);
  std::vector<double> sum(static_cast<std::size_t>(nk)), sq(static_cast<std::size_t>(nk));
  auto in = x.data<T>();
  auto slot = [&](std::size_t e) {
    std::int64_t rem = static_cast<std::int64_t>(e), off = 0;
    for (std::size_t d = s.size(); d-- > 0;) off += (rem % s[d]) * st[d], rem /= s[d];
    return static_cast<std::size_t>(off);
  };
  for (std::size_t e = 0; e < in.size(); ++e)
    sum[slot(e)] += in[e], sq[slot(e)] += double(in[e]) * in[e];
  const double cnt =
      static_cast<double>(in.size()) / static_cast<double>(std::max<std::int64_t>(nk, 1));
  auto out = ctx.out(0, carrier_dtype<T>(), s).template data<T>();
  for (std::size_t e = 0; e < in.size(); ++e) {
    const auto k = slot(e);
    const double mean = sum[k] / cnt, var = std::max(0.0, sq[k] / cnt - mean * mean);
    out[e] = static_cast<T>((in[e] - mean) / (std::sqrt(var) + 1e-9));
  }
}

template <class T>
void lrn(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  const auto& s = x.shape();
  const T alpha = ctx.node.attr_float("alpha", 1e-4f), beta = ctx.node.attr_float("beta", 0.75f),
          bias = ctx.node.attr_float("bias", 1.0f);
  const auto size = ctx.node.attr_int("size", 0);
  if (size <= 0) ctx.fail("size must be positive");
  const auto n = s[0], c = s[1], inner = product(s, 2);
  const auto lo = (size - 1) / 2, hi = size - 1 - lo;
  auto in = x.data<T>();
  auto out = ctx.out(0, carrier_dtype<T>(), s).template data<T>();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t i = 0; i < inner; ++i) {
        T sq = 0;
        for (auto k = std::max<std::int64_t>(0, ch - lo); k <= std::min(c - 1, ch + hi); ++k) {
          const T v = in[static_cast<std::size_t>((b * c + k) * inner + i)];
          sq += v * v;
        }
        const auto at = static_cast<std::size_t>((b * c + ch) * inner + i);
        out[at] = in[at] / std::pow(bias + alpha / static_cast<T>(size) * sq, beta);
      }
}

template <class T>
void hardmax(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  const auto& s = x.shape();
  const auto rank = static_cast<std::int64_t>(s.size());
  std::int64_t outer, len, inner;
  if (ctx.opset < 13) {
    const auto axis = norm_axis(ctx, ctx.node.attr_int("axis", 1), std::max<std::int64_t>(rank, 1));
    outer = product(s, 0, static_cast<std::size_t>(axis)),
    len = product(s, static_cast<std::size_t>(axis)), inner = 1;
  } else {
    const auto axis = norm_axis(ctx, ctx.node.attr_int("axis", -1), rank);
    outer = product(s, 0, static_cast<std::size_t>(axis)), len = s[static_cast<std::size_t>(axis)];
    inner = product(s, static_cast<std::size_t>(axis) + 1);
  }
  auto in = x.data<T>();
  auto out = ctx.out(0, carrier_dtype<T>(), s).template data<T>();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < len; ++k)
        if (in[static_cast<std::size_t>((o * len + k) * inner + i)] >
            in[static_cast<std::size_t>((o * len + best) * inner + i)])
          best = k;
      if (len) out[static_cast<std::size_t>((o * len + best) * inner + i)] = 1;
    }
}

}  // namespace

void register_norm(Registry& r) {
  r.add("BatchNormalization", carried<batch_norm<float>, batch_norm<double>>,
        {.applies_epilogue = true});
  r.add("InstanceNormalization", carried<instance_norm<float>, instance_norm<double>>);
  r.add("GroupNormalization", carried<group_norm<float>, group_norm<double>>);
  r.add("MeanVarianceNormalization",
        carried<mean_variance_norm<float>, mean_variance_norm<double>>);
  r.add("LRN", carried<lrn<float>, lrn<double>>);
  r.add("Hardmax", carried<hardmax<float>, hardmax<double>>);
  r.add("Softmax", carried<softmax<float, false>, softmax<double, false>>);
  r.add("LogSoftmax", carried<softmax<float, true>, softmax<double, true>>);
  r.add("LayerNormalization", carried<layer_norm<float>, layer_norm<double>>);
}

}  // namespace fpguard::ops
