// LossScaler: dynamic loss scaling with exactly the semantics of PyTorch's
// torch.cuda.amp.GradScaler (as of torch 1.13: grad_scaler.py and its CUDA kernels
// _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_), so that a training
// loop, a simulation or a test can replay what GradScaler would do, step by step and bit
// for bit (docs/safety.md).
//
// The scale is a float32 value, as GradScaler's scale tensor is: init_scale and
// update(new_scale) are rounded to float32, and each update computes
// float32(double(scale) * factor), as the CUDA kernel does. Unscaling multiplies by
// inv_scale = float32(1 / double(scale)) (grad_scaler.py: scale.double().reciprocal()
// .float()), in float32 for float gradients and in double for double gradients, as the
// kernel's opmath does; the non-finite check is the kernel's isfinite((float)g), so a
// finite double gradient too large for float32 counts as found_inf.
//
// Divergences from GradScaler, all deliberate and documented: no lazy initialisation
// (GradScaler.get_scale() returns the unrounded init_scale until the first scale() call;
// scale() here is always the float32 value); options are validated (growth_factor > 1,
// 0 < backoff_factor < 1 and a positive float32 init_scale, like GradScaler's asserts, plus
// growth_interval >= 1, which GradScaler accepts and then never grows); and, like torch
// 1.13 but unlike torch >= 2.1, growth is not capped: the scale can grow to inf.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace fpguard {

class LossScaler {
 public:
  struct Options {
    double init_scale = 65536.0;  // 2^16
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int growth_interval = 2000;
    bool enabled = true;
  };

  LossScaler() : LossScaler(Options{}) {}
  // Throws fpguard::Error("LossScaler", ...) for invalid options (see above).
  explicit LossScaler(const Options& o);

  // The current scale (a float32 value), or 1.0 when disabled (GradScaler.get_scale()).
  double scale() const { return enabled_ ? static_cast<double>(scale_) : 1.0; }
  // Consecutive clean steps since the last growth or backoff; 0 when disabled.
  int growth_tracker() const { return enabled_ ? growth_tracker_ : 0; }
  bool enabled() const { return enabled_; }
  double growth_factor() const { return growth_factor_; }
  double backoff_factor() const { return backoff_factor_; }
  int growth_interval() const { return growth_interval_; }

  // loss * scale (GradScaler.scale(loss)); the loss unchanged when disabled. The float
  // overload multiplies in float32, as torch does for a float32 loss tensor; the double
  // overload multiplies in double (exact for the usual power-of-two scales).
  double scale_loss(double loss) const;
  float scale_loss(float loss) const;

  // Unscales the gradients in place and reports whether any of them was inf or NaN
  // (GradScaler.unscale_: every gradient is multiplied, even when one is non-finite).
  // Several arrays in one call share one found_inf. Disabled: leaves the gradients alone
  // and returns false (GradScaler.step then neither unscales nor checks).
  bool unscale_and_check(std::span<float> grads) const;
  bool unscale_and_check(std::span<double> grads) const;
  bool unscale_and_check(std::span<const std::span<float>> grads) const;
  bool unscale_and_check(std::span<const std::span<double>> grads) const;
  bool unscale_and_check(std::initializer_list<std::span<float>> grads) const;
  bool unscale_and_check(std::initializer_list<std::span<double>> grads) const;

  // End of an iteration (GradScaler.update()): found_inf -> scale *= backoff_factor and
  // growth_tracker = 0; otherwise growth_tracker += 1, and when it reaches growth_interval,
  // scale *= growth_factor and growth_tracker = 0. No-op when disabled.
  void update(bool found_inf);
  // GradScaler.update(new_scale): sets the scale (rounded to float32); leaves
  // growth_tracker alone. No-op when disabled. Like torch's fill_ of a float32 tensor it
  // throws (fpguard::Error) for a finite |new_scale| > float32 max and takes anything else
  // unchecked (0, negative, inf, NaN: the caller's business, as in PyTorch).
  void update(double new_scale);

  // State as a JSON object (GradScaler.state_dict() plus "enabled"): fields scale,
  // growth_factor, backoff_factor, growth_interval, growth_tracker, enabled.
  std::string to_json() const;
  // The inverse. Accepts PyTorch's key "_growth_tracker" for "growth_tracker"; "enabled"
  // is optional (default true). Throws fpguard::Error("LossScaler state", ...) naming the
  // field for malformed JSON, missing fields, wrong types and invalid values.
  static LossScaler from_json(std::string_view json);

 private:
  float scale_ = 65536.0f;
  int growth_tracker_ = 0;
  double growth_factor_ = 2.0;
  double backoff_factor_ = 0.5;
  int growth_interval_ = 2000;
  bool enabled_ = true;
};

}  // namespace fpguard
