// Resize (opsets 10-19: nearest/linear/cubic, every coordinate transformation mode,
// scales or sizes, axes, keep_aspect_ratio_policy, antialias) and the deprecated Upsample.
// Each axis is resampled separably: per output coordinate a short list of (input index,
// weight) taps; an element is the weighted sum over the product of its axes' taps
// (double).
#include <cmath>
#include <limits>

#include "core/parallel.hpp"
#include "ops/bilinear.hpp"
#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

struct Taps {
  std::vector<std::int64_t> index;
  std::vector<double> weight;
  bool outside = false;  // tf_crop_and_resize beyond the input: extrapolation_value
};

struct AxisPlan {
  std::vector<Taps> taps;  // one per output coordinate
};

struct Params {
  std::string mode = "nearest", transform = "half_pixel", nearest_mode = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;  // opset 18: linear and cubic filters stretched when downscaling
};

// The cubic convolution kernel (Keys, coefficient a) at distance d >= 0.
double cubic_weight(double a, double d) {
  if (d >= 2) return 0;
  return d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
}

// `out` is the resized length as ONNX's reference defines it: input length x scale, not
// rounded (it matters for align_corners when downsampling by a non-integral scale).
double source_coordinate(const Params& p, std::int64_t x, double scale, std::int64_t in, double out,
                         double roi_start, double roi_end) {
  const double xr = static_cast<double>(x);
  const auto& t = p.transform;
  if (t == "tf_half_pixel_for_nn") return (xr + 0.5) / scale;
  if (t == "half_pixel") return (xr + 0.5) / scale - 0.5;
  if (t == "half_pixel_symmetric") {
    const double adjustment = std::floor(out) / (scale * static_cast<double>(in));
    const double center = static_cast<double>(in) / 2;
    return center * (1 - adjustment) + (xr + 0.5) / scale - 0.5;
  }
  if (t == "pytorch_half_pixel") return out > 1 ? (xr + 0.5) / scale - 0.5 : 0.0;
  if (t == "align_corners") return out == 1 ? 0.0 : xr * static_cast<double>(in - 1) / (out - 1);
  if (t == "asymmetric") return xr / scale;
  // tf_crop_and_resize
  const double len = static_cast<double>(in - 1);
  return out > 1 ? roi_start * len + xr * (roi_end - roi_start) * len / (out - 1)
                 : 0.5 * (roi_start + roi_end) * len;
}

// The taps of output coordinate xo (in input coordinates) on an axis of `in` elements
// resized by `scale`.
Taps taps_for(const KernelContext& ctx, const Params& p, double xo, std::int64_t in, double scale) {
  Taps t;
  auto clampi = [in](std::int64_t i) { return std::min(std::max<std::int64_t>(i, 0), in - 1); };
  if (p.transform == "tf_crop_and_resize" && (xo < 0 || xo > static_cast<double>(in - 1))) {
    t.outside = true;
    return t;
  }
  if (p.mode == "nearest") {
    std::int64_t i;
    const auto& m = p.nearest_mode;
    if (m == "round_prefer_floor")
      i = static_cast<std::int64_t>(std::ceil(xo - 0.5));
    else if (m == "round_prefer_ceil")
      i = static_cast<std::int64_t>(std::floor(xo + 0.5));
    else if (m == "floor")
      i = static_cast<std::int64_t>(std::floor(xo));
    else if (m == "ceil")
      i = static_cast<std::int64_t>(std::ceil(xo));
    else
      ctx.fail("nearest_mode '" + m + "' is not supported");
    t.index.push_back(clampi(i));
    t.weight.push_back(1.0);
    return t;
  }
  const auto base = static_cast<std::int64_t>(std::floor(xo));
  const double r = xo - static_cast<double>(base);
  if (p.mode != "linear" && p.mode != "cubic") ctx.fail("mode '" + p.mode + "' is not supported");
  if (p.antialias && scale < 1) {
    // The filter stretched by 1/scale: weight f((j - r) * scale) for the taps j around
    // xo where f is non-zero (support 1 for linear, 2 for cubic), normalised to sum 1;
    // taps beyond the input take the edge value, or no weight with exclude_outside.
    const double support = p.mode == "linear" ? 1.0 : 2.0;
    const auto start = static_cast<std::int64_t>(std::floor(-support / scale)) + 1;
    double sum = 0;
    for (std::int64_t j = start; j < 2 - start; ++j) {
      const double d = std::fabs((static_cast<double>(j) - r) * scale);
      double w = p.mode == "linear" ? std::max(0.0, 1 - d) : cubic_weight(p.cubic_a, d);
      const std::int64_t i = base + j;
      if (p.exclude_outside && (i < 0 || i >= in)) w = 0;
      t.index.push_back(clampi(i));
      t.weight.push_back(w);
      sum += w;
    }
    if (sum != 0)
      for (auto& w : t.weight) w /= sum;
    return t;
  }
  if (p.mode == "linear") {
    t.index = {clampi(base), clampi(base + 1)};
    t.weight = {1 - r, r};
    return t;
  }
  const double s[4] = {r + 1, r, 1 - r, 2 - r};
  double sum = 0;
  for (int k = 0; k < 4; ++k) {
    double w = cubic_weight(p.cubic_a, s[k]);
    const auto i = base - 1 + k;
    if (p.exclude_outside && (i < 0 || i >= in)) w = 0;
    t.index.push_back(clampi(i));
    t.weight.push_back(w);
    sum += w;
  }
  if (p.exclude_outside && sum != 0)
    for (auto& w : t.weight) w /= sum;
  return t;
}

