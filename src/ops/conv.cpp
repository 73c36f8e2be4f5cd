// Conv (im2col + ops::gemm, any number of spatial dims, groups, dilations, auto_pad),
// the pools (MaxPool, AveragePool, their Global forms) and the window geometry they share.

#include <cmath>
#include <limits>
#include <memory>

#include "core/parallel.hpp"
#include "ops/depthwise.hpp"
#include "ops/maxpool.hpp"
#include "ops/ops.hpp"
#include "ops/pointwise.hpp"

namespace fpguard::ops {

namespace {

struct Window {
  std::vector<std::int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;
};

// Output sizes and pads from the attributes (pads, auto_pad, strides, dilations).
Window window(const KernelContext& ctx, const Shape& x, const std::vector<std::int64_t>& kernel,
              bool ceil_mode) {
  const std::size_t k = kernel.size();
  if (x.size() != k + 2)
    ctx.fail("input of shape " + shape_str(x) + " does not match a " + std::to_string(k) +
             "-D kernel");
  Window w;
  w.in.assign(x.begin() + 2, x.end());
  w.kernel = kernel;
  w.stride = ctx.node.attr_ints("strides", std::vector<std::int64_t>(k, 1));
  w.dilation = ctx.node.attr_ints("dilations", std::vector<std::int64_t>(k, 1));
  auto pads = ctx.node.attr_ints("pads", std::vector<std::int64_t>(2 * k, 0));
  if (w.stride.size() != k || w.dilation.size() != k || pads.size() != 2 * k)
    ctx.fail("strides, dilations or pads do not match the kernel rank");
  const std::string auto_pad = ctx.node.attr_string("auto_pad", "NOTSET");
  w.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(k));
  w.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(k), pads.end());
  w.out.resize(k);
  for (std::size_t i = 0; i < k; ++i) {
    if (w.stride[i] <= 0 || w.dilation[i] <= 0) ctx.fail("strides and dilations must be positive");
    const auto ext = (w.kernel[i] - 1) * w.dilation[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      w.out[i] = (w.in[i] + w.stride[i] - 1) / w.stride[i];
      const auto total = std::max<std::int64_t>(0, (w.out[i] - 1) * w.stride[i] + ext - w.in[i]);
      w.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[i] = total - w.pad_begin[i];
      continue;
    }
    if (auto_pad == "VALID")
      w.pad_begin[i] = w.pad_end[i] = 0;
    else if (auto_pad != "NOTSET")
      ctx.fail("auto_pad '" + auto_pad + "' is not supported");
    const auto span = w.in[i] + w.pad_begin[i] + w.pad_end[i] - ext;
    if (span < 0) ctx.fail("the kernel is larger than the padded input");
    w.out[i] = (ceil_mode ? (span + w.stride[i] - 1) / w.stride[i] : span / w.stride[i]) + 1;
    // A window that would start in the end padding is dropped (as PyTorch and ONNX do).
    if (ceil_mode && (w.out[i] - 1) * w.stride[i] >= w.in[i] + w.pad_begin[i]) --w.out[i];
  }
  return w;
}

// Iterates a multi-index over `dims` (row-major), calling f(index) for each.
template <class F>
void for_each_index(const std::vector<std::int64_t>& dims, F&& f) {
  const auto n = product(dims);
  std::vector<std::int64_t> idx(dims.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    f(idx, i);
    for (std::size_t d = dims.size(); d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}

// im2col of one 2-D input plane: rows (kh, kw), columns output positions (oh, ow);
// positions in the padding are 0. The same layout as the N-d loop of im2col().
template <class T>
void im2col_2d(const T* plane, const ConvGeometry& win, T* col) {
  const auto ih_n = win.in[0], iw_n = win.in[1], oh_n = win.out[0], ow_n = win.out[1];
  const auto osize = oh_n * ow_n;
  for (std::int64_t kh = 0; kh < win.kernel[0]; ++kh)
    for (std::int64_t kw = 0; kw < win.kernel[1]; ++kw) {
      T* row = col + (kh * win.kernel[1] + kw) * osize;
      for (std::int64_t oh = 0; oh < oh_n; ++oh) {
        T* r = row + oh * ow_n;
        const auto ih = oh * win.stride[0] - win.pad_begin[0] + kh * win.dilation[0];
        if (ih < 0 || ih >= ih_n) {
          std::fill(r, r + ow_n, T{0});
          continue;
        }
        const T* src = plane + ih * iw_n;
        const auto base = kw * win.dilation[1] - win.pad_begin[1];
        for (std::int64_t ow = 0; ow < ow_n; ++ow) {
          const auto iw = ow * win.stride[1] + base;
          r[ow] = iw >= 0 && iw < iw_n ? src[iw] : T{0};
        }
      }
    }
}

}  // namespace

ConvGeometry conv_geometry(const KernelContext& ctx, const Shape& xs, const Shape& ws) {
  if (ws.size() < 3) ctx.fail("W " + shape_str(ws) + " must have rank >= 3");
  const std::vector<std::int64_t> kernel(ws.begin() + 2, ws.end());
  if (ctx.node.has_attr("kernel_shape") && ctx.node.attr_ints("kernel_shape") != kernel)
    ctx.fail("kernel_shape does not match W " + shape_str(ws));
  const Window win = window(ctx, xs, kernel, false);
  const auto group = ctx.node.attr_int("group", 1);
  const auto c = xs[1], m = ws[0];
  if (group <= 0 || c % group || m % group || ws[1] != c / group)
    ctx.fail("channels: X has " + std::to_string(c) + ", W " + shape_str(ws) + ", group " +
             std::to_string(group));
  return {xs[0], c, m, group, win.in, win.kernel, win.stride, win.dilation, win.pad_begin, win.out};
}

template <class T>
void im2col(const ConvGeometry& geo, const T* plane, T* col) {
  const std::size_t sd = geo.kernel.size();
  if (sd == 2) return im2col_2d(plane, geo, col);  // without the generic index machinery
  const auto osize = product(geo.out);
  for_each_index(geo.kernel, [&](const std::vector<std::int64_t>& kidx, std::int64_t kr) {
    T* row = col + kr * osize;
    for_each_index(geo.out, [&](const std::vector<std::int64_t>& oidx, std::int64_t oc) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d < sd; ++d) {
        const auto pos = oidx[d] * geo.stride[d] - geo.pad_begin[d] + kidx[d] * geo.dilation[d];
        if (pos < 0 || pos >= geo.in[d]) {
          row[oc] = 0;
          return;
        }
        off = off * geo.in[d] + pos;
      }
      row[oc] = plane[off];
    });
  });
}
template void im2col(const ConvGeometry&, const float*, float*);
template void im2col(const ConvGeometry&, const double*, double*);
template void im2col(const ConvGeometry&, const std::int32_t*, std::int32_t*);

