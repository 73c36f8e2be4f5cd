// Reductions over axes (attribute before opset 18 — 13 for ReduceSum — and input
// after), ArgMax/ArgMin. Accumulation is in the carrier (float32, or float64 in a truth
// run; double for the sums of large float32 counts is a follow-up). With --accumulate, the
// sum-type reductions (Sum, Mean, SumSquare, L1, L2, LogSum, LogSumExp) round every partial
// sum into the accumulation format, as MatMul/Gemm/Conv do; Max, Min and Prod do not sum.
#include <cmath>
#include <limits>

#include "fpguard/experiments.hpp"
#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

struct Plan {
  Shape out_shape;  // with keepdims applied
  Shape kept;       // out shape with reduced dims = 1
  std::vector<bool> reduced;
  bool noop = false;
};

Plan plan_reduce(const KernelContext& ctx, std::int64_t axes_input_opset) {
  const Tensor& x = ctx.in(0);
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  std::vector<std::int64_t> axes;
  const bool from_input = ctx.opset >= axes_input_opset;
  if (from_input) {
    if (ctx.has(1)) axes = int_values(ctx, ctx.in(1));
  } else {
    axes = ctx.node.attr_ints("axes");
  }
  Plan p;
  p.reduced.assign(static_cast<std::size_t>(rank), false);
  if (axes.empty()) {
    if (from_input && ctx.node.attr_int("noop_with_empty_axes", 0)) {
      p.noop = true;
    } else {
      p.reduced.assign(static_cast<std::size_t>(rank), true);
    }
  }
  for (auto a : axes) p.reduced[static_cast<std::size_t>(norm_axis(ctx, a, rank))] = true;
  const bool keep = ctx.node.attr_int("keepdims", 1) != 0;
  for (std::int64_t d = 0; d < rank; ++d) {
    const bool r = p.reduced[static_cast<std::size_t>(d)];
    p.kept.push_back(r ? 1 : x.shape()[static_cast<std::size_t>(d)]);
    if (!r)
      p.out_shape.push_back(x.shape()[static_cast<std::size_t>(d)]);
    else if (keep)
      p.out_shape.push_back(1);
  }
  return p;
}

enum class Red { sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp };

// The reductions whose result is a sum (of v, v*v, |v| or exp(v)): --accumulate rounds them.
template <Red op>
constexpr bool summing =
    op == Red::sum || op == Red::mean || op == Red::log_sum || op == Red::sum_square ||
    op == Red::l2 || op == Red::l1 || op == Red::log_sum_exp;

template <Red op>
constexpr double initial = op == Red::max    ? -std::numeric_limits<double>::infinity()
                           : op == Red::min  ? std::numeric_limits<double>::infinity()
                           : op == Red::prod ? 1.0
                                             : 0.0;

// What a summing reduction (but LogSumExp) adds for v.
template <Red op, class T>
T term(T v) {
  if constexpr (op == Red::sum_square || op == Red::l2)
    return v * v;
  else if constexpr (op == Red::l1)
    return std::fabs(v);
  else
    return v;
}

// One accumulation step: on the carrier (floating inputs), or on double (integers).
template <Red op, class T>
void step(T& a, T v) {
  if constexpr (op == Red::sum || op == Red::mean || op == Red::log_sum || op == Red::sum_square ||
                op == Red::l2 || op == Red::l1)
    a += term<op>(v);
  else if constexpr (op == Red::max)
    a = (std::isnan(v) || v > a) ? v : a;
  else if constexpr (op == Red::min)
    a = (std::isnan(v) || v < a) ? v : a;
  else if constexpr (op == Red::prod)
    a *= v;
  else
    a += std::exp(v);  // log_sum_exp (max-shift is a follow-up)
}

// The input in runs of its innermost dimensions (merged while they are all reduced or all
// kept): a reduced run folds into one accumulator, a kept run into `len()` of them.
class Runs {
 public:
  Runs(const Shape& in_shape, const Shape& kept) : n_(product(in_shape)) {
    const auto kst = broadcast_strides(kept, in_shape);
    for (std::size_t d = in_shape.size(); d-- > 0;) {
      if (in_shape[d] == 1) continue;
      if (!dim_.empty() && kst[d] == ost_.back() * dim_.back()) {
        dim_.back() *= in_shape[d];
        continue;
      }
      dim_.push_back(in_shape[d]), ost_.push_back(kst[d]);
    }
    if (dim_.empty()) dim_ = {1}, ost_ = {0};
  }

  std::int64_t len() const { return dim_[0]; }
  bool reduced() const { return ost_[0] == 0; }

