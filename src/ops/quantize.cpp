// Quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear: int8/uint8/
// int16/uint16/int32 per-tensor, per-axis and blocked; FLOAT8 zero points need storage dtypes
// fpguard does not have yet) and Compress, ReverseSequence, Einsum.
#include <cmath>
#include <cstring>
#include <map>

#include "ops/ops.hpp"

namespace fpguard::ops {

namespace {

// Per-tensor (scalar scale), per-axis (1-D scale along `axis`) or blocked (opset 21: a
// scale of x's rank, one value per `block_size` elements along `axis`) parameters, as one
// value per element index.
struct Affine {
  std::vector<double> scale, zero;
  std::int64_t axis = 0, inner = 1, len = 1;
  bool blocked = false;  // scale and zero hold one value per element of x
  std::size_t at(std::size_t e, std::size_t n) const {
    if (n == 1) return 0;
    if (blocked) return e;
    return (e / static_cast<std::size_t>(inner)) % static_cast<std::size_t>(len);
  }
  double s(std::size_t e) const { return scale[at(e, scale.size())]; }
  double z(std::size_t e) const { return zero.empty() ? 0 : zero[at(e, zero.size())]; }
};

// The blocked parameter p (shape ps: x's, with ceil(x[axis] / block) along axis) expanded
// to one value per element of x.
std::vector<double> expand_blocks(const KernelContext& ctx, const std::vector<double>& p,
                                  const Shape& ps, const Shape& x, std::size_t axis,
                                  std::int64_t block, const char* what) {
  if (ps.size() != x.size())
    ctx.fail(std::string(what) + " must have the input's rank for blocked quantization");
  for (std::size_t d = 0; d < x.size(); ++d) {
    const std::int64_t want = d == axis ? (x[d] + block - 1) / block : x[d];
    if (ps[d] != want)
      ctx.fail(std::string(what) + " has shape " + shape_str(ps) + "; blocks of " +
               std::to_string(block) + " along axis " + std::to_string(axis) + " need " +
               std::to_string(want) + " in dimension " + std::to_string(d));
  }
  const auto outer = product(x, 0, axis), inner = product(x, axis + 1);
  const std::int64_t len = x[axis], blocks = ps[axis];
  std::vector<double> out(static_cast<std::size_t>(outer * len * inner));
  std::size_t e = 0;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < len; ++i)
      for (std::int64_t k = 0; k < inner; ++k)
        out[e++] = p[static_cast<std::size_t>((o * blocks + i / block) * inner + k)];
  return out;
}

Affine affine(const KernelContext& ctx, const Shape& x) {
  Affine a;
  const Tensor& sc = ctx.in(1);
  a.scale.resize(sc.size());
  to_double(sc, a.scale);
  if (ctx.has(2)) {
    a.zero.resize(ctx.in(2).size());
    to_double(ctx.in(2), a.zero);
  }
  const std::int64_t block = ctx.opset >= 21 ? ctx.node.attr_int("block_size", 0) : 0;
  if (block < 0) ctx.fail("block_size must not be negative");
  if (block > 0) {
    a.axis = norm_axis(ctx, ctx.node.attr_int("axis", 1), static_cast<std::int64_t>(x.size()));
    const auto axis = static_cast<std::size_t>(a.axis);
    a.scale = expand_blocks(ctx, a.scale, sc.shape(), x, axis, block, "scale");
    if (ctx.has(2)) {
      if (ctx.in(2).shape() != sc.shape()) ctx.fail("zero point and scale differ in shape");
      a.zero = expand_blocks(ctx, a.zero, ctx.in(2).shape(), x, axis, block, "zero point");
    }
    a.blocked = true;
    return a;
  }
  if (a.scale.size() > 1) {
    a.axis = norm_axis(ctx, ctx.node.attr_int("axis", 1), static_cast<std::int64_t>(x.size()));
    a.len = x[static_cast<std::size_t>(a.axis)];
    a.inner = product(x, static_cast<std::size_t>(a.axis) + 1);
    if (static_cast<std::int64_t>(a.scale.size()) != a.len)
      ctx.fail("scale does not match the axis length");
  }
  if (!a.zero.empty() && a.zero.size() != a.scale.size())
    ctx.fail("zero point and scale differ in size");
  return a;
}

template <class T>
void quantize(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Affine a = affine(ctx, x.shape());
  DType to = ctx.has(2) ? ctx.in(2).dtype() : DType::uint8;
  if (ctx.node.has_attr("output_dtype") && !ctx.has(2)) {
    const auto d = model::dtype_of(static_cast<int>(ctx.node.attr_int("output_dtype", 2)));
    if (!d || exec::is_float(*d)) ctx.fail("output_dtype is not supported");
    to = *d;
  }
  std::vector<double> v(x.size());
  to_double(x, v);
  // The division is in the input's precision (the carrier), as ONNX specifies: a
  // quotient that rounds to a tie in float32 must round as that tie.
  for (std::size_t e = 0; e < v.size(); ++e)
    v[e] = std::nearbyint(static_cast<T>(v[e]) / static_cast<T>(a.s(e))) + a.z(e);
  Tensor d(DType::float64, x.shape());
  std::copy(v.begin(), v.end(), d.data<double>().begin());
  ctx.outputs[0] = exec::convert(d, to);  // saturates
}

template <class T>
void dequantize(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Affine a = affine(ctx, x.shape());
  std::vector<double> v(x.size());
  to_double(x, v);
  auto out = ctx.out(0, carrier_dtype<T>(), x.shape()).template data<T>();
  for (std::size_t e = 0; e < v.size(); ++e) out[e] = static_cast<T>((v[e] - a.z(e)) * a.s(e));
  if (ctx.input_dtypes[1] != carrier_dtype<T>()) ctx.output_dtypes[0] = ctx.input_dtypes[1];
}

template <class T>
void dynamic_quantize(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  require_float(ctx, x);
  auto in = x.data<T>();
  T lo = 0, hi = 0;
  for (T v : in) lo = std::min(lo, v), hi = std::max(hi, v);
  const T scale = (hi - lo) / 255.0f;
  const T zp = scale == 0 ? 0 : std::clamp(std::nearbyint(0 - lo / scale), T{0}, T{255});
  auto y = ctx.out(0, DType::uint8, x.shape()).data<std::uint8_t>();
  for (std::size_t e = 0; e < in.size(); ++e)
    y[e] = static_cast<std::uint8_t>(
        std::clamp(std::nearbyint(scale == 0 ? 0 : in[e] / scale) + zp, T{0}, T{255}));
  ctx.out(1, carrier_dtype<T>(), {}).template data<T>()[0] = scale;
  ctx.out(2, DType::uint8, {}).data<std::uint8_t>()[0] = static_cast<std::uint8_t>(zp);
}

void compress(KernelContext& ctx) {
  const Tensor& x0 = ctx.in(0);
  const Tensor& cond = ctx.in(1);
  std::vector<double> c(cond.size());
  to_double(cond, c);
  Tensor flat;
  const bool has_axis = ctx.node.has_attr("axis");
  const Tensor* x = &x0;
  if (!has_axis) {
    flat = Tensor(x0.dtype(), {static_cast<std::int64_t>(x0.size())});
    if (x0.nbytes()) std::memcpy(flat.bytes(), x0.bytes(), x0.nbytes());
    x = &flat;
  }
  const auto rank = static_cast<std::int64_t>(x->shape().size());
  const auto axis =
      static_cast<std::size_t>(has_axis ? norm_axis(ctx, ctx.node.attr_int("axis", 0), rank) : 0);
  const auto len = x->shape()[axis];
  std::vector<std::int64_t> keep;
  for (std::int64_t i = 0; i < std::min<std::int64_t>(len, static_cast<std::int64_t>(c.size()));
       ++i)
    if (c[static_cast<std::size_t>(i)] != 0) keep.push_back(i);
  Shape os = x->shape();
  os[axis] = static_cast<std::int64_t>(keep.size());
  Tensor& out = ctx.out(0, x->dtype(), os);
  const auto isz = itemsize(x->dtype());
  const auto outer = product(x->shape(), 0, axis), inner = product(x->shape(), axis + 1);
  const auto nk = static_cast<std::int64_t>(keep.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k = 0; k < nk; ++k)
      if (inner)
        std::memcpy(out.bytes() + static_cast<std::size_t>((o * nk + k) * inner) * isz,
                    x->bytes() + static_cast<std::size_t>(
                                     (o * len + keep[static_cast<std::size_t>(k)]) * inner) *
                                     isz,
                    static_cast<std::size_t>(inner) * isz);
}

void reverse_sequence(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto lens = int_values(ctx, ctx.in(1));
  const auto& s = x.shape();
  const auto batch_axis = static_cast<std::size_t>(ctx.node.attr_int("batch_axis", 1));
  const auto time_axis = static_cast<std::size_t>(ctx.node.attr_int("time_axis", 0));
  if (s.size() < 2 || batch_axis > 1 || time_axis > 1 || batch_axis == time_axis)
    ctx.fail("batch_axis and time_axis must be 0 and 1");
  Tensor& out = ctx.out(0, x.dtype(), s);
  const auto isz = itemsize(x.dtype());
  const auto inner = product(s, 2);
  for (std::int64_t i = 0; i < s[0]; ++i)
    for (std::int64_t j = 0; j < s[1]; ++j) {
      const auto b = batch_axis == 0 ? i : j, t = batch_axis == 0 ? j : i;
      const auto L = lens.at(static_cast<std::size_t>(b));
      const auto src_t = t < L ? L - 1 - t : t;
      const auto si = batch_axis == 0 ? i : src_t, sj = batch_axis == 0 ? src_t : j;
      std::memcpy(out.bytes() + static_cast<std::size_t>((i * s[1] + j) * inner) * isz,
                  x.bytes() + static_cast<std::size_t>((si * s[1] + sj) * inner) * isz,
                  static_cast<std::size_t>(inner) * isz);
    }
}

// An Einsum equation read against its operands: each operand's labels (an ellipsis made
// the letters '0'.., broadcast over all operands, right-aligned), each label's size, and
// the output's labels.
struct EinsumLabels {
  std::vector<std::string> operands;
  std::string output;
  std::map<char, std::int64_t> size;
};

// The operand terms of the equation's left-hand side.
std::vector<std::string> einsum_terms(const std::string& lhs) {
  std::vector<std::string> terms;
  for (std::size_t p = 0;;) {
    const auto q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) return terms;
    p = q + 1;
  }
}

