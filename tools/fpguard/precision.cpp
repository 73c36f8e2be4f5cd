// --other-precision and --amax-margin of run and check (the parser of precisions is the
// library's: parse_precision, format.hpp).
#include <algorithm>

#include "cli.hpp"
#include "fpguard/error.hpp"

namespace fpguard::cli {

void add_scaled_options(CLI::App& cmd, ScaledArgs& a) {
  cmd.add_option("--other-precision", a.other,
                 "With a scaled --precision (fp8, mxfp8_e4m3, nvfp4, ...): the format of every "
                 "op but MatMul/Gemm/Conv (default bfloat16)");
  cmd.add_option("--amax-margin", a.amax_margin,
                 "With fp8/tensor:/channel: precisions: multiply each calibrated activation amax "
                 "by 2^M (default 0)");
  cmd.add_option("--keep-unscaled", a.keep_unscaled,
                 "With a scaled --precision: run these MatMul/Gemm/Conv nodes unscaled in "
                 "--other-precision (NODE,...)")
      ->take_all();
}

std::set<std::string> unscaled_nodes(const ScaledArgs& a, const Precision& p) {
  std::set<std::string> out;
  for (const auto& item : a.keep_unscaled) {
    std::size_t pos = 0;
    while (pos <= item.size()) {
      const std::size_t comma = std::min(item.find(',', pos), item.size());
      if (comma > pos) out.insert(item.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  if (!out.empty() && !p.scaled)
    throw Error("--keep-unscaled",
                "applies to a scaled --precision (fp8, mxfp8_e4m3, nvfp4, ...), not " + p.name());
  return out;
}

}  // namespace fpguard::cli
