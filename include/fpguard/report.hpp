// The report layer: everything a person or a program reads. The analysis layers return
// data (kinds, numbers, structured fixes); this layer words it, in one number format, as
// text tables fitted to the terminal, and writes and reads back the JSON of every result
// (each with a schema_version, documented field by field in docs/). The CLI parses flags,
// calls the library and renders through here; a Python API or a web page can do the same.
#pragma once

#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fpguard/analysis.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/inputs.hpp"
#include "fpguard/round.hpp"
#include "fpguard/stats.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::report {

using Json = nlohmann::ordered_json;

// ---- numbers: one policy everywhere -----------------------------------------------------
// Up to 4 significant digits, plain decimals between 1e-3 and 1e6 with trailing zeros
// dropped (0.5, 12.25, 65504), scientific notation outside (1e+20, 2.98e-08); "inf",
// "-inf", "nan".
std::string num(double v);
// Thousands separated by commas: 659831 -> "659,831".
std::string count(std::uint64_t n);
// `digits` decimals ("0.999123"); "nan"/"inf" for those.
std::string fixed(double v, int digits);
// Headroom in bits, one decimal ("12.3b"), "-" for +inf (an all-zero tensor).
std::string bits(double v);
// A JSON number; null for inf and NaN (JSON has neither; each schema documents it).
Json number(double v);
// num(), but "n/a" for NaN: a statistic with nothing to measure (an error where no value
// is finite in both runs).
std::string num_na(double v);

// ---- text tables -------------------------------------------------------------------------
enum class Align { left, right };

// Columns sized from their content; when a width is given, the widest left-aligned
// column (node names) is shortened in the middle until the rows fit.
class Table {
 public:
  struct Column {
    std::string header;
    Align align = Align::left;
  };
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void add(std::vector<std::string> cells);
  std::size_t rows() const { return rows_.size(); }
  // Each line starts with `indent`; width 0: no limit.
  void render(std::ostream& out, std::size_t width = 0, std::string_view indent = "  ") const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// `s` in at most `width` characters (UTF-8 aware): the middle replaced by "…".
std::string shorten_middle(std::string_view s, std::size_t width);

// ---- the terminal ------------------------------------------------------------------------
enum class ColorMode { automatic, always, never };
// "auto", "always" or "never"; an Error naming `where` otherwise.
ColorMode parse_color(const std::string& value, const std::string& where);

// What the process may do on its terminal: colour on stdout (a TTY, NO_COLOR unset, or
// --color always), a progress line on stderr (a TTY and not --quiet), the width of stdout.
struct Terminal {
  bool color = false;
  bool progress = false;
  std::size_t width = 0;  // 0: not a terminal (no fitting)
  static Terminal detect(ColorMode mode, bool quiet);

  std::string bold(std::string_view s) const;
  std::string good(std::string_view s) const;  // green
  std::string bad(std::string_view s) const;   // red
  std::string dim(std::string_view s) const;
};

// One line on stderr, redrawn in place: "label [#####.....] 42% ETA 3s" (with a detail:
// "label [#####.....] 42% 5/12 sets ETA 3s"), or a free-text step; erased when done.
// Silent unless terminal.progress.
class Progress {
 public:
  Progress(const Terminal& t, std::string label);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void update(std::size_t done, std::size_t total, std::string_view detail = {});
  void step(std::string_view what);

