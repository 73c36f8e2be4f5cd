// DFT (opsets 17 and 20) and STFT (17): complex transforms of any length in double, on
// kissfft's header-only C++ template (Debian's libkissfft-dev; mixed radix). Real signals
// end in a dimension of 1, complex ones in 2 (real, imaginary); outputs are complex.
#include <complex>
#include <kissfft/kissfft.hh>

#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

using cpx = std::complex<double>;

// The values of a [..., 1 | 2] tensor as complex numbers (one per leading index).
std::vector<cpx> complex_values(const KernelContext& ctx, const Tensor& t, const char* what) {
  require_float(ctx, t, what);
  const auto& s = t.shape();
  if (s.size() < 2 || (s.back() != 1 && s.back() != 2))
    ctx.fail(std::string(what) + " must have rank >= 2 and end in a dimension of 1 (real) or " +
             "2 (complex), got " + shape_str(s));
  std::vector<double> v(t.size());
  to_double(t, v);
  const bool complex = s.back() == 2;
  std::vector<cpx> c(v.size() / static_cast<std::size_t>(s.back()));
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = complex ? cpx(v[2 * i], v[2 * i + 1]) : v[i];
  return c;
}

// A scalar (or one-element) integer input.
std::int64_t scalar_int(const KernelContext& ctx, std::size_t i, const char* what) {
  const auto v = int_values(ctx, ctx.in(i));
  if (v.size() != 1)
    ctx.fail(std::string(what) + " must be a scalar, got " + std::to_string(v.size()) + " values");
  return v[0];
}

// The result in the carrier (the transforms compute in double either way).
Tensor complex_tensor(const KernelContext& ctx, const std::vector<cpx>& c, Shape shape) {
  shape.push_back(2);
  Tensor d(DType::float64, shape);
  auto p = d.data<double>();
  for (std::size_t i = 0; i < c.size(); ++i) {
    p[2 * i] = c[i].real();
    p[2 * i + 1] = c[i].imag();
  }
  return exec::convert(d, ctx.carrier);
}

// y[k] = sum_n x[n] e^(-2 pi j k n / N) (inverse: e^(+...) / N) along `axis`, the signal
// padded with zeros or truncated to dft_length; onesided keeps bins 0 .. N/2.
void dft(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto c = complex_values(ctx, x, "input");
  const Shape& s = x.shape();
  const auto r = static_cast<std::int64_t>(s.size());
  std::int64_t axis = ctx.opset >= 20 ? (ctx.has(2) ? scalar_int(ctx, 2, "axis") : -2)
                                      : ctx.node.attr_int("axis", 1);
  if (axis < -r || axis > r - 2 || axis == -1)
    ctx.fail("axis " + std::to_string(axis) + " is not a signal axis of rank " + std::to_string(r) +
             " input (the last dimension holds real/imaginary parts)");
  if (axis < 0) axis += r;
  const std::int64_t n = s[static_cast<std::size_t>(axis)];
  const std::int64_t len = ctx.has(1) && ctx.in(1).size() ? scalar_int(ctx, 1, "dft_length") : n;
  if (len <= 0) ctx.fail("dft_length must be positive, got " + std::to_string(len));
  const bool inverse = ctx.node.attr_int("inverse", 0) != 0;
  const bool onesided = ctx.node.attr_int("onesided", 0) != 0;
  const std::int64_t bins = onesided ? len / 2 + 1 : len;
  const std::int64_t outer = product(s, 0, static_cast<std::size_t>(axis));
  const std::int64_t inner = product(s, static_cast<std::size_t>(axis) + 1, s.size() - 1);
  Shape out_shape(s.begin(), s.end() - 1);
  out_shape[static_cast<std::size_t>(axis)] = bins;
  std::vector<cpx> y(static_cast<std::size_t>(outer * bins * inner));
  const kissfft<double> fft(static_cast<std::size_t>(len), inverse);
  std::vector<cpx> in(static_cast<std::size_t>(len)), out(in.size());
  const double scale = inverse ? 1.0 / static_cast<double>(len) : 1.0;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      for (std::int64_t k = 0; k < len; ++k)
        in[static_cast<std::size_t>(k)] =
            k < n ? c[static_cast<std::size_t>((o * n + k) * inner + i)] : cpx(0, 0);
      fft.transform(in.data(), out.data());
      for (std::int64_t k = 0; k < bins; ++k)
        y[static_cast<std::size_t>((o * bins + k) * inner + i)] =
            out[static_cast<std::size_t>(k)] * scale;
    }
  ctx.outputs[0] = complex_tensor(ctx, y, out_shape);
}

