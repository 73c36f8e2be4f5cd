// The kernel registry and dtype conversions shared by kernels and the executor.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "ops/ops.hpp"

namespace fpguard::exec {

void Registry::add(const std::string& op, Kernel k, OpTraits traits, ElementwiseCode code) {
  FPG_CHECK(!ops_.count(op));
  OpInfo info;
  static_cast<OpTraits&>(info) = traits;
  info.kernel = k;
  info.elementwise = code;
  ops_[op] = info;
}

const OpInfo* Registry::info(const model::Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return nullptr;
  return global().find(n.op_type);
}

double degree_in_first_input(const OpTraits& t, std::optional<double> exponent) {
  switch (t.degree) {
    case Degree::same:
    case Degree::additive:
    case Degree::product:
    case Degree::quotient:
    case Degree::clipped:
      return 1;
    case Degree::half:
      return 0.5;
    case Degree::negated:
      return -1;
    case Degree::power:
      return exponent.value_or(0);
    case Degree::doubled:
      return 2;
    case Degree::none:
    case Degree::selected:
      return 0;
  }
  return 0;
}

const OpInfo* Registry::find(const std::string& op) const {
  auto it = ops_.find(op);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : ops_) out.push_back(k);
  return out;
}

const Registry& Registry::global() {
  // Explicit calls, not static registrars: objects of a static library that nothing
  // references would be dropped by the linker, and their ops with them.
  static const Registry r = [] {
    Registry reg;
    ops::register_elementwise(reg);
    ops::register_matmul(reg);
    ops::register_reduce(reg);
    ops::register_norm(reg);
    ops::register_shape(reg);
    ops::register_conv(reg);
    ops::register_index(reg);
    ops::register_resize(reg);
    ops::register_control(reg);
    ops::register_loss(reg);
    ops::register_quantize(reg);
    ops::register_qlinear(reg);
    ops::register_misc(reg);
    ops::register_rnn(reg);
    ops::register_sequence(reg);
    ops::register_spectral(reg);
    return reg;
  }();
  return r;
}

namespace {

void collect_unsupported(const model::Graph& g, std::set<std::string>& out) {
  const auto& reg = Registry::global();
  for (const auto& n : g.nodes) {
    const bool default_domain = n.domain.empty() || n.domain == "ai.onnx";
    if (!default_domain)
      out.insert(n.domain + "." + n.op_type);
    else if (!reg.find(n.op_type))
      out.insert(n.op_type);
    for (const auto& a : n.attributes) {
      if (const auto* sg = std::get_if<model::GraphPtr>(&a.value)) collect_unsupported(**sg, out);
      if (const auto* sgs = std::get_if<std::vector<model::GraphPtr>>(&a.value))
        for (const auto& sg : *sgs) collect_unsupported(*sg, out);
    }
  }
}

template <class To>
To saturate_cast(double v) {
  if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else {
    if (std::isnan(v)) return To{0};
    v = std::trunc(v);
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  }
}

template <class To>
void from_double(const std::vector<double>& d, Tensor& out) {
  auto o = out.data<To>();
  for (std::size_t i = 0; i < d.size(); ++i) o[i] = saturate_cast<To>(d[i]);
}

template <class T>
bool same_int(const Tensor& t, Tensor& out) {
  // int64 -> other integers without a detour through double (exact beyond 2^53).
  auto in = t.data<std::int64_t>();
  auto o = out.data<T>();
  for (std::size_t i = 0; i < in.size(); ++i) o[i] = static_cast<T>(in[i]);
  return true;
}

}  // namespace

std::vector<std::string> unsupported_ops(const model::Graph& g) {
  std::set<std::string> out;
  collect_unsupported(g, out);
  return {out.begin(), out.end()};
}

bool is_float(DType d) {
  return d == DType::float32 || d == DType::float16 || d == DType::bfloat16 || d == DType::float64;
}

Tensor convert(const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  Tensor out(to, t.shape());
  if (to == DType::float16 || to == DType::bfloat16) {
    const Format f = parse_format(to == DType::float16 ? "float16" : "bfloat16");
    if (t.dtype() == DType::float64) {  // rounded once, not through float32
      encode(t.data<double>(), out.data<std::uint16_t>(), f);
      return out;
    }
    Tensor widened;  // (a float32 t is read in place, not copied)
    if (t.dtype() != DType::float32) widened = convert(t, DType::float32);
    const Tensor& x = t.dtype() == DType::float32 ? t : widened;
    encode(x.data<float>(), out.data<std::uint16_t>(), f);
    return out;
  }
  if (t.dtype() == DType::int64 && to == DType::int32) {
    same_int<std::int32_t>(t, out);
    return out;
  }
  if (t.dtype() == DType::int64 && to == DType::uint64) {
    same_int<std::uint64_t>(t, out);
    return out;
  }
  std::vector<double> d(t.size());
  to_double(t, d);
  switch (to) {
    case DType::float64:
      from_double<double>(d, out);
      break;
    case DType::float32:
      from_double<float>(d, out);
      break;
    case DType::int8:
      from_double<std::int8_t>(d, out);
      break;
    case DType::int16:
      from_double<std::int16_t>(d, out);
      break;
    case DType::int32:
      from_double<std::int32_t>(d, out);
      break;
    case DType::int64:
      from_double<std::int64_t>(d, out);
      break;
    case DType::uint8:
      from_double<std::uint8_t>(d, out);
      break;
    case DType::uint16:
      from_double<std::uint16_t>(d, out);
      break;
    case DType::uint32:
      from_double<std::uint32_t>(d, out);
      break;
    case DType::uint64:
      from_double<std::uint64_t>(d, out);
      break;
    case DType::bool_: {
      auto o = out.data<std::uint8_t>();
      for (std::size_t i = 0; i < d.size(); ++i) o[i] = d[i] != 0 ? 1 : 0;
      break;
    }
    default:
      FPG_CHECK(false);
  }
  return out;
}

Tensor widen(const Tensor& t, DType carrier) {
  if (is_float(t.dtype()) && t.dtype() != carrier) return convert(t, carrier);
  return t;
}

}  // namespace fpguard::exec
