// The model-input options (inputs.hpp); the inputs themselves are the library's.
#include "inputs.hpp"

namespace fpguard::cli {

void add_input_options(CLI::App& cmd, inputs::Options& o) {
  cmd.add_option("--input", o.input, "NAME=FILE.npy|FILE.pb|uniform:LO:HI|normal:MEAN:STD")
      ->take_all();
  cmd.add_option("--inputs", o.inputs, "Directory of inputs (ONNX test_data_set or NAME.npy)");
  cmd.add_option("--shape", o.shape, "NAME=D0,D1,... for inputs with dynamic dimensions")
      ->take_all();
  cmd.add_option("--seed", o.seed, "Seed of generated inputs (default 0)");
  cmd.add_flag("--require-inputs", o.require_inputs,
               "Refuse to generate inputs (exit 2): every input from a file");
}

void add_set_options(CLI::App& cmd, inputs::Options& o) {
  cmd.add_option("--max-sets", o.max_sets,
                 "Of the input sets of --inputs DIR, only the first K (natural order; 0: all)");
  cmd.add_option("--sample-sets", o.sample_sets,
                 "Of the input sets of --inputs DIR, K drawn at random with --seed (0: all)");
}

}  // namespace fpguard::cli
