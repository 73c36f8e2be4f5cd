// RNN, GRU and LSTM (forward, reverse, bidirectional; layout 0/1; sequence_lens; clip;
// activations with alpha/beta; GRU linear_before_reset; LSTM peepholes and input_forget).
// The input products of every step are one gemm per direction before the steps (they do
// not depend on the state); the recurrent product is one gemm per step; the gates are
// loops, LSTM's activations applied a gate at a time. The two directions of a bidirectional node
// run side by side, one thread each (a step's products are too small to split: a parallel region
// per step cost more than the product).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.hpp"
#include "ops/ops.hpp"
#include "ops/vmath.hpp"

namespace fpguard::ops {

namespace {

// An activation of the cell (ONNX's list): the C library's scalar functions (see apply()).
enum class ActKind {
  sigmoid,
  tanh,
  relu,
  softsign,
  softplus,
  leaky_relu,
  thresholded_relu,
  elu,
  hard_sigmoid,
  affine,
  scaled_tanh
};

template <class T>
struct Act {
  ActKind kind = ActKind::tanh;
  float alpha = 0, beta = 0;

  T operator()(T x) const {
    switch (kind) {
      case ActKind::sigmoid:
        return 1.0f / (1.0f + std::exp(-x));
      case ActKind::tanh:
        return std::tanh(x);
      case ActKind::relu:
        return std::max(x, T{0});
      case ActKind::softsign:
        return x / (1 + std::fabs(x));
      case ActKind::softplus:
        return std::log1p(std::exp(x));
      case ActKind::leaky_relu:
        return x >= 0 ? x : alpha * x;
      case ActKind::thresholded_relu:
        return x > alpha ? x : T{0};
      case ActKind::elu:
        return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case ActKind::hard_sigmoid:
        return std::clamp(alpha * x + beta, T{0}, T{1});
      case ActKind::affine:
        return alpha * x + beta;
      case ActKind::scaled_tanh:
        return alpha * std::tanh(beta * x);
    }
    return x;
  }
};

// x[0..n) = a(x[i]), in place. Float32 sigmoid and tanh take the executor's vectorised
// math (ops/vmath, as the Sigmoid and Tanh ops do: within a few ULP of the C library's);
// the rest the scalar formulas above.
template <class T>
void apply(const Act<T>& a, T* x, std::size_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (a.kind == ActKind::sigmoid) return vmath::apply(vmath::Fn::sigmoid, x, x, n);
    if (a.kind == ActKind::tanh) return vmath::apply(vmath::Fn::tanh, x, x, n);
  }
  for (std::size_t i = 0; i < n; ++i) x[i] = a(x[i]);
}

// Each name's kind, and the defaults of the alpha and beta it reads (NaN: reads none).
struct ActName {
  const char* name;
  ActKind kind;
  float alpha, beta;
};
constexpr float kNone = std::numeric_limits<float>::quiet_NaN();
constexpr ActName kActNames[] = {
    {"Sigmoid", ActKind::sigmoid, kNone, kNone},
    {"Tanh", ActKind::tanh, kNone, kNone},
    {"Relu", ActKind::relu, kNone, kNone},
    {"Softsign", ActKind::softsign, kNone, kNone},
    {"Softplus", ActKind::softplus, kNone, kNone},
    {"LeakyRelu", ActKind::leaky_relu, 0.01f, kNone},
    {"ThresholdedRelu", ActKind::thresholded_relu, 1.0f, kNone},
    {"Elu", ActKind::elu, 1.0f, kNone},
    {"HardSigmoid", ActKind::hard_sigmoid, 0.2f, 0.5f},
    {"Affine", ActKind::affine, 1.0f, 0.0f},
    {"ScaledTanh", ActKind::scaled_tanh, 1.0f, 1.0f},
};

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
    const auto* known = std::find_if(std::begin(kActNames), std::end(kActNames),
                                     [&](const ActName& k) { return n == k.name; });
    if (known == std::end(kActNames)) ctx.fail("activation '" + n + "' is not supported");
    Act<T> act{.kind = known->kind};
    if (!std::isnan(known->alpha)) act.alpha = ia < alphas.size() ? alphas[ia++] : known->alpha;
    if (!std::isnan(known->beta)) act.beta = ib < betas.size() ? betas[ib++] : known->beta;
    out.push_back(act);
  }
  const auto per_dir = static_cast<std::int64_t>(defaults.size());
  if (static_cast<std::int64_t>(out.size()) != per_dir * dirs)
    ctx.fail("activations has the wrong length");
  return out;
}