// Whether only the last two axes move (the others keep their elements: one tap of weight
// 1 each), with no tap outside the input: then resample_planes computes the result.
bool planar(const std::vector<AxisPlan>& plans, const Shape& in, const Shape& out) {
  const std::size_t r = plans.size();
  if (r < 2) return false;
  for (std::size_t d = 0; d < r; ++d)
    for (std::size_t o = 0; o < plans[d].taps.size(); ++o) {
      const Taps& t = plans[d].taps[o];
      if (t.outside) return false;
      if (d + 2 < r && (in[d] != out[d] || t.index.size() != 1 ||
                        t.index[0] != static_cast<std::int64_t>(o) || t.weight[0] != 1.0))
        return false;
    }
  return true;
}

// The taps of one axis flattened: coordinate o's are [first[o], first[o + 1]) of index
// and weight.
struct FlatTaps {
  std::vector<std::size_t> first{0};
  std::vector<std::int64_t> index;
  std::vector<double> weight;
  bool single = true;  // one tap of weight 1 per coordinate (nearest)
  bool pairs = true;   // two taps per coordinate (linear)
  explicit FlatTaps(const std::vector<Taps>& taps) {
    for (const Taps& t : taps) {
      index.insert(index.end(), t.index.begin(), t.index.end());
      weight.insert(weight.end(), t.weight.begin(), t.weight.end());
      first.push_back(index.size());
      single = single && t.index.size() == 1 && t.weight[0] == 1.0;
      pairs = pairs && t.index.size() == 2;
    }
  }
};

// The column taps of a linear resize split by tap: output x reads columns c0[x] and c1[x]
// with weights w0[x] and w1[x] (contiguous, for bilinear::row's vectors).
struct LinearColumns {
  std::vector<std::int32_t> c0, c1;
  std::vector<double> w0, w1;
  // Empty unless `pairs`.
  LinearColumns(const FlatTaps& cols, bool pairs) {
    if (!pairs) return;
    for (std::size_t j = 0; j + 1 < cols.index.size(); j += 2) {
      c0.push_back(static_cast<std::int32_t>(cols.index[j]));
      c1.push_back(static_cast<std::int32_t>(cols.index[j + 1]));
      w0.push_back(cols.weight[j]);
      w1.push_back(cols.weight[j + 1]);
    }
  }
};

// Source rows expanded to the output's columns (row[c0[x]] and row[c1[x]] as double: the
// operands of bilinear::row), the last two that a thread needed: consecutive output rows
// mostly read the same two source rows (upsampling by k: k - 1 rows in k), so each is
// expanded once per plane rather than gathered again for every output row.
template <class T>
class ExpandedRows {
 public:
  explicit ExpandedRows(const LinearColumns& cols) : cols_(cols), n_(cols.c0.size()), e_(4 * n_) {}
  // A new plane: nothing expanded yet.
  void reset() { row_[0] = row_[1] = -1; }
  // Source row i of `plane` expanded (its c0 taps, then n c1 taps), keeping the expansion
  // of row `keep` (the output row's other source row).
  const double* get(const T* plane, std::int64_t iw, std::int64_t i, std::int64_t keep) {
    for (std::size_t s = 0; s < 2; ++s)
      if (row_[s] == i) return e_.data() + 2 * s * n_;
    const std::size_t s = row_[0] == keep ? 1 : 0;
    double* e = e_.data() + 2 * s * n_;
    bilinear::expand(plane + i * iw, cols_.c0.data(), cols_.c1.data(),
                     static_cast<std::int64_t>(n_), e, e + n_);
    row_[s] = i;
    return e;
  }

