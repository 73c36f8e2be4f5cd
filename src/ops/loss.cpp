// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reductions none/sum/mean,
// class weights, ignore_index), as the ONNX node tests exercise them.
#include <cmath>

#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

// loss over log-probabilities `lp` ([N, C, d...]) and integer targets ([N, d...]).
template <class T>
Tensor nll(KernelContext& ctx, const std::vector<T>& lp, const Shape& shape, const Tensor& target,
           const Tensor* weight) {
  if (shape.size() < 2) ctx.fail("input must have rank >= 2");
  const auto n = shape[0], c = shape[1], inner = product(shape, 2);
  const auto t = int_values(ctx, target);
  if (static_cast<std::int64_t>(t.size()) != n * inner)
    ctx.fail("target has the wrong number of values");
  const bool has_ignore = ctx.node.has_attr("ignore_index");
  const auto ignore = ctx.node.attr_int("ignore_index", 0);
  const std::string reduction = ctx.node.attr_string("reduction", "mean");
  std::vector<T> w;
  if (weight) {
    require_float(ctx, *weight, "weight");
    auto d = weight->data<T>();
    w.assign(d.begin(), d.end());
  }
  Tensor loss(carrier_dtype<T>(), target.shape());
  auto pl = loss.data<T>();
  double sum = 0, wsum = 0;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < inner; ++i) {
      const auto k = static_cast<std::size_t>(b * inner + i);
      const auto cls = t[k];
      if (has_ignore && cls == ignore) {
        pl[k] = 0;
        continue;
      }
      if (cls < 0 || cls >= c) ctx.fail("target " + std::to_string(cls) + " is not a class");
      const T wt = w.empty() ? 1.0f : w[static_cast<std::size_t>(cls)];
      pl[k] = -lp[static_cast<std::size_t>((b * c + cls) * inner + i)] * wt;
      sum += pl[k];
      wsum += wt;
    }
  if (reduction == "none") return loss;
  Tensor r(carrier_dtype<T>(), {});
  if (reduction == "sum")
    r.data<T>()[0] = static_cast<T>(sum);
  else if (reduction == "mean")
    r.data<T>()[0] = static_cast<T>(wsum == 0 ? 0.0 : sum / wsum);
  else
    ctx.fail("reduction '" + reduction + "' is not supported");
  return r;
}

template <class T>
void nll_loss(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  auto d = x.data<T>();
  ctx.outputs[0] = nll(ctx, std::vector<T>(d.begin(), d.end()), x.shape(), ctx.in(1),
                       ctx.has(2) ? &ctx.in(2) : nullptr);
}

template <class T>
void softmax_cross_entropy(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  const auto& s = x.shape();
  if (s.size() < 2) ctx.fail("scores must have rank >= 2");
  const auto n = s[0], c = s[1], inner = product(s, 2);
  auto in = x.data<T>();
  std::vector<T> lp(in.size());
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < inner; ++i) {
      auto at = [&](std::int64_t k) { return static_cast<std::size_t>((b * c + k) * inner + i); };
      T m = -INFINITY;
      for (std::int64_t k = 0; k < c; ++k) m = std::max(m, in[at(k)]);
      T sum = 0;
      for (std::int64_t k = 0; k < c; ++k) sum += std::exp(in[at(k)] - m);
      const T ls = std::log(sum);
      for (std::int64_t k = 0; k < c; ++k) lp[at(k)] = in[at(k)] - m - ls;
    }
  ctx.outputs[0] = nll(ctx, lp, s, ctx.in(1), ctx.has(2) ? &ctx.in(2) : nullptr);
  if (ctx.outputs.size() > 1) {
    auto o = ctx.out(1, carrier_dtype<T>(), s).template data<T>();
    std::copy(lp.begin(), lp.end(), o.begin());
  }
}

}  // namespace

void register_loss(Registry& r) {
  r.add("NegativeLogLikelihoodLoss", carried<nll_loss<float>, nll_loss<double>>);
  r.add("SoftmaxCrossEntropyLoss",
        carried<softmax_cross_entropy<float>, softmax_cross_entropy<double>>);
}

}  // namespace fpguard::ops