enum class Cell { rnn, gru, lstm };

// The products of one direction as ops::gemm computes MatMul, without the accumulation
// model (which RNN, GRU and LSTM have never applied): `rows` x `cols` = A (rows x k)
// times B^T (B: cols x k, a W or R of the node) + `bias` (per column). `plain`: the
// node's context without the accumulation model.
template <class T>
void gate_products(const KernelContext& plain, std::int64_t rows, std::int64_t cols, std::int64_t k,
                   const T* a, const T* b, const T* bias, T* out) {
  gemm(plain, false, true, rows, cols, k, T{1}, a, k, b, k, T{0}, out, cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) out[r * cols + j] += bias[j];
}

template <Cell cell>
constexpr std::int64_t kGates = cell == Cell::rnn ? 1 : (cell == Cell::gru ? 3 : 4);

// A node's attributes, inputs and shapes, read once.
template <class T, Cell cell>
struct Recurrence {
  static constexpr std::int64_t G = kGates<cell>;
  std::string direction;
  std::int64_t dirs = 1, seq = 0, batch = 0, in = 0, hidden = 0;
  bool layout = false, linear_before_reset = false, input_forget = false;
  T clip = 0;
  std::vector<Act<T>> acts;
  std::size_t acts_per_dir = 0;
  std::vector<T> bias, h0, c0, peep;  // bias: W's then R's, per direction
  std::vector<std::int64_t> lens;

  T clipped(T v) const { return clip > 0 ? std::clamp(v, -clip, clip) : v; }
  // Activation j of direction d (the last one where fewer are given).
  const Act<T>& act(std::int64_t d, std::size_t j) const {
    return acts[std::min(static_cast<std::size_t>(d) * acts_per_dir + j, acts.size() - 1)];
  }
};

// `to` filled with input i's values where the node has it (else left as it is).
template <class T>
void copy_input(const KernelContext& ctx, std::size_t i, std::vector<T>& to) {
  if (!ctx.has(i)) return;
  auto d = ctx.in(i).template data<T>();
  std::copy(d.begin(), d.end(), to.begin());
}

