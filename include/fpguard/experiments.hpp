// Precision experiments: the measurements people otherwise write as ad-hoc scripts, done
// exactly. (1) gemm_error: how far a matrix product computed in a low-precision format
// (inputs rounded, partial sums rounded in an accumulation format, output rounded) is
// from the truth, separated into input-rounding and arithmetic error and set against the
// classical bounds gamma_n |A||B| and sqrt(n) u |A||B|. (2) accum_limits: when a running
// sum in a format stops growing, and how naive, pairwise and Kahan sums of n terms fare.
// (3) targets: which formats each accelerator generation runs natively, as data, for the
// commands that pick a precision per target. docs/experiments.md explains every number.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fpguard/accumulation.hpp"
#include "fpguard/format.hpp"

namespace fpguard {

// ---- GEMM error ---------------------------------------------------------------------

// Where the entries of A and B come from.
struct Distribution {
  enum class Kind { normal, uniform };
  Kind kind = Kind::normal;  // N(0, 1)
  double lo = 0, hi = 1;     // uniform:LO:HI, LO < HI
};
// "normal" or "uniform:LO:HI"; throws Error("--distribution").
Distribution parse_distribution(std::string_view s);
std::string to_string(const Distribution& d);

// "128,256,1024": positive sizes, each small enough that the experiment's matrices fit in
// this machine's memory; throws Error("--sizes").
std::vector<std::int64_t> parse_sizes(std::string_view s);
// Bytes gemm_error needs for one size n (every n x n matrix it holds at once).
std::uint64_t gemm_error_bytes(std::int64_t n);

// A format name, or "same" (nullopt: the input format), for --accumulate / --output.
std::optional<Format> parse_format_or_same(std::string_view s);

// One configuration: what is rounded where. Make it with make_gemm_setup.
struct GemmSetup {
  Format input;       // A and B are rounded into it (nearest-even)
  Format accumulate;  // every partial sum is rounded into it
  Format output;      // C is rounded into it at the end
  AccumulationOrder order;
  // A scaled input format: A and B are quantized into it as the executor quantizes a
  // MatMul's operands (round_scaled on float32 carriers; blocks along K, i.e. A's rows and
  // B's columns; a channel: format scales A per tensor and B per column), and `input` is
  // float32, the carrier the GEMM multiplies.
  std::optional<ScaledFormat> scaled;
};
// accumulate / output: nullopt means "the input format". A float64 (any input of more
// than 26 bits) accumulates in float64 whatever is asked: its products are exact in no
// carrier. order: nullopt means library when accumulating in float32 inputs that float32
// holds exactly, else sequential. Throws Error for combinations that cannot be modelled
// (an unsigned input format, library with another accumulation format, ...).
GemmSetup make_gemm_setup(const Format& input, const std::optional<Format>& accumulate,
                          const std::optional<Format>& output,
                          const std::optional<AccumulationOrder>& order);
// A scaled input format: as above with float32 inputs (accumulate/output nullopt mean
// float32), `scaled` set.
GemmSetup make_gemm_setup(const ScaledFormat& input, const std::optional<Format>& accumulate,
                          const std::optional<Format>& output,
                          const std::optional<AccumulationOrder>& order);
// Either kind of input format.
using GemmInput = std::variant<Format, ScaledFormat>;
GemmSetup make_gemm_setup(const GemmInput& input, const std::optional<Format>& accumulate,
                          const std::optional<Format>& output,
                          const std::optional<AccumulationOrder>& order);

// The matrix products themselves, n x n, row-major, values in double carriers.
// The truth: a double GEMM (error <= n 2^-53 |A||B|), or with `compensated` Ogita-Rump-
// Oishi Dot2 (error ~ 2^-53 |C| + n^2 2^-106 |A||B|), needed when float64 is measured.
void gemm_reference(std::span<const double> a, std::span<const double> b, std::span<double> c,
                    std::int64_t n, bool compensated, int threads = 0);
// The accumulation model: each product is exact (a fused multiply-add; inputs of <= 26
// bits, or float64 accumulation), each addition is rounded into `accumulate` (nearest-even)
// in the given order. The result is not rounded to any output format. Library order runs
// oneDNN's sgemm (inputs must be float32 values). Float32/float64 sequential and blocked
// orders run vectorised kernels; everything else an exact emulation that rounds every
// partial sum with fpguard::round (the slow path: ~n^3 roundings).
void gemm_accumulate(std::span<const double> a, std::span<const double> b, std::span<double> c,
                     std::int64_t n, const Format& accumulate, const AccumulationOrder& order,
                     int threads = 0);
// The same for rectangular matrices: A m x k, B k x n, C m x n (row-major). The
// executor's MatMul/Gemm/Conv use it for low-precision accumulation (--accumulate).
void gemm_accumulate(std::span<const double> a, std::span<const double> b, std::span<double> c,
                     std::int64_t m, std::int64_t k, std::int64_t n, const Format& accumulate,
                     const AccumulationOrder& order, int threads = 0);
// The exact emulation whatever fast path exists: what the fast paths are tested against.
void gemm_accumulate_generic(std::span<const double> a, std::span<const double> b,
                             std::span<double> c, std::int64_t n, const Format& accumulate,
                             const AccumulationOrder& order, int threads = 0);

// Every matrix of one experiment (one size, one sample, one setup).
struct GemmMatrices {
  std::int64_t n = 0;
  std::vector<double> a, b;                  // drawn from the distribution
  std::vector<double> a_rounded, b_rounded;  // rounded into the input format
  std::vector<double> c;                     // measured: accumulated, rounded to output
  std::vector<double> c_ref;                 // truth from the rounded inputs
  std::vector<double> c_ref_unrounded;       // truth from the drawn inputs
  std::vector<double> abs_ab;                // |A_rounded| |B_rounded| (an upper estimate)
  // The bound on |C_ref(unrounded) - C_ref| of docs/experiments.md ("Input rounding"):
  // E_A (|B| + E_B) + |A| E_B, with E_A, E_B elementwise bounds on the input rounding
  // (scalar: u |x| + eta; scaled: from each value's scale and its group's amax). Empty
  // where there is no bound (an input overflowed, or a NaN scale).
  std::vector<double> input_bound;
  // Accumulated values that overflow the output format (or are not finite).
  std::uint64_t overflow = 0;
};
// The matrices of sample `sample` of size n: A and B depend only on (seed, n, sample), so
// every setup sees the same data.
GemmMatrices gemm_matrices(std::int64_t n, const GemmSetup& s, const Distribution& d,
                           std::uint64_t seed, int sample, int threads = 0);

// One row of the gemm-error table. Errors are against the truth from the rounded inputs;
// aggregated over samples as noted.
struct GemmErrorRow {
  std::int64_t size = 0;
  std::string format, accumulate, accumulation, output;
  int samples = 0;
  double mean_abs_error = 0;        // mean |C - C_ref| (mean over samples)
  double max_abs_error = 0;         // max |C - C_ref| (max over samples)
  double max_rel_error = 0;         // max |C - C_ref| / max(|C_ref|, floor) (max)
  double normwise_error = 0;        // ||C - C_ref||_F / ||C_ref||_F (mean)
  double input_rounding_error = 0;  // ||C_ref - C_ref(unrounded)||_F / ||C_ref(unrounded)||_F
  // ||GemmMatrices::input_bound||_F / ||C_ref(unrounded)||_F: the theory for the line
  // above; +inf where there is no bound. Mean over samples.
  double input_rounding_bound = 0;
  // [gamma_n (1 + u_out) || |A||B| ||_F + u_out ||C_ref||_F + n eta_out] / ||C_ref||_F with
  // gamma_n = n u / (1 - n u), u the accumulation format's unit roundoff, u_out and eta_out
  // the output rounding's (0 when the output holds every accumulated value). +inf where
  // n u >= 1 (no bound) or C_ref == 0. Mean over samples.
  double bound_deterministic = 0;
  // The same with sqrt(n) u in place of gamma_n (the typical size, not a bound). Mean.
  double bound_probabilistic = 0;
  // Outputs that overflowed (inf, NaN or saturated): the errors are then not meaningful
  // and the bounds do not apply.
  std::uint64_t overflow = 0;
  // Elements whose error exceeds the elementwise deterministic bound (plus the truth's own
  // error): 0 unless fpguard is wrong. nullopt where there is no bound or an overflow.
  std::optional<std::uint64_t> bound_violations;
  // Elements whose input-rounding error |C_ref - C_ref(unrounded)| exceeds input_bound
  // (plus the truths' own error): 0 unless fpguard is wrong; nullopt where no bound.
  std::optional<std::uint64_t> input_bound_violations;
  double rel_floor = 0;  // the floor of max_rel_error: max(u_acc, u_out) max|C_ref| (max)
};
GemmErrorRow gemm_error_row(const GemmMatrices& m, const GemmSetup& s);

struct GemmErrorOptions {
  std::vector<std::int64_t> sizes = {128, 256, 512, 1024};
  // Scalar or scaled; empty: float16, bfloat16, tf32, e4m3fn, e5m2, float32.
  std::vector<GemmInput> formats;
  std::optional<Format> accumulate = parse_format("float32");  // nullopt: the input's
  std::optional<Format> output;                                // nullopt: the input's
  std::optional<AccumulationOrder> order;                      // nullopt: automatic
  Distribution distribution;
  int samples = 1;
  std::uint64_t seed = 0;
  int threads = 0;  // 0: every core
};
// One row per (size, format), sizes outer. Throws Error for bad options.
std::vector<GemmErrorRow> gemm_error(const GemmErrorOptions& o);

// ---- accumulation limits ------------------------------------------------------------

struct AccumOptions {
  double value = 1.0;  // the increment (rounded into the format first)
  double start = 0.0;  // the accumulator's initial value (rounded into the format first)
  // Terms of the naive/pairwise/Kahan comparison; 0: 10^5, or the largest power of ten
  // whose sum n |value| the format can hold.
  std::uint64_t n = 0;
};

struct AccumRow {
  std::string format;
  double value = 0;  // the increment as the format holds it
  double start = 0;  // the initial accumulator as the format holds it
  // S_0 = start, S_k = fl(S_{k-1} + value). The number of additions after which the sum
  // no longer changes: the smallest k with fl(S_k + value) == S_k (2048 for ones in fp16:
  // S_2048 = 2048 and 2048 + 1 rounds back to 2048). Every later increment is lost, so
  // this is also the safe number of accumulation steps. nullopt when the sum overflows
  // first (overflow_count says when).
  std::optional<std::uint64_t> stagnation_count;
  std::optional<std::uint64_t> overflow_count;  // first k at which S_k is not finite
  // The number of additions before the first one that rounds (S_k == start + k value
  // exactly for every k up to it).
  std::uint64_t exact_count = 0;
  std::uint64_t n = 0;
  // |sum - n value| / |n value| for sums of n copies of value from 0, every operation
  // rounded into the format; +inf when the sum overflows.
  double naive_rel_error = 0, pairwise_rel_error = 0, kahan_rel_error = 0;
};

// Throws Error for formats without sign or zero (E8M0), and for a value that rounds to 0
// or overflows in the format.
AccumRow accum_limits(const Format& f, const AccumOptions& o = {});
// The same row computed by simulating every addition (O(stagnation count)); the tests
// check the fast version (O(binades)) against it.
AccumRow accum_limits_simulated(const Format& f, const AccumOptions& o = {});
// The formats of `accum --all`: every named format but E8M0.
std::vector<Format> accum_formats();

// fl(a + b) in format f, correctly rounded (nearest-even), for a and b values of f: the
// one addition every simulation here uses.
double add_rounded(double a, double b, const Format& f);

// ---- targets -------------------------------------------------------------------------

// An accelerator generation and the formats it computes in natively. Facts with their
// sources are in targets.cpp and docs/experiments.md.
struct Target {
  std::string name;                  // "sm_80", "cdna3", "sapphire-rapids", ...
  std::vector<std::string> aliases;  // "a100", "mi300x", ...
  std::string vendor;                // NVIDIA, AMD, Intel, Arm
  std::string products;              // "A100", ...
  // Floating formats (canonical names) the matrix units (tensor cores, MFMA, AMX,
  // BFMMLA) multiply natively ...
  std::vector<std::string> matrix_formats;
  // ... and those the vector units compute in (float32 everywhere).
  std::vector<std::string> vector_formats;
  std::vector<std::string> integer_formats;  // int8, int4 in the matrix units
  std::string recommended;                   // the safe default: bf16 where the matrix units run it
  // The float format with the highest matrix-unit throughput (ties: the more precise
  // one); fp8/fp6/fp4 need per-tensor or per-block scales.
  std::string fastest;
  std::string notes;
  std::string sources;
  // Block-scaled formats (format.hpp's ScaledFormat names) the matrix units run with
  // hardware block scales: OCP MX (e8m0 per 32), NVFP4 (e4m3 per 16).
  std::vector<std::string> scaled_formats{};
};
const std::vector<Target>& targets();
// By name or alias, case-insensitive; throws Error("target '<name>'") with "did you mean".
const Target& find_target(std::string_view name);
// Whether the target computes in `f` natively (matrix or vector units) ...
bool runs_natively(const Target& t, const Format& f);
// ... and in its matrix units.
bool runs_in_matrix_units(const Target& t, const Format& f);
Format recommended_format(const Target& t);
// Whether the matrix units run a scaled format natively: block formats with hardware block
// scales (Target::scaled_formats); per-tensor and per-channel scales, which a GEMM applies
// in its epilogue, wherever the element format runs in the matrix units.
bool runs_natively(const Target& t, const ScaledFormat& f);
// For `check`/`plan --target`: throws Error("--target <name>") when the target cannot run
// f natively, naming what it can run and what to use instead.
void require_native(const Target& t, const Format& f);
// The same for a scaled precision: a block format (MX, NVFP4, block:...) the target's matrix
// units run by name; scaled FP8 (tensor:/channel:) by its element format.
void require_native(const Target& t, const ScaledFormat& f);

}  // namespace fpguard
