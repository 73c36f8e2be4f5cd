// NonMaxSuppression, Unique, Det and MaxUnpool.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>

#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

template <class T>
void non_max_suppression(KernelContext& ctx) {
  const Tensor& boxes = ctx.in(0);
  const Tensor& scores = ctx.in(1);
  require_float(ctx, boxes, "boxes");
  require_float(ctx, scores, "scores");
  const auto& bs = boxes.shape();
  const auto& ss = scores.shape();
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1])
    ctx.fail("boxes " + shape_str(bs) + " and scores " + shape_str(ss) + " do not match");
  const std::int64_t max_out =
      ctx.has(2) && ctx.in(2).size() ? int_values(ctx, ctx.in(2)).at(0) : 0;
  std::vector<double> iou_v(1, 0.0), score_v;
  if (ctx.has(3) && ctx.in(3).size()) to_double(ctx.in(3), iou_v);
  const bool has_score_thr = ctx.has(4) && ctx.in(4).size();
  if (has_score_thr) {
    score_v.resize(1);
    to_double(ctx.in(4), score_v);
  }
  const bool center = ctx.node.attr_int("center_point_box", 0) != 0;
  const auto nb = bs[0], n = bs[1], nc = ss[1];
  auto pb = boxes.data<T>();
  auto ps = scores.data<T>();
  auto corners = [&](std::int64_t b, std::int64_t i) {
    const T* p = pb.data() + (b * n + i) * 4;
    std::array<double, 4> r;  // y1 x1 y2 x2, ordered
    if (center) {
      r = {p[1] - p[3] / 2.0, p[0] - p[2] / 2.0, p[1] + p[3] / 2.0, p[0] + p[2] / 2.0};
    } else {
      r = {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
    }
    return r;
  };
  auto iou = [&](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    const double ih = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
    const double iw = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
    const double inter = ih * iw;
    const double uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni <= 0 ? 0.0 : inter / uni;
  };
  std::vector<std::array<std::int64_t, 3>> selected;
  for (std::int64_t b = 0; b < nb; ++b)
    for (std::int64_t c = 0; c < nc; ++c) {
      std::vector<std::int64_t> cand;
      for (std::int64_t i = 0; i < n; ++i)
        if (!has_score_thr || ps[static_cast<std::size_t>((b * nc + c) * n + i)] > score_v[0])
          cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](std::int64_t x, std::int64_t y) {
        return ps[static_cast<std::size_t>((b * nc + c) * n + x)] >
               ps[static_cast<std::size_t>((b * nc + c) * n + y)];
      });
      std::vector<std::int64_t> kept;
      for (auto i : cand) {
        if (static_cast<std::int64_t>(kept.size()) >= max_out) break;
        const auto bi = corners(b, i);
        bool keep = true;
        for (auto k : kept)
          if (iou(bi, corners(b, k)) > iou_v[0]) {
            keep = false;
            break;
          }
        if (keep) kept.push_back(i);
      }
      for (auto k : kept) selected.push_back({b, c, k});
    }
  auto out = ctx.out(0, DType::int64, {static_cast<std::int64_t>(selected.size()), 3})
                 .data<std::int64_t>();
  for (std::size_t i = 0; i < selected.size(); ++i)
    for (std::size_t j = 0; j < 3; ++j) out[i * 3 + j] = selected[i][j];
}

