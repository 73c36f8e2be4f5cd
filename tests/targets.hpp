// Tests that run kernels on every Highway target compiled in and supported here, the
// run-time dispatcher seeing one target at a time (the float32 kernels of vmath,
// depthwise, gemv, rounding and stats).
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>
#include <functional>

namespace fpguard::test {

// Restores Highway's own target choice however the test ends.
struct TargetGuard {
  ~TargetGuard() { hwy::SetSupportedTargetsForTest(0); }
};

// Runs body once per target compiled in and supported here, the dispatcher seeing only
// that one.
inline void on_every_target(const std::function<void()>& body) {
  TargetGuard guard;
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    ASSERT_EQ(hwy::SupportedTargets(), target);
    SCOPED_TRACE(hwy::TargetName(target));
    body();
  }
}

}  // namespace fpguard::test