// The implicit output (no "->"): the ellipsis, then the labels used once, in order.
std::string einsum_implicit_output(const std::vector<std::string>& labels, const std::string& ell) {
  std::map<char, int> count;
  for (const auto& l : labels)
    for (char ch : l) ++count[ch];
  std::string out = ell;
  for (auto [ch, n] : count)
    if (n == 1 && !(ch >= '0' && ch <= '9')) out += ch;
  return out;
}

EinsumLabels einsum_labels(const KernelContext& ctx) {
  std::string eq;
  for (char ch : ctx.node.attr_string("equation", ""))
    if (ch != ' ') eq += ch;
  const auto arrow = eq.find("->");
  const std::vector<std::string> terms = einsum_terms(eq.substr(0, arrow));
  if (terms.size() != ctx.num_inputs())
    ctx.fail("the equation has " + std::to_string(terms.size()) + " operands");
  std::size_t ell_rank = 0;
  for (std::size_t i = 0; i < terms.size(); ++i)
    if (terms[i].find("...") != std::string::npos)
      ell_rank = std::max(ell_rank, ctx.in(i).shape().size() - (terms[i].size() - 3));
  std::string ell;
  for (std::size_t k = 0; k < ell_rank; ++k) ell += static_cast<char>('0' + k);
  EinsumLabels r;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    std::string t = terms[i];
    const auto e = t.find("...");
    const auto& sh = ctx.in(i).shape();
    if (e != std::string::npos)
      t = t.substr(0, e) + ell.substr(ell_rank - (sh.size() - (t.size() - 3))) + t.substr(e + 3);
    if (t.size() != sh.size())
      ctx.fail("operand " + std::to_string(i) + " has rank " + std::to_string(sh.size()) +
               ", the equation says " + std::to_string(t.size()));
    for (std::size_t d = 0; d < t.size(); ++d) {
      auto [it, fresh] = r.size.emplace(t[d], sh[d]);
      if (!fresh && it->second != sh[d]) {
        if (it->second == 1)
          it->second = sh[d];
        else if (sh[d] != 1)
          ctx.fail(std::string("label '") + t[d] + "' has two sizes");
      }
    }
    r.operands.push_back(t);
    require_float(ctx, ctx.in(i));
  }
  if (arrow == std::string::npos) {
    r.output = einsum_implicit_output(r.operands, ell);
  } else {
    r.output = eq.substr(arrow + 2);
    const auto e = r.output.find("...");
    if (e != std::string::npos) r.output = r.output.substr(0, e) + ell + r.output.substr(e + 3);
  }
  return r;
}