namespace {

// Conv and ConvTranspose: the optional bias B (input 2, one value per output channel),
// checked; null when absent.
template <class T>
const T* bias_of(const KernelContext& ctx, std::int64_t m) {
  if (!ctx.has(2)) return nullptr;
  const Tensor& bias = ctx.in(2);
  require_float(ctx, bias, "B");
  if (bias.size() != static_cast<std::size_t>(m))
    ctx.fail("B must have " + std::to_string(m) + " values");
  return bias.data<T>().data();
}

// The bias added to every position of y (n images, m channels, osize positions each) and
// then the fused element-wise op (KernelContext::epilogue: Conv's), plane after plane
// while it is in the cache, on the run's threads: each element gets the same operations
// as from a pass over y for the bias and another for the op.
template <class T>
void add_bias(const KernelContext& ctx, T* y, std::int64_t n, std::int64_t m, std::int64_t osize) {
  const T* pb = bias_of<T>(ctx, m);
  const auto* epilogue = std::is_same_v<T, float> ? ctx.epilogue : nullptr;
  if ((!pb && !epilogue) || osize == 0) return;
  const auto plane = static_cast<std::size_t>(osize);
  detail::parallel_for(
      static_cast<std::size_t>(n * m) * plane, ctx.threads,
      [&](std::size_t e0, std::size_t e1) {
        for (std::size_t p = e0 / plane; p < e1 / plane; ++p) {
          T* row = y + p * plane;
          if (pb) {
            const T v = pb[p % static_cast<std::size_t>(m)];
            for (std::size_t i = 0; i < plane; ++i) row[i] += v;
          }
          if constexpr (std::is_same_v<T, float>)
            if (epilogue) (*epilogue)(row, plane, 1);
        }
      },
      plane);
}

// Conv and ConvTranspose: X and W (float carriers, the same rank >= 3).
std::pair<const Tensor&, const Tensor&> conv_operands(const KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  require_float(ctx, x, "X");
  require_float(ctx, w, "W");
  if (w.shape().size() < 3 || x.shape().size() != w.shape().size())
    ctx.fail("X " + shape_str(x.shape()) + " and W " + shape_str(w.shape()) +
             " ranks do not match");
  return {x, w};
}

// 2-D convolutions whose output channels each read one input channel (group == C > 1:
// depthwise, with any channel multiplier) run directly on NCHW, without oneDNN's reorders
// into its blocked layout and back: 1.3-2.5x faster on MobileNetV3's planes of 14 x 14 and
// more. Plane by plane where a plane's rows fill the vectors; in blocks of channels, the
// vector's lanes, where depthwise::prefer_block says (rows narrower than a vector: MobileNetV3's
// 7 x 7 and 14 x 14 planes; 5 x 5 kernels on small planes), with a multiplier of 1. Other
// output rows narrower than 8 leave most lanes of a vector idle, and there oneDNN's
// convolution (vectorised across channels) is faster.
bool depthwise_2d(const ConvGeometry& g) {
  return g.kernel.size() == 2 && g.group > 1 && g.group == g.c;
}

bool block_depthwise(const ConvGeometry& g) {
  return depthwise_2d(g) && g.m == g.c && depthwise::prefer_block(window2d(g));
}

bool direct_depthwise(const ConvGeometry& g) {
  return depthwise_2d(g) && (g.out[1] >= 8 || block_depthwise(g));
}

// A thread's scratch for the depthwise kernels (thread_scratch), in floats.
float* depthwise_scratch(std::size_t floats) {
  return static_cast<float*>(thread_scratch(Scratch::depthwise, floats * sizeof(float)));
}

// The channels in blocks of depthwise::block_channels() (the last one shorter), split across
// the threads; where the blocks of all images do not divide evenly among the threads and are
// few (MobileNetV3's 72 channels: 5 blocks of 16), their output rows in parts as well.
void depthwise_blocks(const KernelContext& ctx, const ConvGeometry& g, const float* x,
                      const float* w, const float* bias, float* y) {
  const auto lanes = static_cast<std::int64_t>(depthwise::block_channels());
  const auto blocks = (g.m + lanes - 1) / lanes, isize = product(g.in), osize = product(g.out),
             ksize = product(g.kernel), out_h = g.out[0];
  const int threads = detail::resolve_threads(ctx.threads > 1 ? 0 : 1,
                                              static_cast<std::size_t>(g.n * g.m * osize * ksize));
  const std::int64_t units = g.n * blocks;
  const std::int64_t parts =
      units % threads == 0 || units >= 8 * threads ? 1 : std::min<std::int64_t>(threads, out_h);
  const depthwise::Plane p = window2d(g);
  detail::parallel_for(
      static_cast<std::size_t>(units * parts), threads,
      [&](std::size_t lo, std::size_t hi) {
        float* scratch = depthwise_scratch(depthwise::block_scratch_floats(p));
        for (auto i = static_cast<std::int64_t>(lo); i < static_cast<std::int64_t>(hi); ++i) {
          const auto u = i / parts, part = i % parts;
          const auto b = u / blocks, c = u % blocks * lanes;  // image, first channel
          depthwise::channel_block(p, std::min(lanes, g.m - c), out_h * part / parts,
                                   out_h * (part + 1) / parts, x + (b * g.c + c) * isize, isize,
                                   w + c * ksize, bias ? bias + c : nullptr,
                                   y + (b * g.m + c) * osize, osize, ctx.epilogue, scratch);
        }
      },
      1);
}

void depthwise(const KernelContext& ctx, const ConvGeometry& g, const float* x, const float* w,
               const float* bias, float* y) {
  if (block_depthwise(g)) return depthwise_blocks(ctx, g, x, w, bias, y);
  const auto planes = g.n * g.m, mg = g.m / g.group, isize = product(g.in), osize = product(g.out),
             ksize = product(g.kernel);
  const depthwise::Plane p = window2d(g);
  detail::parallel_for(
      static_cast<std::size_t>(planes),
      detail::resolve_threads(ctx.threads > 1 ? 0 : 1,
                              static_cast<std::size_t>(planes * osize * ksize)),
      [&](std::size_t lo, std::size_t hi) {
        float* strip = depthwise_scratch(depthwise::scratch_floats(p));
        for (auto i = static_cast<std::int64_t>(lo); i < static_cast<std::int64_t>(hi); ++i) {
          const auto b = i / g.m, j = i % g.m;  // image, output channel
          depthwise::plane(p, x + (b * g.c + j / mg) * isize, w + j * ksize,
                           bias ? bias + j : nullptr, ctx.epilogue, y + i * osize, strip);
        }
      },
      1);
}

// A 1x1 convolution whose activations (X and Y) are at least as large as its weights runs
// as a GEMM on NCHW, which saves reordering them into oneDNN's blocked layout and back; one
// that widens the channels (M >= C) does from half its weights' size. Over small planes
// (MobileNetV3's 7 x 7 and 1 x 1 layers of 960 channels, ResNet-50's 7 x 7 of 2048)
// oneDNN's convolution is faster: its weights are prepared once in its layout, and the
// reorders of the activations are small. ResNet-50's 14 x 14 layers that widen 256 or 512
// channels to 1024 took 1.4x as long there as in the GEMM, and those that narrow 1024 to
// 256 were 5% faster there (bench/README.md, session 21).
bool pointwise_as_gemm(const ConvGeometry& g) {
  if (product(g.kernel) != 1) return false;
  const auto cg = g.c / g.group, mg = g.m / g.group;
  return product(g.out) * (cg + mg) * (mg >= cg ? 2 : 1) >= cg * mg;
}

// A 1x1 convolution without strides or pads: its im2col is X itself.
bool im2col_is_identity(const ConvGeometry& g) {
  for (std::size_t i = 0; i < g.kernel.size(); ++i)
    if (g.kernel[i] != 1 || g.stride[i] != 1 || g.pad_begin[i] != 0 || g.out[i] != g.in[i])
      return false;
  return true;
}

// A 1x1 convolution without strides or pads, run as a GEMM, over few input channels per
// group: there the pointwise kernel runs it, a panel of output positions at a time.
bool direct_pointwise(const ConvGeometry& g) {
  return pointwise_as_gemm(g) && im2col_is_identity(g) && g.c / g.group <= pointwise::kMaxK;
}

// The pointwise kernel per image and group, output positions split across the threads in
// panels; the kernel adds the bias and applies the fused op to each panel while it is in
// the cache (where add_bias would read the whole output again).
void pointwise_conv(const KernelContext& ctx, const ConvGeometry& g, int threads, const float* x,
                    const float* w, const float* bias, float* y) {
  const auto cg = g.c / g.group, mg = g.m / g.group, plane = product(g.out);
  const std::int64_t panel = pointwise::panel_columns(mg, cg);
  detail::parallel_for(
      static_cast<std::size_t>(plane), threads,
      [&](std::size_t lo, std::size_t hi) {
        auto* scratch = static_cast<float*>(
            thread_scratch(Scratch::pointwise, pointwise::scratch_floats(mg, cg) * sizeof(float)));
        for (auto c0 = static_cast<std::int64_t>(lo); c0 < static_cast<std::int64_t>(hi);
             c0 += panel)
          for (std::int64_t b = 0; b < g.n; ++b)
            for (std::int64_t q = 0; q < g.group; ++q)
              pointwise::columns(w + q * mg * cg, x + (b * g.c + q * cg) * plane,
                                 bias ? bias + q * mg : nullptr, y + (b * g.m + q * mg) * plane, mg,
                                 cg, plane, c0, std::min(c0 + panel, static_cast<std::int64_t>(hi)),
                                 ctx.epilogue, scratch);
      },
      static_cast<std::size_t>(panel));
}

// A 1x1 convolution of one group over a 1 x 1 plane (a squeeze-excitation block's layers):
// Y (N x M) = X (N x C) times W (M x C) transposed, which gemm() runs as a product of a few
// rows, reading each row of W once, without the reorders and the convolution primitive's
// call (ten pairs of 576 -> 144 -> 576 channels: 0.24 -> 0.14 ms; bench/README.md,
// session 22).
bool conv_as_rows(const ConvGeometry& g) {
  return product(g.kernel) == 1 && product(g.in) == 1 && product(g.out) == 1 && g.group == 1;
}

// The threads of a convolution on the depthwise or pointwise kernel or oneDNN's primitive:
// one when it is too small for a second thread to pay for waking it (each parallel region
// of oneDNN's and of our kernels wakes the pool's threads: tens of microseconds on a VM
// once they sleep), else the run's. A multiply-add counts as a quarter of parallel_for's
// element (a load and a store at memory speed), or as one where each reads its own weight
// (conv_as_rows: memory-bound). The work is split by output position and channel, never
// along a sum: the results do not depend on the choice.
int conv_threads(const ConvGeometry& g, int threads) {
  const auto macs = g.n * g.m * product(g.out) * (g.c / g.group) * product(g.kernel);
  const std::size_t per_thread = conv_as_rows(g) ? 1 : 4;
  return static_cast<std::size_t>(macs) < per_thread * detail::parallel_threshold() ? 1 : threads;
}

// conv_as_rows' product, then the bias and the fused op over the (small) output at once.
void conv_rows(const KernelContext& ctx, const ConvGeometry& g, const float* x, const float* w,
               const float* bias, float* y) {
  gemm(ctx, false, true, g.n, g.m, g.c, 1.0f, x, g.c, w, g.c, 0.0f, y, g.m);
  if (bias)
    for (std::int64_t i = 0; i < g.n * g.m; ++i) y[i] += bias[i % g.m];
  if (ctx.epilogue) (*ctx.epilogue)(y, static_cast<std::size_t>(g.n * g.m), 1);
}

template <class T>
void conv(KernelContext& ctx) {
  const auto [x, w] = conv_operands(ctx);
  const ConvGeometry geo = conv_geometry(ctx, x.shape(), w.shape());
  const auto n = geo.n, c = geo.c, m = geo.m, group = geo.group;
  const auto cg = c / group, mg = m / group;
  const auto ksize = product(geo.kernel), osize = product(geo.out), isize = product(geo.in);
  Shape os{n, m};
  os.insert(os.end(), geo.out.begin(), geo.out.end());
  Tensor& out = ctx.out_uninit(0, carrier_dtype<T>(), os);
  const T* px = x.data<T>().data();
  T* po = out.data<T>().data();
  if constexpr (std::is_same_v<T, float>) {
    // The depthwise and pointwise kernels, the products of rows and oneDNN's convolution
    // (with its reorders) on conv_threads; the GEMM paths below keep the run's threads.
    const detail::PoolThreads pool(conv_threads(geo, ctx.threads));
    const float* pb = bias_of<float>(ctx, m);
    // Depthwise kernels run directly on NCHW, 1x1 kernels over large planes on the
    // pointwise kernel (few input channels) or as one GEMM per image and group (below), and
    // over a 1 x 1 plane as products of rows, without oneDNN's reorders of X and Y.
    if (n && m && osize && direct_depthwise(geo) && !ctx.accumulate) {
      ctx.round_weight();
      return depthwise(ctx, geo, px, ctx.in(1).data<float>().data(), pb, po);
    }
    if (n && m && osize && direct_pointwise(geo) && !ctx.accumulate) {
      ctx.round_weight();
      return pointwise_conv(ctx, geo, conv_threads(geo, ctx.threads), px,
                            ctx.in(1).data<float>().data(), pb, po);
    }
    if (n && m && conv_as_rows(geo) && !ctx.accumulate) {
      ctx.round_weight();
      return conv_rows(ctx, geo, px, ctx.in(1).data<float>().data(), pb, po);
    }
    if (n && m && osize && !pointwise_as_gemm(geo) && conv_primitive(ctx, geo, px, w, pb, po))
      return;
  }
  ctx.round_weight();  // a weight handed over unrounded: the paths below read it rounded
  const T* pw = ctx.in(1).data<T>().data();
  const bool identity = im2col_is_identity(geo);
  std::vector<T> col(identity ? 0 : static_cast<std::size_t>(cg * ksize * osize));
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t g = 0; g < group; ++g) {
      // im2col: row (ci, kernel offset), column output position.
      const T* cols = px + (b * c + g * cg) * isize;
      if (!identity) {
        for (std::int64_t ci = 0; ci < cg; ++ci)
          im2col(geo, px + (b * c + g * cg + ci) * isize, col.data() + ci * ksize * osize);
        cols = col.data();
      }
      T* dst = po + (b * m + g * mg) * osize;
      const auto kk = cg * ksize;
      if (mg && osize)  // (kk == 0: gemm writes zeros)
        gemm(ctx, false, false, mg, osize, kk, 1.0f, pw + g * mg * kk, kk, cols, osize, 0.0f, dst,
             osize);
    }
  if constexpr (!std::is_same_v<T, float>)
    FPG_CHECK(!ctx.epilogue);  // the executor fuses on float32 carriers only
  add_bias(ctx, po, n, m, osize);
}