 private:
  const LinearColumns& cols_;
  std::size_t n_;
  std::vector<double> e_;  // two expanded rows of 2 n
  std::int64_t row_[2] = {-1, -1};
};

// A linear resize's output row: the double sum, in order, of (row weight x column weight)
// x input over the two row taps (outer) and x's two column taps, rounded to T.
template <class T>
void linear_row(const T* plane, std::int64_t iw, const Taps& ty, const LinearColumns& cols,
                ExpandedRows<T>& rows, T* dst, std::int64_t ow) {
  const double* a = rows.get(plane, iw, ty.index[0], ty.index[1]);
  const double* b = rows.get(plane, iw, ty.index[1], ty.index[0]);
  bilinear::row({a, a + ow, b, b + ow, ty.weight[0], ty.weight[1], cols.w0.data(), cols.w1.data()},
                ow, dst);
}

// One output row of a plane: output x is the sum over the row taps (`ty`) and x's column
// taps of (row weight x column weight) x input, in double, in that order.
template <class T>
void resample_row(const T* plane, std::int64_t iw, const Taps& ty, const FlatTaps& cols, T* dst,
                  std::int64_t ow) {
  if (cols.single && ty.index.size() == 1 && ty.weight[0] == 1.0) {
    // Nearest: 0 + (1 x 1) x input, which is the input plus 0 (a negative zero becomes +0,
    // a NaN stays a NaN): the sum below, bit for bit, without the conversions to double.
    const T* row = plane + ty.index[0] * iw;
    for (std::int64_t x = 0; x < ow; ++x)
      dst[x] = row[cols.index[static_cast<std::size_t>(x)]] + T{0};
    return;
  }
  for (std::int64_t x = 0; x < ow; ++x) {
    const std::size_t j0 = cols.first[static_cast<std::size_t>(x)],
                      j1 = cols.first[static_cast<std::size_t>(x) + 1];
    double acc = 0;
    for (std::size_t i = 0; i < ty.index.size(); ++i) {
      const T* row = plane + ty.index[i] * iw;
      for (std::size_t j = j0; j < j1; ++j)
        acc += ty.weight[i] * cols.weight[j] * static_cast<double>(row[cols.index[j]]);
    }
    dst[x] = static_cast<T>(acc);
  }
}

// resample's arithmetic, plane by plane (planes split across threads): the same double
// products and sums in the same order (a leading axis' weight 1 changes no product), so
// the same bits, without the per-element odometer, the double copy of the input and the
// double output (dbnet's six Resizes: 291 -> see bench/README.md). An output row whose
// taps are the previous row's is a copy of it (nearest upsampling).
template <class T>
void resample_planes(KernelContext& ctx, const std::vector<AxisPlan>& plans, const Shape& in_shape,
                     const Shape& out_shape) {
  const std::size_t r = in_shape.size();
  const auto ih = in_shape[r - 2], iw = in_shape[r - 1], oh = out_shape[r - 2],
             ow = out_shape[r - 1];
  const auto planes = product(out_shape) / std::max<std::int64_t>(1, oh * ow);
  const T* px = ctx.in(0).data<T>().data();
  T* po = ctx.out_uninit(0, carrier_dtype<T>(), out_shape).template data<T>().data();
  const auto& rows = plans[r - 2].taps;
  const FlatTaps cols(plans[r - 1].taps);
  // bilinear's columns are int32: wider rows take resample_row's loop.
  const bool pairs = cols.pairs && iw <= std::numeric_limits<std::int32_t>::max();
  const LinearColumns linear(cols, pairs);
  detail::parallel_for(
      static_cast<std::size_t>(planes),
      detail::resolve_threads(ctx.threads > 1 ? 0 : 1, static_cast<std::size_t>(planes * oh * ow)),
      [&](std::size_t lo, std::size_t hi) {
        ExpandedRows<T> expanded(linear);
        for (auto p = static_cast<std::int64_t>(lo); p < static_cast<std::int64_t>(hi); ++p) {
          const T* plane = px + p * ih * iw;
          T* dst = po + p * oh * ow;
          expanded.reset();
          for (std::int64_t y = 0; y < oh; ++y) {
            const Taps& ty = rows[static_cast<std::size_t>(y)];
            if (y > 0 && ty.index == rows[static_cast<std::size_t>(y) - 1].index &&
                ty.weight == rows[static_cast<std::size_t>(y) - 1].weight)
              std::copy(dst + (y - 1) * ow, dst + y * ow, dst + y * ow);
            else if (pairs && ty.index.size() == 2)
              linear_row(plane, iw, ty, linear, expanded, dst + y * ow, ow);
            else
              resample_row(plane, iw, ty, cols, dst + y * ow, ow);
          }
        }
      },
      1);
}

