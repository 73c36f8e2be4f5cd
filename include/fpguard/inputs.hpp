// Model inputs: the tensors a run, a check, a plan or a convert's verification feeds the
// model's runtime inputs. Each comes from a file (NAME=FILE), a directory (an ONNX
// test_data_set, or NAME.npy files; for samples, also a directory of such sets), or a
// generator (uniform:LO:HI, normal:MEAN:STD, seeded), with shapes for dynamic dimensions.
// The CLI's --input, --inputs, --shape and --seed set the Options members of the same
// names; every error about them is Error::in_option with that name ("input", "inputs",
// "shape", "seed", "samples"), and no message names a CLI flag.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fpguard/model.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::inputs {

struct Options {
  // NAME=FILE (.npy, a one-array .npz, a TensorProto .pb; a SequenceProto/OptionalProto
  // .pb for an input of that type) or NAME=uniform:LO:HI / NAME=normal:MEAN:STD. A later
  // entry for a name replaces an earlier one.
  std::vector<std::string> input{};
  // A directory: one input set (an ONNX test_data_set: input_N.pb; or NAME.npy files), or
  // for gather_samples a directory of such sets. "": none.
  std::string inputs{};
  // NAME=D0,D1,...: the shape of a generated input; fills in its dynamic dimensions. A
  // later entry for a name replaces an earlier one.
  std::vector<std::string> shape{};
  std::uint64_t seed = 0;  // of the generators; input set s draws with seed + s
  // Of a directory of sets (gather_samples): only the first `max_sets` (in natural order),
  // or `sample_sets` drawn at random with `seed` (kept in natural order). 0: all.
  std::size_t max_sets = 0, sample_sets = 0;
  // Refuse to generate: an input that would be drawn from a generator (asked for or by
  // default) is an Error (option "require_inputs") naming every such input.
  bool require_inputs = false;
  bool operator==(const Options&) const = default;
};

// A generator of input values: uniform in [a, b], or normal with mean a and std b.
struct Generator {
  std::string distribution = "uniform";  // "uniform" or "normal"
  double a = 0, b = 0;
  // "uniform:LO:HI" / "normal:MEAN:STD", as parse_generator reads it back.
  std::string spec() const;
  bool operator==(const Generator&) const = default;
};

// The generators of the inputs given neither by file nor by a spec.
inline constexpr std::string_view kFloatingDefault = "uniform:-1:1";
inline constexpr std::string_view kIntegerDefault = "uniform:0:0";

// Whether the VALUE of NAME=VALUE names a generator (uniform:..., normal:...), not a file.
bool is_generator(std::string_view value);
// uniform:LO:HI or normal:MEAN:STD (finite parameters, LO <= HI, STD >= 0); else an Error
// (option "input", value `input`: the input it was given for).
Generator parse_generator(std::string_view spec, const std::string& input);

// An input drawn from a generator instead of read from data.
struct Generated {
  std::string name{};
  Generator generator{};
  bool by_default = true;  // no generator was asked for: kFloatingDefault or kIntegerDefault
  bool operator==(const Generated&) const = default;
};

// One input set for the model's runtime inputs, in their order. Inputs given neither by
// file nor by spec are generated (floating: kFloatingDefault, integers: kIntegerDefault);
// every generated input, asked for or by default, is appended to `generated` in the
// model's order. `sample` offsets the generators' seed. Inputs of sequence or optional
// type are read from .pb files only, never generated.
std::vector<NamedValue> gather(const Options& o, const model::Model& m, std::uint64_t sample = 0,
                               std::vector<Generated>* generated = nullptr);

// The input sets of `dir`: its subdirectories that hold .npy or .pb files, and its .npz
// files (one set each, arrays named by graph input) unless `dir` holds .npy/.pb files
// itself; in natural order of their names (natural_less: set_2 before set_10). Empty when
// `dir` itself is one set (or not a directory).
std::vector<std::string> set_dirs(const std::string& dir);

// The input sets one process of a sharded check takes: those whose index (their position
// in set_dirs) is `index` modulo `count`, so that every shard sees a spread of the data.
struct Shard {
  std::size_t index = 0, count = 1;
  bool operator==(const Shard&) const = default;
};
// "I/N" with I < N; else an Error in option "shard".
Shard parse_shard(std::string_view spec);

// The input sets of check, plan and convert (tensors; sequences and optionals from their
// .pb files, as gather reads them): one per subdirectory of `inputs` when it holds sets, else
// `samples` sets (set s generated with seed + s, whichever process draws it; given files
// are the same in every set). A directory's sets are first narrowed to Options::max_sets
// or sample_sets; set indices number the sets chosen. With a `shard` of several, only its
// sets are taken.
//
// SetList names them without reading any: read(k) reads (or draws) the k-th when asked, so
// that a check over thousands of sets holds one at a time.
struct SetList {
  std::vector<std::size_t> indices{};  // each set's index among all sets, ascending
  std::vector<std::string> names{};    // its directory's name ("" when generated)
  std::size_t total = 0;               // how many sets there are before sharding
  std::size_t size() const { return indices.size(); }
  // The k-th set (k < size()); the inputs it generated are added to *generated unless
  // already there (in the model's order).
  std::vector<NamedValue> read(std::size_t k, std::vector<Generated>* generated = nullptr) const;

  Options options{};
  const model::Model* model = nullptr;
  std::vector<std::string> paths{};  // the sets' directories or .npz files (empty: generated)
};
SetList list_samples(const Options& o, const model::Model& m, std::size_t samples,
                     const Shard& shard = {});

// The same sets, all read (list_samples, then read each).
struct Samples {
  std::vector<std::vector<NamedValue>> sets;
  std::vector<Generated> generated;  // once each, in the model's order
  // Each set's index among all sets (ascending), and its directory's name ("" when
  // generated or `inputs` is one set); `total`: how many sets there are before sharding.
  std::vector<std::size_t> indices{};
  std::vector<std::string> names{};
  std::size_t total = 0;
};
Samples gather_samples(const Options& o, const model::Model& m, std::size_t samples,
                       const Shard& shard = {});

// The SHA-256 of an input set's values (names, dtypes, shapes and bytes, in order; a
// sequence's elements in order after its kind and length, an empty optional by its kind):
// what identifies the set a merge of sharded checks reads again. A set of tensors hashes
// as it always did.
std::string set_sha256(const std::vector<NamedValue>& set);

// `o` with its file paths (the files of `input` and the `inputs` directory) absolute,
// resolved against the current directory and lexically normalised; generator specs and
// shapes as they are. What plan.json records, so that the inputs are found again from
// another directory.
Options absolute(const Options& o);

// How a run's input sets were made: what plan.json records of them.
struct Provenance {
  Options options;
  std::size_t samples = 1;
  std::vector<Generated> generated{};
  bool operator==(const Provenance&) const = default;
};

}  // namespace fpguard::inputs