// What a pool node asks for beyond its window.
struct PoolOptions {
  bool indices = false;       // MaxPool's Indices output is wanted
  bool column_major = false;  // storage_order 1 (of the indices)
  bool include_pad = false;   // count_include_pad (AveragePool)
};

// One 2-D plane, each output on its own (AveragePool; MaxPool with Indices). `base`: the
// plane's first flat index in the tensor (the indices count over the whole tensor); `idx`
// is null when no indices are wanted.
template <class T, bool is_max>
void pool_plane_2d(const Window& win, const PoolOptions& o, const T* plane, std::int64_t base,
                   T* out, std::int64_t* idx) {
  const auto ih_n = win.in[0], iw_n = win.in[1], oh_n = win.out[0], ow_n = win.out[1];
  const auto kh_n = win.kernel[0], kw_n = win.kernel[1];
  for (std::int64_t oh = 0; oh < oh_n; ++oh)
    for (std::int64_t ow = 0; ow < ow_n; ++ow) {
      const auto h0 = oh * win.stride[0] - win.pad_begin[0];
      const auto w0 = ow * win.stride[1] - win.pad_begin[1];
      T acc = is_max ? -std::numeric_limits<T>::infinity() : 0.0f;
      std::int64_t count = 0, best = -1;
      for (std::int64_t kh = 0; kh < kh_n; ++kh) {
        const auto ih = h0 + kh * win.dilation[0];
        const bool row_in = ih >= 0 && ih < ih_n;
        const bool row_padded = ih < ih_n + win.pad_end[0];
        for (std::int64_t kw = 0; kw < kw_n; ++kw) {
          const auto iw = w0 + kw * win.dilation[1];
          if (row_in && iw >= 0 && iw < iw_n) {
            const T v = plane[ih * iw_n + iw];
            if constexpr (is_max) {
              if (v > acc || std::isnan(v) || best < 0)
                acc = v, best = o.column_major ? iw * ih_n + ih : ih * iw_n + iw;
            } else {
              acc += v;
            }
            ++count;
          } else if (o.include_pad && row_padded && iw < iw_n + win.pad_end[1]) {
            ++count;
          }
        }
      }
      if constexpr (!is_max) acc = count ? acc / static_cast<T>(count) : 0.0f;
      out[oh * ow_n + ow] = acc;
      if (idx) idx[oh * ow_n + ow] = base + best;
    }
}