template <class T, Cell cell>
Recurrence<T, cell> read_recurrence(const KernelContext& ctx) {
  constexpr std::int64_t G = kGates<cell>;
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  const Tensor& r = ctx.in(2);
  for (const Tensor* t : {&x, &w, &r}) require_float(ctx, *t);
  Recurrence<T, cell> n;
  n.direction = ctx.node.attr_string("direction", "forward");
  n.dirs = n.direction == "bidirectional" ? 2 : 1;
  n.layout = ctx.node.attr_int("layout", 0) != 0;
  const auto& xs = x.shape();
  if (xs.size() != 3) ctx.fail("X must be 3-D");
  n.seq = n.layout ? xs[1] : xs[0], n.batch = n.layout ? xs[0] : xs[1], n.in = xs[2];
  n.hidden = ctx.node.attr_int("hidden_size", w.shape().at(1) / G);
  if (w.shape() != Shape{n.dirs, G * n.hidden, n.in} ||
      r.shape() != Shape{n.dirs, G * n.hidden, n.hidden})
    ctx.fail("W " + shape_str(w.shape()) + " or R " + shape_str(r.shape()) + " does not match");
  n.clip = ctx.node.attr_float("clip", 0.0f);
  n.linear_before_reset = ctx.node.attr_int("linear_before_reset", 0) != 0;
  n.input_forget = ctx.node.attr_int("input_forget", 0) != 0;
  const std::vector<std::string> defaults =
      cell == Cell::rnn ? std::vector<std::string>{"Tanh"}
                        : (cell == Cell::gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                             : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"});
  n.acts = activations<T>(ctx, defaults, n.dirs);
  n.acts_per_dir = defaults.size();
  n.bias.assign(static_cast<std::size_t>(n.dirs * 2 * G * n.hidden), 0.0f);
  copy_input(ctx, 3, n.bias);
  n.lens.assign(static_cast<std::size_t>(n.batch), n.seq);
  if (ctx.has(4)) n.lens = int_values(ctx, ctx.in(4));
  n.h0.assign(static_cast<std::size_t>(n.dirs * n.batch * n.hidden), 0.0f);
  n.c0 = n.h0;
  copy_input(ctx, 5, n.h0);
  if (cell == Cell::lstm) copy_input(ctx, 6, n.c0);
  if (cell == Cell::lstm && ctx.has(7)) {
    auto d = ctx.in(7).template data<T>();
    n.peep.assign(d.begin(), d.end());
  }
  return n;
}

// One step of direction d: the new hidden state `hn` (and cell state `c`, LSTM) from the
// input products `gx`, the recurrent products `gh` and the state `h`. `R`, `Rb`: the
// direction's recurrent weights and bias (GRU without linear_before_reset multiplies by R
// after the reset gate). `scratch`: G * hidden values (LSTM's gates).
template <class T, Cell cell>
void cell_step(const Recurrence<T, cell>& n, std::int64_t d, const T* gx, const T* gh, const T* R,
               const T* Rb, const std::vector<T>& h, std::vector<T>& c, std::vector<T>& hn,
               std::vector<T>& scratch) {
  const auto H = static_cast<std::size_t>(n.hidden);
  const Act<T>& f = n.act(d, 0);
  const Act<T>& g = n.act(d, 1);
  if constexpr (cell == Cell::rnn) {
    for (std::size_t k = 0; k < H; ++k) hn[k] = f(n.clipped(gx[k] + gh[k]));
  } else if constexpr (cell == Cell::lstm) {
    // In passes over the gates (ONNX's order i, o, f, c), each activation applied to a
    // whole gate at once; the sums are the scalar formulas' (o's peephole reads the new c).
    const Act<T>& hact = n.act(d, 2);
    const T* P = n.peep.empty() ? nullptr : n.peep.data() + d * 3 * n.hidden;
    T *pi = scratch.data(), *po = pi + H, *pf = po + H, *pc = pf + H;
    for (std::size_t k = 0; k < H; ++k) {
      pi[k] = n.clipped(gx[k] + gh[k] + (P ? P[k] * c[k] : 0));
      pf[k] = n.clipped(gx[2 * H + k] + gh[2 * H + k] + (P ? P[2 * H + k] * c[k] : 0));
      pc[k] = n.clipped(gx[3 * H + k] + gh[3 * H + k]);
    }
    apply(f, pi, H);
    if (!n.input_forget) apply(f, pf, H);
    apply(g, pc, H);
    for (std::size_t k = 0; k < H; ++k) {
      const T fg = n.input_forget ? 1 - pi[k] : pf[k];
      const T cn = fg * c[k] + pi[k] * pc[k];
      po[k] = n.clipped(gx[H + k] + gh[H + k] + (P ? P[H + k] * cn : 0));
      c[k] = cn;
      hn[k] = cn;
    }
    apply(f, po, H);
    apply(hact, hn.data(), H);
    for (std::size_t k = 0; k < H; ++k) hn[k] = po[k] * hn[k];
  } else {
    // GRU needs every reset gate before the candidate.
    std::vector<T> z(H), rr(H), rh(H);
    for (std::size_t k = 0; k < H; ++k) {
      z[k] = f(n.clipped(gx[k] + gh[k]));
      rr[k] = f(n.clipped(gx[H + k] + gh[H + k]));
      rh[k] = rr[k] * h[k];
    }
    for (std::size_t k = 0; k < H; ++k) {
      T hh;
      if (n.linear_before_reset) {
        hh = g(n.clipped(gx[2 * H + k] + rr[k] * gh[2 * H + k]));
      } else {
        T acc = Rb[2 * H + k];
        for (std::size_t q = 0; q < H; ++q) acc += R[(2 * H + k) * H + q] * rh[q];
        hh = g(n.clipped(gx[2 * H + k] + acc));
      }
      hn[k] = (1 - z[k]) * hh + z[k] * h[k];
    }
  }
}

// The outputs of a node: Y, Y_h and Y_c, and where each (step, direction, batch) row lies
// in them for the node's layout.
template <class T>
struct RecurrentOutputs {
  Tensor y, yh, yc;
  bool layout = false;
  std::int64_t seq = 0, dirs = 1, batch = 0, hidden = 0;

  T* y_at(std::int64_t t, std::int64_t d, std::int64_t b) {
    return y.data<T>().data() +
           (layout ? ((b * seq + t) * dirs + d) : ((t * dirs + d) * batch + b)) * hidden;
  }
  T* state_at(Tensor& s, std::int64_t d, std::int64_t b) {
    return s.data<T>().data() + (layout ? (b * dirs + d) : (d * batch + b)) * hidden;
  }
};

// Direction d of the node: every step's input products (one gemm), then the steps of each
// batch entry in order, writing its rows of the outputs.
template <class T, Cell cell>
void run_direction(const KernelContext& plain, const Recurrence<T, cell>& n, std::int64_t d,
                   RecurrentOutputs<T>& out) {
  constexpr std::int64_t G = kGates<cell>;
  const auto seq = n.seq, batch = n.batch, hidden = n.hidden;
  const bool reverse = n.direction == "reverse" || d == 1;
  const T* W = plain.in(1).template data<T>().data() + d * G * hidden * n.in;
  const T* R = plain.in(2).template data<T>().data() + d * G * hidden * hidden;
  const T* Wb = n.bias.data() + d * 2 * G * hidden;
  const T* Rb = Wb + G * hidden;
  // Row (t, b) of X (in its layout's order) times W^T: every step's input products.
  std::vector<T> gx_all(static_cast<std::size_t>(seq * batch * G * hidden)),
      gh(static_cast<std::size_t>(G * hidden)), scratch(gh.size());
  auto gx_row = [&](std::int64_t t, std::int64_t b) {
    return gx_all.data() + (n.layout ? (b * seq + t) : (t * batch + b)) * G * hidden;
  };
  gate_products(plain, seq * batch, G * hidden, n.in, plain.in(0).template data<T>().data(), W, Wb,
                gx_all.data());
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto first = (d * batch + b) * hidden;
    std::vector<T> h(n.h0.begin() + first, n.h0.begin() + first + hidden);
    std::vector<T> c(n.c0.begin() + first, n.c0.begin() + first + hidden);
    std::vector<T> hn(static_cast<std::size_t>(hidden));
    const auto len = std::min(n.lens[static_cast<std::size_t>(b)], seq);
    for (std::int64_t s = 0; s < len; ++s) {
      const auto t = reverse ? len - 1 - s : s;
      gate_products(plain, 1, G * hidden, hidden, h.data(), R, Rb, gh.data());
      cell_step(n, d, gx_row(t, b), gh.data(), R, Rb, h, c, hn, scratch);
      h.swap(hn);
      std::copy(h.begin(), h.end(), out.y_at(t, d, b));
    }
    std::copy(h.begin(), h.end(), out.state_at(out.yh, d, b));
    std::copy(c.begin(), c.end(), out.state_at(out.yc, d, b));
  }
}