void unique(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const bool sorted = ctx.node.attr_int("sorted", 1) != 0;
  const bool has_axis = ctx.node.has_attr("axis");
  const auto& s = x.shape();
  const auto rank = static_cast<std::int64_t>(s.size());
  const std::size_t axis =
      has_axis ? static_cast<std::size_t>(norm_axis(ctx, ctx.node.attr_int("axis", 0), rank)) : 0;
  const std::int64_t len = has_axis ? s[axis] : static_cast<std::int64_t>(x.size());
  const std::int64_t outer = has_axis ? product(s, 0, axis) : 1;
  const std::int64_t inner = has_axis ? product(s, axis + 1) : 1;
  std::vector<double> v(x.size());
  to_double(x, v);
  auto slice = [&](std::int64_t k) {  // the k-th slice along the axis, as values
    std::vector<double> out;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i)
        out.push_back(v[static_cast<std::size_t>((o * len + k) * inner + i)]);
    return out;
  };
  std::map<std::vector<double>, std::int64_t> first;  // slice -> index of first occurrence
  std::vector<std::int64_t> order;                    // unique slices by first occurrence
  std::vector<std::vector<double>> slices;
  for (std::int64_t k = 0; k < len; ++k) {
    auto sl = slice(k);
    if (first.emplace(sl, k).second) order.push_back(k), slices.push_back(std::move(sl));
  }
  std::vector<std::size_t> perm(order.size());
  std::iota(perm.begin(), perm.end(), 0);
  if (sorted)
    std::sort(perm.begin(), perm.end(),
              [&](std::size_t a, std::size_t b) { return slices[a] < slices[b]; });
  std::map<std::vector<double>, std::int64_t> rank_of;
  for (std::size_t r = 0; r < perm.size(); ++r)
    rank_of[slices[perm[r]]] = static_cast<std::int64_t>(r);
  const auto nu = static_cast<std::int64_t>(perm.size());
  Shape ys = has_axis ? s : Shape{nu};
  if (has_axis) ys[axis] = nu;
  Tensor y(DType::float64, ys);
  auto py = y.data<double>();
  for (std::int64_t r = 0; r < nu; ++r) {
    const auto& sl = slices[perm[static_cast<std::size_t>(r)]];
    std::size_t q = 0;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i)
        py[static_cast<std::size_t>((o * nu + r) * inner + i)] = sl[q++];
  }
  ctx.outputs[0] = exec::convert(y, x.dtype());
  if (ctx.outputs.size() > 1) {
    auto p = ctx.out(1, DType::int64, {nu}).data<std::int64_t>();
    for (std::int64_t r = 0; r < nu; ++r)
      p[static_cast<std::size_t>(r)] = order[perm[static_cast<std::size_t>(r)]];
  }
  if (ctx.outputs.size() > 2) {
    auto p = ctx.out(2, DType::int64, {len}).data<std::int64_t>();
    for (std::int64_t k = 0; k < len; ++k) p[static_cast<std::size_t>(k)] = rank_of[slice(k)];
  }
  if (ctx.outputs.size() > 3) {
    auto p = ctx.out(3, DType::int64, {nu}).data<std::int64_t>();
    for (std::int64_t k = 0; k < len; ++k) ++p[static_cast<std::size_t>(rank_of[slice(k)])];
  }
}

template <class T>
void det(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  const auto& s = x.shape();
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2]) ctx.fail("input must be [..., M, M]");
  const auto m = s.back();
  const Shape os(s.begin(), s.end() - 2);
  auto out = ctx.out(0, carrier_dtype<T>(), os).template data<T>();
  auto in = x.data<T>();
  std::vector<double> a(static_cast<std::size_t>(m * m));
  for (std::size_t b = 0; b < out.size(); ++b) {
    std::copy(in.begin() + static_cast<std::ptrdiff_t>(b * a.size()),
              in.begin() + static_cast<std::ptrdiff_t>((b + 1) * a.size()), a.begin());
    double d = 1;
    for (std::int64_t c = 0; c < m; ++c) {  // LU with partial pivoting
      std::int64_t p = c;
      for (std::int64_t r = c + 1; r < m; ++r)
        if (std::fabs(a[static_cast<std::size_t>(r * m + c)]) >
            std::fabs(a[static_cast<std::size_t>(p * m + c)]))
          p = r;
      if (a[static_cast<std::size_t>(p * m + c)] == 0) {
        d = 0;
        break;
      }
      if (p != c) {
        for (std::int64_t k = 0; k < m; ++k)
          std::swap(a[static_cast<std::size_t>(p * m + k)], a[static_cast<std::size_t>(c * m + k)]);
        d = -d;
      }
      const double piv = a[static_cast<std::size_t>(c * m + c)];
      d *= piv;
      for (std::int64_t r = c + 1; r < m; ++r) {
        const double f = a[static_cast<std::size_t>(r * m + c)] / piv;
        for (std::int64_t k = c; k < m; ++k)
          a[static_cast<std::size_t>(r * m + k)] -= f * a[static_cast<std::size_t>(c * m + k)];
      }
    }
    out[b] = static_cast<T>(d);
  }
}

void max_unpool(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto idx = int_values(ctx, ctx.in(1));
  const auto& s = x.shape();
  const auto kernel = ctx.node.attr_ints("kernel_shape");
  const std::size_t sd = kernel.size();
  if (s.size() != sd + 2) ctx.fail("kernel_shape does not match the input rank");
  const auto strides = ctx.node.attr_ints("strides", std::vector<std::int64_t>(sd, 1));
  const auto pads = ctx.node.attr_ints("pads", std::vector<std::int64_t>(2 * sd, 0));
  // Indices address the tensor MaxPool saw (the default output shape here); an explicit
  // output_shape places each element at the same multi-index of the larger output.
  Shape ds = {s[0], s[1]};
  for (std::size_t d = 0; d < sd; ++d)
    ds.push_back((s[d + 2] - 1) * strides[d] - pads[d] - pads[d + sd] + kernel[d]);
  const Shape os = ctx.has(2) ? int_values(ctx, ctx.in(2)) : ds;
  if (os.size() != ds.size()) ctx.fail("output_shape has the wrong rank");
  Tensor& out = ctx.out(0, x.dtype(), os);
  const auto n = product(ds);
  const auto isz = itemsize(x.dtype());
  for (std::size_t k = 0; k < idx.size(); ++k) {
    if (idx[k] < 0 || idx[k] >= n) ctx.fail("index " + std::to_string(idx[k]) + " is out of range");
    std::int64_t rem = idx[k], off = 0, mul = 1;
    for (std::size_t d = ds.size(); d-- > 0;) {
      const auto c = rem % ds[d];
      rem /= ds[d];
      if (c >= os[d]) ctx.fail("index " + std::to_string(idx[k]) + " does not fit output_shape");
      off += c * mul;
      mul *= os[d];
    }
    std::copy(x.bytes() + k * isz, x.bytes() + (k + 1) * isz,
              out.bytes() + static_cast<std::size_t>(off) * isz);
  }
}