// One plane of any rank, each output on its own (as pool_plane_2d).
template <class T, bool is_max>
void pool_plane_nd(const Window& win, const PoolOptions& o, const T* plane, std::int64_t base,
                   T* out, std::int64_t* idx) {
  const std::size_t sd = win.kernel.size();
  for_each_index(win.out, [&](const std::vector<std::int64_t>& oidx, std::int64_t oc) {
    T acc = is_max ? -std::numeric_limits<T>::infinity() : 0.0f;
    std::int64_t count = 0, best = -1;
    std::vector<std::int64_t> pos(sd);
    for_each_index(win.kernel, [&](const std::vector<std::int64_t>& kidx, std::int64_t) {
      std::int64_t off = 0;
      bool inside = true, in_padded = true;
      for (std::size_t d = 0; d < sd; ++d) {
        pos[d] = oidx[d] * win.stride[d] - win.pad_begin[d] + kidx[d] * win.dilation[d];
        if (pos[d] < 0 || pos[d] >= win.in[d]) inside = false;
        if (pos[d] >= win.in[d] + win.pad_end[d]) in_padded = false;
        off = off * win.in[d] + pos[d];
      }
      if (inside) {
        const T v = plane[off];
        if constexpr (is_max) {
          if (v > acc || std::isnan(v) || best < 0) {
            acc = v;
            if (o.column_major) {
              off = 0;
              for (std::size_t d = sd; d-- > 0;) off = off * win.in[d] + pos[d];
            }
            best = off;
          }
        } else {
          acc += v;
        }
        ++count;
      } else if (o.include_pad && in_padded) {
        ++count;
      }
    });
    if constexpr (!is_max) acc = count ? acc / static_cast<T>(count) : 0.0f;
    out[oc] = acc;
    if (idx) idx[oc] = base + best;
  });
}

