// The input options of run/check/plan/convert (inputs::Options): one input per
// line of the fuzz data, as `--input NAME=FILE|uniform:LO:HI|normal:M:S` and
// `--shape NAME=D0,D1,...` values, given to a model with a fixed-shape float input and a
// dynamic int64 one. Specs that name files are left to the file harnesses (a spec that
// is not a generator is read as a path: only names under a directory that does not exist
// reach the reader). What is accepted has the declared dtype and shape.
#include <sstream>
#include <string>

#include "fpguard/error.hpp"
#include "fpguard/inputs.hpp"
#include "fpguard/limits.hpp"
#include "fuzz_util.hpp"

using namespace fpguard;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_memory_limit(fuzz::kFuzzMemoryLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  model::Model m;
  m.opsets[""] = 13;
  m.path = "fuzz.onnx";
  m.graph.inputs.push_back({"x", 1, true, {{2, ""}, {3, ""}}});
  m.graph.inputs.push_back({"n", 7, true, {{-1, "N"}}});
  inputs::Options a;
  std::stringstream ss{std::string(fuzz::as_text(data, size))};
  std::string line;
  while (std::getline(ss, line)) {
    if (line.rfind("shape ", 0) == 0)
      a.shape.push_back(line.substr(6));
    else if (line.rfind("seed ", 0) == 0)
      a.seed = line.size();
    else
      a.input.push_back(line.find('/') == std::string::npos || line.find(':') != std::string::npos
                            ? line
                            : "x=/nonexistent/fpguard-fuzz/" + line);
  }
  fuzz::expect_errors_only([&] {
    const auto sets = inputs::gather_samples(a, m, 2).sets;
    FUZZ_ASSERT(sets.size() == 2);
    for (const auto& set : sets) {
      FUZZ_ASSERT(set.size() == 2);
      FUZZ_ASSERT(set[0].value.tensor.dtype() == DType::float32);
      FUZZ_ASSERT(set[0].value.tensor.shape() == (std::vector<std::int64_t>{2, 3}));
      FUZZ_ASSERT(set[1].value.tensor.dtype() == DType::int64);
    }
  });
  return 0;
}
