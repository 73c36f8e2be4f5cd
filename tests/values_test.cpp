// Values that are not numeric tensors (src/ops/sequence.cpp, the executor's Value slots,
// string tensors): the sequence ops on models built in memory against hand-computed
// results, optionals, a sequence carried through Loop, Scan-8's batch axis and
// sequence_lens, Cast to and from strings, and the errors of a sequence or a string where
// a numeric tensor belongs (and the reverse), each naming the node or input.
#include <gtest/gtest.h>

#include <cmath>

#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/model.hpp"
#include "graph_util.hpp"

namespace fpguard::exec {
namespace {

using test::floats;

Tensor ints(std::vector<std::int64_t> shape, std::vector<std::int64_t> v) {
  Tensor t(DType::int64, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<std::int64_t>().begin());
  return t;
}

std::vector<float> values(const Tensor& t) {
  auto d = t.data<float>();
  return {d.begin(), d.end()};
}

model::ValueInfo declared(const std::string& name, model::TypeKind kind, int elem_type = 0) {
  model::ValueInfo v;
  v.name = name;
  v.kind = kind;
  v.elem_type = elem_type;
  return v;
}

model::Attribute attr(const std::string& name, std::int64_t v) {
  return {name, v, ""};
}

// A model (opset 17) of `nodes` with the given inputs and outputs.
model::Model make(std::vector<model::ValueInfo> inputs, std::vector<model::Node> nodes,
                  std::vector<model::ValueInfo> outputs) {
  model::Model m;
  m.ir_version = 8;
  m.opsets[""] = 17;
  m.path = "seq.onnx";
  m.graph.inputs = std::move(inputs);
  m.graph.nodes = std::move(nodes);
  m.graph.outputs = std::move(outputs);
  return m;
}

model::Node node(const std::string& name, const std::string& op, std::vector<std::string> in,
                 std::vector<std::string> out, std::vector<model::Attribute> attrs = {}) {
  return {name, op, "", std::move(in), std::move(out), std::move(attrs), "", {}};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

const auto kTensor = model::TypeKind::tensor;
const auto kSequence = model::TypeKind::sequence;
const auto kOptional = model::TypeKind::optional;

// x [2,3] -> SplitToSequence(axis 1, split [1,2]) -> erase the first -> insert x's first
// column back at the end -> ConcatFromSequence(axis 1): columns 1, 2, 0.
TEST(Sequence, SplitEditAndConcat) {
  auto m =
      make({declared("x", kTensor, 1)},
           {node("split", "SplitToSequence", {"x", "lens"}, {"s"}, {attr("axis", 1)}),
            node("first", "SequenceAt", {"s", "zero"}, {"c0"}),
            node("erase", "SequenceErase", {"s", "zero"}, {"s1"}),
            node("insert", "SequenceInsert", {"s1", "c0"}, {"s2"}),
            node("n", "SequenceLength", {"s2"}, {"len"}),
            node("concat", "ConcatFromSequence", {"s2"}, {"y"}, {attr("axis", 1)})},
           {declared("y", kTensor, 1), declared("len", kTensor, 7), declared("s2", kSequence)});
  m.graph.initializers = {{"lens", ints({2}, {1, 2})}, {"zero", ints({}, {0})}};
  const auto out = Executor(m).run_values({{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].value.tensor.shape(), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(values(out[0].value.tensor), (std::vector<float>{2, 3, 1, 5, 6, 4}));
  EXPECT_EQ(out[1].value.tensor.data<std::int64_t>()[0], 2);
  ASSERT_EQ(out[2].value.kind, ValueKind::sequence);
  ASSERT_EQ(out[2].value.items.size(), 2u);
  EXPECT_EQ(out[2].value.items[0].shape(), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(values(out[2].value.items[1]), (std::vector<float>{1, 4}));
}

// SplitToSequence without split: pieces of one along the axis, dropped with keepdims 0;
// ConcatFromSequence with new_axis stacks them back (here along axis 1: the transpose).
TEST(Sequence, SplitWithoutLengthsAndStack) {
  const auto m = make(
      {declared("x", kTensor, 1)},
      {node("split", "SplitToSequence", {"x"}, {"s"}, {attr("keepdims", 0)}),
       node("stack", "ConcatFromSequence", {"s"}, {"y"}, {attr("axis", 1), attr("new_axis", 1)})},
      {declared("y", kTensor, 1)});
  const auto out = Executor(m).run({{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(out[0].tensor.shape(), (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(values(out[0].tensor), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

// A scalar split: chunks of that size, the last one shorter.
TEST(Sequence, ScalarSplitLeavesAShorterLastPiece) {
  auto m =
      make({declared("x", kTensor, 1)}, {node("split", "SplitToSequence", {"x", "two"}, {"s"})},
           {declared("s", kSequence)});
  m.graph.initializers = {{"two", ints({}, {2})}};
  const auto out = Executor(m).run_values({{"x", floats({5}, {1, 2, 3, 4, 5})}});
  ASSERT_EQ(out[0].value.items.size(), 3u);
  EXPECT_EQ(values(out[0].value.items[2]), (std::vector<float>{5}));
}

TEST(Sequence, ConstructKeepsStorageDtypesAndAtCountsFromTheEnd) {
  auto m = make({declared("a", kTensor, 10), declared("b", kTensor, 10)},
                {node("make", "SequenceConstruct", {"a", "b"}, {"s"}),
                 node("last", "SequenceAt", {"s", "minus_one"}, {"y"})},
                {declared("y", kTensor, 10)});
  m.graph.initializers = {{"minus_one", ints({}, {-1})}};
  Tensor a(DType::float16, {1}), b(DType::float16, {1});
  a.data<std::uint16_t>()[0] = 0x3c00;  // 1
  b.data<std::uint16_t>()[0] = 0x4000;  // 2
  for (auto carrier : {DType::float32, DType::float64}) {
    RunOptions o;
    o.carrier = carrier;
    const auto out = Executor(m, o).run({{"a", a}, {"b", b}});
    ASSERT_EQ(out[0].tensor.dtype(), DType::float16);
    EXPECT_EQ(out[0].tensor.data<std::uint16_t>()[0], 0x4000);
  }
}

TEST(Optional, EmptyAndFullOptionals) {
  const auto m = make(
      {declared("o", kOptional)},
      {node("has", "OptionalHasElement", {"o"}, {"has"}), node("same", "Identity", {"o"}, {"o2"})},
      {declared("has", kTensor, 9), declared("o2", kOptional)});
  const Executor ex(m);
  auto out = ex.run_values({{"o", Value::none()}});
  EXPECT_EQ(out[0].value.tensor.data<std::uint8_t>()[0], 0);
  EXPECT_EQ(out[1].value.kind, ValueKind::none);
  out = ex.run_values({{"o", Value::sequence({floats({1}, {7})})}});
  EXPECT_EQ(out[0].value.tensor.data<std::uint8_t>()[0], 1);
  ASSERT_EQ(out[1].value.kind, ValueKind::sequence);
  EXPECT_EQ(values(out[1].value.items[0]), (std::vector<float>{7}));
  // OptionalGetElement of an empty optional names the node.
  const auto get =
      make({declared("o", kOptional)}, {node("get", "OptionalGetElement", {"o"}, {"y"})},
           {declared("y", kTensor)});
  EXPECT_NE(error_of([&] {
              Executor(get).run_values({{"o", Value::none()}});
            }).find("seq.onnx: node 'get' (OptionalGetElement): the optional is empty"),
            std::string::npos);
}

TEST(Values, ErrorsNameTheNodeOrInput) {
  // A sequence where a tensor op expects a tensor.
  const auto add = make({declared("s", kSequence), declared("x", kTensor, 1)},
                        {node("add", "Add", {"s", "x"}, {"y"})}, {declared("y", kTensor, 1)});
  EXPECT_EQ(error_of([&] {
              Executor(add).run_values({{"s", Value::sequence({})}, {"x", floats({1}, {1})}});
            }),
            "seq.onnx: node 'add' (Add): input 's' is a sequence; Add takes tensors");
  // A tensor where the model declares a sequence, and the reverse.
  EXPECT_EQ(error_of([&] {
              Executor(add).run_values({{"s", floats({1}, {1})}, {"x", floats({1}, {1})}});
            }),
            "seq.onnx: input 's': is a tensor but the model declares a sequence");
  EXPECT_EQ(error_of([&] {
              Executor(add).run_values({{"s", Value::sequence({})}, {"x", Value::none()}});
            }),
            "seq.onnx: input 'x': is an empty optional but the model declares a tensor");
  // run() returns tensors only.
  const auto id = make({declared("s", kSequence)}, {node("id", "Identity", {"s"}, {"y"})},
                       {declared("y", kSequence)});
  EXPECT_EQ(error_of([&] { Executor(id).run({}); }), "seq.onnx: input 's' was not given");
  const Executor ex(id);
  Session s(ex, std::vector<NamedValue>{{"s", Value::sequence({})}});
  while (!s.done()) s.step();
  EXPECT_EQ(error_of([&] { s.outputs(); }),
            "seq.onnx: graph output 'y' is a sequence, not a tensor");
  EXPECT_EQ(s.output_values()[0].value.kind, ValueKind::sequence);
  EXPECT_EQ(s.value("y"), nullptr);  // not a tensor
}

// Loop carrying a sequence: each iteration appends the iteration number.
TEST(Values, LoopCarriesASequence) {
  auto body = std::make_shared<model::Graph>();
  body->name = "body";
  body->inputs = {declared("i", kTensor, 7), declared("c", kTensor, 9),
                  declared("s_in", kSequence)};
  body->nodes = {node("keep", "Identity", {"c"}, {"c_out"}),
                 node("append", "SequenceInsert", {"s_in", "i"}, {"s_out"})};
  body->outputs = {declared("c_out", kTensor, 9), declared("s_out", kSequence)};
  auto m = make({},
                {node("empty", "SequenceEmpty", {}, {"s0"}, {attr("dtype", 7)}),
                 node("loop", "Loop", {"n", "", "s0"}, {"s"}, {{"body", body, ""}})},
                {declared("s", kSequence)});
  m.graph.initializers = {{"n", ints({}, {3})}};
  const auto out = Executor(m).run_values({});
  ASSERT_EQ(out[0].value.items.size(), 3u);
  EXPECT_EQ(out[0].value.items[2].data<std::int64_t>()[0], 2);
}

// Scan-8: batch axis first, sequence_lens per batch entry (outputs past a shorter length
// stay zero), directions reversing a scan input.
TEST(Scan8, BatchAxisAndSequenceLengths) {
  auto body = std::make_shared<model::Graph>();
  body->name = "body";
  body->inputs = {declared("sum_in", kTensor, 1), declared("next", kTensor, 1)};
  body->nodes = {node("add", "Add", {"sum_in", "next"}, {"sum_out"}),
                 node("copy", "Identity", {"sum_out"}, {"scan_out"})};
  body->outputs = {declared("sum_out", kTensor, 1), declared("scan_out", kTensor, 1)};
  for (std::int64_t direction : {0, 1}) {
    auto m = make(
        {declared("lens", kTensor, 7), declared("init", kTensor, 1), declared("x", kTensor, 1)},
        {node("scan", "Scan", {"lens", "init", "x"}, {"y", "z"},
              {{"body", body, ""},
               attr("num_scan_inputs", 1),
               {"directions", std::vector<std::int64_t>{direction}, ""}})},
        {declared("y", kTensor, 1), declared("z", kTensor, 1)});
    m.opsets[""] = 8;
    const auto out = Executor(m).run({{"lens", ints({2}, {3, 1})},
                                      {"init", floats({2, 1}, {0, 100})},
                                      {"x", floats({2, 3, 1}, {1, 2, 3, 4, 5, 6})}});
    EXPECT_EQ(values(out[0].tensor), (std::vector<float>{6, 104}));
    EXPECT_EQ(out[1].tensor.shape(), (std::vector<std::int64_t>{2, 3, 1}));
    if (direction == 0)
      EXPECT_EQ(values(out[1].tensor), (std::vector<float>{1, 3, 6, 104, 0, 0}));
    else
      EXPECT_EQ(values(out[1].tensor), (std::vector<float>{3, 5, 6, 104, 0, 0}));
  }
}

Tensor texts(std::vector<std::int64_t> shape, std::vector<std::string> v) {
  Tensor t(DType::string, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<std::string>().begin());
  return t;
}

std::vector<std::string> texts_of(const Tensor& t) {
  auto d = t.data<std::string>();
  return {d.begin(), d.end()};
}

// Cast to STRING prints the shortest text that reads back to the stored value (float16's
// 0.1 is 0.099975586), special values as NaN/INF/-INF; Cast from STRING reads them back
// (any case, "+INF" too); Reshape carries strings; a numeric op refuses them.
TEST(Strings, CastBothWaysAndReshape) {
  auto m =
      make({declared("x", kTensor, 1), declared("h", kTensor, 10)},
           {node("to_text", "Cast", {"x"}, {"s"}, {attr("to", 8)}),
            node("flat", "Reshape", {"s", "shape"}, {"s1"}),
            node("back", "Cast", {"s1"}, {"y"}, {attr("to", 1)}),
            node("half_text", "Cast", {"h"}, {"hs"}, {attr("to", 8)})},
           {declared("s1", kTensor, 8), declared("y", kTensor, 1), declared("hs", kTensor, 8)});
  m.graph.initializers = {{"shape", ints({1}, {-1})}};
  Tensor h(DType::float16, {1});
  h.data<std::uint16_t>()[0] = 0x2e66;  // float16's nearest to 0.1
  const Tensor x = floats({2, 3}, {0.97676110267f, -2.5f, 1e20f, NAN, INFINITY, -INFINITY});
  for (auto carrier : {DType::float32, DType::float64}) {
    RunOptions o;
    o.carrier = carrier;
    const auto out = Executor(m, o).run({{"x", x}, {"h", h}});
    EXPECT_EQ(texts_of(out[0].tensor),
              (std::vector<std::string>{"0.9767611", "-2.5", "1e+20", "NaN", "INF", "-INF"}));
    EXPECT_EQ(out[0].tensor.shape(), (std::vector<std::int64_t>{6}));
    const auto y = values(out[1].tensor);
    for (std::size_t i = 0; i < 6; ++i)
      if (std::isnan(x.data<float>()[i]))
        EXPECT_TRUE(std::isnan(y[i]));
      else
        EXPECT_EQ(y[i], x.data<float>()[i]) << i;
    EXPECT_EQ(texts_of(out[2].tensor), (std::vector<std::string>{"0.099975586"}));
  }
  const auto parse =
      make({declared("s", kTensor, 8)}, {node("num", "Cast", {"s"}, {"y"}, {attr("to", 7)})},
           {declared("y", kTensor, 7)});
  const auto got = Executor(parse).run({{"s", texts({3}, {"42", "-7.9", "1e3"})}});
  EXPECT_EQ(got[0].tensor.data<std::int64_t>()[1], -7);
  EXPECT_EQ(got[0].tensor.data<std::int64_t>()[2], 1000);
  const auto f =
      make({declared("s", kTensor, 8)}, {node("num", "Cast", {"s"}, {"y"}, {attr("to", 1)})},
           {declared("y", kTensor, 1)});
  const auto inf = Executor(f).run({{"s", texts({2}, {"+inf", "nan"})}});
  EXPECT_TRUE(std::isinf(inf[0].tensor.data<float>()[0]));
  EXPECT_TRUE(std::isnan(inf[0].tensor.data<float>()[1]));
  EXPECT_EQ(error_of([&] {
              Executor(f).run({{"s", texts({2}, {"1", "one"})}});
            }),
            "seq.onnx: node 'num' (Cast): 'one' is not a number (element 1)");
  const auto add = make({declared("s", kTensor, 8)}, {node("add", "Add", {"s", "s"}, {"y"})},
                        {declared("y", kTensor, 8)});
  EXPECT_EQ(error_of([&] {
              Executor(add).run({{"s", texts({1}, {"a"})}});
            }),
            "seq.onnx: node 'add' (Add): input 's' is a string tensor; Add takes numeric tensors");
  // A float32 tensor fed where the model declares strings.
  EXPECT_EQ(error_of([&] {
              Executor(f).run({{"s", floats({1}, {1})}});
            }),
            "seq.onnx: input 's': has dtype float32 but the model declares string");
}

// Concat, Gather and the sequence ops move strings as they move numbers.
TEST(Strings, ConcatGatherAndSequencesCarryThem) {
  auto m = make({declared("s", kTensor, 8)},
                {node("twice", "Concat", {"s", "s"}, {"c"}, {attr("axis", 1)}),
                 node("pick", "Gather", {"c", "idx"}, {"g"}, {attr("axis", 1)}),
                 node("split", "SplitToSequence", {"c"}, {"seq"}, {attr("axis", 0)}),
                 node("join", "ConcatFromSequence", {"seq"}, {"j"}, {attr("axis", 1)})},
                {declared("g", kTensor, 8), declared("j", kTensor, 8)});
  m.graph.initializers = {{"idx", ints({2}, {3, 0})}};
  const auto out = Executor(m).run({{"s", texts({2, 2}, {"a", "b", "c", "d"})}});
  EXPECT_EQ(out[0].tensor.shape(), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(texts_of(out[0].tensor), (std::vector<std::string>{"b", "a", "d", "c"}));
  EXPECT_EQ(out[1].tensor.shape(), (std::vector<std::int64_t>{1, 8}));
  EXPECT_EQ(texts_of(out[1].tensor),
            (std::vector<std::string>{"a", "b", "a", "b", "c", "d", "c", "d"}));
}

// A Loop's scan output of strings is stacked as strings.
TEST(Strings, LoopStacksStringScanOutputs) {
  auto body = std::make_shared<model::Graph>();
  body->name = "body";
  body->inputs = {declared("i", kTensor, 7), declared("c", kTensor, 9)};
  body->nodes = {node("keep", "Identity", {"c"}, {"c_out"}),
                 node("text", "Cast", {"i"}, {"t"}, {attr("to", 8)})};
  body->outputs = {declared("c_out", kTensor, 9), declared("t", kTensor, 8)};
  auto m = make({}, {node("loop", "Loop", {"n", ""}, {"all"}, {{"body", body, ""}})},
                {declared("all", kTensor, 8)});
  m.graph.initializers = {{"n", ints({}, {3})}};
  const auto out = Executor(m).run({});
  EXPECT_EQ(texts_of(out[0].tensor), (std::vector<std::string>{"0", "1", "2"}));
}

}  // namespace
}  // namespace fpguard::exec