  // Calls f(i, o) for each run: input offset i, output offset o of its first element.
  template <class F>
  void walk(F&& f) const {
    std::vector<std::int64_t> idx(dim_.size(), 0);
    std::int64_t o = 0;
    for (std::int64_t i = 0; i < n_; i += len()) {
      f(i, o);
      for (std::size_t d = 1; d < dim_.size(); ++d) {
        ++idx[d], o += ost_[d];
        if (idx[d] < dim_[d]) break;
        o -= ost_[d] * idx[d], idx[d] = 0;
      }
    }
  }

 private:
  std::int64_t n_;
  std::vector<std::int64_t> dim_, ost_;  // coalesced dims (innermost first), output strides
};

// The accumulators of a floating input, on its carrier.
template <Red op, class T>
std::vector<T> reduce_floats(std::span<const T> x, const Runs& runs, std::int64_t n_out) {
  std::vector<T> acc(static_cast<std::size_t>(n_out), static_cast<T>(initial<op>));
  const auto len = runs.len();
  runs.walk([&](std::int64_t i, std::int64_t o) {
    const T* v = x.data() + i;
    if (!runs.reduced()) {
      T* a = acc.data() + o;
      for (std::int64_t k = 0; k < len; ++k) step<op>(a[k], v[k]);
    } else if constexpr (summing<op> && op != Red::log_sum_exp) {
      T& a = acc[static_cast<std::size_t>(o)];
      a = add_in_eights(a, v, len, [](T t) { return term<op>(t); });
    } else {
      T& a = acc[static_cast<std::size_t>(o)];
      for (std::int64_t k = 0; k < len; ++k) step<op>(a, v[k]);
    }
  });
  return acc;
}

// The accumulators of an integer input, in double (exact while the sums stay below 2^53).
template <Red op>
std::vector<double> reduce_integers(const Tensor& x, const Runs& runs, std::int64_t n_out) {
  std::vector<double> acc(static_cast<std::size_t>(n_out), initial<op>);
  std::vector<double> xin(x.size());
  to_double(x, xin);
  const auto len = runs.len();
  runs.walk([&](std::int64_t i, std::int64_t o) {
    const double* v = xin.data() + i;
    for (std::int64_t k = 0; k < len; ++k)
      step<op>(acc[static_cast<std::size_t>(runs.reduced() ? o : o + k)], v[k]);
  });
  return acc;
}

