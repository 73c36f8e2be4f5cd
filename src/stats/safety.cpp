#include "fpguard/safety.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "fpguard/error.hpp"

namespace fpguard {
namespace {

const Format& named(std::string_view name) {
  for (const auto& f : named_formats())
    if (f.name == name) return f;
  FPG_CHECK(!"named format missing from the table");
  return named_formats().front();
}

std::string show(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// eps in the carrier T. Refused (Error) when it is not a positive finite carrier value,
// as every guarantee below rests on eps > 0.
template <class T>
T epsilon(const char* where, double eps_scale, const Format& f) {
  if (!(std::isfinite(eps_scale) && eps_scale > 0))
    throw Error(where, "eps_scale must be finite and > 0 (got " + show(eps_scale) + ")");
  const T eps = static_cast<T>(eps_scale * finfo(f).tiny);
  if (!(std::isfinite(eps) && eps > 0))
    throw Error(where, "eps = eps_scale * finfo(" + f.name +
                           ").tiny = " + show(eps_scale * finfo(f).tiny) +
                           " is not a positive finite value of the " +
                           (sizeof(T) == 4 ? "float" : "double") + " carrier");
  return eps;
}

template <class T>
std::size_t divide(std::span<const T> a, std::span<const T> b, std::span<T> out, double eps_scale,
                   const Format& f) {
  FPG_CHECK(a.size() == b.size() && a.size() == out.size());
  const T eps = epsilon<T>("safe_divide", eps_scale, f);
  std::size_t nonfinite = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const T d = b[i];
    // |d| < eps is false for NaN and inf, so both pass through unchanged; std::copysign
    // gives a zero its own sign, which sign(d) would not.
    const T guarded = std::fabs(d) < eps ? std::copysign(eps, d) : d;
    const T q = a[i] / guarded;
    out[i] = q;
    nonfinite += !std::isfinite(q);
  }
  return nonfinite;
}

template <class T>
std::size_t rsqrt(std::span<const T> x, std::span<T> out, double eps_scale, const Format& f) {
  FPG_CHECK(x.size() == out.size());
  const T eps = epsilon<T>("safe_rsqrt", eps_scale, f);
  std::size_t nonfinite = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const T v = x[i];
    // Negative inputs (not -0) reach sqrt and give NaN; NaN fails `v < eps` and stays NaN.
    const T clamped = (v >= 0 && v < eps) ? eps : v;
    const T r = T(1) / std::sqrt(clamped);
    out[i] = r;
    nonfinite += !std::isfinite(r);
  }
  return nonfinite;
}

}  // namespace

std::size_t safe_divide(std::span<const float> a, std::span<const float> b, std::span<float> out,
                        double eps_scale) {
  return divide(a, b, out, eps_scale, named("float32"));
}
std::size_t safe_divide(std::span<const double> a, std::span<const double> b, std::span<double> out,
                        double eps_scale) {
  return divide(a, b, out, eps_scale, named("float64"));
}
std::size_t safe_divide(std::span<const float> a, std::span<const float> b, std::span<float> out,
                        double eps_scale, const Format& f) {
  return divide(a, b, out, eps_scale, f);
}
std::size_t safe_divide(std::span<const double> a, std::span<const double> b, std::span<double> out,
                        double eps_scale, const Format& f) {
  return divide(a, b, out, eps_scale, f);
}

std::size_t safe_rsqrt(std::span<const float> x, std::span<float> out, double eps_scale) {
  return rsqrt(x, out, eps_scale, named("float32"));
}
std::size_t safe_rsqrt(std::span<const double> x, std::span<double> out, double eps_scale) {
  return rsqrt(x, out, eps_scale, named("float64"));
}
std::size_t safe_rsqrt(std::span<const float> x, std::span<float> out, double eps_scale,
                       const Format& f) {
  return rsqrt(x, out, eps_scale, f);
}
std::size_t safe_rsqrt(std::span<const double> x, std::span<double> out, double eps_scale,
                       const Format& f) {
  return rsqrt(x, out, eps_scale, f);
}

}  // namespace fpguard