template <class T, Cell cell>
void recurrent(KernelContext& ctx) {
  const auto n = read_recurrence<T, cell>(ctx);
  const auto seq = n.seq, batch = n.batch, dirs = n.dirs, hidden = n.hidden;
  const Shape ys = n.layout ? Shape{batch, seq, dirs, hidden} : Shape{seq, dirs, batch, hidden};
  const Shape hs = n.layout ? Shape{batch, dirs, hidden} : Shape{dirs, batch, hidden};
  RecurrentOutputs<T> out{.y = Tensor(carrier_dtype<T>(), ys),
                          .yh = Tensor(carrier_dtype<T>(), hs),
                          .yc = Tensor(carrier_dtype<T>(), hs),
                          .layout = n.layout,
                          .seq = seq,
                          .dirs = dirs,
                          .batch = batch,
                          .hidden = hidden};
  KernelContext plain = ctx;  // the gate products never apply the accumulation model
  plain.accumulate = nullptr;
  // The directions are independent: side by side when there are two threads. Their gemms
  // then run on one thread each, which gave the 1-thread bits on the real and the small
  // CRNN (tests/cli/realarch_test.py checks the small one).
  const int threads = static_cast<int>(std::min<std::int64_t>(std::max(ctx.threads, 1), dirs));
  detail::parallel_for(
      static_cast<std::size_t>(dirs), threads,
      [&](std::size_t begin, std::size_t end) {
        for (auto d = begin; d < end; ++d)
          run_direction(plain, n, static_cast<std::int64_t>(d), out);
      },
      1);
  ctx.outputs[0] = std::move(out.y);
  if (ctx.outputs.size() > 1) ctx.outputs[1] = std::move(out.yh);
  if (ctx.outputs.size() > 2) ctx.outputs[2] = std::move(out.yc);
}

}  // namespace

void register_rnn(Registry& r) {
  r.add("RNN", carried<recurrent<float, Cell::rnn>, recurrent<double, Cell::rnn>>);
  r.add("GRU", carried<recurrent<float, Cell::gru>, recurrent<double, Cell::gru>>);
  r.add("LSTM", carried<recurrent<float, Cell::lstm>, recurrent<double, Cell::lstm>>);
}

}  // namespace fpguard::ops
