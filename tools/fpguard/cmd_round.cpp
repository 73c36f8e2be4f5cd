// `fpguard round`: round a float32/float64 .npy into a format, writing carrier values in
// the input dtype or, with --encode, the format's bit patterns.
#include <iostream>
#include <utility>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/report.hpp"
#include "fpguard/round.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::cli {

namespace {

struct RoundArgs {
  std::string format, input, output, rounding = "nearest-even";
  std::uint64_t seed = 0;
  bool saturate = false, flush = false, encode = false;
};

DType code_dtype(const Format& f) {
  if (f.bits() <= 8) return DType::uint8;
  if (f.bits() <= 16) return DType::uint16;
  if (f.bits() <= 32) return DType::uint32;
  return DType::uint64;
}

template <class Code>
void encode_into(const std::vector<double>& values, Tensor& out, const Format& f,
                 const RoundOptions& o) {
  encode(std::span<const double>(values), out.data<Code>(), f, o);
}

void run(const RoundArgs& a) {
  const Format f = parse_format(a.format);
  RoundOptions o;
  o.rounding = parse_rounding(a.rounding);
  o.seed = a.seed;
  o.saturate = a.saturate;
  o.flush_subnormals = a.flush;
  check_not_same_file(a.input, a.output, "-o");
  const Tensor in = read_npy(a.input);
  if (in.dtype() != DType::float32 && in.dtype() != DType::float64)
    throw Error(a.input, "dtype " + std::string(to_string(in.dtype())) +
                             " is not supported by round (float32 or float64 only)");

  report::RoundSummary summary{
      .output = a.output, .values = in.size(), .input = in.dtype(), .format = f.name, .options = o};
  Tensor out;
  if (a.encode) {
    // Codes from the values in double (exact for both input dtypes); the counts from the
    // same values rounded.
    std::vector<double> x(in.size()), r(in.size());
    if (in.dtype() == DType::float32)
      std::copy(in.data<float>().begin(), in.data<float>().end(), x.begin());
    else
      std::copy(in.data<double>().begin(), in.data<double>().end(), x.begin());
    out = Tensor(code_dtype(f), in.shape());
    switch (out.dtype()) {
      case DType::uint8:
        encode_into<std::uint8_t>(x, out, f, o);
        break;
      case DType::uint16:
        encode_into<std::uint16_t>(x, out, f, o);
        break;
      case DType::uint32:
        encode_into<std::uint32_t>(x, out, f, o);
        break;
      default:
        encode_into<std::uint64_t>(x, out, f, o);
        break;
    }
    round(std::span<const double>(x), std::span<double>(r), f, o);
    summary.counts = count_rounding(std::span<const double>(x), std::span<const double>(r), f);
    summary.codes = out.dtype();
  } else if (in.dtype() == DType::float32) {
    out = Tensor::uninitialized(DType::float32, in.shape());
    round(in.data<float>(), out.data<float>(), f, o);
    summary.counts = count_rounding(in.data<float>(), std::as_const(out).data<float>(), f);
  } else {
    out = Tensor::uninitialized(DType::float64, in.shape());
    round(in.data<double>(), out.data<double>(), f, o);
    summary.counts = count_rounding(in.data<double>(), std::as_const(out).data<double>(), f);
  }
  write_npy(a.output, out);
  report::render(std::cout, summary);
}

}  // namespace

void add_round(CLI::App& app) {
  auto* cmd = app.add_subcommand("round", "Round a float32/float64 .npy into a format");
  auto a = std::make_shared<RoundArgs>();
  cmd->add_option("format", a->format, "Target format (float16, bf16, float8_e4m3fn, e5m7, ...)")
      ->required();
  cmd->add_option("input", a->input, "Input .npy (float32 or float64)")->required();
  cmd->add_option("-o,--output", a->output, "Output .npy (written atomically)")->required();
  cmd->add_option("--rounding", a->rounding,
                  "nearest-even (default), toward-zero, up, down, stochastic");
  cmd->add_option("--seed", a->seed, "Seed for --rounding stochastic (default 0)");
  cmd->add_flag("--saturate", a->saturate, "Overflow to +-max instead of inf/NaN");
  cmd->add_flag("--flush-subnormals", a->flush, "Flush subnormal results to zero (FTZ)");
  cmd->add_flag("--encode", a->encode,
                "Write the format's bit patterns (uint8/16/32/64) instead of values");
  cmd->footer(
      "Examples:\n  fpguard round float16 x.npy -o x16.npy\n"
      "  fpguard round float8_e4m3fn x.npy -o codes.npy --encode --saturate\n"
      "  fpguard round bf16 x.npy -o y.npy --rounding stochastic --seed 7");
  cmd->callback([a] { run(*a); });
}

}  // namespace fpguard::cli