template <class T, bool is_max>
void pool(KernelContext& ctx) {
  const Tensor& x_in = ctx.in(0);
  // 8-bit integers (MaxPool) are exact in float32: pool there, convert back.
  const bool small_int = x_in.dtype() == DType::int8 || x_in.dtype() == DType::uint8;
  if (small_int && !is_max) ctx.fail("AveragePool of integers is not supported");
  Tensor widened;  // (the input itself is read in place, not copied)
  if (small_int) widened = exec::convert(x_in, carrier_dtype<T>());
  const Tensor& x = small_int ? widened : x_in;
  require_float(ctx, x);
  const auto kernel = ctx.node.attr_ints("kernel_shape");
  if (kernel.empty()) ctx.fail("kernel_shape is required");
  const PoolOptions o{
      .indices = ctx.node.outputs.size() > 1 && !ctx.node.outputs[1].empty(),
      .column_major = ctx.node.attr_int("storage_order", 0) != 0,
      .include_pad = ctx.node.attr_int("count_include_pad", 0) != 0,
  };
  const Window win = window(ctx, x.shape(), kernel, ctx.node.attr_int("ceil_mode", 0) != 0);
  const auto nc = x.shape()[0] * x.shape()[1];
  const auto isize = product(win.in), osize = product(win.out);
  Shape os(win.out.size() + 2);
  os[0] = x.shape()[0], os[1] = x.shape()[1];
  std::copy(win.out.begin(), win.out.end(), os.begin() + 2);
  Tensor out = Tensor::uninitialized(carrier_dtype<T>(), os);  // every element is written
  Tensor indices(DType::int64, o.indices ? os : Shape{0});
  const T* px = x.data<T>().data();
  T* po = out.data<T>().data();
  std::int64_t* pi = indices.data<std::int64_t>().data();
  // Plane p, its outputs and indices.
  auto plane = [&](std::int64_t p, auto&& f) {
    f(win, o, px + p * isize, p * isize, po + p * osize, o.indices ? pi + p * osize : nullptr);
  };
  if (kernel.size() == 2) {  // the common case: plain loops, planes split across threads
    // MaxPool without indices: separably, on the vector kernel (ops/maxpool.hpp).
    const maxpool::Plane mp = window2d(win);
    const bool separable = is_max && !o.indices && maxpool::separable(mp);
    detail::parallel_for(
        static_cast<std::size_t>(nc),
        detail::resolve_threads(ctx.threads > 1 ? 0 : 1, static_cast<std::size_t>(nc * osize)),
        [&](std::size_t lo, std::size_t hi) {
          std::vector<T> cols(separable ? maxpool::scratch_values(mp) : 0);
          for (auto p = static_cast<std::int64_t>(lo); p < static_cast<std::int64_t>(hi); ++p)
            if (separable)
              maxpool::plane(mp, px + p * isize, po + p * osize, cols.data());
            else
              plane(p, pool_plane_2d<T, is_max>);
        },
        1);
  } else {
    for (std::int64_t p = 0; p < nc; ++p) plane(p, pool_plane_nd<T, is_max>);
  }
  ctx.outputs[0] = small_int ? exec::convert(out, x_in.dtype()) : std::move(out);
  if (o.indices) ctx.outputs[1] = std::move(indices);
}

