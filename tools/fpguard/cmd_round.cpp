// `fpguard round`: round a float32/float64 .npy into a format, writing carrier values in
// the input dtype (or --dtype) or, with --encode, the format's bit patterns. The file is
// streamed: read, rounded, counted and written a piece at a time (values in the input's
// dtype straight into a map of the output).
#include <algorithm>
#include <cstring>
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

// The codes of rounded values `y` in `f` (values of f: encoding them rounds nothing).
template <class Code, class T>
void store_codes(std::span<const T> y, std::byte* dst, const Format& f) {
  const std::span<Code> codes(reinterpret_cast<Code*>(dst), y.size());
  if constexpr (std::is_same_v<T, float> && sizeof(Code) <= 2) {
    encode(y, codes, f);  // float16: the SIMD conversion
  } else {
    const std::vector<double> d(y.begin(), y.end());
    encode(std::span<const double>(d), codes, f);
  }
}

// Rounded values `y` stored at `dst` as `s` says (in another dtype than T's).
template <class T>
void store_piece(std::span<const T> y, std::byte* dst, const Storage& s) {
  switch (s.dtype) {
    case DType::uint8:
      return store_codes<std::uint8_t>(y, dst, *s.bits);
    case DType::uint16:
    case DType::float16:
      return store_codes<std::uint16_t>(y, dst, *s.bits);
    case DType::uint32:
      return store_codes<std::uint32_t>(y, dst, *s.bits);
    case DType::uint64:
      return store_codes<std::uint64_t>(y, dst, *s.bits);
    default:
      break;
  }
  // The other carrier: exact, since the dtype holds every value of the format.
  if (s.dtype == DType::float32)
    std::copy(y.begin(), y.end(), reinterpret_cast<float*>(dst));
  else
    std::copy(y.begin(), y.end(), reinterpret_cast<double*>(dst));
}

// The input read, rounded and counted a piece at a time: `place(first, n)` says where the
// rounded values of elements [first, first + n) go, `take(rounded, first)` takes them.
// Memory stays flat whatever the file's size.
template <class T, class Place, class Take>
RoundCounts stream(NpyReader& in, const Format& f, const RoundOptions& o, Place&& place,
                   Take&& take) {
  constexpr std::size_t kPiece = std::size_t{1} << 20;  // elements
  RoundCounts total;
  RoundOptions piece = o;
  for (std::span<const std::byte> bytes; !(bytes = in.next(kPiece)).empty();) {
    // The reader's views are aligned for T (its memory map only where the data is).
    const std::span<const T> x(reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T));
    const std::span<T> rounded = place(piece.first_index, x.size());
    const RoundCounts c = round_and_count(x, rounded, f, piece);
    take(std::span<const T>(rounded), piece.first_index);
    total.values += c.values;
    total.changed += c.changed;
    total.overflow += c.overflow;
    total.underflow += c.underflow;
    total.nan += c.nan;
    piece.first_index += x.size();
  }
  FPG_CHECK(piece.first_index == in.size());
  return total;
}

// Values stored as T: rounded straight into the output's pages (a shared map of it; .npy
// headers pad the data to 64 bytes, so it is aligned for T), each piece's pages given back
// once written (they stay in the page cache).
template <class T>
RoundCounts round_mapped(NpyReader& in, const std::string& output, const std::string& header,
                         const Format& f, const RoundOptions& o) {
  RoundCounts counts;
  write_file_mapped(output, header.size() + in.size() * sizeof(T), [&](const MappedOutput& out) {
    std::memcpy(out.bytes().data(), header.data(), header.size());
    T* data = reinterpret_cast<T*>(out.bytes().data() + header.size());
    counts = stream<T>(
        in, f, o, [&](std::size_t first, std::size_t n) { return std::span<T>(data + first, n); },
        [&](std::span<const T> y, std::size_t first) {
          out.release(header.size() + first * sizeof(T), y.size_bytes());
        });
  });
  return counts;
}

// Values stored in another dtype, or codes: rounded into a piece buffer, stored into
// another and written. (Through a map, the first write to each new page faults it in and
// zero-fills it: measured slower than write(2) for these.)
template <class T>
RoundCounts round_buffered(NpyReader& in, const std::string& output, const std::string& header,
                           const Format& f, const RoundOptions& o, const Storage& s) {
  RoundCounts counts;
  write_file_atomic(output, [&](std::ostream& out) {
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    std::vector<T> y;
    std::vector<std::byte> stored;
    counts = stream<T>(
        in, f, o,
        [&](std::size_t, std::size_t n) {
          y.resize(n);
          return std::span<T>(y);
        },
        [&](std::span<const T> rounded, std::size_t) {
          stored.resize(rounded.size() * itemsize(s.dtype));
          store_piece(rounded, stored.data(), s);
          out.write(reinterpret_cast<const char*>(stored.data()),
                    static_cast<std::streamsize>(stored.size()));
        });
  });
  return counts;
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
  const bool f32 = in.dtype() == DType::float32;
  if (s.dtype == in.dtype())
    summary.counts = f32 ? round_mapped<float>(in, a.output, header, f, o)
                         : round_mapped<double>(in, a.output, header, f, o);
  else
    summary.counts = f32 ? round_buffered<float>(in, a.output, header, f, o, s)
                         : round_buffered<double>(in, a.output, header, f, o, s);
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
