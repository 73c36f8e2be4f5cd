// Internal: the vector forms of vmath's exact piecewise functions (vmath::Exact: Relu,
// HardSwish) per SIMD target, for vmath::apply_exact and for the kernels that apply a fused
// op to their outputs in registers before storing them (ops/pointwise.cpp,
// ops/depthwise.cpp): one definition, so both give the same bits. Included after
// <hwy/highway.h> by files compiled once per target (hwy/foreach_target.h); the include
// guard toggles per target, as Highway's own -inl.h headers do.
#if defined(FPGUARD_OPS_VMATH_INL_HPP_) == defined(HWY_TARGET_TOGGLE)
#ifdef FPGUARD_OPS_VMATH_INL_HPP_
#undef FPGUARD_OPS_VMATH_INL_HPP_
#else
#define FPGUARD_OPS_VMATH_INL_HPP_
#endif

#include <hwy/highway.h>

#include <optional>

#include "ops/vmath.hpp"

HWY_BEFORE_NAMESPACE();
namespace fpguard::ops::vmath::HWY_NAMESPACE {

// x * clamp(x / 6 + 0.5, 0, 1), clamp as std::clamp compares (a NaN stays NaN).
template <class D, class V = hwy::HWY_NAMESPACE::Vec<D>>
HWY_INLINE V HardSwishV(D d, V x) {
  namespace hn = hwy::HWY_NAMESPACE;
  const V zero = hn::Zero(d), one = hn::Set(d, 1.0f);
  const V t = hn::Add(hn::Div(x, hn::Set(d, 6.0f)), hn::Set(d, 0.5f));
  const V c = hn::IfThenElse(hn::Lt(t, zero), zero, hn::IfThenElse(hn::Lt(one, t), one, t));
  return hn::Mul(x, c);
}

// x where x > 0 or x is NaN, else +0.
template <class D, class V = hwy::HWY_NAMESPACE::Vec<D>>
HWY_INLINE V ReluV(D d, V x) {
  namespace hn = hwy::HWY_NAMESPACE;
  return hn::IfThenElseZero(hn::Or(hn::Gt(x, hn::Zero(d)), hn::IsNaN(x)), x);
}

// f's vector form of x; x itself without f.
template <class D, class V = hwy::HWY_NAMESPACE::Vec<D>>
HWY_INLINE V ExactV(D d, std::optional<Exact> f, V x) {
  if (!f) return x;
  switch (*f) {
    case Exact::hard_swish:
      return HardSwishV(d, x);
    case Exact::relu:
      return ReluV(d, x);
  }
  return x;
}

}  // namespace fpguard::ops::vmath::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FPGUARD_OPS_VMATH_INL_HPP_
