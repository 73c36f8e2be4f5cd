// plan.json as `fpguard convert --plan` reads it back: any text gives a PlanFile or an
// Error naming the file; what is accepted keeps the schema's promises.
#include <string>

#include "fpguard/analysis.hpp"
#include "fpguard/report.hpp"
#include "fuzz_util.hpp"

using namespace fpguard;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::expect_errors_only([&] {
    const auto p = report::parse_plan(fuzz::as_text(data, size), "--plan fuzz.json");
    for (const auto& [value, k] : p.scaled) FUZZ_ASSERT(k >= 1 && k <= 64);
  });
  return 0;
}
