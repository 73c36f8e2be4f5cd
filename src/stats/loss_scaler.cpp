#include "fpguard/loss_scaler.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "fpguard/error.hpp"

namespace fpguard {
namespace {

std::string show(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// What torch's isfinite_ensure_cuda_math(float) sees: the gradient as float, so a double
// beyond float32's range is as non-finite as an inf.
bool nonfinite_as_float(float g) {
  return !std::isfinite(g);
}
bool nonfinite_as_float(double g) {
  return !std::isfinite(static_cast<float>(g));
}

// One pass of _amp_foreach_non_finite_check_and_unscale_ (CUDA): check, then multiply by
// inv_scale unless it is exactly 1, in T's opmath (float for float, double for double).
template <class T>
bool unscale(std::span<T> grads, float inv_scale) {
  bool found = false;
  const T inv = static_cast<T>(inv_scale);
  const bool identity = inv_scale == 1.0f;
  for (T& g : grads) {
    found |= nonfinite_as_float(g);
    if (!identity) g = g * inv;
  }
  return found;
}

// grad_scaler.py: inv_scale = self._scale.double().reciprocal().float()
float inverse(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

constexpr const char* kWhere = "LossScaler";

}  // namespace

LossScaler::LossScaler(const Options& o)
    : scale_(static_cast<float>(o.init_scale)),
      growth_factor_(o.growth_factor),
      backoff_factor_(o.backoff_factor),
      growth_interval_(o.growth_interval),
      enabled_(o.enabled) {
  // GradScaler asserts the two factors; the rest would make a scaler that never works.
  if (!(std::isfinite(o.growth_factor) && o.growth_factor > 1.0))
    throw Error(kWhere,
                "growth_factor must be finite and > 1.0 (got " + show(o.growth_factor) + ")");
  if (!(o.backoff_factor > 0.0 && o.backoff_factor < 1.0))
    throw Error(kWhere,
                "backoff_factor must be > 0 and < 1.0 (got " + show(o.backoff_factor) + ")");
  if (o.growth_interval < 1)
    throw Error(kWhere,
                "growth_interval must be >= 1 (got " + std::to_string(o.growth_interval) + ")");
  if (!(std::isfinite(scale_) && scale_ > 0.0f))
    throw Error(kWhere, "init_scale must be a positive finite float32 value (got " +
                            show(o.init_scale) + ")");
}

double LossScaler::scale_loss(double loss) const {
  return enabled_ ? loss * static_cast<double>(scale_) : loss;
}
float LossScaler::scale_loss(float loss) const {
  return enabled_ ? loss * scale_ : loss;
}

bool LossScaler::unscale_and_check(std::span<float> grads) const {
  return enabled_ && unscale(grads, inverse(scale_));
}
bool LossScaler::unscale_and_check(std::span<double> grads) const {
  return enabled_ && unscale(grads, inverse(scale_));
}
bool LossScaler::unscale_and_check(std::span<const std::span<float>> grads) const {
  if (!enabled_) return false;
  bool found = false;
  for (auto g : grads) found |= unscale(g, inverse(scale_));
  return found;
}
bool LossScaler::unscale_and_check(std::span<const std::span<double>> grads) const {
  if (!enabled_) return false;
  bool found = false;
  for (auto g : grads) found |= unscale(g, inverse(scale_));
  return found;
}
bool LossScaler::unscale_and_check(std::initializer_list<std::span<float>> grads) const {
  return unscale_and_check(std::span<const std::span<float>>(grads.begin(), grads.size()));
}
bool LossScaler::unscale_and_check(std::initializer_list<std::span<double>> grads) const {
  return unscale_and_check(std::span<const std::span<double>>(grads.begin(), grads.size()));
}

// amp_update_scale_cuda_kernel: float scale times double factor, stored back as float.
void LossScaler::update(bool found_inf) {
  if (!enabled_) return;
  if (found_inf) {
    scale_ = static_cast<float>(static_cast<double>(scale_) * backoff_factor_);
    growth_tracker_ = 0;
    return;
  }
  const int successful = growth_tracker_ + 1;
  if (successful == growth_interval_) {
    scale_ = static_cast<float>(static_cast<double>(scale_) * growth_factor_);
    growth_tracker_ = 0;
  } else {
    growth_tracker_ = successful;
  }
}

// GradScaler: self._scale.fill_(new_scale) on a float32 tensor, which refuses finite
// values beyond float32's max ("value cannot be converted to type float without
// overflow") and takes anything else, inf and NaN included, rounded to float32.
void LossScaler::update(double new_scale) {
  if (!enabled_) return;
  if (std::isfinite(new_scale) &&
      std::fabs(new_scale) > static_cast<double>(std::numeric_limits<float>::max()))
    throw Error(kWhere, "new_scale " + show(new_scale) + " does not fit in float32");
  scale_ = static_cast<float>(new_scale);
}

std::string LossScaler::to_json() const {
  nlohmann::json j;
  j["scale"] = static_cast<double>(scale_);
  j["growth_factor"] = growth_factor_;
  j["backoff_factor"] = backoff_factor_;
  j["growth_interval"] = growth_interval_;
  j["growth_tracker"] = growth_tracker_;
  j["enabled"] = enabled_;
  return j.dump();
}

namespace {

const char* kState = "LossScaler state";

const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) throw Error(kState, std::string("field '") + name + "' is missing");
  return *it;
}

double number(const nlohmann::json& j, const char* name) {
  const auto& v = field(j, name);
  if (!v.is_number())
    throw Error(kState,
                std::string("field '") + name + "' must be a number (got " + v.dump() + ")");
  return v.get<double>();
}

int integer(const nlohmann::json& v, const char* name) {
  if (!v.is_number_integer())
    throw Error(kState,
                std::string("field '") + name + "' must be an integer (got " + v.dump() + ")");
  const bool fits = v.is_number_unsigned()
                        ? v.get<std::uint64_t>() <= std::numeric_limits<int>::max()
                        : v.get<std::int64_t>() >= std::numeric_limits<int>::min() &&
                              v.get<std::int64_t>() <= std::numeric_limits<int>::max();
  if (!fits)
    throw Error(kState, std::string("field '") + name + "' is out of range (got " + v.dump() + ")");
  return v.get<int>();
}

}  // namespace

LossScaler LossScaler::from_json(std::string_view json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(kState, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw Error(kState, "must be a JSON object (got " + j.dump() + ")");

  Options o;
  o.init_scale = number(j, "scale");
  o.growth_factor = number(j, "growth_factor");
  o.backoff_factor = number(j, "backoff_factor");
  o.growth_interval = integer(field(j, "growth_interval"), "growth_interval");
  const char* tracker_key = j.contains("growth_tracker") ? "growth_tracker" : "_growth_tracker";
  if (!j.contains(tracker_key)) throw Error(kState, "field 'growth_tracker' is missing");
  const int tracker = integer(j[tracker_key], tracker_key);
  if (const auto it = j.find("enabled"); it != j.end()) {
    if (!it->is_boolean())
      throw Error(kState, "field 'enabled' must be true or false (got " + it->dump() + ")");
    o.enabled = it->get<bool>();
  }

  // Report option errors against the field they came from.
  auto invalid = [](const char* name, const std::string& why) {
    return Error(kState, std::string("field '") + name + "' " + why);
  };
  if (!(std::isfinite(o.growth_factor) && o.growth_factor > 1.0))
    throw invalid("growth_factor", "must be > 1.0 (got " + show(o.growth_factor) + ")");
  if (!(o.backoff_factor > 0.0 && o.backoff_factor < 1.0))
    throw invalid("backoff_factor", "must be > 0 and < 1.0 (got " + show(o.backoff_factor) + ")");
  if (o.growth_interval < 1)
    throw invalid("growth_interval",
                  "must be >= 1 (got " + std::to_string(o.growth_interval) + ")");
  const float s = static_cast<float>(o.init_scale);
  if (!(std::isfinite(s) && s > 0.0f))
    throw invalid("scale",
                  "must be a positive finite float32 value (got " + show(o.init_scale) + ")");
  // GradScaler can never store a tracker outside [0, growth_interval); one there would
  // never reach growth_interval again.
  if (tracker < 0 || tracker >= o.growth_interval)
    throw invalid(tracker_key,
                  "must be >= 0 and < growth_interval = " + std::to_string(o.growth_interval) +
                      " (got " + std::to_string(tracker) + ")");

  LossScaler s_out(o);
  s_out.growth_tracker_ = tracker;
  return s_out;
}

}  // namespace fpguard