template <class T, bool is_max>
void global_pool(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  const auto& s = x.shape();
  if (s.size() < 2) ctx.fail("input must have rank >= 2");
  const auto nc = s[0] * s[1], len = product(s, 2);
  Shape os(s.size(), 1);
  os[0] = s[0], os[1] = s[1];
  auto out = ctx.out(0, carrier_dtype<T>(), os).template data<T>();
  auto in = x.data<T>();
  // Planes split across threads, each on one: its maximum in order, its sum as
  // ReduceMean's (add_in_eights).
  detail::parallel_for(
      static_cast<std::size_t>(nc),
      detail::resolve_threads(ctx.threads > 1 ? 0 : 1, static_cast<std::size_t>(nc * len)),
      [&](std::size_t lo, std::size_t hi) {
        for (auto p = static_cast<std::int64_t>(lo); p < static_cast<std::int64_t>(hi); ++p) {
          const T* plane = in.data() + p * len;
          if constexpr (is_max) {
            T acc = -std::numeric_limits<T>::infinity();
            for (std::int64_t i = 0; i < len; ++i) acc = plane[i] > acc ? plane[i] : acc;
            out[static_cast<std::size_t>(p)] = acc;
          } else {
            const T sum = add_in_eights(T{0}, plane, len, [](T v) { return v; });
            out[static_cast<std::size_t>(p)] = sum / static_cast<T>(len);
          }
        }
      },
      1);
}

// col2im of one output plane of ConvTranspose (`win`: its input and output sizes, kernel,
// strides, dilations and begin pads): row r of `col` (kernel offset r, one column per input
// position) added at the output positions it reaches, kernel offsets in order, then input
// positions.
template <class T>
void col2im_nd(const T* col, const Window& win, T* plane) {
  const std::size_t sd = win.kernel.size();
  const auto isize = product(win.in);
  for_each_index(win.kernel, [&](const std::vector<std::int64_t>& kidx, std::int64_t kr) {
    const T* row = col + kr * isize;
    for_each_index(win.in, [&](const std::vector<std::int64_t>& iidx, std::int64_t ic) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d < sd; ++d) {
        const auto pos = iidx[d] * win.stride[d] - win.pad_begin[d] + kidx[d] * win.dilation[d];
        if (pos < 0 || pos >= win.out[d]) return;
        off = off * win.out[d] + pos;
      }
      plane[off] += row[ic];
    });
  });
}

// col2im_nd of a 2-D plane along output rows: the same additions in the same order (the
// same sums, bit for bit), without the N-d index machinery.
template <class T>
void col2im_2d(const T* col, const Window& win, T* plane) {
  const auto ih_n = win.in[0], iw_n = win.in[1], oh_n = win.out[0], ow_n = win.out[1];
  const auto sw = win.stride[1], isize = ih_n * iw_n;
  for (std::int64_t kh = 0; kh < win.kernel[0]; ++kh)
    for (std::int64_t kw = 0; kw < win.kernel[1]; ++kw) {
      const T* row = col + (kh * win.kernel[1] + kw) * isize;
      const auto off = kw * win.dilation[1] - win.pad_begin[1];  // ow = iw * sw + off
      // Input columns [lo, hi) land inside the output row.
      const std::int64_t lo = off >= 0 ? 0 : std::min(iw_n, (sw - 1 - off) / sw);
      const std::int64_t hi = ow_n - off <= 0 ? 0 : std::min(iw_n, (ow_n - off - 1) / sw + 1);
      if (hi <= lo) continue;
      for (std::int64_t ih = 0; ih < ih_n; ++ih) {
        const auto oh = ih * win.stride[0] - win.pad_begin[0] + kh * win.dilation[0];
        if (oh < 0 || oh >= oh_n) continue;
        const T* src = row + ih * iw_n;
        T* dst = plane + oh * ow_n;
        for (std::int64_t iw = lo; iw < hi; ++iw) dst[iw * sw + off] += src[iw];
      }
    }
}