// Hann, Hamming and Blackman windows: w[n] for n < size, periodic (N = size) or
// symmetric (N = size - 1).
template <int kind>
void window_k(KernelContext& ctx) {
  const auto size = int_values(ctx, ctx.in(0)).at(0);
  if (size < 0) ctx.fail("size must be non-negative");
  const bool periodic = ctx.node.attr_int("periodic", 1) != 0;
  const auto dt = model::dtype_of(static_cast<int>(ctx.node.attr_int("output_datatype", 1)));
  if (!dt) ctx.fail("output_datatype is not supported");
  const double n_ = static_cast<double>(periodic ? size : size - 1);
  Tensor d(DType::float64, {size});
  auto p = d.data<double>();
  const double pi = 3.14159265358979323846;
  for (std::int64_t n = 0; n < size; ++n) {
    const double a = n_ == 0 ? 0 : 2 * pi * static_cast<double>(n) / n_;
    double v;
    if constexpr (kind == 0)
      v = 0.5 - 0.5 * std::cos(a);
    else if constexpr (kind == 1)
      v = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(a);
    else
      v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    p[static_cast<std::size_t>(n)] = v;
  }
  if (exec::is_float(*dt)) {
    ctx.outputs[0] = exec::convert(d, ctx.carrier);
    ctx.output_dtypes[0] = *dt;
  } else {
    ctx.outputs[0] = exec::convert(d, *dt);
  }
}

// GridSample on 4-D inputs (opset 16 names bilinear/bicubic, opset 20 linear/cubic):
// padding zeros/border/reflection, align_corners.
double gs_reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const auto n = static_cast<std::int64_t>(dx / range);
    const double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const auto n = static_cast<std::int64_t>(dx / range);
    const double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

// Samples one [h, w] plane at grid points, as a GridSample node's attributes say.
class GridSampler {
 public:
  GridSampler(const KernelContext& ctx, std::int64_t h, std::int64_t w)
      : mode_(ctx.node.attr_string("mode", ctx.opset >= 20 ? "linear" : "bilinear")),
        pad_(ctx.node.attr_string("padding_mode", "zeros")),
        align_(ctx.node.attr_int("align_corners", 0) != 0),
        h_(h),
        w_(w),
        xlo_(align_ ? 0 : -0.5),
        xhi_(align_ ? static_cast<double>(w - 1) : static_cast<double>(w) - 0.5),
        ylo_(align_ ? 0 : -0.5),
        yhi_(align_ ? static_cast<double>(h - 1) : static_cast<double>(h) - 0.5) {
    if (mode_ == "bilinear") mode_ = "linear";
    if (mode_ == "bicubic") mode_ = "cubic";
    if (pad_ != "zeros" && pad_ != "border" && pad_ != "reflection")
      ctx.fail("padding_mode '" + pad_ + "' is not supported");
    if (mode_ != "linear" && mode_ != "nearest" && mode_ != "cubic")
      ctx.fail("mode '" + mode_ + "' is not supported");
  }

  // The input position (column, row) of a normalised grid point, padding applied.
  std::pair<double, double> position(double gx, double gy) const {
    double fx = denorm(gx, w_), fy = denorm(gy, h_);
    if (pad_ == "border")
      fx = std::clamp(fx, 0.0, static_cast<double>(w_ - 1)),
      fy = std::clamp(fy, 0.0, static_cast<double>(h_ - 1));
    else if (pad_ == "reflection")
      fx = gs_reflect(fx, xlo_, xhi_), fy = gs_reflect(fy, ylo_, yhi_);
    return {fx, fy};
  }

