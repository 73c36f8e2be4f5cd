// Graph outputs that need not be tensors (include/fpguard/analysis.hpp, "graph output
// values"): a sequence is compared element by element, an optional when both runs hold a
// value, and a value whose kind or length differs between the runs is a mismatch.
#include <algorithm>
#include <cmath>

#include "analysis.hpp"
#include "fpguard/error.hpp"

namespace fpguard::analysis {

ValueForm form_of(const Value& v) {
  return {.kind = v.kind, .length = v.kind == ValueKind::sequence ? v.items.size() : 0};
}

std::vector<const Tensor*> tensors_of(const Value& v) {
  std::vector<const Tensor*> out;
  if (v.kind == ValueKind::tensor) out.push_back(&v.tensor);
  if (v.kind == ValueKind::sequence)
    for (const auto& t : v.items) out.push_back(&t);
  return out;
}

namespace {

// A floating tensor as compared: a float64 reference as it is, anything else in float32
// (`held` keeps a converted copy).
const Tensor& as_compared(const Tensor& t, bool reference, Tensor& held) {
  if ((reference && t.dtype() == DType::float64) || t.dtype() == DType::float32) return t;
  return held = exec::convert(t, DType::float32);
}

Comparison compare_pair(const Tensor& r, const Tensor& v, bool scaled) {
  const Format fp32 = parse_format("float32");
  Tensor rh, vh;
  const Tensor& vv = as_compared(v, false, vh);
  const Tensor& rr = as_compared(r, true, rh);
  const std::span<const float> vs(vv.data<float>().data(), vv.size());
  if (rr.dtype() == DType::float64)
    return compare(std::span<const double>(rr.data<double>().data(), rr.size()), vs, fp32, scaled);
  return compare(std::span<const float>(rr.data<float>().data(), rr.size()), vs, fp32, scaled);
}

}  // namespace

ValueComparison compare_values(const Value& r, const Value& v, bool scaled) {
  ValueComparison out;
  out.same_form = form_of(r) == form_of(v);
  const auto rs = tensors_of(r), vs = tensors_of(v);
  const std::size_t n = std::min(rs.size(), vs.size());
  if (r.kind == ValueKind::sequence) out.elements.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    if (!exec::is_float(rs[k]->dtype()) || !exec::is_float(vs[k]->dtype())) continue;
    if (rs[k]->size() != vs[k]->size()) {
      out.same_form = false;
      continue;
    }
    const Comparison c = compare_pair(*rs[k], *vs[k], scaled);
    if (r.kind == ValueKind::sequence) out.elements[k] = c;
    out.all.merge(c);
  }
  return out;
}

namespace {

// The values of `v` (emulated) outside atol + rtol |r| of the reference `r`, NaN in both
// and equal values (infinities too) aside.
std::uint64_t outside_tolerance(const Tensor& r, const Tensor& v, double atol, double rtol) {
  if (!exec::is_float(r.dtype()) || !exec::is_float(v.dtype()) || r.size() != v.size()) return 0;
  Tensor rh, vh;
  const Tensor& rr = as_compared(r, true, rh);
  const Tensor& vv = as_compared(v, false, vh);
  const auto es = vv.data<float>();
  std::uint64_t n = 0;
  auto count = [&](auto rs) {
    for (std::size_t k = 0; k < rs.size(); ++k) {
      const double x = rs[k], y = es[k];
      if (std::isnan(x) && std::isnan(y)) continue;
      if (x == y) continue;
      if (!(std::fabs(y - x) <= atol + rtol * std::fabs(x))) ++n;
    }
  };
  if (rr.dtype() == DType::float64)
    count(rr.data<double>());
  else
    count(rr.data<float>());
  return n;
}

// "name[k]", a sequence element's name.
std::string element_name(const std::string& output, std::size_t k) {
  return output + "[" + std::to_string(k) + "]";
}

}  // namespace

void record_output(const Value& r, const Value& e, std::size_t set, const CheckOptions& o,
                   OutputVerdict& v, Comparison& cmp, std::vector<Comparison>& element_cmp) {
  const ValueComparison c = compare_values(r, e, true);
  cmp.merge(c.all);
  v.nonfinite += c.all.overflow + c.all.nan;
  const auto rs = tensors_of(r), es = tensors_of(e);
  if (c.elements.size() > v.elements.size()) {
    for (std::size_t k = v.elements.size(); k < c.elements.size(); ++k)
      v.elements.push_back({.name = element_name(v.name, k)});
    element_cmp.resize(c.elements.size());
  }
  for (std::size_t k = 0; k < c.elements.size(); ++k) {
    element_cmp[k].merge(c.elements[k]);
    v.elements[k].nonfinite += c.elements[k].overflow + c.elements[k].nan;
  }
  if (o.atol || o.rtol)
    for (std::size_t k = 0; k < rs.size() && k < es.size(); ++k) {
      const std::uint64_t n =
          outside_tolerance(*rs[k], *es[k], o.atol.value_or(0), o.rtol.value_or(0));
      v.outside_tolerance += n;
      if (k < v.elements.size()) v.elements[k].outside_tolerance += n;
    }
  if (c.same_form) return;
  ++v.mismatched_sets;
  if (!v.mismatch || set < v.mismatch->set)
    v.mismatch = OutputMismatch{.set = set, .reference = form_of(r), .emulated = form_of(e)};
}

namespace {
void judge_one(const Comparison& c, const CheckOptions& o, OutputVerdict& v) {
  constexpr double none = std::numeric_limits<double>::quiet_NaN();
  const bool measured = c.finite > 0;
  v.max_abs_error = measured ? c.max_abs : none;
  v.max_rel_error = measured ? c.max_rel : none;
  v.max_scaled_error = measured ? c.max_scaled : none;
  // Relative to an all-zero reference, a non-zero error has no finite value either.
  v.rel_rms_error = measured && (c.rr > 0 || c.dd == 0) ? c.nrmse() : none;
  v.cosine = c.cosine();
  v.pass = v.nonfinite == 0 && v.outside_tolerance == 0 && v.cosine >= o.min_cosine &&  // NaN
           v.mismatched_sets == 0;                                                      // fails
}
}  // namespace

void judge(const Comparison& c, const std::vector<Comparison>& elements, const CheckOptions& o,
           OutputVerdict& v) {
  judge_one(c, o, v);
  for (std::size_t k = 0; k < v.elements.size() && k < elements.size(); ++k) {
    judge_one(elements[k], o, v.elements[k]);
    v.pass = v.pass && v.elements[k].pass;
  }
}

void merge_output(OutputVerdict& a, std::vector<Comparison>& a_elements, const OutputVerdict& b,
                  const std::vector<Comparison>& b_elements) {
  a.nonfinite += b.nonfinite;
  a.outside_tolerance += b.outside_tolerance;
  a.mismatched_sets += b.mismatched_sets;
  if (b.mismatch && (!a.mismatch || b.mismatch->set < a.mismatch->set)) a.mismatch = b.mismatch;
  if (b.elements.size() > a.elements.size()) {
    for (std::size_t k = a.elements.size(); k < b.elements.size(); ++k)
      a.elements.push_back({.name = b.elements[k].name});
    a_elements.resize(b.elements.size());
  }
  for (std::size_t k = 0; k < b.elements.size(); ++k) {
    a.elements[k].nonfinite += b.elements[k].nonfinite;
    a.elements[k].outside_tolerance += b.elements[k].outside_tolerance;
    if (k < b_elements.size()) a_elements[k].merge(b_elements[k]);
  }
}

}  // namespace fpguard::analysis