// Einsum by direct summation over every index (small tensors; a contraction planner onto
// MatMul is a follow-up).
template <class T>
void einsum(KernelContext& ctx) {
  const EinsumLabels l = einsum_labels(ctx);
  // Every label: the output's first, then the summed ones.
  std::string all = l.output;
  for (auto [ch, n] : l.size)
    if (all.find(ch) == std::string::npos) all += ch;
  Shape os;
  for (char ch : l.output) os.push_back(l.size.at(ch));
  auto out = ctx.out(0, carrier_dtype<T>(), os).template data<T>();
  std::vector<std::int64_t> dims;
  for (char ch : all) dims.push_back(l.size.at(ch));
  // Per operand: the stride of each label of `all` (0 where absent or broadcast).
  std::vector<std::vector<std::int64_t>> strides;
  for (std::size_t i = 0; i < l.operands.size(); ++i) {
    const auto& sh = ctx.in(i).shape();
    std::vector<std::int64_t> st(all.size(), 0);
    std::int64_t s = 1;
    for (std::size_t d = l.operands[i].size(); d-- > 0;) {
      if (sh[d] != 1) st[all.find(l.operands[i][d])] += s;
      s *= sh[d];
    }
    strides.push_back(st);
  }
  const auto total = product(dims);
  const auto n_out = product(os);
  const auto inner = n_out ? total / n_out : 0;
  std::vector<std::int64_t> idx(all.size(), 0);
  for (std::int64_t e = 0; e < total; ++e) {
    T prod = 1;
    for (std::size_t i = 0; i < l.operands.size(); ++i) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d < all.size(); ++d) off += idx[d] * strides[i][d];
      prod *= ctx.in(i).template data<T>()[static_cast<std::size_t>(off)];
    }
    out[static_cast<std::size_t>(e / std::max<std::int64_t>(inner, 1))] += prod;
    for (std::size_t d = all.size(); d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

void register_quantize(Registry& r) {
  r.add("QuantizeLinear", carried<quantize<float>, quantize<double>>);
  r.add("DequantizeLinear", carried<dequantize<float>, dequantize<double>>);
  r.add("DynamicQuantizeLinear", carried<dynamic_quantize<float>, dynamic_quantize<double>>);
  r.add("Compress", compress, {.kind = OpKind::data_movement});
  r.add("ReverseSequence", reverse_sequence, {.kind = OpKind::data_movement});
  r.add("Einsum", carried<einsum<float>, einsum<double>>);
}

}  // namespace fpguard::ops