  template <class T>
  double sample(const T* plane, double fx, double fy) const {
    if (mode_ == "nearest")
      return pixel(plane, static_cast<std::int64_t>(std::nearbyint(fy)),
                   static_cast<std::int64_t>(std::nearbyint(fx)));
    if (mode_ == "linear") {
      const auto x0 = static_cast<std::int64_t>(std::floor(fx)),
                 y0 = static_cast<std::int64_t>(std::floor(fy));
      const double dx = fx - static_cast<double>(x0), dy = fy - static_cast<double>(y0);
      return (1 - dy) * ((1 - dx) * pixel(plane, y0, x0) + dx * pixel(plane, y0, x0 + 1)) +
             dy * ((1 - dx) * pixel(plane, y0 + 1, x0) + dx * pixel(plane, y0 + 1, x0 + 1));
    }
    const auto x0 = static_cast<std::int64_t>(std::floor(fx)) - 1,
               y0 = static_cast<std::int64_t>(std::floor(fy)) - 1;
    const auto cx = cubic(fx - std::floor(fx)), cy = cubic(fy - std::floor(fy));
    double v = 0;
    for (int p = 0; p < 4; ++p) {
      double row = 0;
      for (int q = 0; q < 4; ++q)
        row += cx[static_cast<std::size_t>(q)] * pixel(plane, y0 + p, x0 + q);
      v += cy[static_cast<std::size_t>(p)] * row;
    }
    return v;
  }

 private:
  double denorm(double v, std::int64_t len) const {
    return align_ ? (v + 1) / 2 * static_cast<double>(len - 1)
                  : ((v + 1) * static_cast<double>(len) - 1) / 2;
  }

  template <class T>
  double pixel(const T* plane, std::int64_t r, std::int64_t col) const {
    if (pad_ == "zeros") {
      if (r < 0 || r >= h_ || col < 0 || col >= w_) return 0;
    } else if (pad_ == "border") {
      r = std::clamp<std::int64_t>(r, 0, h_ - 1), col = std::clamp<std::int64_t>(col, 0, w_ - 1);
    } else {
      r = static_cast<std::int64_t>(gs_reflect(static_cast<double>(r), ylo_, yhi_));
      col = static_cast<std::int64_t>(gs_reflect(static_cast<double>(col), xlo_, xhi_));
      r = std::clamp<std::int64_t>(r, 0, h_ - 1), col = std::clamp<std::int64_t>(col, 0, w_ - 1);
    }
    return plane[r * w_ + col];
  }

  // The four cubic convolution weights (a = -0.75) at fraction t.
  static std::array<double, 4> cubic(double t) {
    const double a = -0.75;
    const double s[4] = {t + 1, t, 1 - t, 2 - t};
    std::array<double, 4> r{};
    for (int k = 0; k < 4; ++k) {
      const double d = s[k];
      r[static_cast<std::size_t>(k)] =
          d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
    }
    return r;
  }

  std::string mode_, pad_;
  bool align_;
  std::int64_t h_, w_;
  double xlo_, xhi_, ylo_, yhi_;  // the reflection bounds
};

template <class T>
void grid_sample(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& grid = ctx.in(1);
  require_float(ctx, x);
  require_float(ctx, grid, "grid");
  const auto& xs = x.shape();
  const auto& gs = grid.shape();
  if (xs.size() != 4 || gs.size() != 4 || gs[0] != xs[0] || gs[3] != 2)
    ctx.fail("only 4-D inputs with a [N, H, W, 2] grid are supported");
  const auto n = xs[0], c = xs[1], h = xs[2], w = xs[3], ho = gs[1], wo = gs[2];
  const GridSampler sampler(ctx, h, w);
  auto out = ctx.out(0, carrier_dtype<T>(), {n, c, ho, wo}).template data<T>();
  auto px = x.data<T>(), pg = grid.data<T>();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < ho; ++i)
      for (std::int64_t j = 0; j < wo; ++j) {
        const T* g = pg.data() + ((b * ho + i) * wo + j) * 2;
        const auto [fx, fy] = sampler.position(g[0], g[1]);
        for (std::int64_t ch = 0; ch < c; ++ch) {
          const double v = sampler.sample(px.data() + (b * c + ch) * h * w, fx, fy);
          out[static_cast<std::size_t>(((b * c + ch) * ho + i) * wo + j)] = static_cast<T>(v);
        }
      }
}

}  // namespace

void register_misc(Registry& r) {
  r.add("GridSample", carried<grid_sample<float>, grid_sample<double>>, {.min_opset = 16});
  r.add("HannWindow", window_k<0>, {.min_opset = 17});
  r.add("HammingWindow", window_k<1>, {.min_opset = 17});
  r.add("BlackmanWindow", window_k<2>, {.min_opset = 17});
  r.add("NonMaxSuppression", carried<non_max_suppression<float>, non_max_suppression<double>>);
  r.add("Unique", unique, {.kind = OpKind::data_movement});
  r.add("Det", carried<det<float>, det<double>>);
  r.add("MaxUnpool", max_unpool, {.kind = OpKind::data_movement});
}

}  // namespace fpguard::ops
