// RNN, GRU and LSTM (forward, reverse, bidirectional; layout 0/1; sequence_lens; clip;
// activations with alpha/beta; GRU linear_before_reset; LSTM peepholes and input_forget).
// The input products of every step are one gemm per direction before the steps (they do
// not depend on the state); the recurrent product is one gemm per step; the gates are
// plain loops.
#include <cmath>
#include <functional>

#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

template <class T>
using Act = std::function<T(T)>;

template <class T>
std::vector<Act<T>> activations(const KernelContext& ctx, const std::vector<std::string>& defaults,
                                std::int64_t dirs) {
  std::vector<std::string> names;
  const auto* a = ctx.node.find_attr("activations");
  if (a) names = std::get<std::vector<std::string>>(a->value);
  if (names.empty())
    for (std::int64_t d = 0; d < dirs; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  const auto alphas = ctx.node.attr_floats("activation_alpha"),
             betas = ctx.node.attr_floats("activation_beta");
  std::size_t ia = 0, ib = 0;
  std::vector<Act<T>> out;
  for (const auto& n : names) {
    auto alpha = [&](float def) { return ia < alphas.size() ? alphas[ia++] : def; };
    auto beta = [&](float def) { return ib < betas.size() ? betas[ib++] : def; };
    if (n == "Sigmoid")
      out.push_back([](T x) { return 1.0f / (1.0f + std::exp(-x)); });
    else if (n == "Tanh")
      out.push_back([](T x) { return std::tanh(x); });
    else if (n == "Relu")
      out.push_back([](T x) { return std::max(x, T{0}); });
    else if (n == "Softsign")
      out.push_back([](T x) { return x / (1 + std::fabs(x)); });
    else if (n == "Softplus")
      out.push_back([](T x) { return std::log1p(std::exp(x)); });
    else if (n == "LeakyRelu") {
      const float al = alpha(0.01f);
      out.push_back([al](T x) { return x >= 0 ? x : al * x; });
    } else if (n == "ThresholdedRelu") {
      const float al = alpha(1.0f);
      out.push_back([al](T x) { return x > al ? x : T{0}; });
    } else if (n == "Elu") {
      const float al = alpha(1.0f);
      out.push_back([al](T x) { return x >= 0 ? x : al * (std::exp(x) - 1); });
    } else if (n == "HardSigmoid") {
      const float al = alpha(0.2f), be = beta(0.5f);
      out.push_back([al, be](T x) { return std::clamp(al * x + be, T{0}, T{1}); });
    } else if (n == "Affine") {
      const float al = alpha(1.0f), be = beta(0.0f);
      out.push_back([al, be](T x) { return al * x + be; });
    } else if (n == "ScaledTanh") {
      const float al = alpha(1.0f), be = beta(1.0f);
      out.push_back([al, be](T x) { return al * std::tanh(be * x); });
    } else {
      ctx.fail("activation '" + n + "' is not supported");
    }
  }
  const auto per_dir = static_cast<std::int64_t>(defaults.size());
  if (static_cast<std::int64_t>(out.size()) != per_dir * dirs)
    ctx.fail("activations has the wrong length");
  return out;
}

enum class Cell { rnn, gru, lstm };

// The products of one direction as ops::gemm computes MatMul, without the accumulation
// model (which RNN, GRU and LSTM have never applied): `rows` x `cols` = A (rows x k)
// times B^T (B: cols x k, a W or R of the node) + `bias` (per column).
template <class T>
void gate_products(const KernelContext& ctx, std::int64_t rows, std::int64_t cols, std::int64_t k,
                   const T* a, const T* b, const T* bias, T* out) {
  KernelContext plain = ctx;
  plain.accumulate = nullptr;
  gemm(plain, false, true, rows, cols, k, T{1}, a, k, b, k, T{0}, out, cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) out[r * cols + j] += bias[j];
}

template <class T, Cell cell>
void recurrent(KernelContext& ctx) {
  constexpr std::int64_t G = cell == Cell::rnn ? 1 : (cell == Cell::gru ? 3 : 4);
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  const Tensor& r = ctx.in(2);
  for (const Tensor* t : {&x, &w, &r}) require_float(ctx, *t);
  const std::string direction = ctx.node.attr_string("direction", "forward");
  const std::int64_t dirs = direction == "bidirectional" ? 2 : 1;
  const bool layout = ctx.node.attr_int("layout", 0) != 0;
  const auto& xs = x.shape();
  if (xs.size() != 3) ctx.fail("X must be 3-D");
  const auto seq = layout ? xs[1] : xs[0], batch = layout ? xs[0] : xs[1], in = xs[2];
  const auto hidden = ctx.node.attr_int("hidden_size", w.shape().at(1) / G);
  if (w.shape() != Shape{dirs, G * hidden, in} || r.shape() != Shape{dirs, G * hidden, hidden})
    ctx.fail("W " + shape_str(w.shape()) + " or R " + shape_str(r.shape()) + " does not match");
  const T clip = ctx.node.attr_float("clip", 0.0f);
  const bool lbr = ctx.node.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = ctx.node.attr_int("input_forget", 0) != 0;
  const std::vector<std::string> defaults =
      cell == Cell::rnn ? std::vector<std::string>{"Tanh"}
                        : (cell == Cell::gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                             : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"});
  const auto acts = activations<T>(ctx, defaults, dirs);
  const auto na = static_cast<std::size_t>(defaults.size());
  std::vector<T> bias(static_cast<std::size_t>(dirs * 2 * G * hidden), 0.0f);
  if (ctx.has(3)) {
    auto b = ctx.in(3).template data<T>();
    std::copy(b.begin(), b.end(), bias.begin());
  }
  std::vector<std::int64_t> lens(static_cast<std::size_t>(batch), seq);
  if (ctx.has(4)) lens = int_values(ctx, ctx.in(4));
  std::vector<T> h0(static_cast<std::size_t>(dirs * batch * hidden), 0.0f), c0 = h0, peep;
  if (ctx.has(5)) {
    auto d = ctx.in(5).template data<T>();
    std::copy(d.begin(), d.end(), h0.begin());
  }
  if (cell == Cell::lstm && ctx.has(6)) {
    auto d = ctx.in(6).template data<T>();
    std::copy(d.begin(), d.end(), c0.begin());
  }
  if (cell == Cell::lstm && ctx.has(7)) {
    auto d = ctx.in(7).template data<T>();
    peep.assign(d.begin(), d.end());
  }
  const Shape ys = layout ? Shape{batch, seq, dirs, hidden} : Shape{seq, dirs, batch, hidden};
  const Shape hs = layout ? Shape{batch, dirs, hidden} : Shape{dirs, batch, hidden};
  Tensor y(carrier_dtype<T>(), ys), yh(carrier_dtype<T>(), hs), yc(carrier_dtype<T>(), hs);
  auto px = x.data<T>(), pw = w.data<T>(), pr = r.data<T>();
  auto py = y.data<T>(), pyh = yh.data<T>(), pyc = yc.data<T>();
  auto yat = [&](std::int64_t t, std::int64_t d, std::int64_t b) -> T* {
    return py.data() +
           (layout ? ((b * seq + t) * dirs + d) : ((t * dirs + d) * batch + b)) * hidden;
  };
  auto hat = [&](std::span<T> p, std::int64_t d, std::int64_t b) -> T* {
    return p.data() + (layout ? (b * dirs + d) : (d * batch + b)) * hidden;
  };
  auto clipv = [clip](T v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
  // Row (t, b) of X (in its layout's order) times W^T: every step's input products.
  std::vector<T> gx_all(static_cast<std::size_t>(seq * batch * G * hidden)),
      gh(static_cast<std::size_t>(G * hidden));
  auto gx_row = [&](std::int64_t t, std::int64_t b) {
    return gx_all.data() + (layout ? (b * seq + t) : (t * batch + b)) * G * hidden;
  };
  for (std::int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const T* W = pw.data() + d * G * hidden * in;
    const T* R = pr.data() + d * G * hidden * hidden;
    const T* Wb = bias.data() + d * 2 * G * hidden;
    const T* Rb = Wb + G * hidden;
    const Act<T>& f = acts[static_cast<std::size_t>(d) * na];
    const Act<T>& g = acts[std::min(static_cast<std::size_t>(d) * na + 1, acts.size() - 1)];
    const Act<T>& hact = acts[std::min(static_cast<std::size_t>(d) * na + 2, acts.size() - 1)];
    gate_products(ctx, seq * batch, G * hidden, in, px.data(), W, Wb, gx_all.data());
    for (std::int64_t b = 0; b < batch; ++b) {
      std::vector<T> h(h0.begin() + (d * batch + b) * hidden,
                       h0.begin() + (d * batch + b + 1) * hidden);
      std::vector<T> c(c0.begin() + (d * batch + b) * hidden,
                       c0.begin() + (d * batch + b + 1) * hidden);
      const auto len = std::min(lens[static_cast<std::size_t>(b)], seq);
      for (std::int64_t s = 0; s < len; ++s) {
        const auto t = reverse ? len - 1 - s : s;
        const T* gx = gx_row(t, b);
        gate_products(ctx, 1, G * hidden, hidden, h.data(), R, Rb, gh.data());
        std::vector<T> hn(static_cast<std::size_t>(hidden));
        for (std::int64_t k = 0; k < hidden; ++k) {
          const auto K = static_cast<std::size_t>(k), H = static_cast<std::size_t>(hidden);
          if constexpr (cell == Cell::rnn) {
            hn[K] = f(clipv(gx[K] + gh[K]));
          } else if constexpr (cell == Cell::gru) {
            // GRU needs every reset gate before the candidate: done after this loop.
          } else {
            const T* P = peep.empty() ? nullptr : peep.data() + d * 3 * hidden;
            T i = f(clipv(gx[K] + gh[K] + (P ? P[k] * c[K] : 0)));
            T fg = f(clipv(gx[2 * H + K] + gh[2 * H + K] + (P ? P[2 * hidden + k] * c[K] : 0)));
            if (input_forget) fg = 1 - i;
            const T cc = g(clipv(gx[3 * H + K] + gh[3 * H + K]));
            const T cn = fg * c[K] + i * cc;
            const T o = f(clipv(gx[H + K] + gh[H + K] + (P ? P[hidden + k] * cn : 0)));
            c[K] = cn;
            hn[K] = o * hact(cn);
          }
        }
        if constexpr (cell == Cell::gru) {
          const auto H = static_cast<std::size_t>(hidden);
          std::vector<T> z(H), rr(H), rh(H);
          for (std::size_t k = 0; k < H; ++k) {
            z[k] = f(clipv(gx[k] + gh[k]));
            rr[k] = f(clipv(gx[H + k] + gh[H + k]));
            rh[k] = rr[k] * h[k];
          }
          for (std::size_t k = 0; k < H; ++k) {
            T hh;
            if (lbr) {
              hh = g(clipv(gx[2 * H + k] + rr[k] * gh[2 * H + k]));
            } else {
              T acc = Rb[2 * hidden + static_cast<std::int64_t>(k)];
              for (std::size_t q = 0; q < H; ++q) acc += R[(2 * H + k) * H + q] * rh[q];
              hh = g(clipv(gx[2 * H + k] + acc));
            }
            hn[k] = (1 - z[k]) * hh + z[k] * h[k];
          }
        }
        h = hn;
        std::copy(h.begin(), h.end(), yat(t, d, b));
      }
      std::copy(h.begin(), h.end(), hat(pyh, d, b));
      std::copy(c.begin(), c.end(), hat(pyc, d, b));
    }
  }
  ctx.outputs[0] = std::move(y);
  if (ctx.outputs.size() > 1) ctx.outputs[1] = std::move(yh);
  if (ctx.outputs.size() > 2) ctx.outputs[2] = std::move(yc);
}

}  // namespace

void register_rnn(Registry& r) {
  r.add("RNN", carried<recurrent<float, Cell::rnn>, recurrent<double, Cell::rnn>>);
  r.add("GRU", carried<recurrent<float, Cell::gru>, recurrent<double, Cell::gru>>);
  r.add("LSTM", carried<recurrent<float, Cell::lstm>, recurrent<double, Cell::lstm>>);
}

}  // namespace fpguard::ops
