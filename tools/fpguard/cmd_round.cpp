// `fpguard round`: round a float32/float64 .npy into a format, writing carrier values in
// the input dtype (or --dtype) or, with --encode, the format's bit patterns. The file is
// streamed: read, rounded, counted and written a piece at a time.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/report.hpp"
#include "fpguard/round.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::cli {

namespace {

struct RoundArgs {
  std::string format, input, output, rounding = "nearest-even", dtype;
  std::uint64_t seed = 0;
  bool saturate = false, flush = false, encode = false;
  std::optional<int> axis;
};

DType code_dtype(const Format& f) {
  if (f.bits() <= 8) return DType::uint8;
  if (f.bits() <= 16) return DType::uint16;
  if (f.bits() <= 32) return DType::uint32;
  return DType::uint64;
}

// What the rounded values are written as.
struct Storage {
  DType dtype = DType::float32;  // of the .npy
  std::optional<Format> bits{};  // --encode: the format's codes; float16: IEEE half bits
};

// --dtype (float16, bfloat16: as float32 values, float32, float64), else the input's; a
// dtype that cannot hold every value of the format is refused.
Storage storage_of(const RoundArgs& a, DType input, const Format& f) {
  if (a.encode) {
    if (!a.dtype.empty()) throw Error("--dtype " + a.dtype, "--encode writes codes, not values");
    return {.dtype = code_dtype(f), .bits = f};
  }
  if (a.dtype.empty()) return {.dtype = input};
  const Format wide = parse_format(a.dtype);
  const std::vector<std::pair<std::string, DType>> carriers = {
      {"float16", DType::float16},
      {"bfloat16", DType::float32},  // NumPy has no bfloat16: its values as float32
      {"float32", DType::float32},
      {"float64", DType::float64}};
  const auto c = std::find_if(carriers.begin(), carriers.end(),
                              [&](const auto& p) { return p.first == wide.name; });
  if (c == carriers.end())
    throw Error("--dtype " + a.dtype, "expected float16, bfloat16, float32 or float64");
  if (!holds_every_value(wide, f))
    throw Error("--dtype " + a.dtype, wide.name + " cannot hold every " + f.name +
                                          " value exactly; choose a wider dtype");
  if (c->second == DType::float16) return {.dtype = DType::float16, .bits = wide};
  return {.dtype = c->second};
}

void write_span(std::ostream& out, const void* data, std::size_t bytes) {
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

// The codes of rounded values `y` in `f` (values of f: encoding them rounds nothing).
template <class Code, class T>
void write_codes(std::ostream& out, std::span<const T> y, const Format& f) {
  std::vector<Code> codes(y.size());
  if constexpr (std::is_same_v<T, float> && sizeof(Code) <= 2) {
    encode(y, std::span<Code>(codes), f);  // float16: the SIMD conversion
  } else {
    const std::vector<double> d(y.begin(), y.end());
    encode(std::span<const double>(d), std::span<Code>(codes), f);
  }
  write_span(out, codes.data(), codes.size() * sizeof(Code));
}

// Rounded values `y` written as `s` says.
template <class T>
void write_piece(std::ostream& out, std::span<const T> y, const Storage& s) {
  switch (s.dtype) {
    case DType::uint8:
      return write_codes<std::uint8_t>(out, y, *s.bits);
    case DType::uint16:
    case DType::float16:
      return write_codes<std::uint16_t>(out, y, *s.bits);
    case DType::uint32:
      return write_codes<std::uint32_t>(out, y, *s.bits);
    case DType::uint64:
      return write_codes<std::uint64_t>(out, y, *s.bits);
    default:
      break;
  }
  if (s.dtype == (std::is_same_v<T, float> ? DType::float32 : DType::float64))
    return write_span(out, y.data(), y.size_bytes());
  // The other carrier: exact, since the dtype holds every value of the format.
  if (s.dtype == DType::float32) {
    const std::vector<float> v(y.begin(), y.end());
    return write_span(out, v.data(), v.size() * sizeof(float));
  }
  const std::vector<double> v(y.begin(), y.end());
  write_span(out, v.data(), v.size() * sizeof(double));
}

// The input read, rounded, counted and written a piece at a time: memory stays flat
// whatever the file's size.
template <class T>
RoundCounts stream(NpyReader& in, std::ostream& out, const Format& f, const RoundOptions& o,
                   const Storage& s) {
  constexpr std::size_t kPiece = std::size_t{1} << 20;  // elements
  std::vector<T> y(std::clamp<std::size_t>(in.size(), 1, kPiece));
  RoundCounts total;
  RoundOptions piece = o;
  for (std::span<const std::byte> bytes; !(bytes = in.next(kPiece)).empty();) {
    // The reader's views are aligned for T (its memory map only where the data is).
    const std::span<const T> x(reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T));
    const std::size_t n = x.size();
    const RoundCounts c = round_and_count(x, std::span<T>(y.data(), n), f, piece);
    write_piece(out, std::span<const T>(y.data(), n), s);
    total.values += c.values;
    total.changed += c.changed;
    total.overflow += c.overflow;
    total.underflow += c.underflow;
    total.nan += c.nan;
    piece.first_index += n;
  }
  return total;
}

// A scaled format needs the whole tensor (its scales come from its amax): read at once.
void run_scaled(const RoundArgs& a, const ScaledFormat& f) {
  if (a.rounding != "nearest-even" || a.flush)
    throw Error(a.rounding != "nearest-even" ? "--rounding" : "--flush-subnormals",
                f.name + " rounds to nearest-even, saturating (its definition)");
  if (!a.dtype.empty()) throw Error("--dtype " + a.dtype, "not available for scaled formats");
  if (a.encode && std::filesystem::path(a.output).extension() != ".npz")
    throw Error("-o " + a.output, "--encode of a scaled format writes an .npz (codes, scales)");
  check_not_same_file(a.input, a.output, "-o");
  Tensor x = read_npy(a.input);
  if (x.dtype() != DType::float32 && x.dtype() != DType::float64)
    throw Error(a.input, "dtype " + std::string(to_string(x.dtype())) +
                             " is not supported by round (float32 or float64 only)");
  ScaledLayout layout{.shape = x.shape(),
                      .axis = a.axis.value_or(f.scope == ScaleScope::channel ? 0 : -1)};
  ScaledCodes codes;
  ScaledCodes* want = a.encode ? &codes : nullptr;
  report::RoundSummary summary{
      .output = a.output, .values = x.size(), .input = x.dtype(), .format = f.name};
  summary.scaled = x.dtype() == DType::float32
                       ? round_scaled(x.data<float>(), x.data<float>(), layout, f, {}, want)
                       : round_scaled(x.data<double>(), x.data<double>(), layout, f, {}, want);
  summary.scope = std::string(to_string(f.scope));
  summary.block_size = f.block_size;
  summary.axis = layout.axis;
  if (a.encode) {
    const auto entries = scaled_code_tensors(codes, f, x.dtype(), x.shape());
    summary.codes = entries.front().tensor.dtype();
    write_npz(a.output, entries, false);
  } else {
    write_npy(a.output, x);
  }
  report::render(std::cout, summary);
}

void run(const RoundArgs& a) {
  if (auto sf = find_scaled_format(a.format)) return run_scaled(a, *sf);
  if (a.axis) throw Error("--axis", "only scaled formats (mxfp8_e4m3, nvfp4, fp8, ...) have one");
  const Format f = parse_format(a.format);
  RoundOptions o;
  o.rounding = parse_rounding(a.rounding);
  o.seed = a.seed;
  o.saturate = a.saturate;
  o.flush_subnormals = a.flush;
  check_not_same_file(a.input, a.output, "-o");
  NpyReader in(a.input);
  if (in.dtype() != DType::float32 && in.dtype() != DType::float64)
    throw Error(a.input, "dtype " + std::string(to_string(in.dtype())) +
                             " is not supported by round (float32 or float64 only)");
  const Storage s = storage_of(a, in.dtype(), f);

  report::RoundSummary summary{
      .output = a.output, .values = in.size(), .input = in.dtype(), .format = f.name, .options = o};
  if (a.encode) summary.codes = s.dtype;
  if (!a.dtype.empty()) summary.stored = s.dtype;
  const std::string header = npy_header(s.dtype, in.shape(), a.output);
  write_file_atomic(a.output, [&](std::ostream& out) {
    write_span(out, header.data(), header.size());
    summary.counts = in.dtype() == DType::float32 ? stream<float>(in, out, f, o, s)
                                                  : stream<double>(in, out, f, o, s);
  });
  report::render(std::cout, summary);
}

}  // namespace

void add_round(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "round", "Round a float32/float64 .npy into a format, scalar or scaled (MX, NVFP4, FP8)");
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
                "Write the format's bit patterns (uint8/16/32/64) instead of values; for a "
                "scaled format an .npz of codes, scales (and global_scale for nvfp4)");
  cmd->add_option("--axis", a->axis,
                  "Scaled formats: the axis blocks run along (default the last), or the "
                  "channel axis of channel: formats (default 0)");
  cmd->add_option("--dtype", a->dtype,
                  "Write the values as float16 (a real <f2 .npy), bfloat16 (as float32 values), "
                  "float32 or float64 (default: the input's)");
  cmd->footer(
      "Examples:\n  fpguard round float16 x.npy -o x16.npy\n"
      "  fpguard round float8_e4m3fn x.npy -o codes.npy --encode --saturate\n"
      "  fpguard round bf16 x.npy -o y.npy --rounding stochastic --seed 7\n"
      "  fpguard round float16 x.npy -o x16.npy --dtype float16\n"
      "  fpguard round mxfp4_e2m1 w.npy -o w4.npy --axis 1\n"
      "  fpguard round nvfp4 w.npy -o w.npz --encode");
  cmd->callback([a] { run(*a); });
}

}  // namespace fpguard::cli