void resample(KernelContext& ctx, const Params& p, const std::vector<double>& scales,
              const Shape& out_shape, const std::vector<double>& roi, double extrapolation) {
  const Tensor& x = ctx.in(0);
  const auto& in = x.shape();
  const std::size_t r = in.size();
  std::vector<AxisPlan> plans(r);
  for (std::size_t d = 0; d < r; ++d)
    for (std::int64_t o = 0; o < out_shape[d]; ++o) {
      const double rs = roi.empty() ? 0.0 : roi[d], re = roi.empty() ? 1.0 : roi[d + r];
      const bool identity =
          in[d] == out_shape[d] && scales[d] == 1.0 && p.transform != "tf_crop_and_resize";
      if (identity) {
        plans[d].taps.push_back(Taps{{o}, {1.0}, false});
        continue;
      }
      const double xo =
          source_coordinate(p, o, scales[d], in[d], static_cast<double>(in[d]) * scales[d], rs, re);
      plans[d].taps.push_back(taps_for(ctx, p, xo, in[d], scales[d]));
    }
  if (planar(plans, in, out_shape)) {
    if (x.dtype() == DType::float32) return resample_planes<float>(ctx, plans, in, out_shape);
    if (x.dtype() == DType::float64) return resample_planes<double>(ctx, plans, in, out_shape);
  }
  std::vector<double> xin(x.size());
  to_double(x, xin);
  Tensor out_d(DType::float64, out_shape);
  auto po = out_d.data<double>();
  std::vector<std::int64_t> st(r, 1);
  for (std::size_t d = r; d-- > 1;) st[d - 1] = st[d] * in[d];
  std::vector<std::int64_t> idx(r, 0);
  std::vector<const Taps*> cur(r);
  std::vector<std::size_t> k(r);
  for (std::size_t o = 0; o < po.size(); ++o) {
    bool outside = false;
    for (std::size_t d = 0; d < r; ++d) {
      cur[d] = &plans[d].taps[static_cast<std::size_t>(idx[d])];
      outside = outside || cur[d]->outside;
    }
    if (outside) {
      po[o] = extrapolation;
    } else {
      double acc = 0;
      std::fill(k.begin(), k.end(), 0);
      while (true) {
        double w = 1;
        std::int64_t off = 0;
        for (std::size_t d = 0; d < r; ++d)
          w *= cur[d]->weight[k[d]], off += cur[d]->index[k[d]] * st[d];
        acc += w * xin[static_cast<std::size_t>(off)];
        std::size_t d = r;
        while (d-- > 0) {
          if (++k[d] < cur[d]->index.size()) break;
          k[d] = 0;
        }
        if (d == static_cast<std::size_t>(-1)) break;
      }
      po[o] = acc;
    }
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
  Tensor res = exec::convert(out_d, x.dtype() == DType::float32 ? DType::float32 : x.dtype());
  ctx.outputs[0] = std::move(res);
}

std::vector<double> float_values(const Tensor& t) {
  std::vector<double> v(t.size());
  to_double(t, v);
  return v;
}

void resize(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto& in = x.shape();
  const auto r = static_cast<std::int64_t>(in.size());
  Params p;
  p.mode = ctx.node.attr_string("mode", "nearest");
  if (ctx.opset < 11) {
    p.transform = "asymmetric";
    p.nearest_mode = "floor";
  } else {
    p.transform = ctx.node.attr_string("coordinate_transformation_mode", "half_pixel");
    p.nearest_mode = ctx.node.attr_string("nearest_mode", "round_prefer_floor");
    p.cubic_a = ctx.node.attr_float("cubic_coeff_a", -0.75f);
    p.exclude_outside = ctx.node.attr_int("exclude_outside", 0) != 0;
  }
  p.antialias = ctx.opset >= 18 && ctx.node.attr_int("antialias", 0) != 0;
  std::vector<std::int64_t> axes = ctx.node.attr_ints("axes");
  if (axes.empty())
    for (std::int64_t d = 0; d < r; ++d) axes.push_back(d);
  for (auto& a : axes) a = norm_axis(ctx, a, r);
  const std::size_t scales_at = ctx.opset < 11 ? 1 : 2;
  std::vector<double> scales(static_cast<std::size_t>(r), 1.0), roi;
  Shape out = in;
  const bool has_scales = ctx.has(scales_at) && ctx.in(scales_at).size() > 0;
  const bool has_sizes = ctx.opset >= 11 && ctx.has(3) && ctx.in(3).size() > 0;
  if (has_scales == has_sizes) ctx.fail("exactly one of scales and sizes must be given");
  if (has_scales) {
    const auto s = float_values(ctx.in(scales_at));
    if (s.size() != axes.size()) ctx.fail("scales has the wrong length");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const auto d = static_cast<std::size_t>(axes[i]);
      scales[d] = s[i];
      out[d] = static_cast<std::int64_t>(std::floor(static_cast<double>(in[d]) * s[i]));
    }
  } else {
    const auto sz = int_values(ctx, ctx.in(3));
    if (sz.size() != axes.size()) ctx.fail("sizes has the wrong length");
    const std::string policy = ctx.node.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const auto d = static_cast<std::size_t>(axes[i]);
        out[d] = sz[i];
        scales[d] = static_cast<double>(sz[i]) / static_cast<double>(in[d]);
      }
    } else {
      double scale = policy == "not_larger" ? INFINITY : 0;
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const double s =
            static_cast<double>(sz[i]) / static_cast<double>(in[static_cast<std::size_t>(axes[i])]);
        scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
      }
      for (auto a : axes) {
        const auto d = static_cast<std::size_t>(a);
        scales[d] = scale;
        out[d] = static_cast<std::int64_t>(std::floor(static_cast<double>(in[d]) * scale + 0.5));
      }
    }
  }
  if (p.transform == "tf_crop_and_resize") {
    if (!ctx.has(1)) ctx.fail("tf_crop_and_resize needs roi");
    const auto given = float_values(ctx.in(1));
    if (given.size() != 2 * axes.size()) ctx.fail("roi has the wrong length");
    roi.assign(2 * static_cast<std::size_t>(r), 0.0);
    for (std::size_t d = 0; d < static_cast<std::size_t>(r); ++d)
      roi[d + static_cast<std::size_t>(r)] = 1.0;
    for (std::size_t i = 0; i < axes.size(); ++i) {
      roi[static_cast<std::size_t>(axes[i])] = given[i];
      roi[static_cast<std::size_t>(axes[i] + r)] = given[i + axes.size()];
    }
  }
  resample(ctx, p, scales, out, roi, ctx.node.attr_float("extrapolation_value", 0.0f));
}

void upsample(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Params p;
  p.mode = ctx.node.attr_string("mode", "nearest");
  if (p.mode == "bilinear") p.mode = "linear";
  p.transform = "asymmetric";
  p.nearest_mode = "floor";
  const auto s = ctx.opset < 9 ? [&] {
    const auto f = ctx.node.attr_floats("scales");
    return std::vector<double>(f.begin(), f.end());
  }() : float_values(ctx.in(1));
  if (s.size() != x.shape().size()) ctx.fail("scales has the wrong length");
  Shape out = x.shape();
  for (std::size_t d = 0; d < out.size(); ++d)
    out[d] = static_cast<std::int64_t>(std::floor(static_cast<double>(out[d]) * s[d]));
  resample(ctx, p, s, out, {}, 0.0);
}

}  // namespace

void register_resize(Registry& r) {
  r.add("Resize", resize, {.min_opset = 10, .degree = Degree::same});
  r.add("Upsample", upsample);
}

}  // namespace fpguard::ops
