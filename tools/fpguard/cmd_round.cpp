// `fpguard round`: round a float32/float64 .npy into a format, writing carrier values in
// the input dtype or, with --encode, the format's bit patterns.
#include <fmt/format.h>

#include <cmath>
#include <iostream>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
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

  // Rounded values in double (exact for both input dtypes), for the summary and --encode.
  std::vector<double> x(in.size()), r(in.size());
  if (in.dtype() == DType::float32)
    std::copy(in.data<float>().begin(), in.data<float>().end(), x.begin());
  else
    std::copy(in.data<double>().begin(), in.data<double>().end(), x.begin());

  Tensor out;
  if (a.encode) {
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
  } else if (in.dtype() == DType::float32) {
    out = Tensor(DType::float32, in.shape());
    round(in.data<float>(), out.data<float>(), f, o);
    std::copy(out.data<float>().begin(), out.data<float>().end(), r.begin());
  } else {
    out = Tensor(DType::float64, in.shape());
    round(in.data<double>(), out.data<double>(), f, o);
    std::copy(out.data<double>().begin(), out.data<double>().end(), r.begin());
  }
  write_npy(a.output, out);

  std::size_t overflow = 0, underflow = 0, nan = 0, changed = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]))
      ++nan;
    else if (std::isfinite(x[i]) && (!std::isfinite(r[i]) || std::fabs(x[i]) > f.max()))
      ++overflow;  // became inf/NaN, or was saturated
    else if (x[i] != 0 && r[i] == 0)
      ++underflow;
    if (!(r[i] == x[i]) && !(std::isnan(r[i]) && std::isnan(x[i]))) ++changed;
  }
  std::cout << fmt::format(
      "{}: {} {} values rounded to {} ({}{}{}): {} changed, {} overflowed, {} underflowed to zero, "
      "{} NaN in input{}\n",
      a.output, in.size(), to_string(in.dtype()), f.name, to_string(o.rounding),
      o.saturate ? ", saturate" : "", o.flush_subnormals ? ", flush-subnormals" : "", changed,
      overflow, underflow, nan,
      a.encode ? fmt::format("; wrote {} codes", to_string(out.dtype())) : "");
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
