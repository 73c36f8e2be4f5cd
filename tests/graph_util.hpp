// Helpers shared by the tests that build models in memory (analysis, rewrite, exec):
// float32 tensors from values, and a small graph builder with one float32 input "x".
#pragma once

#include <algorithm>
#include <string>
#include <utility>
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

// x [2, 64] -> MatMul(W = ones [64, 4]) -> y, and an x whose row r is 64 then 31 ones (one
// MX block: the 64 sets its scale to 2^(6 - emax)), then 32 ones (a second block). In
// mxfp4_e2m1 (emax 2) the first block's scale is 16 and its ones (1/16 < 0.25, half E2M1's
// smallest subnormal) flush to zero: 31 swamped values per row; the second block is exact.
inline std::pair<GraphBuilder, Tensor> outlier_matmul() {
  GraphBuilder b({2, 64});
  b.init("W", floats({64, 4}, std::vector<float>(64 * 4, 1.0f)));
  b.node("mm", "MatMul", {"x", "W"}, "y").output("y");
  std::vector<float> x(2 * 64, 1.0f);
  x[0] = x[64] = 64.0f;
  return {b, floats({2, 64}, x)};
}

}  // namespace fpguard::test
