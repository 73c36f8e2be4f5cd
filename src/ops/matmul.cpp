// MatMul and Gemm on oneDNN's matmul primitive (row-major, float32 accumulation) or, on float64
// carriers, the experiments layer's float64 FMA GEMM; or on the exact low-precision
// accumulation model when the node asks for it (KernelContext::accumulate).
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "core/parallel.hpp"
#include "experiments/kernels.hpp"
#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/round.hpp"
#include "ops/gemv.hpp"
#include "ops/ops.hpp"

// libgomp's, which oneDNN uses for its threads (declared here: no -fopenmp needed).
extern "C" void omp_set_num_threads(int);

namespace fpguard::ops {

void set_blas_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

namespace {

// The low-precision accumulation model: the products of the (already rounded) inputs
// summed with every partial sum rounded into the format, in the given order (the GEMM
// emulation of the experiments layer); alpha and beta C applied afterwards, as an
// epilogue does.
template <class T>
void gemm_emulated(const KernelContext& ctx, bool ta, bool tb, std::int64_t m, std::int64_t n,
                   std::int64_t k, T alpha, const T* a, std::int64_t lda, const T* b,
                   std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  const auto um = static_cast<std::size_t>(m), un = static_cast<std::size_t>(n),
             uk = static_cast<std::size_t>(k);
  std::vector<double> da(um * uk), db(uk * un), dc(um * un);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < k; ++j)
      da[static_cast<std::size_t>(i * k + j)] = ta ? a[j * lda + i] : a[i * lda + j];
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      db[static_cast<std::size_t>(i * n + j)] = tb ? b[j * ldb + i] : b[i * ldb + j];
  try {
    gemm_accumulate(da, db, dc, m, k, n, *ctx.accumulate, ctx.accumulation, ctx.threads);
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      T& out = c[i * ldc + j];
      const T r = static_cast<T>(dc[static_cast<std::size_t>(i * n + j)]);
      out = beta == 0 ? alpha * r : alpha * r + beta * out;
    }
}

template <class T>
bool gemm_special(const KernelContext& ctx, bool ta, bool tb, std::int64_t m, std::int64_t n,
                  std::int64_t k, T alpha, const T* a, std::int64_t lda, const T* b,
                  std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return true;
  if (ctx.accumulate && k > 0) {
    gemm_emulated(ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return true;
  }
  if (k == 0) {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0 ? T{0} : beta * c[i * ldc + j];
    return true;
  }
  return false;
}

}  // namespace

namespace {

// oneDNN's matmul primitive on the operands in place (strides express the transposes):
// its brgemm kernels read a transposed B as fast as a plain one, where dnnl_sgemm's 'T'
// path is 2-3x slower on many rows (every Gemm exported from a torch Linear has transB =
// 1; products of a few rows are the other way round: kFewRows in gemm()). The primitive is
// created per call, which oneDNN's primitive cache makes cheap after the first. Returns
// false when oneDNN offers no implementation for these strides.
bool matmul_primitive(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                      const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                      float beta, float* c, std::int64_t ldc) {
  using dnnl::memory;
  static const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  thread_local dnnl::stream strm(eng);
  const memory::desc ad({m, k}, memory::data_type::f32,
                        ta ? memory::dims{1, lda} : memory::dims{lda, 1});
  const memory::desc bd({k, n}, memory::data_type::f32,
                        tb ? memory::dims{1, ldb} : memory::dims{ldb, 1});
  const memory::desc cd({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1) attr.set_output_scales(0, {alpha});
  if (beta != 0) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  try {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, eng);
    const dnnl::matmul mm(pd);
    memory am(ad, eng, const_cast<float*>(a)), bm(bd, eng, const_cast<float*>(b)), cm(cd, eng, c);
    mm.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    strm.wait();
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

}  // namespace

namespace {

// A convolution as oneDNN runs it: the primitive, the weights in its layout (a copy
// reordered into it, or the caller's tensor when the layouts agree), and the reorders of
// X from NCHW into its source layout and of its destination back to NCHW (empty where the
// layouts agree), made with it rather than per call.
struct ConvPrepared {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward primitive;
  dnnl::memory weights;
  std::optional<dnnl::reorder> x_in, y_out;
};

const dnnl::engine& cpu_engine() {
  static const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& cpu_stream() {
  thread_local dnnl::stream strm(cpu_engine());
  return strm;
}

// Whether oneDNN runs its AVX-512 kernels on this CPU (the convolutions' layouts and the
// matmuls' padded B depend on it).
bool onednn_avx512() {
  static const bool avx512 =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  return avx512;
}

// The plain (ONNX) layouts of a convolution's operands: x, w, y, bias.
struct ConvDescs {
  dnnl::memory::desc x, w, y, b;
  dnnl::memory::dims strides, dil, pl, pr;
};

ConvDescs conv_descs(const ConvGeometry& g) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const std::size_t sd = g.kernel.size();
  const auto f32 = memory::data_type::f32;
  ConvDescs d;
  memory::dims xd{g.n, g.c}, yd{g.n, g.m}, wd, bd{g.m};
  if (g.group > 1)
    wd = {g.group, g.m / g.group, g.c / g.group};
  else
    wd = {g.m, g.c};
  for (std::size_t i = 0; i < sd; ++i) {
    xd.push_back(g.in[i]);
    yd.push_back(g.out[i]);
    wd.push_back(g.kernel[i]);
    d.strides.push_back(g.stride[i]);
    d.dil.push_back(g.dilation[i] - 1);
    d.pl.push_back(g.pad_begin[i]);
    // oneDNN wants the end padding the output size implies (ONNX's may be larger).
    d.pr.push_back((g.out[i] - 1) * g.stride[i] + (g.kernel[i] - 1) * g.dilation[i] + 1 - g.in[i] -
                   g.pad_begin[i]);
  }
  static constexpr tag act[] = {tag::ncw, tag::nchw, tag::ncdhw};
  static constexpr tag wts[] = {tag::oiw, tag::oihw, tag::oidhw};
  static constexpr tag gwts[] = {tag::goiw, tag::goihw, tag::goidhw};
  d.x = memory::desc(xd, f32, act[sd - 1]);
  d.y = memory::desc(yd, f32, act[sd - 1]);
  d.w = memory::desc(wd, f32, g.group > 1 ? gwts[sd - 1] : wts[sd - 1]);
  d.b = memory::desc(bd, f32, tag::x);
  return d;
}

// X's and Y's layouts for oneDNN's convolution: its choice (`any`: NHWC for its brgemm
// kernels), except on a CPU where oneDNN runs AVX-512 kernels, for 2-D convolutions:
// - larger kernels of one group over whole blocks of 16 input channels onto planes of at
//   least kLargePlane positions, whatever their output channels: the channel-blocked
//   layout nChw16c for both (oneDNN's jit kernel instead of its brgemm kernel on NHWC,
//   whose reorders transpose each channel's plane at a stride of the plane's size): the
//   U-Net's 3 x 3 layers on 256 x 256 and 128 x 128 planes 4-11% less time, DBNet's 96 ->
//   24 ones on 160 x 160 13%. On smaller planes it did not pay (ResNet-50's 56 x 56 to 7 x
//   7 layers 9-21% slower, the U-Net's 32 x 32 to 64 x 64 within 2%; bench/README.md,
//   session 22).
// - 1x1 or depthwise (group = C: those that reach oneDNN have output rows under 8,
//   direct_depthwise) over whole blocks of 16 input and output channels: nChw16c for
//   both. Its reorders from and to NCHW move whole 64-byte rows (NCHW <-> NHWC transposes
//   ResNet-50's 1024 and 2048 channels at a 4 KiB stride), and oneDNN's 1x1 and depthwise
//   kernels on it took ResNet-50's 14 x 14 and 7 x 7 1x1 layers and MobileNetV3's 7 x 7
//   ones 8-13% less time, its 7 x 7 depthwise layers 25%.
// - an image's few channels (at most 4; group 1) onto whole blocks of 16 output channels:
//   X as it is (NCHW, no reorder) and Y in nChw16c, oneDNN's kernel for first layers: the
//   stems of ResNet-50, MobileNetV3, DBNet, the U-Net and the CRNN (3 channels) took
//   14-31% less time.
// Other convolutions were slower blocked (three input channels in nChw16c fall to a
// reference kernel); AVX2 was not measured (bench/README.md, session 21).
constexpr std::int64_t kLargePlane = 128 * 128;

std::pair<dnnl::memory::format_tag, dnnl::memory::format_tag> activation_layouts(
    const ConvDescs& d) {
  using tag = dnnl::memory::format_tag;
  const auto w = d.w.dims(), x = d.x.dims(), y = d.y.dims();
  if (!onednn_avx512() || x.size() != 4) return {tag::any, tag::any};
  const bool pointwise = w.size() == 4 && w[2] == 1 && w[3] == 1;
  if (w.size() == 4 && !pointwise && x[1] % 16 == 0 && y[2] * y[3] >= kLargePlane)
    return {tag::nChw16c, tag::nChw16c};
  if (y[1] % 16 != 0) return {tag::any, tag::any};
  if (x[1] <= 4 && w.size() == 4) return {tag::nchw, tag::nChw16c};
  const bool depthwise = w.size() == 5 && w[0] == x[1] && w[2] == 1;  // (g, M/g, C/g, kh, kw)
  if (x[1] % 16 == 0 && (pointwise || depthwise)) return {tag::nChw16c, tag::nChw16c};
  return {tag::any, tag::any};
}

// The primitive for `g` in layouts of oneDNN's choosing (blocked, for its direct
// kernels; activation_layouts'), and `w` reordered into its weights layout (throws
// dnnl::error when oneDNN has no implementation).
std::shared_ptr<const ConvPrepared> prepare_conv(const ConvDescs& d, const float* w, bool bias) {
  using dnnl::memory;
  const auto& eng = cpu_engine();
  const auto f32 = memory::data_type::f32;
  const auto make = [&](std::pair<memory::format_tag, memory::format_tag> act) {
    const memory::desc x_any(d.x.dims(), f32, act.first), y_any(d.y.dims(), f32, act.second),
        w_any(d.w.dims(), f32, memory::format_tag::any);
    const dnnl::convolution_forward::desc cd(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x_any, w_any,
        bias ? d.b : memory::desc(), y_any, d.strides, d.dil, d.pl, d.pr);
    return dnnl::convolution_forward::primitive_desc(cd, eng);
  };
  auto pd = make(activation_layouts(d));
  // (Where those layouts have only oneDNN's reference kernel, its own choice.)
  if (std::string_view(pd.impl_info_str()).starts_with("ref"))
    pd = make({memory::format_tag::any, memory::format_tag::any});
  memory wm(d.w, eng, const_cast<float*>(w));
  if (pd.weights_desc() != d.w) {
    memory r(pd.weights_desc(), eng);
    dnnl::reorder(wm, r).execute(cpu_stream(), wm, r);
    cpu_stream().wait();
    wm = r;
  }
  dnnl::convolution_forward prim(pd);
  std::optional<dnnl::reorder> x_in, y_out;
  if (pd.src_desc() != d.x)
    x_in = dnnl::reorder(dnnl::reorder::primitive_desc(eng, d.x, eng, pd.src_desc()));
  if (pd.dst_desc() != d.y)
    y_out = dnnl::reorder(dnnl::reorder::primitive_desc(eng, pd.dst_desc(), eng, d.y));
  return std::make_shared<const ConvPrepared>(ConvPrepared{.pd = std::move(pd),
                                                           .primitive = std::move(prim),
                                                           .weights = std::move(wm),
                                                           .x_in = std::move(x_in),
                                                           .y_out = std::move(y_out)});
}

// Prepared weights `w` (in oneDNN's layout) rounded as `u` says, into a new buffer.
// Rounding is element-wise, so rounding the reordered copy gives the reorder of the
// rounded weights, and a blocked layout's zero padding stays zero.
dnnl::memory rounded_weights(const dnnl::memory& w, const KernelContext::UnroundedWeight& u,
                             int threads) {
  const dnnl::memory r(w.get_desc(), cpu_engine());
  const std::size_t n = w.get_desc().get_size() / sizeof(float);
  RoundOptions o = u.options;
  o.threads = threads;
  round(std::span<const float>(static_cast<const float*>(w.get_data_handle()), n),
        std::span<float>(static_cast<float*>(r.get_data_handle()), n), u.format, o);
  return r;
}

// A stable weight's address as PreparedCache keys spell it.
std::string address_key(const void* p) {
  char s[32];
  std::snprintf(s, sizeof s, "%p", p);
  return s;
}

std::string dims_key(const dnnl::memory::dims& d) {
  std::string k;
  for (const auto v : d) k += std::to_string(v) + ",";
  return k;
}

}  // namespace

namespace {

// The primitive for `d` and the weights it runs with: W (`w`) reordered into its layout
// and, when it arrived unrounded (KernelContext::unrounded), rounded. A weight that keeps
// its address (an initializer) is prepared once per executor cache: keyed by its address
// and the input's shape (the node fixes the rest), kept rounded once per format, or kept
// in float32 (shared with float32 runs) and rounded per run (RunOptions::
// prepare_in_float32), the latest rounding kept for the node's next run in another
// executor.
std::pair<std::shared_ptr<const ConvPrepared>, dnnl::memory> prepared_conv(const KernelContext& ctx,
                                                                           const ConvDescs& d,
                                                                           const Tensor& w,
                                                                           bool bias) {
  const KernelContext::UnroundedWeight* u = ctx.unrounded ? &*ctx.unrounded : nullptr;
  if (!ctx.prepared || !ctx.stable(1)) {
    auto p = prepare_conv(d, w.data<float>().data(), bias);
    return {p, u ? rounded_weights(p->weights, *u, ctx.threads) : p->weights};
  }
  // The primitive keeps the thread count it was made for (oneDNN's jit kernels split
  // their work when they are made).
  const std::string key = "conv|" + address_key(w.address()) + "|" + dims_key(d.x.dims()) + "t" +
                          std::to_string(omp_get_max_threads());
  const bool keep_rounded = u && !u->keep_float32;
  auto p = ctx.prepared->get<ConvPrepared>(ctx.node, keep_rounded ? key + "|" + u->key : key, [&] {
    auto made = prepare_conv(d, w.data<float>().data(), bias);
    // Runs read the reordered copy from now on: a weight in a file's memory map (or a
    // FileCopy) gives its pages back (read again, they come back from the file).
    if (made->weights.get_data_handle() != w.address()) w.release_pages();
    if (!keep_rounded) return made;
    return std::make_shared<const ConvPrepared>(
        ConvPrepared{.pd = made->pd,
                     .primitive = made->primitive,
                     .weights = rounded_weights(made->weights, *u, ctx.threads),
                     .x_in = made->x_in,
                     .y_out = made->y_out});
  });
  if (!u || keep_rounded) return {p, p->weights};
  const auto r = ctx.prepared->latest<dnnl::memory>(ctx.node, key + "|" + u->key, [&] {
    return std::make_shared<const dnnl::memory>(rounded_weights(p->weights, *u, ctx.threads));
  });
  return {p, *r};
}

}  // namespace

bool conv_primitive(const KernelContext& ctx, const ConvGeometry& g, const float* x,
                    const Tensor& w, const float* bias, float* y) {
  if (ctx.accumulate) return false;  // the accumulation model goes through gemm()
  const std::size_t sd = g.kernel.size();
  if (sd < 1 || sd > 3) return false;
  using dnnl::memory;
  const auto& eng = cpu_engine();
  auto& strm = cpu_stream();
  const ConvDescs d = conv_descs(g);
  try {
    const auto [prep, weights] = prepared_conv(ctx, d, w, bias != nullptr);
    const auto& pd = prep->pd;
    memory xm(d.x, eng, const_cast<float*>(x)), ym(d.y, eng, y);
    memory xr = prep->x_in ? memory(pd.src_desc(), eng,
                                    thread_scratch(Scratch::conv_x, pd.src_desc().get_size()))
                           : xm;
    memory yr = prep->y_out ? memory(pd.dst_desc(), eng,
                                     thread_scratch(Scratch::conv_y, pd.dst_desc().get_size()))
                            : ym;
    // A reorder smaller than parallel_for's threshold runs on this thread alone.
    const auto reorder = [&](const dnnl::reorder& r, memory& from, memory& to) {
      const std::size_t n = from.get_desc().get_size() / sizeof(float);
      const detail::PoolThreads pool(n < detail::parallel_threshold() ? 1 : omp_get_max_threads());
      r.execute(strm, from, to);
    };
    if (prep->x_in) reorder(*prep->x_in, xm, xr);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, xr}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, yr}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(d.b, eng, const_cast<float*>(bias)));
    prep->primitive.execute(strm, args);
    if (ctx.epilogue) {
      // A fused element-wise op, on the destination in the primitive's layout (its
      // padding included: reorders never read it) while it is still in the cache.
      strm.wait();
      (*ctx.epilogue)(static_cast<float*>(yr.get_data_handle()),
                      pd.dst_desc().get_size() / sizeof(float), omp_get_max_threads());
    }
    if (prep->y_out) reorder(*prep->y_out, yr, ym);
    strm.wait();
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

// Products of at most this many rows of A against a transposed B (a recurrent step's, a
// classifier's Linear at batch 1; A not transposed, the measured case) take dnnl_sgemm: on
// AVX-512 it runs them 2-4.5x faster than the matmul primitive's brgemm, whose blocking is
// made for many rows, and with oneDNN held to AVX2 no slower; at 16 rows the primitive is
// 2x faster (BM_small_gemm in bench/gemm_bench.cpp; bench/README.md, "Products of a few
// rows"). Products without transposes (1x1 convolutions on NCHW, MatMuls of weights
// [K, N]) take dnnl_sgemm at any size: on AVX-512 as fast or faster than the primitive on
// ResNet-50's, MobileNetV3's and BERT's shapes (BERT's 128 x 768 x 3072 -20%;
// BM_small_gemm/plain_*; bench/README.md, session 27); on AVX2 the primitive runs that sgemm.
// Both gave the same bits on 1 and 2 threads on those shapes (checked: session 27).
constexpr std::int64_t kFewRows = 8;

// One row of A against a transposed B (n rows of k): ops::gemv's kernel, B's rows split
// across the threads where there are enough of them to stream.
void row_gemv(const KernelContext& ctx, std::int64_t n, std::int64_t k, float alpha, const float* a,
              const float* b, std::int64_t ldb, float beta, float* c) {
  const int threads =
      detail::resolve_threads(ctx.threads > 1 ? 0 : 1, static_cast<std::size_t>(n * k));
  detail::parallel_for(
      static_cast<std::size_t>(n), threads,
      [&](std::size_t j0, std::size_t j1) {
        gemv::rows(a, b, ldb, k, alpha, beta, c, static_cast<std::int64_t>(j0),
                   static_cast<std::int64_t>(j1));
      },
      16);
}

void gemm(const KernelContext& ctx, bool ta, bool tb, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
          std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (gemm_special(ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
  if ((ta || (tb && m > kFewRows)) &&
      matmul_primitive(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
    return;
  if (m == 1 && !ta && tb) return row_gemv(ctx, n, k, alpha, a, b, ldb, beta, c);
  const auto st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (st != dnnl_success) ctx.fail("oneDNN sgemm failed (status " + std::to_string(st) + ")");
}

// The float64 truth: the experiments layer's FMA kernel (one fused chain per element, the
// truth of gemm-error) on contiguous copies of op(A) and op(B), then the epilogue.
void gemm(const KernelContext& ctx, bool ta, bool tb, std::int64_t m, std::int64_t n,
          std::int64_t k, double alpha, const double* a, std::int64_t lda, const double* b,
          std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  if (gemm_special(ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
  const auto um = static_cast<std::size_t>(m), un = static_cast<std::size_t>(n),
             uk = static_cast<std::size_t>(k);
  std::vector<double> at, bt, prod(um * un);
  if (ta) {
    at.resize(um * uk);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < k; ++j) at[static_cast<std::size_t>(i * k + j)] = a[j * lda + i];
    a = at.data(), lda = k;
  }
  if (tb) {
    bt.resize(uk * un);
    for (std::int64_t i = 0; i < k; ++i)
      for (std::int64_t j = 0; j < n; ++j) bt[static_cast<std::size_t>(i * n + j)] = b[j * ldb + i];
    b = bt.data(), ldb = n;
  }
  // Rows of C split across threads (each element is one FMA chain: the split changes no
  // bit), when there is enough work.
  const int threads = um * un * uk >= (std::size_t{1} << 20) ? std::max(1, ctx.threads) : 1;
  detail::parallel_for(
      um, threads,
      [&](std::size_t r0, std::size_t r1) {
        detail::gemm_fma(a + r0 * static_cast<std::size_t>(lda), static_cast<std::size_t>(lda), b,
                         static_cast<std::size_t>(ldb), prod.data() + r0 * un, un, r1 - r0, un, uk,
                         false);
      },
      1);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double& out = c[i * ldc + j];
      const double r = prod[static_cast<std::size_t>(i * n + j)];
      out = beta == 0 ? alpha * r : alpha * r + beta * out;
    }
}

namespace {

// How many times `ctx.node` asked for `key` before, through one PreparedCache (the reads
// of a weight: unrounded, KernelContext::unrounded, or in place).
unsigned reads_before(const KernelContext& ctx, const std::string& key) {
  return ctx.prepared->reads(ctx.node, key);
}

// Input 1 (B) as the node's format has it, held for the call. A weight handed over
// unrounded (an initializer read in place, on float32 carriers) is rounded in its first
// run into a buffer of the call rather than into a copy kept for the executor's life: a
// single run then writes no fresh pages for its weights (the heap reuses the previous
// call's buffer), which was most of an emulated run's extra time on the transformers.
// check's local and emulated runs of the node share that rounding (the latest one is
// kept). Later runs read the WeightCache's rounded copy, as every run did before.
std::shared_ptr<const Tensor> operand_b(KernelContext& ctx) {
  const auto alias = [&] {
    return std::shared_ptr<const Tensor>(std::shared_ptr<const Tensor>(), &ctx.in(1));
  };
  if (!ctx.unrounded) return alias();
  const auto& u = *ctx.unrounded;
  const Tensor& w = ctx.in(1);
  const auto make = [&] {
    auto r = std::make_shared<Tensor>(Tensor::uninitialized(DType::float32, w.shape()));
    RoundOptions o = u.options;
    o.threads = ctx.threads;
    round(w.data<float>(), r->data<float>(), u.format, o);
    return std::shared_ptr<const Tensor>(std::move(r));
  };
  if (!ctx.prepared) return make();
  const std::string key = "matmul|" + address_key(w.address()) + "|" + u.key;
  const unsigned first_run_reads = u.keep_float32 ? 2 : 1;  // check: local and emulated
  if (reads_before(ctx, key) >= first_run_reads) {
    ctx.round_weight();
    return alias();
  }
  return u.keep_float32 ? ctx.prepared->latest<Tensor>(ctx.node, key, make) : make();
}

// B (k x n, row-major) as the product reads it: `data`, its rows `ld` apart, from a copy
// that `held` keeps.
struct PaddedRows {
  const float* data;
  std::int64_t ld;
  std::shared_ptr<const Tensor> held;
};

// oneDNN 2.6's AVX2 sgemm runs a product with few rows (1/m + 1/n >= 0.0038: m up to ~260
// for n = 3072) on its no-copy kernels, which read B in place. When B's rows are a multiple
// of 512 bytes apart, the rows they read together fall into the same cache sets: a BERT
// FFN's 128 x 768 x 3072 on a page-aligned B (a weight in external data) took 7.1 ms
// against 3.3 with 64 bytes more between rows (bench/README.md). The stride moves
// addresses only: the bits are the same. (With AVX-512, oneDNN's matmul runs brgemm
// kernels, which copy B.)
constexpr std::int64_t kRowPadding = 16;
bool reads_b_in_place(std::int64_t m, std::int64_t n) {
  return !onednn_avx512() && 1.0 / static_cast<double>(m) + 1.0 / static_cast<double>(n) >= 0.0038;
}

// `count` floats for a copy a kernel keeps, 64-byte aligned (the cache line: the no-copy
// kernels' speed depends on B's alignment too).
std::pair<float*, std::shared_ptr<const void>> kept_floats(std::size_t count) {
  void* p = std::aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  return {static_cast<float*>(p), std::shared_ptr<const void>(p, std::free)};
}

// Input 1 (B, k x n) for a product of m rows that reads B in place, for a weight whose rows
// conflict so, where a copy at a padded stride costs no memory: a weight the node rounds
// itself (KernelContext::unrounded: the copy, rounded, takes the place of the WeightCache's),
// or a float32 weight in a file's map (whose pages are given back). From the node's second
// call on: a single run copies nothing. One copy per weight and rounding, shared by the
// nodes that read it. nullopt: read B as operand_b() has it. Not for check's executors
// (prepare_in_float32), which read the float32 weights in turn.
std::optional<PaddedRows> padded_rows(KernelContext& ctx, std::int64_t m, std::int64_t k,
                                      std::int64_t n) {
  const Tensor& w = ctx.in(1);
  const KernelContext::UnroundedWeight* u = ctx.unrounded ? &*ctx.unrounded : nullptr;
  if (!ctx.prepared || !ctx.stable(1) || ctx.prepare_in_float32 || (!u && !w.maps_file()) ||
      w.dtype() != DType::float32 || n % 128 != 0 || k * n < (1 << 16) || m <= 0 ||
      !reads_b_in_place(m, n))
    return std::nullopt;
  const std::string key = "matmul-rows|" + address_key(w.address()) + (u ? "|" + u->key : "");
  if (reads_before(ctx, key + "|reads") == 0) return std::nullopt;
  const std::int64_t ld = n + kRowPadding;
  // One copy per weight, whichever nodes read it (ALBERT's layers share theirs): the key
  // names the weight and its rounding, so it is kept under no node of its own.
  static const model::Node any_node{};
  auto padded = ctx.prepared->get<Tensor>(any_node, key, [&] {
    const auto un = static_cast<std::size_t>(n), uld = static_cast<std::size_t>(ld);
    const auto [to, owner] = kept_floats(static_cast<std::size_t>(k) * uld);
    const auto from = w.data<float>();
    RoundOptions o = u ? u->options : RoundOptions{};
    o.threads = 1;
    detail::parallel_for(
        static_cast<std::size_t>(k), ctx.threads,
        [&, to = to](std::size_t r0, std::size_t r1) {
          for (std::size_t r = r0; r < r1; ++r) {
            if (u)
              round(from.subspan(r * un, un), std::span<float>(to + r * uld, un), u->format, o);
            else
              std::memcpy(to + r * uld, &from[r * un], un * sizeof(float));
          }
        },
        1);
    w.release_pages();
    return std::make_shared<const Tensor>(
        Tensor::view(DType::float32, {k, ld}, reinterpret_cast<const std::byte*>(to), owner));
  });
  return PaddedRows{.data = padded->data<float>().data(), .ld = ld, .held = padded};
}

template <class T>
void matmul_product(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  require_float(ctx, a, "A");
  require_float(ctx, ctx.in(1), "B");
  Shape sa = a.shape(), sb = ctx.in(1).shape();  // (as rounded: the same)
  if (sa.empty() || sb.empty()) ctx.fail("MatMul inputs must have rank >= 1");
  const bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  const std::int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  if (sb[sb.size() - 2] != k)
    ctx.fail("shapes " + shape_str(a.shape()) + " and " + shape_str(ctx.in(1).shape()) +
             " cannot be multiplied");
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const Shape batch = broadcast_shapes(ctx, ba, bb);
  Shape out_shape = batch;
  if (!va) out_shape.push_back(m);
  if (!vb) out_shape.push_back(n);
  Tensor& out = ctx.out_uninit(0, carrier_dtype<T>(), out_shape);
  const auto nb = product(batch);
  const auto stra = broadcast_strides(ba, batch), strb = broadcast_strides(bb, batch);
  const T* pa = a.template data<T>().data();
  T* po = out.template data<T>().data();
  const bool one_b = product(bb) == 1 && ba == batch;
  if constexpr (std::is_same_v<T, float>) {
    if (const auto rows = one_b ? padded_rows(ctx, nb * m, k, n) : std::nullopt) {
      gemm(ctx, false, false, nb * m, n, k, T{1}, pa, k, rows->data, rows->ld, T{0}, po, n);
      return;
    }
  }
  const auto held_b = operand_b(ctx);
  const T* pb = held_b->template data<T>().data();
  if (one_b) {
    // One B for every batch (a Linear over [seq, batch, features]): the batches are the
    // rows of one product, so B is read once instead of once per batch (a CRNN's
    // classifier, 80 products of one row each, ran at memory speed: 153 -> 8 ms).
    gemm(ctx, false, false, nb * m, n, k, T{1}, pa, k, pb, n, T{0}, po, n);
    return;
  }
  for (std::int64_t i = 0; i < nb; ++i) {
    std::int64_t ia = 0, ib = 0, rem = i;
    for (std::size_t d = batch.size(); d-- > 0;) {
      const auto idx = rem % batch[d];
      rem /= batch[d];
      ia += idx * stra[d], ib += idx * strb[d];
    }
    gemm(ctx, false, false, m, n, k, T{1}, pa + ia * m * k, k, pb + ib * k * n, n, T{0},
         po + i * m * n, n);
  }
}

// MatMul, then the element-wise op fused into it (KernelContext::epilogue: the executor
// fuses an activation, or an Add of its bias, into a MatMul; the Add after the kernel).
template <class T>
void matmul(KernelContext& ctx) {
  matmul_product<T>(ctx);
  if constexpr (std::is_same_v<T, float>)
    if (ctx.epilogue) {
      Tensor& out = ctx.outputs.at(0);
      (*ctx.epilogue)(out.data<float>().data(), out.size(), ctx.threads);
    }
}

template <class T>
void gemm_k(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);  // (as rounded: the same shape)
  require_float(ctx, a, "A");
  require_float(ctx, b, "B");
  if (a.shape().size() != 2 || b.shape().size() != 2) ctx.fail("Gemm inputs must be 2-D");
  const bool ta = ctx.node.attr_int("transA", 0) != 0, tb = ctx.node.attr_int("transB", 0) != 0;
  const T alpha = ctx.node.attr_float("alpha", 1.0f), beta = ctx.node.attr_float("beta", 1.0f);
  const auto m = ta ? a.shape()[1] : a.shape()[0], k = ta ? a.shape()[0] : a.shape()[1];
  const auto kb = tb ? b.shape()[1] : b.shape()[0], n = tb ? b.shape()[0] : b.shape()[1];
  if (k != kb)
    ctx.fail("shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) +
             " cannot be multiplied (transA=" + std::to_string(ta) +
             ", transB=" + std::to_string(tb) + ")");
  Tensor& out = ctx.out_uninit(0, carrier_dtype<T>(), {m, n});
  T* po = out.template data<T>().data();
  T use_beta = 0;
  if (ctx.has(2) && beta != 0) {
    const Tensor& c = ctx.in(2);
    require_float(ctx, c, "C");
    const Shape bc = broadcast_shapes(ctx, c.shape(), {m, n});
    if (bc != Shape{m, n})
      ctx.fail("C of shape " + shape_str(c.shape()) + " does not broadcast to " +
               shape_str({m, n}));
    const auto st = broadcast_strides(c.shape(), {m, n});
    auto pc = c.template data<T>();
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) po[i * n + j] = pc[i * st[0] + j * st[1]];
    use_beta = beta;
  }
  const T* pa = a.template data<T>().data();
  if constexpr (std::is_same_v<T, float>) {
    // (the no-copy kernels read a transposed B without conflicts)
    if (const auto rows = tb ? std::nullopt : padded_rows(ctx, m, k, n)) {
      gemm(ctx, ta, tb, m, n, k, alpha, pa, a.shape()[1], rows->data, rows->ld, use_beta, po, n);
      return;
    }
  }
  const auto held_b = operand_b(ctx);
  gemm(ctx, ta, tb, m, n, k, alpha, pa, a.shape()[1], held_b->template data<T>().data(),
       held_b->shape()[1], use_beta, po, n);
}

}  // namespace

void register_matmul(Registry& r) {
  r.add("MatMul", carried<matmul<float>, matmul<double>>,
        {.degree = Degree::product, .rounds_weight = true, .applies_epilogue = true});
  r.add("Gemm", carried<gemm_k<float>, gemm_k<double>>,
        {.degree = Degree::product, .rounds_weight = true});
}

}  // namespace fpguard::ops
