// Model inputs for `fpguard run` and `fpguard check`: files (--input NAME=FILE), a
// directory (--inputs DIR: an ONNX test_data_set or NAME.npy files; for check, also a
// directory of such sets), or generated values (uniform:LO:HI, normal:MEAN:STD), with
// --shape for dynamic dimensions and --seed for the generator.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "fpguard/model.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::cli {

struct InputArgs {
  std::vector<std::string> inputs, shapes;
  std::string inputs_dir;
  std::uint64_t seed = 0;
};

// Registers --input, --inputs, --shape and --seed on a subcommand.
void add_input_options(CLI::App& cmd, InputArgs& a);

// One input set for the model's runtime inputs, in their order. Inputs given neither by
// file nor by spec are generated (floating: uniform:-1:1, integers: 0); `generated`
// receives their names. `sample` offsets the generator's seed (one set per sample).
// Inputs of sequence or optional type are read from .pb files (SequenceProto,
// OptionalProto): given by --input NAME=FILE.pb or in a test_data_set; never generated.
std::vector<NamedValue> gather_inputs(const InputArgs& a, const model::Model& m,
                                      std::uint64_t sample = 0,
                                      std::vector<std::string>* generated = nullptr);

// The subdirectories of `dir` that hold input sets (test_data_set_*, or any directory of
// .npy/.pb files), sorted; empty when `dir` itself is one set.
std::vector<std::string> input_set_dirs(const std::string& dir);

// The input sets of check and plan: one per subdirectory of --inputs when it holds sets,
// else `samples` sets (generated inputs differ by seed; given files are the same in every
// set). `generated` receives the names of generated inputs, once each.
std::vector<std::vector<NamedTensor>> gather_samples(const InputArgs& a, const model::Model& m,
                                                     std::size_t samples,
                                                     std::vector<std::string>& generated);
// "NO INPUTS GIVEN: x, y generated ...": the note a diagnosis leads with.
std::string generated_note(const std::vector<std::string>& generated);

}  // namespace fpguard::cli
