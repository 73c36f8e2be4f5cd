// --other-precision and --amax-margin of run and check (the parser of precisions is the
// library's: parse_precision, format.hpp).
#include "cli.hpp"

namespace fpguard::cli {

void add_scaled_options(CLI::App& cmd, ScaledArgs& a) {
  cmd.add_option("--other-precision", a.other,
                 "With a scaled --precision (fp8, mxfp8_e4m3, nvfp4, ...): the format of every "
                 "op but MatMul/Gemm/Conv (default bfloat16)");
  cmd.add_option("--amax-margin", a.amax_margin,
                 "With fp8/tensor:/channel: precisions: multiply each calibrated activation amax "
                 "by 2^M (default 0)");
}

}  // namespace fpguard::cli