// --accumulate: the sums again on the accumulation model of MatMul/Gemm/Conv (every partial
// sum rounded into the format, in ctx.accumulation's order): output o is row o of A (its
// terms in input order) times a column of ones.
template <Red op, class T>
void accumulate_sums(KernelContext& ctx, std::span<const T> x, const Runs& runs,
                     std::vector<T>& acc) {
  const auto n = static_cast<std::int64_t>(x.size());
  const auto n_out = static_cast<std::int64_t>(acc.size());
  const auto terms = n / n_out;
  const auto un = static_cast<std::size_t>(n), uterms = static_cast<std::size_t>(terms);
  std::vector<double> a(un), ones(uterms, 1.0), c(static_cast<std::size_t>(n_out));
  std::vector<std::size_t> filled(static_cast<std::size_t>(n_out), 0);
  auto term = [](T v) -> double {
    if constexpr (op == Red::sum_square || op == Red::l2)
      return static_cast<double>(v) * static_cast<double>(v);  // exact, as GEMM products
    else if constexpr (op == Red::l1)
      return std::fabs(static_cast<double>(v));
    else if constexpr (op == Red::log_sum_exp)
      return static_cast<double>(std::exp(v));
    else
      return static_cast<double>(v);
  };
  runs.walk([&](std::int64_t i, std::int64_t o) {
    for (std::int64_t k = 0; k < runs.len(); ++k) {
      const auto out = static_cast<std::size_t>(runs.reduced() ? o : o + k);
      a[out * uterms + filled[out]++] = term(x[static_cast<std::size_t>(i + k)]);
    }
  });
  try {
    gemm_accumulate(a, ones, c, n_out, terms, 1, *ctx.accumulate, ctx.accumulation, ctx.threads);
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
  for (std::size_t k = 0; k < acc.size(); ++k) acc[k] = static_cast<T>(c[k]);
}

// An accumulator made a result: `count` values went into it.
template <Red op, class T>
T finish(T a, double count) {
  if constexpr (op == Red::mean)
    return a / static_cast<T>(count);
  else if constexpr (op == Red::l2)
    return std::sqrt(a);
  else if constexpr (op == Red::log_sum || op == Red::log_sum_exp)
    return std::log(a);
  else
    return a;
}

template <class T, Red op>
void reduce(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Plan p = plan_reduce(ctx, op == Red::sum ? 13 : 18);
  if (p.noop) {
    ctx.outputs[0] = x;
    return;
  }
  const bool is_f = x.dtype() == carrier_dtype<T>();
  if (!is_f &&
      (exec::is_float(x.dtype()) || x.dtype() == DType::bool_ || x.dtype() == DType::string))
    ctx.fail("unsupported dtype " + std::string(to_string(x.dtype())));
  const Runs runs(x.shape(), p.kept);
  const auto n = product(x.shape()), n_out = product(p.kept);
  const double count =
      static_cast<double>(n) / static_cast<double>(std::max<std::int64_t>(n_out, 1));
  if (is_f) {
    // Floating values accumulate in the carrier.
    const auto fx = x.data<T>();
    std::vector<T> acc = reduce_floats<op>(fx, runs, n_out);
    if constexpr (summing<op>)
      if (ctx.accumulate && n > 0 && n_out > 0) accumulate_sums<op>(ctx, fx, runs, acc);
    auto out = ctx.out(0, carrier_dtype<T>(), p.out_shape).template data<T>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = finish<op>(acc[i], count);
    return;
  }
  // Integers accumulate in double; the result (a mean, square root or logarithm) is
  // truncated toward zero into the input's type, as ONNX Runtime and the ONNX reference do.
  const std::vector<double> acc = reduce_integers<op>(x, runs, n_out);
  Tensor d(DType::float64, p.out_shape);
  auto out = d.data<double>();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::trunc(finish<op>(acc[i], count));
  ctx.outputs[0] = exec::convert(d, x.dtype());
}

template <bool is_max>
void arg_reduce(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  const auto axis = norm_axis(ctx, ctx.node.attr_int("axis", 0), rank);
  const bool keep = ctx.node.attr_int("keepdims", 1) != 0;
  const bool last = ctx.node.attr_int("select_last_index", 0) != 0;
  const auto& s = x.shape();
  const auto outer = product(s, 0, static_cast<std::size_t>(axis));
  const auto len = s[static_cast<std::size_t>(axis)];
  const auto inner = product(s, static_cast<std::size_t>(axis) + 1);
  Shape os;
  for (std::int64_t d = 0; d < rank; ++d)
    if (d != axis)
      os.push_back(s[static_cast<std::size_t>(d)]);
    else if (keep)
      os.push_back(1);
  std::vector<double> v(x.size());
  to_double(x, v);
  auto out = ctx.out(0, DType::int64, os).data<std::int64_t>();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      std::int64_t best = 0;
      double bv = v[static_cast<std::size_t>(o * len * inner + i)];
      for (std::int64_t k = 1; k < len; ++k) {
        const double c = v[static_cast<std::size_t>((o * len + k) * inner + i)];
        const bool better = is_max ? (c > bv || (last && c == bv)) : (c < bv || (last && c == bv));
        if (better) bv = c, best = k;
      }
      out[static_cast<std::size_t>(o * inner + i)] = best;
    }
}

}  // namespace

void register_reduce(Registry& r) {
  r.add("ReduceSum", carried<reduce<float, Red::sum>, reduce<double, Red::sum>>,
        {.degree = Degree::same});
  r.add("ReduceMean", carried<reduce<float, Red::mean>, reduce<double, Red::mean>>,
        {.degree = Degree::same});
  r.add("ReduceMax", carried<reduce<float, Red::max>, reduce<double, Red::max>>,
        {.degree = Degree::same});
  r.add("ReduceMin", carried<reduce<float, Red::min>, reduce<double, Red::min>>,
        {.degree = Degree::same});
  r.add("ReduceProd", carried<reduce<float, Red::prod>, reduce<double, Red::prod>>);
  r.add("ReduceSumSquare", carried<reduce<float, Red::sum_square>, reduce<double, Red::sum_square>>,
        {.degree = Degree::doubled});
  r.add("ReduceL1", carried<reduce<float, Red::l1>, reduce<double, Red::l1>>,
        {.degree = Degree::same});
  r.add("ReduceL2", carried<reduce<float, Red::l2>, reduce<double, Red::l2>>,
        {.degree = Degree::same});
  r.add("ReduceLogSum", carried<reduce<float, Red::log_sum>, reduce<double, Red::log_sum>>);
  r.add("ReduceLogSumExp",
        carried<reduce<float, Red::log_sum_exp>, reduce<double, Red::log_sum_exp>>);
  r.add("ArgMax", arg_reduce<true>);
  r.add("ArgMin", arg_reduce<false>);
}

}  // namespace fpguard::ops