// Frames of frame_length values every frame_step along the signal, each multiplied by the
// window and transformed: output [batch, frames, bins, 2].
void stft(KernelContext& ctx) {
  const Tensor& sig = ctx.in(0);
  const auto c = complex_values(ctx, sig, "signal");
  const Shape& s = sig.shape();
  if (s.size() != 3) ctx.fail("signal must be [batch, length, 1 | 2], got " + shape_str(s));
  const std::int64_t batch = s[0], length = s[1];
  const std::int64_t step = scalar_int(ctx, 1, "frame_step");
  if (step <= 0) ctx.fail("frame_step must be positive, got " + std::to_string(step));
  std::vector<double> window;
  if (ctx.has(2)) {
    const Tensor& w = ctx.in(2);
    require_float(ctx, w, "window");
    if (w.shape().size() != 1) ctx.fail("window must have rank 1, got " + shape_str(w.shape()));
    window.resize(w.size());
    to_double(w, window);
  }
  std::int64_t fl = 0;
  if (ctx.has(3))
    fl = scalar_int(ctx, 3, "frame_length");
  else if (ctx.has(2))
    fl = static_cast<std::int64_t>(window.size());
  else
    ctx.fail("needs a window or a frame_length");
  if (fl <= 0) ctx.fail("frame_length must be positive, got " + std::to_string(fl));
  if (!window.empty() && static_cast<std::int64_t>(window.size()) != fl)
    ctx.fail("window has " + std::to_string(window.size()) + " values but frame_length is " +
             std::to_string(fl));
  if (fl > length)
    ctx.fail("frame_length " + std::to_string(fl) + " is longer than the signal (" +
             std::to_string(length) + ")");
  const bool onesided = ctx.node.attr_int("onesided", 1) != 0;
  if (onesided && s[2] == 2)
    ctx.fail("onesided = 1 needs a real signal (a complex one has no conjugate symmetry)");
  const std::int64_t frames = (length - fl) / step + 1;
  const std::int64_t bins = onesided ? fl / 2 + 1 : fl;
  std::vector<cpx> y(static_cast<std::size_t>(batch * frames * bins));
  const kissfft<double> fft(static_cast<std::size_t>(fl), false);
  std::vector<cpx> in(static_cast<std::size_t>(fl)), out(in.size());
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t f = 0; f < frames; ++f) {
      for (std::int64_t k = 0; k < fl; ++k) {
        const cpx v = c[static_cast<std::size_t>(b * length + f * step + k)];
        in[static_cast<std::size_t>(k)] =
            window.empty() ? v : v * window[static_cast<std::size_t>(k)];
      }
      fft.transform(in.data(), out.data());
      for (std::int64_t k = 0; k < bins; ++k)
        y[static_cast<std::size_t>((b * frames + f) * bins + k)] = out[static_cast<std::size_t>(k)];
    }
  ctx.outputs[0] = complex_tensor(ctx, y, {batch, frames, bins});
}

}  // namespace

void register_spectral(Registry& r) {
  r.add("DFT", dft, {.min_opset = 17});
  r.add("STFT", stft, {.min_opset = 17});
}

}  // namespace fpguard::ops
