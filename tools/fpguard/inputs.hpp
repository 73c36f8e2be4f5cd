// The model-input options of `run`, `check`, `plan` and `convert`: --input, --inputs,
// --shape and --seed set the library's inputs::Options members of the same names
// (include/fpguard/inputs.hpp), whose errors name them as options (main.cpp's flag_of).
#pragma once

#include <CLI/CLI.hpp>

#include "fpguard/inputs.hpp"

namespace fpguard::cli {

// Registers --input, --inputs, --shape and --seed on a subcommand.
void add_input_options(CLI::App& cmd, inputs::Options& o);
// Registers --max-sets and --sample-sets (the commands that take many input sets).
void add_set_options(CLI::App& cmd, inputs::Options& o);

}  // namespace fpguard::cli