// Whether each output of a 2-D ConvTranspose takes one product per input channel:
// strides equal to the kernel, no dilation, pads or output padding (DBNet's 2 x 2
// upsampling layers): each input position writes a kernel-sized tile of Y of its own.
bool writes_tiles(const std::vector<std::int64_t>& kernel, const std::vector<std::int64_t>& stride,
                  const std::vector<std::int64_t>& dil, const std::vector<std::int64_t>& pads,
                  const std::vector<std::int64_t>& in, const std::vector<std::int64_t>& out) {
  if (kernel.size() != 2) return false;
  for (std::size_t i = 0; i < 2; ++i)
    if (stride[i] != kernel[i] || dil[i] != 1 || pads[i] != 0 || pads[i + 2] != 0 ||
        out[i] != in[i] * stride[i])
      return false;
  return true;
}

// The operands of a float32 ConvTranspose that writes_tiles.
struct TileTranspose {
  const float *x, *w, *bias;
  float* y;
  std::int64_t n, c, m, group, in_h, in_w, k_h, k_w;
};

// One output row of a writes_tiles ConvTranspose: dst[iw k_w + j] = 0 + src[j cols + iw],
// then + *bias (0 + v: the general path's col2im into zeros, which makes -0 +0). Two
// kernel columns in a loop of their own, which the compiler vectorises (interleaving two
// rows): 1.8 -> 1.5 ms of DBNet's head.1 with the blocks below, 2.9 in general loops.
void tile_row(const float* src, std::int64_t cols, std::int64_t in_w, std::int64_t k_w,
              const float* bias, float* dst) {
  if (k_w == 2) {
    const float *s0 = src, *s1 = src + cols;
    if (bias)
      for (std::int64_t iw = 0; iw < in_w; ++iw) {
        dst[2 * iw] = (0.0f + s0[iw]) + *bias;
        dst[2 * iw + 1] = (0.0f + s1[iw]) + *bias;
      }
    else
      for (std::int64_t iw = 0; iw < in_w; ++iw) {
        dst[2 * iw] = 0.0f + s0[iw];
        dst[2 * iw + 1] = 0.0f + s1[iw];
      }
    return;
  }
  for (std::int64_t iw = 0; iw < in_w; ++iw)
    for (std::int64_t j = 0; j < k_w; ++j) {
      const float v = 0.0f + src[j * cols + iw];
      dst[iw * k_w + j] = bias ? v + *bias : v;
    }
}

// A writes_tiles ConvTranspose in blocks of input rows, on the threads: each block's W^T x
// (ops::gemm, on its thread) into a buffer that stays in the cache, then written into
// its tiles of Y with the bias: per output, 0 + the product, then + bias, as the general
// path's col2im into zeros and add_bias give, without zero-filling Y, a product buffer of
// Y's size and a second pass for the bias.
void transpose_tiles(const KernelContext& ctx, const TileTranspose& t) {
  const auto cg = t.c / t.group, mg = t.m / t.group, kk = t.k_h * t.k_w, rows = mg * kk;
  const auto isize = t.in_h * t.in_w, out_w = t.in_w * t.k_w, osize = isize * kk;
  // Input rows a block: its products within 512 KiB (1.5 ms for DBNet's head.1, 1.6 with
  // 1 MiB, 1.8 with 256 KiB).
  const auto block = std::max<std::int64_t>(1, (std::int64_t{128} << 10) / (rows * t.in_w));
  const auto blocks = (t.in_h + block - 1) / block;
  detail::parallel_for(
      static_cast<std::size_t>(t.n * t.group * blocks), ctx.threads,
      [&](std::size_t lo, std::size_t hi) {
        std::vector<float> col(static_cast<std::size_t>(rows * block * t.in_w));
        for (auto item = static_cast<std::int64_t>(lo); item < static_cast<std::int64_t>(hi);
             ++item) {
          const auto b = item / (t.group * blocks), g = item / blocks % t.group,
                     h0 = item % blocks * block, h1 = std::min(t.in_h, h0 + block);
          const auto cols = (h1 - h0) * t.in_w;
          gemm(ctx, true, false, rows, cols, cg, 1.0f, t.w + g * cg * rows, rows,
               t.x + (b * t.c + g * cg) * isize + h0 * t.in_w, isize, 0.0f, col.data(), cols);
          for (std::int64_t mi = 0; mi < mg; ++mi) {
            const float bias = t.bias ? t.bias[g * mg + mi] : 0.0f;
            float* plane = t.y + (b * t.m + g * mg + mi) * osize;
            for (std::int64_t h = h0; h < h1; ++h)
              for (std::int64_t i = 0; i < t.k_h; ++i)
                tile_row(col.data() + (mi * kk + i * t.k_w) * cols + (h - h0) * t.in_w, cols,
                         t.in_w, t.k_w, t.bias ? &bias : nullptr, plane + (h * t.k_h + i) * out_w);
          }
        }
      },
      1);
}