 private:
  bool on_;
  std::string label_;
  int last_ = -1;
  bool drawn_ = false;
  double start_;
};

// ---- wording of the analysis' findings ---------------------------------------------------
std::string describe(const analysis::Origin& o);
std::string describe(const analysis::Fix& f);  // names the CLI flags that apply it
std::string describe(const analysis::RuleFinding& r);
std::string describe(const analysis::Note& n, const analysis::Diagnosis& d);
std::string describe(const analysis::Reason& r, const std::string& precision);
std::string describe(const analysis::ScaleRefusal& r);
// "the model as it is", "scaling the input of /Pow", "3 nodes in float32", "without /Add".
std::string describe(const analysis::PlanStep& s);
// "image uniform [-1, 1]", "ids constant 0", "z normal (mean 0, std 1)".
std::string describe(const inputs::Generated& g);
// "(generated inputs: image uniform [-1, 1]; ranges unverified)": what the verdict of a
// check, a plan or a conversion verified on generated inputs holds under; "" for none.
std::string generated_qualifier(const std::vector<inputs::Generated>& generated);
// What the verdict holds under, after PASS/FAIL: "(generated inputs: image uniform [-1, 1];
// ranges unverified)", "(2 overflows absorbed: /ln1/Pow, /ln2/Pow)", each when it applies
// (space-separated); "" when neither does.
std::string verdict_qualifiers(const analysis::Diagnosis& d);
// The advice that goes with generated inputs ("" when every input was given).
std::string generated_advice(const std::vector<inputs::Generated>& generated);

// One fix for every origin of a diagnosis at once (the text and the HTML word it the same).
struct CombinedFix {
  std::size_t origins = 0;
  // The union of the origins' float32 sets (Origin::keep_fp32), in topological order.
  std::vector<std::string> keep_fp32;
  // The exact scalings, the first scale fix of each origin that has one, in origin order,
  // and the float32 set of the origins without one.
  std::vector<analysis::Fix> scalings;
  std::vector<std::string> keep_rest;
};
CombinedFix combine_fixes(const analysis::Diagnosis& d);
// "fix all 2 at once: --keep-fp32 ...; or ...; `fpguard plan` ..." ("" for fewer than two
// origins).
std::string describe(const CombinedFix& c);
// A FAIL that no origin explains (an accuracy loss spread thin): the most damaging nodes
// and `fpguard plan`; "" otherwise.
std::string next_steps(const analysis::Diagnosis& d);
// Why a failing check found no origin, naming where the trouble shows first (one line).
std::string describe(const analysis::FirstTrouble& f, const analysis::Diagnosis& d);
// A sequence or optional output whose emulated value differs in kind or length: "the
// emulated run gives a sequence of 2 where the reference gives a sequence of 3 (input set
// 0; 1 set in all)", over `sets` mismatched sets.
std::string describe(const analysis::OutputMismatch& m, std::uint64_t sets);
// "and 3 more findings below the threshold (...); --json has all" for `minor` findings
// (after_others: some were shown before; else "3 findings ...").
std::string minor_findings(std::size_t minor, bool after_others);

// ---- check -------------------------------------------------------------------------------
inline constexpr int kCheckSchema = 3;
Json to_json(const analysis::Diagnosis& d);
// Several precisions of one model: {"schema_version", "model", "verdict", "checks": [...]}.
Json to_json(const std::vector<analysis::Diagnosis>& ds, const std::string& model);
// A diagnosis read back from to_json(d) (numbers exact; the sentences are re-derived).
// Every error names `where`.
analysis::Diagnosis diagnosis_from_json(const Json& j, const std::string& where);

// ---- partial results of a sharded check (docs/scale.md) -----------------------------------
// `check --shard I/N --json part.json` writes one: what identifies the check (the model and
// its data by SHA-256, the input directory's size, every option that affects results) and
// each precision's analysis::CheckState, and the model's graph without its weights.
// `fpguard merge` reads the parts back, refuses parts of different checks, merges the
// states and finishes the diagnosis from them alone.
// 2: the scaled options and activation amax; 3: the graph and the constants' scans; 4:
// comparisons as flat arrays (null when empty), histograms as [exponent, count, ...].
inline constexpr int kCheckPartSchema = 4;

struct FileId {
  std::string path;    // as given (the model, the reference model) or canonical (data)
  std::string sha256;  // of its bytes
  bool operator==(const FileId&) const = default;
};

struct CheckPart {
  FileId model{};
  std::vector<FileId> data{};  // the model's external data files
  std::optional<FileId> reference_model{};
  std::vector<FileId> reference_data{};
  // The input options (inputs::absolute: the directory of sets, --input files, shapes,
  // seed); all but the directory are part of the identity.
  inputs::Options inputs{};
  std::size_t total_sets = 0;
  inputs::Shard shard{};
  std::vector<std::string> set_names{};  // of the sets in states[k].sets, in that order
  std::string first_set_sha256{};        // inputs::set_sha256 of its first set
  std::string graph{};  // the model as checked (nodes named), model::save_graph_bytes
  struct Check {
    analysis::CheckOptions options{};  // (reference_model, threads, progress: not recorded)
    analysis::CheckState state{};
  };
  std::vector<Check> checks{};  // one per precision, in the order they were asked for
  // The threads the shard ran on (--threads, or the cores of its CPU affinity); not part
  // of the identity (threads do not change results), and merge does not use it.
  std::size_t threads = 0;
};
Json to_json(const CheckPart& p);
// Read back exactly; every error names `where`.
CheckPart check_part_from_json(const Json& j, const std::string& where);
// Parts of one check have the same "identity" object (model and data hashes, the number
// of input sets, the options of each precision): an Error naming `b_where` and the first
// difference from `a_where`'s otherwise.
void require_same_check(const Json& a, const std::string& a_where, const Json& b,
                        const std::string& b_where);
// A part file, read: its identity ({"identity": ...}, for require_same_check) and its
// contents read back exactly, or why they cannot be (`malformed`: merge names the parts
// of another check before a malformed one).
struct CheckPartFile {
  Json identity{};
  std::optional<CheckPart> part{};
  std::exception_ptr malformed{};
};
// Error(path) when the file cannot be read or is not a part (its kind, schema, identity).
CheckPartFile read_check_part(const std::filesystem::path& path);
// States as a part's "states" hold them, in CBOR, and back exactly (what the ranks of an
// mpirun job exchange); errors name `where`.
std::string to_cbor(const std::vector<analysis::CheckState>& states);
std::vector<analysis::CheckState> check_states_from_cbor(std::string_view bytes,
                                                         const std::string& where);
// "shard 1/3: 4 of 12 input sets, written to part_1.json" (one line).
std::string describe(const CheckPart& p, const std::string& file);

// ---- calibrated activation amax (fpguard calibrate; docs/scale.md) ----------------------
// What a scaled precision's static activation scales come from, calibrated on some input
// sets (a shard's): check --amax takes the files of every shard and their maximum.
inline constexpr int kAmaxSchema = 2;  // 2: the external data files' sha256
struct AmaxFile {
  FileId model{};
  std::vector<FileId> data{};         // the model's external data files
  std::string reference = "float32";  // the reference run it was calibrated with
  inputs::Options inputs{};           // as a part's (the directory absolute)
  std::size_t total_sets = 0;
  std::vector<std::size_t> sets{};  // the sets calibrated on (indices, ascending)
  analysis::ActivationAmax amax{};
};
Json to_json(const AmaxFile& a);
// Read back exactly; Error(path) when it cannot be read or is not such a file.
AmaxFile read_amax_file(const std::filesystem::path& path);

struct CheckText {
  std::size_t top = 10;  // rows of the worst-node table and rule findings shown
};
void render(std::ostream& out, const analysis::Diagnosis& d, const CheckText& o, const Terminal& t);
// The verdicts of several precisions, one row each.
void render_side_by_side(std::ostream& out, const std::vector<analysis::Diagnosis>& ds,
                         const Terminal& t);
// `fpguard rules`.
Json rules_json();
void render_rules(std::ostream& out);

// ---- HTML ------------------------------------------------------------------------------
// One self-contained page (inline CSS and SVG, no script, nothing fetched): the verdict,
// the outputs, the origins with their fixes and each origin tensor's exponent histogram
// against the format's bands, the reference range of every floating node against the
// format (headroom) and the local/propagated error along the topological order, the
// worst nodes and the rules. Several precisions are shown side by side, then in turn.
struct HtmlText {
  std::size_t top = 25;  // rows of the worst-node table
};
void write_html(std::ostream& out, const std::vector<analysis::Diagnosis>& ds, const HtmlText& o);
// A plan: the islands and scale rewrites on the node list, then its final check.
void write_html(std::ostream& out, const analysis::Plan& p, const HtmlText& o);

// ---- plan --------------------------------------------------------------------------------
inline constexpr int kPlanSchema = 2;
Json to_json(const analysis::Plan& p);
// plan.json (schema 1 or 2) read back as convert needs it; every error names `where`.
analysis::PlanFile parse_plan(std::string_view text, const std::string& where);
analysis::PlanFile read_plan(const std::string& where, const std::filesystem::path& path);

struct PlanText {
  std::string model_arg{};  // the model as the user named it (for the commands shown)
  std::string plan_file{};  // where plan.json was written ("" when not)
};
void render(std::ostream& out, const analysis::Plan& p, const PlanText& o, const Terminal& t);
// TensorRT 10 trtexec flags that apply the plan.
std::string trtexec_flags(const analysis::Plan& p);
// ONNX Runtime / onnxconverter-common block lists.
Json ort_block_lists(const analysis::Plan& p);
// What to say beside trtexec_flags / ort_block_lists printed alone (`--emit`): a plan
// that scales holds only on the rescaled model (convert --scale-only); "" otherwise.
std::string emit_warning(const analysis::Plan& p, const PlanText& o);

// ---- inspect (docs/inspect.md) -----------------------------------------------------------
inline constexpr int kInspectSchema = 1;
// One tensor of `fpguard inspect`: as the file names it, and its statistics.
struct InspectedTensor {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape{};
  Stats stats{};
  std::vector<ScaledFormatStats> scaled{};  // the scaled formats asked, in order
};
Json to_json(const InspectedTensor& t);  // one entry of "tensors"
// {"schema_version", "tensors": [...]}.
Json to_json(const std::vector<InspectedTensor>& ts);
// One entry of "tensors" read back: its statistics (numbers exact, formats by name) ...
Stats stats_from_json(const Json& tensor, const std::string& where);
// ... with its name, dtype and shape; and the whole document. Every error names `where`.
InspectedTensor inspected_from_json(const Json& tensor, const std::string& where);
std::vector<InspectedTensor> inspect_from_json(const Json& j, const std::string& where);

struct InspectText {
  bool histogram = false;  // the exponent histogram as a bar chart
};
// The statistics, then one row per format (the verdict coloured).
void render(std::ostream& out, const InspectedTensor& t, const InspectText& o,
            const Terminal& term);
// What the columns mean, once after the tensors.
void render_inspect_legend(std::ostream& out);
// The same for the scaled formats' columns, after the tensors when any was asked.
void render_scaled_legend(std::ostream& out);

// One page of tensors: a summary table (verdict per format), then per tensor its
// statistics, its per-format findings and its exponent histogram against each format.
void write_html(std::ostream& out, const std::vector<InspectedTensor>& ts, const HtmlText& o);

// ---- gemm-error, accum, targets (docs/experiments.md) ------------------------------------
inline constexpr int kExperimentsSchema = 1;

// `fpguard gemm-error`: the rows and the data they were measured on.
struct GemmErrorTable {
  Distribution distribution;
  std::uint64_t seed = 0;
  std::vector<GemmErrorRow> rows;
};
Json to_json(const GemmErrorTable& t);
GemmErrorTable gemm_error_from_json(const Json& j, const std::string& where);
void render(std::ostream& out, const GemmErrorTable& t, const Terminal& term);

// `fpguard accum`: one row per format, or why the format was skipped (--all).
struct AccumEntry {
  std::string format;
  std::optional<AccumRow> row;
  std::string skipped;  // when !row: "<where>: <what>" of the Error
};
Json to_json(const std::vector<AccumEntry>& entries);
std::vector<AccumEntry> accum_from_json(const Json& j, const std::string& where);
void render(std::ostream& out, const std::vector<AccumEntry>& entries, const Terminal& term);

// `fpguard targets`: the targets listed, and the format asked about (--format), if any.
struct TargetTable {
  std::vector<Target> targets;
  std::optional<Format> format;
};
Json to_json(const TargetTable& t);
TargetTable targets_from_json(const Json& j, const std::string& where);
// "matrix", "vector" or "no": where t computes in f natively.
std::string_view runs_where(const Target& t, const Format& f);
// One row per target; with a format, whether each runs it.
void render(std::ostream& out, const TargetTable& t, const Terminal& term);
// Whether each target runs a scaled format in its matrix units (runs_natively).
void render(std::ostream& out, const std::vector<Target>& targets, const ScaledFormat& f,
            const Terminal& term);
// One target in full (aliases, formats, notes, sources).
void render_detail(std::ostream& out, const Target& t);

// ---- finfo, iinfo (docs/formats.md) ------------------------------------------------------
// `--json` prints an array of these objects (no schema_version: the fields are torch's).
Json to_json(const FInfo& i);
FInfo finfo_from_json(const Json& j, const std::string& where);
Json to_json(const IInfo& i);
IInfo iinfo_from_json(const Json& j, const std::string& where);
// A scaled format: its element and scale formats (as to_json(FInfo)), what one scale covers,
// bits per value and dynamic ranges (docs/formats.md).
Json to_json(const ScaledInfo& i);
void render(std::ostream& out, const ScaledInfo& i);
// Several formats (types) side by side, one row each.
void render(std::ostream& out, const std::vector<FInfo>& infos, const Terminal& term);
void render(std::ostream& out, const std::vector<IInfo>& infos, const Terminal& term);
// `fpguard round`: the file written and what rounding did to its values, one line.
struct RoundSummary {
  std::string output;
  std::uint64_t values = 0;
  DType input = DType::float32;
  std::string format;
  RoundOptions options{};
  RoundCounts counts{};
  std::optional<DType> codes{};   // --encode: the dtype of the codes written
  std::optional<DType> stored{};  // --dtype: the dtype of the values written
  // A scaled format: what it did, what one scale covers, and along which axis.
  std::optional<ScaledCounts> scaled{};
  std::string scope{};
  int block_size = 0;
  int axis = -1;
};
void render(std::ostream& out, const RoundSummary& s);

// ---- run, ops (README, docs/executor.md) -------------------------------------------------
inline constexpr int kRunSchema = 1;
// What `fpguard run` shows of one tensor: its shape, dtype and range, NaN ignored (an inf
// shows: an overflowed output has max inf). Empty and string tensors have no range.
struct TensorSummary {
  std::vector<std::int64_t> shape;
  DType dtype = DType::float32;
  double min = NAN, max = NAN, absmax = NAN;
};
TensorSummary summarize(const Tensor& t);
// One graph output: a tensor (one item), a sequence (one item per element) or an empty
// optional (none).
struct OutputSummary {
  std::string name;
  ValueKind kind = ValueKind::tensor;
  std::vector<TensorSummary> items;
};
struct RunSummary {
  std::vector<OutputSummary> outputs;
  double load_ms = 0, median_run_ms = 0;
  std::uint64_t runs = 0;
  double peak_rss_mib = 0, start_rss_mib = 0;
  std::optional<exec::Profile> profile{};  // --profile: "profile" in the JSON
  std::size_t profile_top = 20;            // rows of its node table (text only; 0: all)
};
Json to_json(const RunSummary& r);
RunSummary run_from_json(const Json& j, const std::string& where);
void render(std::ostream& out, const RunSummary& r, const Terminal& term);
// `fpguard run --profile` (docs/executor.md): {"schema_version", "runs", "total_ms",
// "op_types": [{op_type, nodes, total_ms, average_ms, share}] slowest first, "nodes":
// [{name, op_type, calls, ms, share}] in the order they first ran}; times per run (each
// node's median), shares percent of total_ms. The reader takes back the runs and the nodes (the
// rest is derived from them).
inline constexpr int kProfileSchema = 1;
Json to_json(const exec::Profile& p);
exec::Profile profile_from_json(const Json& j, const std::string& where);
// The op types (count, total, average, share), then the `top` slowest nodes (0: all).
void render(std::ostream& out, const exec::Profile& p, std::size_t top, const Terminal& term);
// Values as files (`fpguard run --outputs DIR`, `--dump-all DIR`): each tensor as a .npy
// (bfloat16 as float32, exactly), a sequence as one .npy per element, and outputs.json,
// {"schema_version": 1, "tensors": [...]}, listing them in order (docs/executor.md).
// read_values gives the same values back (bfloat16 restored); a malformed outputs.json
// or a file that is missing or not of its listed dtype is an Error naming it.
inline constexpr int kValuesSchema = 1;
void write_values(const std::filesystem::path& dir, const std::vector<NamedValue>& values);
std::vector<NamedValue> read_values(const std::filesystem::path& dir);
// `fpguard ops --json`: {"schema_version": 1, "ops": [...]}.
Json ops_json(const std::vector<std::string>& names);

// ---- Netron annotations (--annotate) ------------------------------------------------------
// The model with each node's findings attached where Netron shows them on click: its
// metadata_props (fpguard.precision, fpguard.damage, fpguard.headroom_bits,
// fpguard.overflow_local, fpguard.overflow_propagated, fpguard.local_error,
// fpguard.propagated_error, fpguard.origin and, with a plan,
// fpguard.plan; numbers as num() writes them, counts as plain digits) and lines appended
// to its doc_string, starting with kAnnotationMarker (the origin's sentence and fixes, the
// plan's reason). The model gets fpguard.precision, fpguard.verdict (and fpguard.plan).
// Nothing else changes: same nodes, values and attributes. Annotating again replaces
// the earlier fpguard keys and lines; other keys and the node's own doc_string stay.
// Nodes are matched by their display names (analysis::display_names), body nodes by their
// paths (exec::node_paths), whose attributes are written on the node inside its subgraph
// (the model's subgraphs are unshared first: a copy it shares them with is left alone); a
// diagnosis naming a node the model lacks is an Error.
inline constexpr std::string_view kAnnotationPrefix = "fpguard.";
inline constexpr std::string_view kAnnotationMarker = "[fpguard]";
model::Model annotate(const model::Model& m, const analysis::Diagnosis& d,
                      const analysis::Plan* plan = nullptr);
// The same without copying the model (its initializers can be large).
void annotate_in_place(model::Model& m, const analysis::Diagnosis& d,
                       const analysis::Plan* plan = nullptr);

}  // namespace fpguard::report
