// Scaled formats as the commands and the Python module use them, beyond the format table
// (format.hpp) and the quantizer (round.hpp): the precision a model runs in, scalar or
// scaled, parsed once for the CLI's --precision/--other-precision and Python's
// precision=/other_precision= (the same "did you mean" and refusals); the executor that runs
// a model in a scaled precision (static activation scales calibrated first); and the
// encoding of a scaled tensor as `fpguard round --encode` writes it and fpguard.encode
// returns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "fpguard/exec.hpp"
#include "fpguard/format.hpp"
#include "fpguard/round.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard {

// A scalar or a scaled format by name; a misspelt name gets a "did you mean" from both
// tables (a scalar-looking one keeps parse_format's). Throws fpguard::Error.
std::variant<Format, ScaledFormat> parse_any_format(const std::string& name);

// The precision a model runs in (run, check): a scalar format, or a scaled one whose
// MatMul/Gemm/Conv operands are quantized into it while the other ops run in `format`.
struct Precision {
  Format format{};  // what the nodes run in: the other precision when scaled
  std::optional<ScaledFormat> scaled{};
  const std::string& name() const { return scaled ? scaled->name : format.name; }
};
// `name` (any format), with `other` the format of the other ops when `name` is scaled
// (ignored otherwise): a scalar low-precision format, else
// Error::in_option("other_precision", other, ...).
Precision parse_precision(const std::string& name, const std::string& other);
// The precision of an analysis that takes scalar formats only (`command`: its name, as
// the message words it): Error::in_option("precision", name, ...) for a scaled one.
Format parse_scalar_precision(const std::string& name, const std::string& command);

// The encoding of a scaled format (round_scaled's ScaledCodes of a tensor of dtype `input`
// and shape `shape`): "codes" (int8 for MXINT8, else uint8 up to 8 bits, uint16), "scales"
// (their codes as uint8, or for the amax rule their values in `input`'s dtype) and, for
// two-level scales, "global_scale" (a float32 scalar): the entries of the .npz.
std::vector<NamedTensor> scaled_code_tensors(const ScaledCodes& c, const ScaledFormat& f,
                                             DType input, const std::vector<std::int64_t>& shape);

namespace exec {

// The executor of `m` in `o` that `fpguard run` and fpguard.run use: a scaled precision of
// the amax rule (o.policy.scaled: fp8, tensor:, channel:) first gets its activations' amax
// calibrated on `samples` by a run that emulates nothing (static scaling, as deployed).
Executor calibrated_executor(const model::Model& m, RunOptions o,
                             const std::vector<std::vector<NamedValue>>& samples);

}  // namespace exec

}  // namespace fpguard