// A ConvTranspose's output sizes, with `pads` made what output_shape or auto_pad imply:
// output_shape's, or stride*(in-1) + output_padding + dilated kernel - pads.
std::vector<std::int64_t> transpose_out(const KernelContext& ctx,
                                        const std::vector<std::int64_t>& in,
                                        const std::vector<std::int64_t>& kernel,
                                        const std::vector<std::int64_t>& stride,
                                        const std::vector<std::int64_t>& dil,
                                        const std::vector<std::int64_t>& out_pad,
                                        std::vector<std::int64_t>& pads) {
  const std::size_t sd = kernel.size();
  const auto out_shape_attr = ctx.node.attr_ints("output_shape");
  const std::string auto_pad = ctx.node.attr_string("auto_pad", "NOTSET");
  std::vector<std::int64_t> out(sd);
  for (std::size_t i = 0; i < sd; ++i) {
    const auto full = stride[i] * (in[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1;
    std::int64_t target = -1;
    if (!out_shape_attr.empty())
      target = out_shape_attr[out_shape_attr.size() - sd + i];
    else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
      target = in[i] * stride[i];
    if (target >= 0) {
      const auto total = std::max<std::int64_t>(0, full - target);
      const bool upper = auto_pad != "SAME_LOWER";
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[i + sd] = total - pads[i];
      out[i] = target;
    } else {
      if (auto_pad == "VALID") pads[i] = pads[i + sd] = 0;
      out[i] = full - pads[i] - pads[i + sd];
    }
  }
  return out;
}

// ConvTranspose: W^T x (ops::gemm) scattered back by col2im (or written as tiles:
// transpose_tiles), to the output sizes of transpose_out.
template <class T>
void conv_transpose(KernelContext& ctx) {
  const auto [x, w] = conv_operands(ctx);
  const auto& xs = x.shape();
  const auto& ws = w.shape();
  const std::size_t sd = ws.size() - 2;
  const std::vector<std::int64_t> kernel(ws.begin() + 2, ws.end());
  const auto group = ctx.node.attr_int("group", 1);
  const auto n = xs[0], c = xs[1];
  if (group <= 0 || c % group || ws[0] != c) ctx.fail("channels of X and W do not match");
  const auto cg = c / group, mg = ws[1], m = mg * group;
  const auto stride = ctx.node.attr_ints("strides", std::vector<std::int64_t>(sd, 1));
  const auto dil = ctx.node.attr_ints("dilations", std::vector<std::int64_t>(sd, 1));
  const auto out_pad = ctx.node.attr_ints("output_padding", std::vector<std::int64_t>(sd, 0));
  auto pads = ctx.node.attr_ints("pads", std::vector<std::int64_t>(2 * sd, 0));
  if (stride.size() != sd || dil.size() != sd || out_pad.size() != sd || pads.size() != 2 * sd)
    ctx.fail("strides, dilations, output_padding or pads do not match the kernel rank");
  const std::vector<std::int64_t> in(xs.begin() + 2, xs.end());
  const auto out = transpose_out(ctx, in, kernel, stride, dil, out_pad, pads);
  Shape os(sd + 2);
  os[0] = n, os[1] = m;
  std::copy(out.begin(), out.end(), os.begin() + 2);
  if constexpr (std::is_same_v<T, float>)
    if (writes_tiles(kernel, stride, dil, pads, in, out) && !ctx.accumulate) {
      float* py = ctx.out_uninit(0, DType::float32, os).data<float>().data();
      return transpose_tiles(ctx, {.x = x.data<float>().data(),
                                   .w = w.data<float>().data(),
                                   .bias = bias_of<float>(ctx, m),
                                   .y = py,
                                   .n = n,
                                   .c = c,
                                   .m = m,
                                   .group = group,
                                   .in_h = in[0],
                                   .in_w = in[1],
                                   .k_h = kernel[0],
                                   .k_w = kernel[1]});
    }
  Tensor& y = ctx.out(0, carrier_dtype<T>(), os);
  const auto ksize = product(kernel), isize = product(in), osize = product(out);
  const Window scatter{.in = in,
                       .kernel = kernel,
                       .stride = stride,
                       .dilation = dil,
                       .pad_begin = {pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(sd)},
                       .pad_end = {},
                       .out = out};
  // The GEMM writes every element of col (zeros when there are no input channels): it is
  // not zero-filled first (9.8 MB per run in DBNet's head).
  const auto col_size = static_cast<std::size_t>(mg * ksize * isize);
  const std::unique_ptr<T[]> col(cg ? new T[col_size] : new T[col_size]());
  const T* px = x.data<T>().data();
  const T* pw = w.data<T>().data();
  T* py = y.data<T>().data();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t g = 0; g < group; ++g) {
      const auto rows = mg * ksize;
      if (rows && isize && cg)
        gemm(ctx, true, false, rows, isize, cg, 1.0f, pw + g * cg * rows, rows,
             px + (b * c + g * cg) * isize, isize, 0.0f, col.get(), isize);
      // The output planes on the run's threads, each scattered as on one.
      if (osize == 0) continue;
      const auto plane_size = static_cast<std::size_t>(osize);
      detail::parallel_for(
          static_cast<std::size_t>(mg) * plane_size, ctx.threads,
          [&](std::size_t e0, std::size_t e1) {
            for (auto mi = static_cast<std::int64_t>(e0 / plane_size);
                 mi < static_cast<std::int64_t>(e1 / plane_size); ++mi) {
              T* plane = py + (b * m + g * mg + mi) * osize;
              if (sd == 2)
                col2im_2d(col.get() + mi * ksize * isize, scatter, plane);
              else
                col2im_nd(col.get() + mi * ksize * isize, scatter, plane);
            }
          },
          plane_size);
    }
  add_bias(ctx, py, n, m, osize);
}

}  // namespace

void register_conv(Registry& r) {
  r.add("ConvTranspose", carried<conv_transpose<float>, conv_transpose<double>>,
        {.degree = Degree::product});
  r.add("Conv", carried<conv<float>, conv<double>>,
        {.degree = Degree::product, .rounds_weight = true, .applies_epilogue = true});
  r.add("MaxPool", carried<pool<float, true>, pool<double, true>>, {.degree = Degree::same});
  r.add("AveragePool", carried<pool<float, false>, pool<double, false>>, {.degree = Degree::same});
  r.add("GlobalMaxPool", carried<global_pool<float, true>, global_pool<double, true>>,
        {.degree = Degree::same});
  r.add("GlobalAveragePool", carried<global_pool<float, false>, global_pool<double, false>>,
        {.degree = Degree::same});
}

}  // namespace fpguard::ops
