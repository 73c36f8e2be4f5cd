// Helpers shared by the tests that build models in memory (analysis, rewrite, exec):
// float32 tensors from values, and a small graph builder with one float32 input "x".
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "fpguard/error.hpp"
#include "fpguard/model.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::test {

inline Tensor floats(std::vector<std::int64_t> shape, std::vector<float> v) {
  Tensor t(DType::float32, std::move(shape));
  FPG_CHECK(t.size() == v.size());
  std::copy(v.begin(), v.end(), t.data<float>().begin());
  return t;
}

inline Tensor scalar(float v) {
  return floats({}, {v});
}

// A model built in memory (opset 13): one float32 input "x" of a fixed shape, then
// nodes, initializers and float32 outputs in the order they are added.
struct GraphBuilder {
  model::Model m;
  explicit GraphBuilder(std::vector<std::int64_t> shape, std::string path = "crafted.onnx") {
    m.ir_version = 8;
    m.opsets[""] = 13;
    m.path = std::move(path);
    model::ValueInfo x{"x", 1, true, {}};
    for (auto d : shape) x.shape.push_back({d, ""});
    m.graph.inputs.push_back(x);
  }
  GraphBuilder& node(const std::string& name, const std::string& op, std::vector<std::string> in,
                     std::string out, std::vector<model::Attribute> attrs = {}) {
    m.graph.nodes.push_back(
        {name, op, "", std::move(in), {std::move(out)}, std::move(attrs), "", {}});
    return *this;
  }
  GraphBuilder& init(const std::string& name, Tensor t) {
    m.graph.initializers.push_back({name, std::move(t)});
    return *this;
  }
  GraphBuilder& output(const std::string& name) {
    m.graph.outputs.push_back({name, 1, false, {}});
    return *this;
  }
};

}  // namespace fpguard::test
