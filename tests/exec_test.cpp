// The executor: results against NumPy, the emulation model (weights rounded once,
// rounding at precision boundaries, data movement never rounds, overflow in the node's
// format), float16 models, observers, unsupported ops listed at once, input checks.
#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <oneapi/dnnl/dnnl.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/model.hpp"
#include "graph_util.hpp"
#include "targets.hpp"

namespace fpguard::exec {
namespace {

const std::filesystem::path kData = FPGUARD_MODEL_DATA;

using test::floats;

std::string run_error(const model::Model& m, const std::vector<NamedTensor>& in,
                      RunOptions o = {}) {
  try {
    Executor(m, o).run(in);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

RunOptions fp16() {
  RunOptions o;
  o.policy.default_format = parse_format("float16");
  return o;
}

// float32 tensors of seeded normal values (mean 0), one after the other.
struct RandomTensors {
  RandomTensors(unsigned seed, float sd) : rng(seed), normal(0, sd) {}
  Tensor operator()(std::vector<std::int64_t> shape) {
    Tensor t(DType::float32, std::move(shape));
    for (float& v : t.data<float>()) v = normal(rng);
    return t;
  }
  std::mt19937 rng;
  std::normal_distribution<float> normal;
};

struct Recorder : Observer {
  // Tensors handed to an observer live only during the call: it copies what it keeps.
  struct Call {
    std::string node;
    std::vector<const Tensor*> input_addresses;
    std::vector<Tensor> inputs;
    std::vector<NamedTensor> outputs;
  };
  std::vector<Call> calls;
  void on_node(const model::Node& n, std::size_t, const std::vector<const Tensor*>& in,
               const std::vector<NamedTensor>& out) override {
    Call c{n.name, in, {}, out};
    for (const auto* t : in) c.inputs.push_back(t ? *t : Tensor());
    calls.push_back(std::move(c));
  }
};

TEST(Executor, MlpMatchesNumPy) {
  const auto m = model::load(kData / "mlp.onnx");
  const auto x = read_npy(kData / "mlp_x.npy");
  const auto want = read_npy(kData / "mlp_y.npy");
  const auto out = Executor(m).run({{"x", x}});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].tensor.shape(), want.shape());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(out[0].tensor.data<float>()[i], want.data<float>()[i], 1e-5);
}

// A model whose weights are in external data: its initializers view the file's memory map
// and stay views through float32 and float16 runs (the executor reads them in place, a
// oneDNN convolution reorders its weights into a buffer of its own, and float16 rounds
// them into the weight cache); its outputs are bit-identical to the same model's saved
// inline, and the data file is never written.
TEST(ExternalData, WeightsAreUsedInPlaceAndNeverWritten) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fpg_exec_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  RandomTensors random(11, 0.2f);
  Tensor shape(DType::int64, {2});
  shape.data<std::int64_t>()[0] = 1, shape.data<std::int64_t>()[1] = 256;
  test::GraphBuilder b({1, 3, 8, 8});
  b.init("w", random({4, 3, 3, 3})).init("b", random({4})).init("shape", shape);
  Tensor b2 = random({5});  // values exact in float16 (multiples of 2^-4 below 2)
  for (float& v : b2.data<float>()) v = std::round(v * 16) / 16;
  b.init("w2", random({256, 5})).init("b2", b2);
  b.node("conv", "Conv", {"x", "w", "b"}, "c",
         {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}, ""},
          {"kernel_shape", std::vector<std::int64_t>{3, 3}, ""}});
  b.node("relu", "Relu", {"c"}, "r").node("flat", "Reshape", {"r", "shape"}, "f");
  b.node("mm", "MatMul", {"f", "w2"}, "m").node("add", "Add", {"m", "b2"}, "y").output("y");
  model::SaveOptions o;
  o.external = model::SaveOptions::External::always;
  o.min_external_bytes = 0;
  const auto data = model::save(b.m, dir / "ext.onnx", o).data_file;
  o.external = model::SaveOptions::External::never;
  model::save(b.m, dir / "inline.onnx", o);
  auto bytes_of = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string data_before = bytes_of(data);
  const auto mtime_before = fs::last_write_time(data);

  const model::Model ext = model::load(dir / "ext.onnx"),
                     inline_ = model::load(dir / "inline.onnx");
  ASSERT_EQ(ext.external_files.size(), 1u);
  for (const auto& t : ext.graph.initializers) EXPECT_TRUE(t.tensor.is_view()) << t.name;
  const Tensor x = random({1, 3, 8, 8});
  // The bytes each node reads as its second input (a weight), by node.
  struct Bytes : Observer {
    std::map<std::string, const std::byte*> second;
    void on_node(const model::Node& n, std::size_t, const std::vector<const Tensor*>& in,
                 const std::vector<NamedTensor>&) override {
      if (in.size() > 1 && in[1]) second[n.name] = in[1]->bytes();
    }
  };
  auto init = [&](const std::string& name) {
    for (const auto& t : ext.graph.initializers)
      if (t.name == name) return t.tensor.bytes();
    return static_cast<const std::byte*>(nullptr);
  };
  for (RunOptions ro : {RunOptions{}, fp16()}) {
    Bytes seen;
    ro.observer = &seen;
    const auto got = Executor(ext, ro).run({{"x", x}});
    ro.observer = nullptr;
    // float32 reads every weight in place; float16 reads a rounded copy of w2, and b2 (exact
    // in float16) in place.
    const bool emulated = ro.policy.default_format.has_value();
    EXPECT_EQ(seen.second["mm"] == init("w2"), !emulated);
    EXPECT_EQ(seen.second["add"], init("b2"));
    const auto want = Executor(inline_, ro).run({{"x", x}});
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].tensor.nbytes(), want[0].tensor.nbytes());
    EXPECT_EQ(std::memcmp(got[0].tensor.bytes(), want[0].tensor.bytes(), want[0].tensor.nbytes()),
              0);
  }
  for (const auto& t : ext.graph.initializers) EXPECT_TRUE(t.tensor.is_view()) << t.name;
  EXPECT_EQ(bytes_of(data), data_before);
  EXPECT_EQ(fs::last_write_time(data), mtime_before);
  fs::remove_all(dir);
}

// A Conv weight that an inline model holds unaligned is a FileCopy (model::load): read
// once for oneDNN's reorder, then given back, in float32 and emulated float16 runs alike,
// and not read again by later runs, whose results are those of the model loaded from bytes
// (weights copied). (oneDNN's x86 kernels take 3x3 weights in a blocked layout: a
// reorder.)
TEST(ExternalData, UnalignedInlineConvWeightIsGivenBackAfterItsReorder) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "fpguard_filecopy";
  fs::create_directories(dir);
  RandomTensors random(5, 0.1f);
  const Tensor w = random({64, 32, 3, 3}), bias = random({64}), x = random({1, 32, 12, 12});
  // The weight's name moves its raw_data: one of four names puts it off a multiple of 4.
  std::optional<model::Model> m;
  fs::path file;
  for (std::string name = "w"; name.size() <= 4 && !m; name += "w") {
    test::GraphBuilder b({1, 32, 12, 12});
    b.init(name, w).init("b", bias);
    b.node("conv", "Conv", {"x", name, "b"}, "y",
           {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}, ""},
            {"kernel_shape", std::vector<std::int64_t>{3, 3}, ""}});
    b.output("y");
    model::SaveOptions o;
    o.external = model::SaveOptions::External::never;
    file = dir / (name + ".onnx");
    model::save(b.m, file, o);
    model::Model loaded = model::load(file);
    if (loaded.graph.initializers[0].tensor.file_copy()) m = std::move(loaded);
  }
  ASSERT_TRUE(m) << "every name left the weight aligned";
  const FileCopy& copy = *m->graph.initializers[0].tensor.file_copy();
  EXPECT_FALSE(copy.held());  // nothing read at load
  std::ifstream in(file, std::ios::binary);
  const model::Model from_bytes = model::load_from_bytes(
      std::string(std::istreambuf_iterator<char>(in), {}), "bytes.onnx", dir);
  EXPECT_EQ(from_bytes.graph.initializers[0].tensor.file_copy(), nullptr);
  for (const RunOptions& ro : {RunOptions{}, fp16()}) {
    const auto want = Executor(from_bytes, ro).run({{"x", x}});
    Executor ex(*m, ro);
    for (int run = 0; run < 3; ++run) {
      const auto got = ex.run({{"x", x}});
      EXPECT_FALSE(copy.held()) << run;
      ASSERT_EQ(got[0].tensor.nbytes(), want[0].tensor.nbytes());
      EXPECT_EQ(std::memcmp(got[0].tensor.bytes(), want[0].tensor.bytes(), want[0].tensor.nbytes()),
                0)
          << run;
    }
  }
  fs::remove_all(dir);
}

TEST(Emulation, SquareOverflowsInFloat16ButNotFloat32) {
  const auto m = model::load(kData / "pow_mean_sqrt.onnx");
  const Tensor x = floats({1, 4}, {300, 300, 300, 300});  // 300^2 = 90000 > 65504
  const auto ref = Executor(m).run({{"x", x}});
  EXPECT_FLOAT_EQ(ref[0].tensor.data<float>()[0], 300.0f);
  const auto emu = Executor(m, fp16()).run({{"x", x}});
  EXPECT_TRUE(std::isinf(emu[0].tensor.data<float>()[0]));
  // Pow and ReduceMean kept in float32 (by op type): 90000 is still rounded to float16
  // where it enters Sqrt, a precision boundary.
  auto o = fp16();
  o.policy.exclude_op_types = {"Pow", "ReduceMean"};
  EXPECT_TRUE(std::isinf(Executor(m, o).run({{"x", x}})[0].tensor.data<float>()[0]));
  // With Sqrt kept too (by name), the result is exact again.
  o.policy.exclude_names = {"sqrt"};
  EXPECT_FLOAT_EQ(Executor(m, o).run({{"x", x}})[0].tensor.data<float>()[0], 300.0f);
}

TEST(Emulation, WeightsAreRoundedOnceAndDataMovementDoesNotRound) {
  const auto m = model::load(kData / "shared_weight.onnx");
  Recorder rec;
  auto o = fp16();
  o.observer = &rec;
  const Tensor x = floats({2, 2}, {1.0001f, 0, 0, 1});
  const auto out = Executor(m, o).run({{"x", x}});
  ASSERT_EQ(rec.calls.size(), 3u);
  EXPECT_EQ(rec.calls[0].input_addresses[1], rec.calls[1].input_addresses[1]);  // one copy
  EXPECT_EQ(rec.calls[0].inputs[1].data<float>()[0], 1.0f);  // 1.0001 rounded to float16
  EXPECT_EQ(rec.calls[1].inputs[1].data<float>()[0], 1.0f);
  EXPECT_EQ(m.graph.find_initializer("w")->tensor.data<float>()[0], 1.0001f);  // model untouched
  // The MatMul input x is rounded at the boundary; Reshape passes 1.0001 through as is.
  EXPECT_EQ(rec.calls[0].inputs[0].data<float>()[0], 1.0f);
  EXPECT_EQ(out[1].name, "r");
  EXPECT_EQ(out[1].tensor.data<float>()[0], 1.0001f);
}

// A value read by several nodes of a format is rounded for each of them (no copy is kept
// with the value): every reader sees the same values, a stochastic rounding's too (its
// draws depend on the seed and the element's index), and they are the value rounded once.
TEST(Emulation, EveryReaderOfAValueSeesItRoundedTheSame) {
  test::GraphBuilder b({64});
  b.node("a", "Neg", {"x"}, "a").node("b", "Abs", {"x"}, "b").node("c", "Neg", {"x"}, "c");
  b.output("a").output("b").output("c");
  std::vector<float> v(64);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.0f + static_cast<float>(i) * 0x1p-14f;
  const Tensor x = floats({64}, v);
  for (const Rounding r : {Rounding::nearest_even, Rounding::stochastic}) {
    SCOPED_TRACE(r == Rounding::stochastic ? "stochastic" : "nearest even");
    Recorder rec;
    auto o = fp16();
    o.policy.round_options.rounding = r;
    o.policy.round_options.seed = 7;
    o.observer = &rec;
    Executor(b.m, o).run({{"x", x}});
    ASSERT_EQ(rec.calls.size(), 3u);
    std::vector<float> want(v.size());
    round(v, want, parse_format("float16"), o.policy.round_options);
    for (const auto& c : rec.calls) {
      const auto got = c.inputs[0].data<float>();
      ASSERT_EQ(got.size(), want.size()) << c.node;
      for (std::size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
            << c.node << " [" << i << "]";
    }
  }
}

// A Reshape, Flatten, Squeeze or Unsqueeze may move its input into its output where no
// later node, graph output or observer reads it (KernelContext::last_read): the values
// read after it (by a later node, as a graph output, a weight) are intact, and every
// result is the copying run's.
TEST(Executor, RelabelingMovesOnlyWhatNobodyReadsLater) {
  test::GraphBuilder b({2, 6});
  b.init("shape", Tensor(DType::int64, {1}));
  b.m.graph.initializers.back().tensor.data<std::int64_t>()[0] = -1;
  b.init("w", floats({2, 3}, {1, 2, 3, 4, 5, 6}));
  b.node("r", "Relu", {"x"}, "r")                       // a graph output
      .node("flat", "Reshape", {"r", "shape"}, "flat")  // r read again later: copied
      .node("neg", "Neg", {"r"}, "neg")
      .node("n2", "Reshape", {"neg", "shape"}, "n2")  // neg read by nobody else: moved
      .node("wf", "Flatten", {"w"}, "wf")             // a weight: copied
      .node("rr", "Reshape", {"r", "shape"}, "rr");   // r, a graph output: copied
  b.output("r").output("flat").output("n2").output("wf").output("rr");
  const Tensor x = floats({2, 6}, {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12});
  const auto plain = Executor(b.m).run({{"x", x}});
  Recorder rec;  // an observer sees every input: nothing is moved
  RunOptions o;
  o.observer = &rec;
  const auto observed = Executor(b.m, o).run({{"x", x}});
  ASSERT_EQ(plain.size(), 5u);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].tensor.shape(), observed[i].tensor.shape()) << plain[i].name;
    const auto p = plain[i].tensor.data<float>(), q = observed[i].tensor.data<float>();
    ASSERT_EQ(p.size(), q.size()) << plain[i].name;
    for (std::size_t j = 0; j < p.size(); ++j) EXPECT_EQ(p[j], q[j]) << plain[i].name;
  }
  EXPECT_EQ(plain[0].tensor.shape(), (std::vector<std::int64_t>{2, 6}));
  EXPECT_EQ(plain[1].tensor.shape(), (std::vector<std::int64_t>{12}));
  EXPECT_EQ(plain[2].tensor.data<float>()[2], -3.0f);  // -relu(3)
  EXPECT_EQ(plain[3].tensor.shape(), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(plain[3].tensor.data<float>()[5], 6.0f);
  EXPECT_EQ(b.m.graph.find_initializer("w")->tensor.data<float>()[5], 6.0f);  // untouched
  EXPECT_EQ(plain[4].tensor.data<float>()[10], 11.0f);
}

// A run moves its outputs out of its values instead of copying them; an output named
// twice, the input, an initializer and a float16 output (converted from its carrier) come
// back as a session's outputs() copies them, run after run, and the model is untouched.
TEST(Executor, RunsMoveTheirOutputsOutAsTheSessionWouldCopyThem) {
  test::GraphBuilder b({2, 3});
  b.init("w", floats({2, 3}, {1, 2, 3, 4, 5, 6}));
  b.node("r", "Relu", {"x"}, "y").node("to16", "Cast", {"y"}, "h", {{"to", std::int64_t{10}, ""}});
  b.output("y").output("y").output("x").output("w");
  b.m.graph.outputs.push_back({"h", 10, false, {}});
  const Tensor x = floats({2, 3}, {1, -2, 3, -4, 5.0009765625f, -6});
  const Executor ex(b.m);
  Session s(ex, std::vector<NamedTensor>{{"x", x}});
  while (!s.done()) s.step();
  const auto copied = s.outputs();
  for (int run = 0; run < 2; ++run) {
    const auto moved = ex.run({{"x", x}});
    const auto values = ex.run_values({{"x", x}});
    ASSERT_EQ(moved.size(), copied.size());
    ASSERT_EQ(values.size(), copied.size());
    for (std::size_t i = 0; i < copied.size(); ++i) {
      for (const Tensor* t : {&moved[i].tensor, &values[i].value.tensor}) {
        EXPECT_EQ(moved[i].name, copied[i].name);
        EXPECT_EQ(t->dtype(), copied[i].tensor.dtype()) << copied[i].name;
        EXPECT_EQ(t->shape(), copied[i].tensor.shape()) << copied[i].name;
        ASSERT_EQ(t->nbytes(), copied[i].tensor.nbytes()) << copied[i].name;
        EXPECT_EQ(std::memcmp(t->bytes(), copied[i].tensor.bytes(), t->nbytes()), 0)
            << copied[i].name;
      }
    }
  }
  EXPECT_EQ(copied[0].tensor.data<float>()[4], 5.0009765625f);
  EXPECT_EQ(copied[1].tensor.data<float>()[4], 5.0009765625f);  // y again
  EXPECT_EQ(copied[2].tensor.data<float>()[1], -2.0f);          // x
  EXPECT_EQ(copied[3].tensor.data<float>()[5], 6.0f);           // w
  EXPECT_EQ(copied[4].tensor.dtype(), DType::float16);          // h: 5.0009765625 -> 5
  EXPECT_EQ(copied[4].tensor.data<std::uint16_t>()[4], 0x4500);
  EXPECT_EQ(b.m.graph.find_initializer("w")->tensor.data<float>()[5], 6.0f);
}

// An executor made from another (what check does for its three runs) shares the plan but
// takes its own options: its results are a fresh executor's, bit for bit, and the first
// executor's are unchanged.
TEST(Executor, SharingAPlanKeepsEachExecutorsOptions) {
  const auto m = model::load(kData / "pow_mean_sqrt.onnx");
  const Tensor x = floats({1, 4}, {300, 1.0001f, 2, 3});
  const Executor ref(m);
  const Executor emu(ref, fp16());
  EXPECT_EQ(emu.order(), ref.order());
  const auto a = emu.run({{"x", x}})[0].tensor;
  const auto b = Executor(m, fp16()).run({{"x", x}})[0].tensor;
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(a.data<float>()[i]),
              std::bit_cast<std::uint32_t>(b.data<float>()[i]));
  EXPECT_TRUE(std::isinf(a.data<float>()[0]));  // 300^2 overflows float16
  EXPECT_FALSE(std::isinf(ref.run({{"x", x}})[0].tensor.data<float>()[0]));
  RunOptions bad;
  bad.carrier = DType::int32;
  EXPECT_THROW(Executor(ref, bad), Error);
}

TEST(Emulation, OutputsAreValuesOfTheFormat) {
  const auto m = model::load(kData / "mlp.onnx");
  const auto x = read_npy(kData / "mlp_x.npy");
  Recorder rec;
  auto o = fp16();
  o.observer = &rec;
  Executor(m, o).run({{"x", x}});
  const Format f = parse_format("float16");
  for (const auto& c : rec.calls)
    for (const auto& t : c.outputs)
      for (float v : t.tensor.data<float>()) EXPECT_EQ(v, round(v, f)) << c.node;
}

TEST(Emulation, CastIsAPrecisionBoundary) {
  const auto m = model::load(kData / "cast_boundary.onnx");
  const auto out = Executor(m, fp16()).run({{"x", floats({1}, {1.0001f})}});
  EXPECT_EQ(out[0].tensor.data<float>()[0], 1.0001f);  // Cast to float32: not rounded to fp16
  ASSERT_EQ(out[1].tensor.dtype(), DType::float16);
  std::vector<double> v(1);
  to_double(out[1].tensor, v);
  EXPECT_EQ(v[0], 1.0);  // Cast to float16 rounds to float16
}

TEST(Executor, Float16ModelRunsInFloat16) {
  const auto m = model::load(kData / "half.onnx");
  Tensor x(DType::float16, {3});
  encode(std::span<const float>(std::vector<float>{1, 2, 3}), x.data<std::uint16_t>(),
         parse_format("float16"));
  const auto out = Executor(m).run({{"x", x}});
  ASSERT_EQ(out[0].tensor.dtype(), DType::float16);
  std::vector<double> v(3);
  to_double(out[0].tensor, v);
  EXPECT_EQ(v[0], 4.0);
  EXPECT_EQ(v[1], 16.0);
  EXPECT_TRUE(std::isinf(v[2]));  // 303^2 overflows float16 storage
}

// The float64 truth run: 1 + 2^-24 is not a float32 value, so (x + 2^-24) - x is 2^-24 in
// double and 0 in float32. Every carrier the observer sees is float64, and the output is
// stored in the declared float32.
TEST(Carrier, Float64RunComputesInDouble) {
  test::GraphBuilder b({1});
  b.init("e", floats({1}, {std::ldexp(1.0f, -24)}))
      .node("add", "Add", {"x", "e"}, "a")
      .node("sub", "Sub", {"a", "x"}, "d")
      .node("mul", "Mul", {"d", "d"}, "y")
      .output("d")
      .output("y");
  const auto x = floats({1}, {1.0f});
  const auto f32 = Executor(b.m).run({{"x", x}});
  EXPECT_EQ(f32[0].tensor.data<float>()[0], 0.0f);
  Recorder rec;
  RunOptions o;
  o.carrier = DType::float64;
  o.observer = &rec;
  const auto f64 = Executor(b.m, o).run({{"x", x}});
  ASSERT_EQ(f64[0].tensor.dtype(), DType::float32);
  EXPECT_EQ(f64[0].tensor.data<float>()[0], 0x1p-24f);
  // 2^-48 is a float32 value too: the output narrows exactly.
  EXPECT_EQ(f64[1].tensor.data<float>()[0], 0x1p-48f);
  ASSERT_EQ(rec.calls.size(), 3u);
  for (const auto& c : rec.calls) {
    for (const auto& t : c.inputs) EXPECT_EQ(t.dtype(), DType::float64) << c.node;
    for (const auto& t : c.outputs) EXPECT_EQ(t.tensor.dtype(), DType::float64) << c.node;
  }
  EXPECT_EQ(rec.calls[1].outputs[0].tensor.data<double>()[0], 0x1p-24);
}

// A float32 local run on a float64 session (check --reference fp64) rounds each input
// to the node's format once, from its double value: 1 + 2^-11 + 2^-40 is just above the
// float16 midpoint between 1 and 1 + 2^-10 and rounds up; through float32 first it would
// be the midpoint 1 + 2^-11, which rounds to even (1).
TEST(Carrier, LocalRunOnFloat64ValuesRoundsOnce) {
  test::GraphBuilder b({1});
  b.init("e", floats({1}, {0x1p-40f}))
      .init("one", floats({1}, {1.0f}))
      .node("add", "Add", {"x", "e"}, "s")
      .node("mul", "Mul", {"s", "one"}, "y")
      .output("y");
  RunOptions o64;
  o64.carrier = DType::float64;
  const Executor truth(b.m, o64), local(b.m);
  Session s(truth, std::vector<NamedTensor>{{"x", floats({1}, {1.0f + 0x1p-11f})}});
  s.step();
  EXPECT_EQ(s.value("s")->data<double>()[0], 1 + 0x1p-11 + 0x1p-40);
  const auto half = parse_format("float16");
  Recorder rec;
  const auto out = s.evaluate_next(half, &rec, &local);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].tensor.dtype(), DType::float32);
  EXPECT_EQ(rec.calls[0].inputs[0].dtype(), DType::float32);
  EXPECT_EQ(rec.calls[0].inputs[0].data<float>()[0], 1.0f + 0x1p-10f);
  EXPECT_EQ(out[0].tensor.data<float>()[0], 1.0f + 0x1p-10f);
  // The same node on the float64 carriers themselves: inputs and result stay double.
  const auto same = s.evaluate_next(half);
  EXPECT_EQ(same[0].tensor.dtype(), DType::float64);
  EXPECT_EQ(same[0].tensor.data<double>()[0], 1 + 0x1p-10);
}

// A Cast to float16 in a float64 run rounds to float16 (from the double value); a Cast
// to float32 does not round (float32 is what the truth run replaces).
TEST(Carrier, CastsInAFloat64Run) {
  test::GraphBuilder b({1});
  b.init("e", floats({1}, {0x1p-40f}))
      .node("add", "Add", {"x", "e"}, "s")
      .node("to16", "Cast", {"s"}, "h", {{"to", std::int64_t{10}, ""}})
      .node("to32", "Cast", {"s"}, "f", {{"to", std::int64_t{1}, ""}})
      .node("back", "Cast", {"h"}, "hf", {{"to", std::int64_t{1}, ""}})
      .node("d", "Sub", {"f", "x"}, "y")
      .output("hf")
      .output("y");
  RunOptions o;
  o.carrier = DType::float64;
  const auto out = Executor(b.m, o).run({{"x", floats({1}, {1.0f + 0x1p-11f})}});
  EXPECT_EQ(out[0].tensor.data<float>()[0], 1.0f + 0x1p-10f);
  EXPECT_EQ(out[1].tensor.data<float>()[0], 0x1p-40f);
}

TEST(Executor, UnsupportedOpsAreListedAtOnce) {
  const auto m = model::load(kData / "unsupported.onnx");
  const auto msg = run_error(m, {{"x", floats({1}, {1})}});
  EXPECT_NE(msg.find("unsupported ops: AlsoNotAnOp, NotAnOp"), std::string::npos) << msg;
}

TEST(Executor, InputErrorsNameTheInput) {
  const auto m = model::load(kData / "mlp.onnx");
  EXPECT_NE(run_error(m, {}).find("input 'x' was not given"), std::string::npos);
  EXPECT_NE(run_error(m, {{"x", floats({2, 5}, std::vector<float>(10))}})
                .find("dimension 1 is 5 but the model declares 4"),
            std::string::npos);
  EXPECT_NE(run_error(m, {{"X", floats({2, 4}, std::vector<float>(8))}}).find("did you mean 'x'"),
            std::string::npos);
}

TEST(Executor, IfBranchesReadOuterValues) {
  const auto m = model::load(kData / "subgraph.onnx");
  Tensor c(DType::bool_, {});
  const Tensor x = floats({2}, {-1, 2});  // Relu -> {0, 2}
  c.data<std::uint8_t>()[0] = 1;
  auto out = Executor(m).run({{"x0", x}, {"c", c}});
  EXPECT_EQ(out[0].tensor.data<float>()[1], 4.0f);  // then: x + x
  c.data<std::uint8_t>()[0] = 0;
  out = Executor(m).run({{"x0", x}, {"c", c}});
  EXPECT_EQ(out[0].tensor.data<float>()[1], -2.0f);  // else: -x
}

// Every node by the name policies know it by: a body's nodes by path, right before the
// node holding them (attributes in file order: onnx.helper sorts them by name).
TEST(Executor, NodePathsNameBodyNodesBeforeTheirNode) {
  const auto m = model::load(kData / "subgraph.onnx");
  EXPECT_EQ(node_paths(m), (std::vector<std::string>{"relu", "branch/else_branch/else_neg",
                                                     "branch/then_branch/then_add", "branch"}));
}

// The profiler times each node the runs ran, a taken branch's node by its path; a local
// evaluation of a node is not a run of it; the values are those of an unprofiled run.
TEST(Profiler, CountsEachNodeOfEachRunOnce) {
  const auto m = model::load(kData / "subgraph.onnx");
  Tensor c(DType::bool_, {});
  c.data<std::uint8_t>()[0] = 1;
  const Tensor x = floats({2}, {-1, 2});
  Profiler profiler;
  const Executor plain(m);
  RunOptions with_profiler;
  with_profiler.profiler = &profiler;
  const Executor timed(m, with_profiler);
  for (int r = 0; r < 3; ++r) {
    const auto got = timed.run({{"x0", x}, {"c", c}});
    const auto want = plain.run({{"x0", x}, {"c", c}});
    EXPECT_EQ(got[0].tensor.data<float>()[1], want[0].tensor.data<float>()[1]);
  }
  {
    Session s(timed, std::vector<NamedTensor>{{"x0", x}, {"c", c}});
    s.evaluate_next(std::nullopt);  // not a run of Relu
    s.step();                       // a run that never ends counts no run
  }
  const Profile p = profiler.profile();
  EXPECT_EQ(p.runs, 3u);
  std::vector<std::pair<std::string, std::uint64_t>> seen;
  for (const auto& n : p.nodes) {
    seen.emplace_back(n.path, n.calls);
    EXPECT_GE(n.ms, 0);
  }
  const std::vector<std::pair<std::string, std::uint64_t>> want = {
      {"relu", 4}, {"branch", 3}, {"branch/then_branch/then_add", 3}};
  EXPECT_EQ(seen, want);
  EXPECT_EQ(p.nodes[2].op_type, "Add");
  const auto types = by_op_type(p);
  ASSERT_EQ(types.size(), 3u);
  for (const auto& t : types) EXPECT_EQ(t.nodes, 1u);
  profiler.clear();
  EXPECT_TRUE(profiler.profile().nodes.empty());
  EXPECT_EQ(profiler.profile().runs, 0u);
}

TEST(Registry, KnowsTheCommonOps) {
  for (const char* op : {"Add", "MatMul", "Gemm", "Softmax", "LayerNormalization", "Reshape",
                         "Transpose", "ReduceMean", "Cast", "Where", "Gather", "Concat"})
    EXPECT_NE(Registry::global().find(op), nullptr) << op;
  EXPECT_EQ(Registry::global().find("Reshape")->kind, OpKind::data_movement);
  EXPECT_EQ(Registry::global().find("MatMul")->kind, OpKind::compute);
}

// A one-node model built in memory: x (float32, `xs`) op w (initializer) -> y.
model::Model one_node(const std::string& op, std::vector<std::int64_t> xs, Tensor w) {
  test::GraphBuilder b(std::move(xs), "acc.onnx");
  b.init("w", std::move(w)).node("node", op, {"x", "w"}, "y").output("y");
  return b.m;
}

// Executors that share a WeightCache (check's three runs) share what kernels prepare from
// its weights and the model's (a Conv's weights reordered into oneDNN's layout, keyed by
// their address): the float32 reference and the float16 runs must each still get their
// own weights, bit for bit what executors with caches of their own give, in either order.
TEST(Executor, ExecutorsSharingWeightsKeepTheirOwnPreparedWeights) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fpg_exec_prep_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 0.3f);
  Tensor w(DType::float32, {8, 3, 3, 3});
  for (float& v : w.data<float>()) v = normal(rng);
  Tensor x(DType::float32, {1, 3, 12, 12});
  for (float& v : x.data<float>()) v = normal(rng);
  model::SaveOptions so;  // external data: the weight is a view of the file, read in place
  so.external = model::SaveOptions::External::always;
  so.min_external_bytes = 0;
  model::save(one_node("Conv", {1, 3, 12, 12}, w), dir / "conv.onnx", so);
  const model::Model m = model::load(dir / "conv.onnx");
  const Tensor want32 = Executor(m).run({{"x", x}})[0].tensor;
  const Tensor want16 = Executor(m, fp16()).run({{"x", x}})[0].tensor;
  ASSERT_NE(std::memcmp(want32.bytes(), want16.bytes(), want32.nbytes()), 0);
  auto same = [](const Tensor& a, const Tensor& b) {
    return a.nbytes() == b.nbytes() && std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0;
  };
  for (const bool reference_first : {true, false})
    for (const bool in_float32 : {false, true}) {  // RunOptions::prepare_in_float32
      RunOptions ref_options;
      ref_options.weights = std::make_shared<WeightCache>();
      ref_options.prepare_in_float32 = in_float32;
      RunOptions emu_options = fp16();
      emu_options.weights = ref_options.weights;
      emu_options.prepare_in_float32 = in_float32;
      const Executor ref(m, ref_options);
      const Executor emu(ref, emu_options), local(ref, emu_options);
      if (reference_first) {
        EXPECT_TRUE(same(ref.run({{"x", x}})[0].tensor, want32));
      }
      EXPECT_TRUE(same(emu.run({{"x", x}})[0].tensor, want16));
      EXPECT_TRUE(same(local.run({{"x", x}})[0].tensor, want16));
      EXPECT_TRUE(same(ref.run({{"x", x}})[0].tensor, want32));
      EXPECT_TRUE(same(emu.run({{"x", x}})[0].tensor, want16));
    }
  fs::remove_all(dir);
}

// Random float32 tensors (N(0, 0.3)), float16 rounding and bitwise equality, for the
// weight-rounding tests below.
struct RoundingTestKit {
  std::mt19937 rng;
  std::normal_distribution<float> normal{0, 0.3f};
  Tensor random(std::vector<std::int64_t> shape) {
    Tensor t(DType::float32, std::move(shape));
    for (float& v : t.data<float>()) v = normal(rng);
    return t;
  }
  static Tensor rounded(Tensor t, const RoundOptions& ro) {
    round(t.data<float>(), t.data<float>(), parse_format("float16"), ro);
    return t;
  }
  static bool same(const Tensor& a, const Tensor& b) {
    return a.nbytes() == b.nbytes() && std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0;
  }
};

// Conv takes its weight unrounded where no observer reads weights (OpTraits::rounds_weight)
// and rounds what it prepares from it: results bit for bit those of the rounded copy (the
// path an observer that reads weights gets) and of a float32 run of the rounded operands
// whose output is rounded after, with weights that overflow float16 or become subnormal or
// zero; in layouts oneDNN pads (3 and 5 channels), with and without saturation, and with a
// 1x1 kernel or 4 spatial dimensions (no oneDNN: the kernel asks for the rounded copy).
TEST(Emulation, ConvRoundsItsPreparedWeightAsTheRoundedCopyWould) {
  struct Observing : Recorder {
    bool reads = true;
    bool reads_weights(bool) const override { return reads; }
  };
  RoundingTestKit kit{std::mt19937(9)};
  const auto random = [&](std::vector<std::int64_t> shape) { return kit.random(std::move(shape)); };
  const auto rounded = RoundingTestKit::rounded;
  const auto same = RoundingTestKit::same;
  const std::vector<std::vector<std::int64_t>> weights = {
      {8, 3, 3, 3}, {16, 16, 1, 1}, {6, 5, 3, 3}, {2, 2, 2, 2, 2, 2}};
  for (const auto& ws : weights)
    for (const bool saturate : {false, true})
      for (const bool in_float32 : {false, true}) {  // RunOptions::prepare_in_float32
        SCOPED_TRACE(::testing::PrintToString(ws) + (saturate ? " saturating" : "") +
                     (in_float32 ? " prepared in float32" : ""));
        std::vector<std::int64_t> xs(ws.size(), 5);
        xs[0] = 1, xs[1] = ws[1];
        Tensor w = random(ws);
        auto wv = w.data<float>();
        wv[0] = 1e5f, wv[1] = -7e4f, wv[2] = 3e-6f, wv[3] = 1e-9f;
        const Tensor x = random(xs);
        const model::Model m = one_node("Conv", xs, w);
        RunOptions o = fp16();
        o.policy.round_options.saturate = saturate;
        o.prepare_in_float32 = in_float32;
        Observing rec;
        rec.reads = false;
        o.observer = &rec;
        const Executor ex(m, o);
        const Tensor unrounded = ex.run({{"x", x}})[0].tensor;
        EXPECT_TRUE(same(ex.run({{"x", x}})[0].tensor, unrounded));  // from what it keeps
        ASSERT_EQ(rec.calls.size(), 2u);
        const Tensor& model_w = m.graph.find_initializer("w")->tensor;
        // 1-3 spatial dimensions: oneDNN, except 1x1 kernels (one GEMM on the rounded copy).
        const bool own_rounding = ws.size() <= 5 && ws[2] * ws[3] > 1;
        EXPECT_EQ(rec.calls[0].input_addresses[1] == &model_w, own_rounding);
        rec.calls.clear();
        rec.reads = true;
        const Tensor copy = Executor(m, o).run({{"x", x}})[0].tensor;
        const RoundOptions& ro = o.policy.round_options;
        EXPECT_TRUE(same(rec.calls[0].inputs[1], rounded(w, ro)));  // the observer's view
        // x is rounded where it enters (a graph input), the output as the node's.
        const Tensor want = rounded(
            Executor(one_node("Conv", xs, rounded(w, ro))).run({{"x", rounded(x, ro)}})[0].tensor,
            ro);
        EXPECT_TRUE(same(unrounded, want));
        EXPECT_TRUE(same(copy, want));
      }
}

// MatMul and Gemm take their weight B unrounded where no observer reads weights
// (OpTraits::rounds_weight): the first run rounds it per call, check's runs (prepared in
// float32) share the latest rounding, later runs read the WeightCache's copy. Every run's
// result is bit for bit a float32 run of the rounded operands whose output is rounded
// after, with weights that overflow float16 or become subnormal or zero, with and without
// saturation; and executors sharing the weights (check's emulated and local runs, over
// several input sets) get the same.
TEST(Emulation, MatMulAndGemmRoundTheirWeightAsTheRoundedCopyWould) {
  struct Observing : Recorder {
    bool reads_weights(bool) const override { return false; }
  };
  RoundingTestKit kit{std::mt19937(11)};
  const auto random = [&](std::vector<std::int64_t> shape) { return kit.random(std::move(shape)); };
  const auto rounded = RoundingTestKit::rounded;
  const auto same = RoundingTestKit::same;
  const auto model_of = [](const std::string& op, const Tensor& w) {
    test::GraphBuilder b({3, 40}, "mm.onnx");
    std::vector<model::Attribute> attrs;
    if (op == "Gemm") attrs.push_back({"transB", std::int64_t{1}, ""});
    b.init("w", w).node("node", op, {"x", "w"}, "y", attrs).output("y");
    return b.m;
  };
  for (const std::string op : {"MatMul", "Gemm"})
    for (const bool saturate : {false, true})
      for (const bool in_float32 : {false, true}) {  // RunOptions::prepare_in_float32
        SCOPED_TRACE(op + (saturate ? " saturating" : "") + (in_float32 ? " in float32" : ""));
        Tensor w = random(op == "Gemm" ? std::vector<std::int64_t>{24, 40}
                                       : std::vector<std::int64_t>{40, 24});
        auto wv = w.data<float>();
        wv[0] = 1e5f, wv[1] = -7e4f, wv[2] = 3e-6f, wv[3] = 1e-9f;
        const model::Model m = model_of(op, w);
        RunOptions o = fp16();
        o.policy.round_options.saturate = saturate;
        o.prepare_in_float32 = in_float32;
        const RoundOptions& ro = o.policy.round_options;
        const Tensor x1 = random({3, 40}), x2 = random({3, 40});
        const auto want = [&](const Tensor& x) {
          return rounded(
              Executor(model_of(op, rounded(w, ro))).run({{"x", rounded(x, ro)}})[0].tensor, ro);
        };
        const Tensor want1 = want(x1), want2 = want(x2);
        Observing rec;
        o.observer = &rec;
        const Executor ex(m, o);
        for (int run = 0; run < 3; ++run) EXPECT_TRUE(same(ex.run({{"x", x1}})[0].tensor, want1));
        ASSERT_EQ(rec.calls.size(), 3u);
        EXPECT_EQ(rec.calls[0].input_addresses[1], &m.graph.find_initializer("w")->tensor);
        // Two executors sharing the weights, node after node, over three input sets.
        o.observer = nullptr;
        o.weights = std::make_shared<WeightCache>();
        const Executor emu(m, o), local(emu, o);
        for (const Tensor* x : {&x1, &x2, &x1}) {
          const Tensor& w_want = x == &x2 ? want2 : want1;
          EXPECT_TRUE(same(local.run({{"x", *x}})[0].tensor, w_want));
          EXPECT_TRUE(same(emu.run({{"x", *x}})[0].tensor, w_want));
        }
      }
}

// Whether the page holding `p` is mapped into this process (/proc/self/pagemap's present
// bit): a file's page given back (Tensor::release_pages) is not, until read again.
bool page_present(const void* p) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY);
  const auto page =
      reinterpret_cast<std::uintptr_t>(p) / static_cast<std::uintptr_t>(::getpagesize());
  std::uint64_t entry = 0;
  const auto got = fd < 0 ? -1 : ::pread(fd, &entry, 8, static_cast<off_t>(page * 8));
  if (fd >= 0) ::close(fd);
  if (got != 8) throw std::runtime_error("cannot read /proc/self/pagemap");
  return (entry >> 63) != 0;
}

// A weight B (k x n) whose rows are a multiple of 512 bytes apart (the stride the no-copy
// sgemm reads slowly) is read from a copy at a padded stride from the node's second run on:
// a float32 weight in a file's map (its pages given back, and not read again), and a weight
// the node rounds itself (rounded into the copy, which takes the WeightCache copy's place).
// Every run's result is bit for bit the unpadded one: float32 on the model saved inline (read
// in place), float16 through an observer that reads weights (the WeightCache's copy).
// check's executors (prepare_in_float32), which read the float32 weights in turn, copy
// nothing; nor does anything on AVX-512 (oneDNN's matmul copies B itself). MatMul over
// batches of A (one product) and Gemm without transB.
TEST(Executor, MatMulAndGemmReadConflictingRowsFromAPaddedCopy) {
  const bool avx512 =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fpg_exec_pad_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Observing : Recorder {
    bool reads = false;
    bool reads_weights(bool) const override { return reads; }
  };
  RoundingTestKit kit{std::mt19937(13)};
  const auto same = RoundingTestKit::same;
  for (const std::string op : {"MatMul", "Gemm"}) {
    const std::vector<std::int64_t> xs =
        op == "MatMul" ? std::vector<std::int64_t>{2, 5, 256} : std::vector<std::int64_t>{7, 256};
    const Tensor w = kit.random({256, op == "MatMul" ? 256 : 384});
    test::GraphBuilder b(xs, op + ".onnx");
    std::vector<model::Attribute> attrs;
    if (op == "Gemm") attrs.push_back({"transB", std::int64_t{0}, ""});
    b.init("w", w).node("node", op, {"x", "w"}, "y", attrs).output("y");
    model::SaveOptions so;
    so.external = model::SaveOptions::External::always;
    so.min_external_bytes = 0;
    model::save(b.m, dir / "ext.onnx", so);
    so.external = model::SaveOptions::External::never;
    model::save(b.m, dir / "inline.onnx", so);
    const Tensor x1 = kit.random(xs), x2 = kit.random(xs);
    for (const bool emulated : {false, true})
      for (const bool in_float32 : {false, true}) {  // RunOptions::prepare_in_float32
        SCOPED_TRACE(op + (emulated ? " float16" : " float32") + (in_float32 ? " check" : ""));
        const model::Model m = model::load(dir / "ext.onnx");
        const Tensor& mw = m.graph.find_initializer("w")->tensor;
        ASSERT_TRUE(mw.maps_file());
        const std::byte* middle = mw.bytes() + mw.nbytes() / 2;
        RunOptions o = emulated ? fp16() : RunOptions{};
        o.prepare_in_float32 = in_float32;
        Observing rec;
        o.observer = &rec;
        const auto want = [&](const Tensor& x) {
          if (!emulated)
            return Executor(model::load(dir / "inline.onnx")).run({{"x", x}})[0].tensor;
          Observing reading;
          reading.reads = true;
          RunOptions ro = o;
          ro.observer = &reading;
          return Executor(m, ro).run({{"x", x}})[0].tensor;
        };
        const Tensor want1 = want(x1), want2 = want(x2);
        const Executor ex(m, o);
        for (int run = 0; run < 4; ++run) {
          const Tensor& x = run == 2 ? x2 : x1;
          EXPECT_TRUE(same(ex.run({{"x", x}})[0].tensor, run == 2 ? want2 : want1)) << run;
          // Given back after the copy (second run) and not read again; kept where not copied.
          EXPECT_EQ(page_present(middle), run == 0 || in_float32 || avx512) << run;
        }
        // The rounding node sees its unrounded weight (no WeightCache copy put in its place).
        if (emulated && !in_float32 && !avx512) {
          ASSERT_EQ(rec.calls.size(), 4u);
          EXPECT_EQ(rec.calls[3].input_addresses[1], &mw);
        }
      }
  }
  fs::remove_all(dir);
}

RunOptions accumulating(const std::string& order) {
  RunOptions o = fp16();
  o.policy.accumulate = parse_format("float16");
  o.policy.accumulation = *parse_accumulation_order(order);
  return o;
}

// A running fp16 sum of ones stops at 2048 (adding 1 to 2048 rounds back to 2048):
// MatMul and Conv accumulating in fp16 sequentially reach 2048 of 4096; pairwise and
// blocked:256 (chunks of 256 in fp16, their sums in float32) reach 4096 exactly; float32
// accumulation (the default) too.
TEST(Accumulation, Float16SumOfOnesStagnatesAt2048) {
  const std::int64_t K = 4096;
  const Tensor ones_x = floats({1, K}, std::vector<float>(K, 1.0f));
  const auto mm = one_node("MatMul", {1, K}, floats({K, 2}, std::vector<float>(2 * K, 1.0f)));
  auto y = [&](const model::Model& m, const RunOptions& o, const Tensor& x) {
    return Executor(m, o).run({{"x", x}})[0].tensor.data<float>()[0];
  };
  EXPECT_EQ(y(mm, fp16(), ones_x), 4096.0f);
  EXPECT_EQ(y(mm, accumulating("sequential"), ones_x), 2048.0f);
  EXPECT_EQ(y(mm, accumulating("pairwise"), ones_x), 4096.0f);
  EXPECT_EQ(y(mm, accumulating("blocked:256"), ones_x), 4096.0f);
  // Conv 1x1 over 4096 channels: the same reduction.
  const auto conv = one_node("Conv", {1, K, 1, 1}, floats({1, K, 1, 1}, std::vector<float>(K, 1)));
  const Tensor ones_img = floats({1, K, 1, 1}, std::vector<float>(K, 1.0f));
  EXPECT_EQ(y(conv, accumulating("sequential"), ones_img), 2048.0f);
  EXPECT_EQ(y(conv, fp16(), ones_img), 4096.0f);
  // Nodes kept in float32 accumulate in float32.
  RunOptions kept = accumulating("sequential");
  kept.policy.exclude_names = {"node"};
  EXPECT_EQ(y(mm, kept, ones_x), 4096.0f);
}

// Sum-type reductions accumulate on the same model: ReduceSum of 4096 ones sequentially in
// fp16 stagnates at 2048, pairwise reaches 4096; over a non-last axis each output sums its
// own column (ones stop at 2048; twos at 4096: 4096 + 2 is a tie that rounds to even).
TEST(Accumulation, ReductionsRoundEveryPartialSum) {
  const std::int64_t K = 4096;
  Tensor axes(DType::int64, {1});
  axes.data<std::int64_t>()[0] = 1;
  const auto sum_last = one_node("ReduceSum", {1, K}, axes);
  const Tensor ones_x = floats({1, K}, std::vector<float>(K, 1.0f));
  auto run = [](const model::Model& m, const RunOptions& o, const Tensor& x) {
    return Executor(m, o).run({{"x", x}})[0].tensor;
  };
  EXPECT_EQ(run(sum_last, fp16(), ones_x).data<float>()[0], 4096.0f);
  EXPECT_EQ(run(sum_last, accumulating("sequential"), ones_x).data<float>()[0], 2048.0f);
  EXPECT_EQ(run(sum_last, accumulating("pairwise"), ones_x).data<float>()[0], 4096.0f);

  axes.data<std::int64_t>()[0] = 0;
  const auto sum_first = one_node("ReduceSum", {K, 2}, axes);
  std::vector<float> cols(2 * K);
  for (std::int64_t i = 0; i < K; ++i) cols[2 * i] = 1, cols[2 * i + 1] = 2;
  const Tensor y = run(sum_first, accumulating("sequential"), floats({K, 2}, cols));
  EXPECT_EQ(y.data<float>()[0], 2048.0f);
  EXPECT_EQ(y.data<float>()[1], 4096.0f);

  // ReduceMean (opset 13: axes attribute) and ReduceL2 (sqrt of the rounded sum of squares).
  for (const char* op : {"ReduceMean", "ReduceL2"}) {
    test::GraphBuilder b({1, K}, "acc.onnx");
    b.node("node", op, {"x"}, "y", {{"axes", std::vector<std::int64_t>{1}, ""}}).output("y");
    // sqrt(2048) = 45.2548... stored in float16 (spacing 1/32 there): 45.25.
    const float want = std::string(op) == "ReduceMean" ? 0.5f : 45.25f;
    EXPECT_EQ(run(b.m, accumulating("sequential"), ones_x).data<float>()[0], want) << op;
    EXPECT_EQ(run(b.m, fp16(), ones_x).data<float>()[0],
              std::string(op) == "ReduceMean" ? 1.0f : 64.0f)
        << op;
  }
}

// Scaled precisions: which operands are quantized, along which axes, with which amax
// (docs/executor.md); the values themselves are tested end to end by cli/scaled_test.py.
model::Node scaled_node(const std::string& op, const std::string& attr = "", std::int64_t v = 0) {
  model::Node n;
  n.name = "n";
  n.op_type = op;
  if (!attr.empty()) n.attributes.push_back({.name = attr, .value = v, .ref_attr_name = ""});
  return n;
}

TEST(Scaled, OperandAxes) {
  const PrecisionPolicy p;
  const ScaledFormat mx = parse_scaled_format("mxfp8_e4m3");
  const auto axis = [&](const model::Node& n, std::size_t i, std::vector<std::int64_t> shape) {
    const auto op = scaled_operand(n, "n", i, shape, false, mx, p);
    return op ? op->layout.axis : 99;
  };
  EXPECT_EQ(axis(scaled_node("MatMul"), 0, {2, 4, 8}), -1);  // A [..., M, K]
  EXPECT_EQ(axis(scaled_node("MatMul"), 1, {2, 8, 3}), -2);  // B [..., K, N]
  EXPECT_EQ(axis(scaled_node("MatMul"), 1, {8}), 0);         // a 1-D B is K
  EXPECT_EQ(axis(scaled_node("Gemm"), 0, {4, 8}), 1);
  EXPECT_EQ(axis(scaled_node("Gemm", "transA", 1), 0, {8, 4}), 0);
  EXPECT_EQ(axis(scaled_node("Gemm"), 1, {8, 3}), 0);
  EXPECT_EQ(axis(scaled_node("Gemm", "transB", 1), 1, {3, 8}), 1);
  EXPECT_EQ(axis(scaled_node("Conv"), 1, {6, 4, 3, 3}), 1);
  EXPECT_EQ(axis(scaled_node("Gemm"), 2, {3}), 99);  // the bias is not quantized
  EXPECT_EQ(axis(scaled_node("Add"), 0, {3}), 99);
  EXPECT_EQ(axis(scaled_node("Gemm"), 0, {4, 8, 1}), 99);  // left to the kernel's error
  // Conv X [N, C, ...] with group 2: [N, 2, C/2, ...] blocked along the group's channels.
  const auto x =
      scaled_operand(scaled_node("Conv", "group", 2), "n", 0, {1, 8, 5, 5}, false, mx, p);
  ASSERT_TRUE(x);
  EXPECT_EQ(x->layout.shape, (std::vector<std::int64_t>{1, 2, 4, 5, 5}));
  EXPECT_EQ(x->layout.axis, 2);
}

TEST(Scaled, ChannelScalesAndCalibratedAmax) {
  PrecisionPolicy p;
  p.activation_amax[{"n", 0}] = 3;
  p.amax_margin = 2;
  const ScaledFormat ch = parse_scaled_format("channel:float8_e4m3fn");
  // Weights: per output channel (Gemm B [N, K] with transB: axis 0), their own amax.
  const auto w = scaled_operand(scaled_node("Gemm", "transB", 1), "n", 1, {3, 8}, true, ch, p);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->format.scope, ScaleScope::channel);
  EXPECT_EQ(w->layout.axis, 0);
  EXPECT_FALSE(w->options.amax);
  // Activations: one static scale per tensor, the calibrated amax times 2^margin.
  const auto a = scaled_operand(scaled_node("Gemm"), "n", 0, {4, 8}, false, ch, p);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->format.scope, ScaleScope::tensor);
  EXPECT_EQ(a->options.amax, 12.0);
  // Block formats ignore calibration.
  const auto mx =
      scaled_operand(scaled_node("Gemm"), "n", 0, {4, 8}, false, parse_scaled_format("nvfp4"), p);
  ASSERT_TRUE(mx);
  EXPECT_FALSE(mx->options.amax);
}

// MaxPool without an Indices output takes a separable path (ops/maxpool.cpp, on vectors
// for strides 1 and 2: rows, then columns); with Indices it takes the scalar path. Both read the
// same input in one model and must agree bit for bit: NaN payloads, infinities, signed zeros,
// padding, dilation, ceil_mode.
TEST(Pool, MaxPoolWithoutIndicesEqualsTheIndexedPathBitForBit) {
  test::TargetGuard guard;  // Highway's own choice of target again, however the test ends
  // (Listed once: a target set for the test is all that Highway reports as supported.)
  const std::vector<std::int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_GT(targets.size(), 1u);
  struct Case {
    std::int64_t h, w;
    std::vector<std::int64_t> kernel, strides, pads, dilations;
    std::int64_t ceil_mode;
  };
  const std::vector<Case> cases = {
      {.h = 8,
       .w = 10,
       .kernel = {2, 2},
       .strides = {2, 2},
       .pads = {0, 0, 0, 0},
       .dilations = {1, 1},
       .ceil_mode = 0},
      {.h = 9,
       .w = 11,
       .kernel = {3, 3},
       .strides = {2, 2},
       .pads = {1, 1, 1, 1},
       .dilations = {1, 1},
       .ceil_mode = 0},
      {.h = 7,
       .w = 13,
       .kernel = {3, 3},
       .strides = {1, 1},
       .pads = {1, 1, 1, 1},
       .dilations = {1, 1},
       .ceil_mode = 0},
      {.h = 8,
       .w = 9,
       .kernel = {2, 1},
       .strides = {2, 1},
       .pads = {0, 1, 0, 1},
       .dilations = {1, 1},
       .ceil_mode = 0},
      {.h = 11,
       .w = 12,
       .kernel = {3, 3},
       .strides = {2, 2},
       .pads = {2, 2, 2, 2},
       .dilations = {2, 2},
       .ceil_mode = 1},
      {.h = 10,
       .w = 17,
       .kernel = {5, 4},
       .strides = {3, 3},
       .pads = {2, 0, 1, 3},
       .dilations = {1, 2},
       .ceil_mode = 1},
      {.h = 1,
       .w = 7,
       .kernel = {1, 7},
       .strides = {1, 1},
       .pads = {0, 3, 0, 3},
       .dilations = {1, 1},
       .ceil_mode = 0},
      {.h = 5,
       .w = 6,
       .kernel = {1, 1},
       .strides = {1, 1},
       .pads = {0, 0, 0, 0},
       .dilations = {1, 1},
       .ceil_mode = 0},
      {.h = 6,  // output column 1 reads no input column: not separable
       .w = 2,
       .kernel = {2, 2},
       .strides = {1, 1},
       .pads = {0, 2, 0, 2},
       .dilations = {1, 3},
       .ceil_mode = 0},
      {.h = 112,  // ResNet's stem pool, planes of several rows of vectors
       .w = 112,
       .kernel = {3, 3},
       .strides = {2, 2},
       .pads = {1, 1, 1, 1},
       .dilations = {1, 1},
       .ceil_mode = 0},
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  const std::vector<float> special = {
      std::bit_cast<float>(0x7fc00001u),      std::bit_cast<float>(0xffc12345u),  // NaN payloads
      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 0.0f, -0.0f};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.h) + "x" + std::to_string(c.w) + " kernel " +
                 std::to_string(c.kernel[0]) + "x" + std::to_string(c.kernel[1]));
    test::GraphBuilder b({2, 3, c.h, c.w});
    const std::vector<model::Attribute> attrs = {{"kernel_shape", c.kernel, ""},
                                                 {"strides", c.strides, ""},
                                                 {"pads", c.pads, ""},
                                                 {"dilations", c.dilations, ""},
                                                 {"ceil_mode", c.ceil_mode, ""}};
    b.node("rows", "MaxPool", {"x"}, "y_rows", attrs);
    b.m.graph.nodes.push_back({"scalar", "MaxPool", "", {"x"}, {"y_scalar", "i"}, attrs, "", {}});
    b.output("y_rows").output("y_scalar");
    std::vector<float> x(static_cast<std::size_t>(6 * c.h * c.w));
    for (float& v : x) {
      const auto pick = rng() % 8;  // a quarter of the values special, the rest uniform
      v = pick < 2 ? special[rng() % special.size()] : uniform(rng);
    }
    // On every SIMD target the kernel is compiled for (vectors of 4 and 8 floats: other
    // tails), as the Highway kernels are tested.
    for (const std::int64_t target : targets) {
      hwy::SetSupportedTargetsForTest(target);
      SCOPED_TRACE(hwy::TargetName(target));
      const auto out = Executor(b.m).run({{"x", floats({2, 3, c.h, c.w}, x)}});
      ASSERT_EQ(out.size(), 2u);
      const auto rows = out[0].tensor.data<float>(), scalar = out[1].tensor.data<float>();
      ASSERT_EQ(out[0].tensor.shape(), out[1].tensor.shape());
      for (std::size_t i = 0; i < rows.size(); ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(rows[i]), std::bit_cast<std::uint32_t>(scalar[i]))
            << "output " << i;
      // On float64 carriers (the kernel's double build): the same taps, narrowed exactly.
      RunOptions o64;
      o64.carrier = DType::float64;
      const auto out64 = Executor(b.m, o64).run({{"x", floats({2, 3, c.h, c.w}, x)}});
      ASSERT_EQ(out64.size(), 2u);
      const auto rows64 = out64[0].tensor.data<float>(), scalar64 = out64[1].tensor.data<float>();
      for (std::size_t i = 0; i < rows.size(); ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(rows64[i]),
                  std::bit_cast<std::uint32_t>(scalar64[i]))
            << "float64 output " << i;
        ASSERT_EQ(std::bit_cast<std::uint32_t>(rows64[i]), std::bit_cast<std::uint32_t>(scalar[i]))
            << "float64 output " << i;
      }
    }
  }
}

// Nearest Resize of the last two axes (planar: row by row, the input plus 0, repeated
// rows copied) gives the generic path's bits (the sum over the taps of 1 x input in double:
// -0 becomes +0, NaN payloads kept): the generic path runs the same resize with the batch
// axis doubled too, whose outputs 2b and 2b + 1 are input b's (in these coordinate and
// rounding modes).
TEST(Resize, NearestOfThePlanesEqualsTheGenericPathBitForBit) {
  struct Case {
    std::string transform, nearest_mode;
    float scale_h, scale_w;
  };
  const std::vector<Case> cases = {{"asymmetric", "floor", 2.0f, 2.0f},
                                   {"half_pixel", "round_prefer_floor", 1.5f, 2.5f},
                                   {"align_corners", "round_prefer_ceil", 0.6f, 3.0f},
                                   {"pytorch_half_pixel", "round_prefer_floor", 3.0f, 0.5f}};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  const std::vector<float> special = {std::bit_cast<float>(0x7fc00001u),
                                      std::bit_cast<float>(0xffc12345u),
                                      std::numeric_limits<float>::infinity(),
                                      0.0f,
                                      -0.0f,
                                      1e-40f};
  std::vector<float> x(2 * 3 * 5 * 7);
  for (float& v : x) v = rng() % 4 == 0 ? special[rng() % special.size()] : uniform(rng);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.transform + " " + c.nearest_mode);
    test::GraphBuilder b({2, 3, 5, 7});
    const std::vector<model::Attribute> attrs = {
        {"mode", std::string("nearest"), ""},
        {"coordinate_transformation_mode", c.transform, ""},
        {"nearest_mode", c.nearest_mode, ""}};
    b.init("planar", floats({4}, {1.0f, 1.0f, c.scale_h, c.scale_w}))
        .init("generic", floats({4}, {2.0f, 1.0f, c.scale_h, c.scale_w}))
        .node("p", "Resize", {"x", "", "planar"}, "y_planar", attrs)
        .node("g", "Resize", {"x", "", "generic"}, "y_generic", attrs)
        .output("y_planar")
        .output("y_generic");
    const auto out = Executor(b.m).run({{"x", floats({2, 3, 5, 7}, x)}});
    ASSERT_EQ(out.size(), 2u);
    const auto planar = out[0].tensor.data<float>(), generic = out[1].tensor.data<float>();
    ASSERT_EQ(generic.size(), 2 * planar.size());
    const std::size_t image = planar.size() / 2;
    for (std::size_t i = 0; i < planar.size(); ++i) {
      const std::size_t batch = i / image, rest = i % image;
      for (std::size_t copy = 0; copy < 2; ++copy)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(planar[i]),
                  std::bit_cast<std::uint32_t>(generic[(2 * batch + copy) * image + rest]))
            << "output " << i;
    }
  }
}

// Linear Resize of the last two axes: each output is the double sum, in order, of (row
// weight x column weight) x input over the two row taps (outer) and the two column taps,
// from 0 (an all -0 neighbourhood gives +0), rounded to the carrier once; worked out here
// from the coordinates (clamped at the edges), bit for bit. Up- and downscaling, rows
// wider, narrower and not a multiple of a vector (the kernel's whole vectors, its last
// vector ending at the row's end, its scalar loop), float32 and float64 carriers; infinities
// and NaNs of two payloads among the inputs. Where two NaNs meet in an addition, x86 keeps
// the first operand's, and which operand is first the compiler chooses (addition commutes
// for it): the scalar loop kept the term's, the vector kernel keeps the sum's; either passes.
TEST(Resize, LinearOfThePlanesIsTheDoubleSumOfItsFourTaps) {
  struct Case {
    std::string transform;
    std::int64_t h, w;
    float sh, sw;
  };
  const std::vector<Case> cases = {
      {"half_pixel", 5, 7, 2.5f, 1.75f}, {"half_pixel", 6, 9, 2.0f, 1.5f},
      {"half_pixel", 3, 5, 8.0f, 8.0f},  {"align_corners", 7, 11, 0.6f, 0.7f},
      {"asymmetric", 3, 2, 2.0f, 1.5f},  {"pytorch_half_pixel", 8, 20, 0.5f, 0.45f}};
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  const std::vector<float> special = {std::bit_cast<float>(0x7fc00001u),
                                      std::bit_cast<float>(0xffc12345u),
                                      std::numeric_limits<float>::infinity(), -0.0f};
  // Source coordinate of output o on an axis of n inputs resized by `scale`.
  auto coordinate = [](const std::string& t, std::int64_t o, double scale, std::int64_t n) {
    const double xo = static_cast<double>(o), out = static_cast<double>(n) * scale;
    if (t == "align_corners") return out == 1 ? 0.0 : xo * static_cast<double>(n - 1) / (out - 1);
    if (t == "asymmetric") return xo / scale;
    if (t == "pytorch_half_pixel" && out <= 1) return 0.0;
    return (xo + 0.5) / scale - 0.5;
  };
  for (const Case& c : cases)
    for (const DType carrier : {DType::float32, DType::float64}) {
      SCOPED_TRACE(c.transform + " " + std::to_string(c.h) + "x" + std::to_string(c.w) + " " +
                   (carrier == DType::float64 ? "float64" : "float32"));
      const std::int64_t h = c.h, w = c.w;
      // Plane 0 all -0; plane 1 a quarter special values; plane 2 uniform.
      std::vector<float> x(static_cast<std::size_t>(3 * h * w));
      for (std::size_t i = 0; i < x.size(); ++i) {
        const auto plane = static_cast<std::int64_t>(i) / (h * w);
        x[i] = plane == 0                     ? -0.0f
               : plane == 1 && rng() % 4 == 0 ? special[rng() % special.size()]
                                              : uniform(rng);
      }
      test::GraphBuilder b({1, 3, h, w});
      b.init("scales", floats({4}, {1.0f, 1.0f, c.sh, c.sw}))
          .node("r", "Resize", {"x", "", "scales"}, "y",
                {{"mode", std::string("linear"), ""},
                 {"coordinate_transformation_mode", c.transform, ""}})
          .output("y");
      Recorder rec;
      RunOptions o;
      o.carrier = carrier;
      o.observer = &rec;
      Executor(b.m, o).run({{"x", floats({1, 3, h, w}, x)}});
      ASSERT_EQ(rec.calls.size(), 1u);
      const Tensor& y = rec.calls[0].outputs[0].tensor;
      ASSERT_EQ(y.dtype(), carrier);
      const auto oh = static_cast<std::int64_t>(std::floor(static_cast<double>(h) * c.sh)),
                 ow = static_cast<std::int64_t>(std::floor(static_cast<double>(w) * c.sw));
      ASSERT_EQ(y.shape(), (std::vector<std::int64_t>{1, 3, oh, ow}));
      // The two taps (index, weight) of output o on an axis of n inputs.
      auto taps = [&](std::int64_t o, float scale, std::int64_t n) {
        const double xo = coordinate(c.transform, o, scale, n);
        const auto base = static_cast<std::int64_t>(std::floor(xo));
        const double r = xo - static_cast<double>(base);
        auto clamp = [n](std::int64_t i) { return std::min(std::max<std::int64_t>(i, 0), n - 1); };
        return std::array<std::pair<std::int64_t, double>, 2>{
            {{clamp(base), 1 - r}, {clamp(base + 1), r}}};
      };
      for (std::int64_t p = 0; p < 3; ++p)
        for (std::int64_t oy = 0; oy < oh; ++oy)
          for (std::int64_t ox = 0; ox < ow; ++ox) {
            // The sum keeping the term's NaN where two meet (acc), and keeping the sum's.
            double acc = 0, other = 0;
            for (const auto& [iy, wy] : taps(oy, c.sh, h))
              for (const auto& [ix, wx] : taps(ox, c.sw, w)) {
                const double term =
                    wy * wx *
                    static_cast<double>(x[static_cast<std::size_t>((p * h + iy) * w + ix)]);
                acc = std::isnan(term) ? term : acc + term;
                other = std::isnan(other) ? other : other + term;
              }
            const auto i = static_cast<std::size_t>((p * oh + oy) * ow + ox);
            if (carrier == DType::float64) {
              const auto got = std::bit_cast<std::uint64_t>(y.data<double>()[i]);
              ASSERT_TRUE(got == std::bit_cast<std::uint64_t>(acc) ||
                          got == std::bit_cast<std::uint64_t>(other))
                  << "output " << i;
            } else {
              const auto got = std::bit_cast<std::uint32_t>(y.data<float>()[i]);
              ASSERT_TRUE(got == std::bit_cast<std::uint32_t>(static_cast<float>(acc)) ||
                          got == std::bit_cast<std::uint32_t>(static_cast<float>(other)))
                  << "output " << i;
            }
          }
    }
}

// A bidirectional RNN whose directions take different activations with alpha and beta
// (ONNX: the activation_alpha/_beta lists are consumed in order, by the activations that
// take them): forward LeakyRelu(alpha 0.2), reverse Affine(alpha 3, beta -1). One step from
// a zero state, so Y is f_d(W_d x), worked out by hand; the two directions run side by
// side on two threads.
TEST(Rnn, ActivationsTakeTheirAlphaAndBetaInOrder) {
  test::GraphBuilder b({1, 1, 2});
  b.init("W", floats({2, 2, 2}, {0.5f, 1.0f, 1.0f, 0.25f, 1.0f, 1.0f, 0.5f, -0.5f}))
      .init("R", floats({2, 2, 2}, std::vector<float>(8, 0.0f)))
      .node("rnn", "RNN", {"x", "W", "R"}, "y",
            {{"direction", std::string("bidirectional"), ""},
             {"hidden_size", std::int64_t{2}, ""},
             {"activations", std::vector<std::string>{"LeakyRelu", "Affine"}, ""},
             {"activation_alpha", std::vector<float>{0.2f, 3.0f}, ""},
             {"activation_beta", std::vector<float>{-1.0f}, ""}})
      .output("y");
  RunOptions o;
  o.threads = 2;
  const auto out = Executor(b.m, o).run({{"x", floats({1, 1, 2}, {1.0f, -2.0f})}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tensor.shape(), (std::vector<std::int64_t>{1, 2, 1, 2}));
  const auto y = out[0].tensor.data<float>();
  // forward: W x = (-1.5, 0.5); reverse: W x = (-1, 1.5)
  EXPECT_EQ(y[0], 0.2f * -1.5f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[2], -4.0f);
  EXPECT_EQ(y[3], 3.5f);
}

// ---- Fusion: a Conv and the element-wise node after it run as one (RunOptions::fuse) ----

// x -> Conv(w, b) -> c -> `op` -> y, on the geometry of `ws` (the kernel's paths: oneDNN,
// depthwise, a 1x1 GEMM, 4 spatial dimensions without oneDNN). Add's other operand is an
// initializer of c's shape, on the side `add_first` says.
struct FusionCase {
  std::string op;
  std::vector<model::Attribute> attrs{};
  std::vector<std::string> extra{};  // further inputs (Clip's bounds), initializers below
  std::vector<std::pair<std::string, Tensor>> inits{};
};

model::Model conv_then(const FusionCase& fc, const std::vector<std::int64_t>& xs, const Tensor& w,
                       std::int64_t group, const Tensor* addend, bool add_first,
                       std::int64_t pad = 1) {
  test::GraphBuilder b(xs, "fusion.onnx");
  Tensor bias(DType::float32, {w.shape()[0]});
  for (std::size_t i = 0; i < bias.size(); ++i) bias.data<float>()[i] = 0.25f * float(i) - 0.5f;
  b.init("w", w).init("b", bias);
  b.node("conv", "Conv", {"x", "w", "b"}, "c",
         {{"group", group, ""}, {"pads", std::vector<std::int64_t>(2 * (xs.size() - 2), pad), ""}});
  std::vector<std::string> in{"c"};
  if (addend) {
    b.init("a", *addend);
    in = add_first ? std::vector<std::string>{"a", "c"} : std::vector<std::string>{"c", "a"};
  }
  in.insert(in.end(), fc.extra.begin(), fc.extra.end());
  for (const auto& [name, t] : fc.inits) b.init(name, t);
  b.node("act", fc.op, in, "y", fc.attrs).output("y");
  return b.m;
}

// Random values with the special ones a Conv's output may hold: NaN, infinities, zeros of
// both signs, huge values whose sums overflow.
Tensor special_random(std::vector<std::int64_t> shape, std::mt19937& rng) {
  Tensor t(DType::float32, std::move(shape));
  std::normal_distribution<float> normal(0, 2);
  auto v = t.data<float>();
  for (float& f : v) f = normal(rng);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            -0.0f,
                            0.0f,
                            3e38f,
                            -3e38f};
  for (std::size_t i = 0; i < std::size(specials) && 7 * i + 3 < v.size(); ++i)
    v[7 * i + 3] = specials[i];
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0;
}

// Runs `m` fused and not (twice each: the second run reads the prepared primitive) and
// expects the same bits; returns whether node "act" ran fused into "conv" (the node
// before it, whatever its op).
bool fused_as_unfused(const model::Model& m, const Tensor& x, RunOptions o = {}) {
  Profiler profiler;
  o.profiler = &profiler;
  o.fuse = true;
  const Executor fused(m, o);
  o.profiler = nullptr;
  o.fuse = false;
  const Executor apart(m, o);
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(same_bits(fused.run({{"x", x}})[0].tensor, apart.run({{"x", x}})[0].tensor));
  bool into_conv = false;
  for (const auto& n : profiler.profile().nodes)
    if (n.path == "act") into_conv = n.fused_into == "conv";
  return into_conv;
}

std::vector<FusionCase> fusion_cases() {
  return {{.op = "Relu"},
          {.op = "LeakyRelu", .attrs = {{"alpha", 0.1f, ""}}},
          {.op = "Clip",
           .extra = {"lo", "hi"},
           .inits = {{"lo", test::scalar(0)}, {"hi", test::scalar(6)}}},
          {.op = "Clip", .extra = {"", "hi"}, .inits = {{"hi", test::scalar(0.5f)}}},
          {.op = "HardSigmoid", .attrs = {{"alpha", 0.3f, ""}, {"beta", 0.4f, ""}}},
          {.op = "HardSwish"},
          {.op = "Sigmoid"},
          {.op = "Tanh"},
          {.op = "Erf"},
          {.op = "Add"}};
}

// Resident memory of this process, in bytes (/proc/self/statm).
std::size_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  in >> size >> resident;
  if (!in) throw std::runtime_error("cannot read /proc/self/statm");
  return resident * static_cast<std::size_t>(::getpagesize());
}

// Nodes that read one weight (ALBERT's layers share theirs) share its padded copy: twelve
// MatMuls of one 1 MiB weight in a file's map hold one copy after their second run, not
// twelve, and give the same bits as their first.
TEST(Executor, NodesReadingOneWeightShareItsPaddedCopy) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fpg_exec_share_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  RoundingTestKit kit{std::mt19937(17)};
  test::GraphBuilder b({4, 256}, "shared.onnx");
  b.init("w", kit.random({256, 1024}));
  for (int i = 0; i < 12; ++i) {
    const std::string n = std::to_string(i);  // (GCC 12's -Wrestrict misfires on "y" + n)
    std::string y = "y", node = "mm";
    y += n, node += n;
    b.node(node, "MatMul", {"x", "w"}, y).output(y);
  }
  model::SaveOptions so;
  so.external = model::SaveOptions::External::always;
  so.min_external_bytes = 0;
  model::save(b.m, dir / "shared.onnx", so);
  const model::Model m = model::load(dir / "shared.onnx");
  const Tensor x = kit.random({4, 256});
  const Executor ex(m);
  const auto first = ex.run({{"x", x}});
  const std::size_t before = resident_bytes();
  for (int run = 0; run < 2; ++run) {
    const auto again = ex.run({{"x", x}});
    ASSERT_EQ(again.size(), first.size());
    for (std::size_t i = 0; i < first.size(); ++i)
      EXPECT_TRUE(RoundingTestKit::same(again[i].tensor, first[i].tensor)) << i;
  }
  // One copy (1 MiB, the map's pages given back): far below twelve.
  EXPECT_LT(resident_bytes(), before + (std::size_t{4} << 20));
  fs::remove_all(dir);
}

// check's runs (RunOptions::prepare_in_float32) hold one quantization of a scaled weight at
// a time in their first two reads of it, not a copy per weight: a chain of eight MatMuls
// with 1 MiB weights in mxfp8_e4m3 keeps no quantized copy in its WeightCache after two
// such runs (the heap then hands each node's quantization the pages of the one before: with
// copies kept, resident memory grew by the weights' 8 MiB in a Release build), and the
// eight copies from the third run on. Every run gives the bits of an executor that keeps
// its copies from the start.
TEST(Executor, CheckRunsHoldOneQuantizedWeightAtATime) {
  RoundingTestKit kit{std::mt19937(29)};
  test::GraphBuilder b({4, 512}, "chain.onnx");
  std::string prev = "x";
  for (int i = 0; i < 8; ++i) {
    const std::string n = std::to_string(i);
    std::string w = "w", y = "y", node = "mm";
    w += n, y += n, node += n;
    b.init(w, kit.random({512, 512}));
    b.node(node, "MatMul", {prev, w}, y);
    prev = y;
  }
  b.output(prev);
  RunOptions cached;
  cached.threads = 1;
  cached.policy.default_format = parse_format("bfloat16");
  cached.policy.scaled = parse_scaled_format("mxfp8_e4m3");
  RunOptions check = cached;
  check.prepare_in_float32 = true;
  check.weights = std::make_shared<WeightCache>();
  const Tensor x = kit.random({4, 512});
  const auto want = Executor(b.m, cached).run({{"x", x}});
  const Executor ex(b.m, check);
  for (int run = 0; run < 3; ++run) {  // runs 0 and 1 share, run 2 makes the cache's copies
    const auto got = ex.run({{"x", x}});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(RoundingTestKit::same(got[0].tensor, want[0].tensor)) << run;
    EXPECT_EQ(check.weights->copies(), run < 2 ? 0u : 8u) << run;
  }
}

// A depthwise convolution on its direct kernel (NCHW, output rows of 8 or more) computes the
// scalar loop's sums bit for bit: for each output, the taps in order (kh, then kw, the
// padding's zeros included) added to 0 as products, then the bias. Strides 1, 2 (pairs of
// taps from one deinterleaving load) and 3, odd and even kernels (3 x 3 on its unrolled
// kernel), dilation, pads (none, and wider than a vector), a channel multiplier of 2, rows
// that are no multiple of a vector or narrower than one, planes of one block of rows and of
// several (each from its own strip of padded rows), row and column strides that differ.
TEST(Executor, DepthwiseConvIsTheScalarSumsBitForBit) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0, 1);
  struct Case {
    std::int64_t kh, kw, stride, dil, pad, mult, w_in, h_in = 11, stride_h = 0;
  };
  const std::vector<Case> cases = {
      {3, 3, 1, 1, 1, 1, 19},       {3, 3, 2, 1, 1, 1, 37},     {5, 5, 2, 1, 2, 1, 33},
      {2, 2, 2, 1, 0, 2, 40},       {4, 3, 2, 1, 1, 1, 35},     {3, 3, 2, 2, 2, 1, 41},
      {3, 3, 3, 1, 1, 1, 50},       {1, 1, 2, 1, 0, 1, 30},     {3, 3, 1, 1, 1, 1, 14, 30},
      {3, 3, 2, 1, 1, 1, 40, 41},   {5, 5, 1, 1, 2, 1, 28, 27}, {3, 3, 1, 1, 0, 1, 21, 19},
      {3, 3, 1, 1, 9, 1, 12, 13},   {3, 3, 1, 1, 3, 1, 6, 20},  {3, 3, 2, 1, 1, 2, 23, 18, 1},
      {3, 3, 1, 1, 1, 1, 17, 26, 2}};
  for (const auto& k : cases) {
    const std::int64_t sh = k.stride_h ? k.stride_h : k.stride;
    SCOPED_TRACE(::testing::Message()
                 << k.kh << "x" << k.kw << " stride " << sh << "," << k.stride << " dilation "
                 << k.dil << " pad " << k.pad << " input " << k.h_in << "x" << k.w_in);
    const std::int64_t c = 3, m = c * k.mult, h_in = k.h_in;
    Tensor x(DType::float32, {1, c, h_in, k.w_in}), w(DType::float32, {m, 1, k.kh, k.kw}),
        bias(DType::float32, {m});
    for (Tensor* t : {&x, &w, &bias})
      for (float& v : t->data<float>()) v = normal(rng);
    test::GraphBuilder b({1, c, h_in, k.w_in}, "dw.onnx");
    b.init("w", w).init("b", bias);
    b.node("conv", "Conv", {"x", "w", "b"}, "y",
           {{"group", c, ""},
            {"strides", std::vector<std::int64_t>{sh, k.stride}, ""},
            {"dilations", std::vector<std::int64_t>{k.dil, k.dil}, ""},
            {"pads", std::vector<std::int64_t>(4, k.pad), ""}})
        .output("y");
    const Tensor y = Executor(b.m).run({{"x", x}})[0].tensor;
    const auto out = [&](std::int64_t in, std::int64_t kernel, std::int64_t stride) {
      return (in + 2 * k.pad - k.dil * (kernel - 1) - 1) / stride + 1;
    };
    const std::int64_t oh_n = out(h_in, k.kh, sh), ow_n = out(k.w_in, k.kw, k.stride);
    ASSERT_EQ(y.shape(), (std::vector<std::int64_t>{1, m, oh_n, ow_n}));
    ASSERT_GE(ow_n, 8);  // the direct kernel's rows
    const auto xv = x.data<float>(), wv = w.data<float>();
    std::size_t differ = 0;
    for (std::int64_t o = 0; o < m; ++o)
      for (std::int64_t oh = 0; oh < oh_n; ++oh)
        for (std::int64_t ow = 0; ow < ow_n; ++ow) {
          float acc = 0.0f;
          for (std::int64_t i = 0; i < k.kh; ++i)
            for (std::int64_t j = 0; j < k.kw; ++j) {
              const auto ih = oh * sh - k.pad + i * k.dil, iw = ow * k.stride - k.pad + j * k.dil;
              const bool inside = ih >= 0 && ih < h_in && iw >= 0 && iw < k.w_in;
              const float xval = inside ? xv[((o / k.mult) * h_in + ih) * k.w_in + iw] : 0.0f;
              acc += wv[(o * k.kh + i) * k.kw + j] * xval;
            }
          const float want = acc + bias.data<float>()[o];
          const float got = y.data<float>()[(o * oh_n + oh) * ow_n + ow];
          differ += std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(want);
        }
    EXPECT_EQ(differ, 0u);
  }
}

// Depthwise convolutions that run in blocks of channels (depthwise::channel_block: MobileNetV3's
// 7 x 7 and 14 x 14 planes, 5 x 5 kernels; channel counts that leave a partial block, and
// five blocks of one image that two threads split by output rows too) give the scalar
// loop's sums, then the fused Relu, bit for bit, on 1 and 2 threads.
TEST(Executor, DepthwiseConvInChannelBlocksIsTheScalarSumsBitForBit) {
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0, 1);
  struct Case {
    std::int64_t c, h, k, stride, images = 2;
  };
  for (const auto& k :
       std::vector<Case>{{35, 7, 5, 1}, {72, 14, 5, 1, 1}, {40, 14, 5, 2}, {80, 28, 5, 1}})
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << k.c << " channels of " << k.h << "x" << k.h << ", " << k.k << "x" << k.k
                   << " stride " << k.stride << ", " << threads << " threads");
      const std::int64_t pad = k.k / 2, out = (k.h + 2 * pad - k.k) / k.stride + 1,
                         images = k.images;
      Tensor x(DType::float32, {images, k.c, k.h, k.h}), w(DType::float32, {k.c, 1, k.k, k.k}),
          bias(DType::float32, {k.c});
      for (Tensor* t : {&x, &w, &bias})
        for (float& v : t->data<float>()) v = normal(rng);
      test::GraphBuilder b({images, k.c, k.h, k.h}, "dwb.onnx");
      b.init("w", w).init("b", bias);
      b.node("conv", "Conv", {"x", "w", "b"}, "c",
             {{"group", k.c, ""},
              {"strides", std::vector<std::int64_t>{k.stride, k.stride}, ""},
              {"pads", std::vector<std::int64_t>(4, pad), ""}})
          .node("relu", "Relu", {"c"}, "y")
          .output("y");
      RunOptions o;
      o.threads = threads;
      const Tensor y = Executor(b.m, o).run({{"x", x}})[0].tensor;
      ASSERT_EQ(y.shape(), (std::vector<std::int64_t>{images, k.c, out, out}));
      const auto xv = x.data<float>(), wv = w.data<float>();
      std::size_t differ = 0;
      for (std::int64_t n = 0; n < images; ++n)
        for (std::int64_t c = 0; c < k.c; ++c)
          for (std::int64_t oh = 0; oh < out; ++oh)
            for (std::int64_t ow = 0; ow < out; ++ow) {
              float acc = 0.0f;
              for (std::int64_t i = 0; i < k.k; ++i)
                for (std::int64_t j = 0; j < k.k; ++j) {
                  const auto ih = oh * k.stride - pad + i, iw = ow * k.stride - pad + j;
                  const bool inside = ih >= 0 && ih < k.h && iw >= 0 && iw < k.h;
                  acc += wv[(c * k.k + i) * k.k + j] *
                         (inside ? xv[((n * k.c + c) * k.h + ih) * k.h + iw] : 0.0f);
                }
              acc += bias.data<float>()[c];
              acc = acc < 0 ? 0.0f : acc;
              const float got = y.data<float>()[((n * k.c + c) * out + oh) * out + ow];
              differ += std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(acc);
            }
      EXPECT_EQ(differ, 0u);
    }
}

// A 1x1 convolution over few input channels (the pointwise kernel, on NCHW) gives each
// output the chain of fused multiply-adds over the input channels in order, from 0, then
// the bias as a separate addition, then the fused Relu: input channels 1 to 32, output
// channels that leave every tile height (1-5 rows) as a remainder, planes that are no
// multiple of a vector and wider than one panel, two groups, two images, with and without
// a bias, on 1 and 3 threads (panels split across them).
TEST(Executor, PointwiseConvIsTheFusedChainsBitForBit) {
  std::mt19937 rng(29);
  std::normal_distribution<float> normal(0, 1);
  struct Case {
    std::int64_t k, m, h, w, group = 1, images = 1;
    bool bias = true, relu = false;
  };
  const std::vector<Case> cases = {{16, 64, 41, 37, 1, 1, true, true},  {1, 7, 9, 13},
                                   {5, 13, 30, 30, 1, 2, false},        {32, 11, 64, 67},
                                   {24, 20, 17, 150, 2, 1, true, true}, {3, 9, 1, 70}};
  for (const auto& c : cases)
    for (const int threads : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << c.k << " -> " << c.m << " over " << c.h << "x" << c.w
                                        << ", group " << c.group << ", " << threads << " threads");
      const std::int64_t kg = c.k / c.group, mg = c.m / c.group, plane = c.h * c.w;
      Tensor x(DType::float32, {c.images, c.k, c.h, c.w}), w(DType::float32, {c.m, kg, 1, 1}),
          bias(DType::float32, {c.m});
      for (Tensor* t : {&x, &w, &bias})
        for (float& v : t->data<float>()) v = normal(rng);
      test::GraphBuilder b({c.images, c.k, c.h, c.w}, "pw.onnx");
      b.init("w", w).init("b", bias);
      std::vector<std::string> ins{"x", "w"};
      if (c.bias) ins.push_back("b");
      b.node("conv", "Conv", ins, c.relu ? "c" : "y", {{"group", c.group, ""}});
      if (c.relu) b.node("relu", "Relu", {"c"}, "y");
      b.output("y");
      RunOptions o;
      o.threads = threads;
      const Tensor y = Executor(b.m, o).run({{"x", x}})[0].tensor;
      ASSERT_EQ(y.shape(), (std::vector<std::int64_t>{c.images, c.m, c.h, c.w}));
      const auto xv = x.data<float>(), wv = w.data<float>();
      std::size_t differ = 0;
      for (std::int64_t n = 0; n < c.images; ++n)
        for (std::int64_t o = 0; o < c.m; ++o)
          for (std::int64_t p = 0; p < plane; ++p) {
            float acc = 0.0f;
            for (std::int64_t q = 0; q < kg; ++q)
              acc = std::fma(wv[o * kg + q], xv[(n * c.k + o / mg * kg + q) * plane + p], acc);
            if (c.bias) acc += bias.data<float>()[o];
            if (c.relu) acc = acc < 0 ? 0.0f : acc;
            const float got = y.data<float>()[(n * c.m + o) * plane + p];
            differ += std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(acc);
          }
      EXPECT_EQ(differ, 0u);
    }
}

// BatchNormalization (inference) over planes split across threads writes every element as
// (x - mean) * (1 / sqrt(var + eps)) * scale + bias, in that order, on 1 and 3 threads.
TEST(Executor, BatchNormAcrossThreadsIsThePerElementFormula) {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0, 1);
  const std::int64_t n = 2, c = 5, h = 70, w = 110;
  Tensor x(DType::float32, {n, c, h, w}), scale(DType::float32, {c}), bias(DType::float32, {c}),
      mean(DType::float32, {c}), var(DType::float32, {c});
  for (Tensor* t : {&x, &scale, &bias, &mean})
    for (float& v : t->data<float>()) v = normal(rng);
  for (float& v : var.data<float>()) v = std::abs(normal(rng)) + 0.1f;
  for (const int threads : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    test::GraphBuilder b({n, c, h, w}, "bn.onnx");
    b.init("s", scale).init("b", bias).init("m", mean).init("v", var);
    b.node("bn", "BatchNormalization", {"x", "s", "b", "m", "v"}, "y", {{"epsilon", 1e-3f, ""}})
        .output("y");
    RunOptions o;
    o.threads = threads;
    const Tensor y = Executor(b.m, o).run({{"x", x}})[0].tensor;
    ASSERT_EQ(y.shape(), x.shape());
    ASSERT_GT(y.size(), std::size_t{1} << 16);  // split across the threads
    std::size_t differ = 0;
    for (std::int64_t i = 0; i < n * c * h * w; ++i) {
      const auto k = static_cast<std::size_t>(i / (h * w) % c);
      const float inv = 1.0f / std::sqrt(var.data<float>()[k] + 1e-3f);
      const float want = (x.data<float>()[static_cast<std::size_t>(i)] - mean.data<float>()[k]) *
                             inv * scale.data<float>()[k] +
                         bias.data<float>()[k];
      differ += std::bit_cast<std::uint32_t>(y.data<float>()[static_cast<std::size_t>(i)]) !=
                std::bit_cast<std::uint32_t>(want);
    }
    EXPECT_EQ(differ, 0u);
  }
}

// LayerNormalization over rows split across threads: each row's mean and variance summed
// as the reductions sum (eight interleaved partial sums, then in order), the formula
// applied per element, bit for bit on 1 and 3 threads, with the Mean and InvStdDev
// outputs; and within float32's rounding of a long double evaluation.
TEST(Executor, LayerNormAcrossThreadsIsThePerRowFormula) {
  std::mt19937 rng(37);
  std::normal_distribution<float> normal(0, 1);
  const std::int64_t rows = 130, len = 771;  // (not a multiple of 8)
  Tensor x(DType::float32, {rows, len}), scale(DType::float32, {len}), bias(DType::float32, {len});
  for (Tensor* t : {&x, &scale, &bias})
    for (float& v : t->data<float>()) v = normal(rng) * 3 + 1;
  const auto sum8 = [&](const float* v, auto term) {
    float part[8] = {};
    for (std::int64_t k = 0; k < len; ++k) part[k % 8] += term(v[k]);
    float s = 0;
    for (const float q : part) s += q;
    return s;
  };
  for (const int threads : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    test::GraphBuilder b({rows, len}, "ln.onnx");
    b.init("s", scale).init("b", bias);
    b.node("ln", "LayerNormalization", {"x", "s", "b"}, "y", {{"epsilon", 1e-5f, ""}});
    b.m.graph.nodes.back().outputs = {"y", "mean", "inv"};
    b.output("y").output("mean").output("inv");
    RunOptions o;
    o.threads = threads;
    const auto out = Executor(b.m, o).run({{"x", x}});
    ASSERT_EQ(out.size(), 3u);
    const float* y = out[0].tensor.data<float>().data();
    std::size_t differ = 0;
    double worst = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* row = x.data<float>().data() + r * len;
      const float mean = sum8(row, [](float v) { return v; }) / static_cast<float>(len);
      const float var =
          sum8(row, [mean](float v) { return (v - mean) * (v - mean); }) / static_cast<float>(len);
      const float inv = 1.0f / std::sqrt(var + 1e-5f);
      differ += out[1].tensor.data<float>()[static_cast<std::size_t>(r)] != mean;
      differ += out[2].tensor.data<float>()[static_cast<std::size_t>(r)] != inv;
      long double m = 0, v2 = 0;
      for (std::int64_t k = 0; k < len; ++k) m += row[k];
      m /= len;
      for (std::int64_t k = 0; k < len; ++k) v2 += (row[k] - m) * (row[k] - m);
      const long double linv = 1 / std::sqrt(v2 / len + 1e-5L);
      for (std::int64_t k = 0; k < len; ++k) {
        const auto i = static_cast<std::size_t>(r * len + k);
        const float want =
            (row[k] - mean) * inv * scale.data<float>()[static_cast<std::size_t>(k)] +
            bias.data<float>()[static_cast<std::size_t>(k)];
        differ += std::bit_cast<std::uint32_t>(y[i]) != std::bit_cast<std::uint32_t>(want);
        const long double exact =
            (row[k] - m) * linv * scale.data<float>()[static_cast<std::size_t>(k)] +
            bias.data<float>()[static_cast<std::size_t>(k)];
        worst = std::max(worst, static_cast<double>(std::fabs(y[i] - exact)));
      }
    }
    EXPECT_EQ(differ, 0u);
    EXPECT_LT(worst, 1e-4);  // |y| up to ~20: a few float32 ulps
  }
}

// Concat of inputs large enough to be split across threads (pieces that start and end
// inside an input's run), along the first, a middle and the last axis, with uneven sizes:
// every element where the index arithmetic of a plain loop puts it, on 1 and 3 threads.
TEST(Executor, ConcatSplitAcrossThreadsPlacesEveryElement) {
  const std::vector<std::int64_t> sizes{3, 17, 1};
  for (const std::int64_t axis : {0, 1, 2})
    for (const int threads : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << "axis " << axis << ", threads " << threads);
      using Dims = std::vector<std::int64_t>;
      std::vector<Dims> shapes;
      for (const auto n : sizes) {
        Dims sh{41, 370, 419};
        sh[static_cast<std::size_t>(axis)] = n;
        shapes.push_back(sh);
      }
      test::GraphBuilder b(shapes[0], "concat.onnx");
      std::vector<Tensor> ins;
      float next = 0.0f;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        Tensor t(DType::float32, shapes[i]);
        for (float& v : t.data<float>()) v = next++;
        ins.push_back(std::move(t));
      }
      b.init("b", ins[1]).init("c", ins[2]);
      b.node("cat", "Concat", {"x", "b", "c"}, "y", {{"axis", axis, ""}}).output("y");
      RunOptions o;
      o.threads = threads;
      const Tensor y = Executor(b.m, o).run({{"x", ins[0]}})[0].tensor;
      Dims want = shapes[0];
      want[static_cast<std::size_t>(axis)] = 3 + 17 + 1;
      ASSERT_EQ(y.shape(), want);
      ASSERT_GT(y.size(), std::size_t{1} << 18);  // split across the threads
      std::size_t wrong = 0;
      for (std::int64_t i = 0; i < want[0]; ++i)
        for (std::int64_t j = 0; j < want[1]; ++j)
          for (std::int64_t k = 0; k < want[2]; ++k) {
            std::int64_t idx[3] = {i, j, k}, which = 0;
            while (idx[axis] >=
                   shapes[static_cast<std::size_t>(which)][static_cast<std::size_t>(axis)])
              idx[axis] -=
                  shapes[static_cast<std::size_t>(which++)][static_cast<std::size_t>(axis)];
            const Dims& s = shapes[static_cast<std::size_t>(which)];
            const float v =
                ins[static_cast<std::size_t>(which)].data<float>()[static_cast<std::size_t>(
                    (idx[0] * s[1] + idx[1]) * s[2] + idx[2])];
            wrong +=
                y.data<float>()[static_cast<std::size_t>((i * want[1] + j) * want[2] + k)] != v;
          }
      EXPECT_EQ(wrong, 0u);
    }
}

// GlobalAveragePool takes each plane's sum as ReduceMean does (eight interleaved partial
// sums, then added in order): bit for bit ReduceMean over the spatial axes, on float32 and
// float64 carriers, planes of 143 values (no multiple of 8) over several binades, and
// within float32 rounding of the exact mean. The data is such that the sum in plain order
// differs in some planes, so the test tells the two orders apart.
TEST(Executor, GlobalAveragePoolIsReduceMeanOverThePlaneBitForBit) {
  std::mt19937 rng(24);
  std::normal_distribution<float> normal(0, 1);
  std::uniform_int_distribution<int> binade(-8, 8);
  const std::vector<std::int64_t> shape{2, 5, 13, 11};
  Tensor x(DType::float32, shape);
  for (float& v : x.data<float>()) v = std::ldexp(normal(rng), binade(rng));
  test::GraphBuilder b(shape, "gap.onnx");
  b.node("gap", "GlobalAveragePool", {"x"}, "g")
      .node("mean", "ReduceMean", {"x"}, "r", {{"axes", std::vector<std::int64_t>{2, 3}, ""}})
      .output("g")
      .output("r");
  const std::int64_t planes = 10, len = 143;
  std::size_t plain_differs = 0;
  for (const DType carrier : {DType::float32, DType::float64}) {
    RunOptions o;
    o.carrier = carrier;
    const auto out = Executor(b.m, o).run({{"x", x}});
    ASSERT_EQ(out[0].tensor.shape(), (std::vector<std::int64_t>{2, 5, 1, 1}));
    EXPECT_TRUE(RoundingTestKit::same(out[0].tensor, out[1].tensor)) << to_string(carrier);
    if (carrier != DType::float32) continue;
    const auto xv = x.data<float>();
    for (std::int64_t p = 0; p < planes; ++p) {
      double exact = 0.0, scale = 0.0;
      float plain = 0.0f;
      for (std::int64_t i = 0; i < len; ++i) {
        const float v = xv[static_cast<std::size_t>(p * len + i)];
        exact += v, scale += std::fabs(v), plain += v;
      }
      const float got = out[0].tensor.data<float>()[static_cast<std::size_t>(p)];
      EXPECT_NEAR(got, exact / len, 1e-6 * scale / len) << p;
      plain_differs += got != plain / static_cast<float>(len);
    }
  }
  EXPECT_GT(plain_differs, 0u);
}

// Every activation (and Add, on either side) fused into each of the Conv kernel's paths
// gives the unfused result bit for bit, NaN, infinities and signed zeros included.
TEST(Fusion, EachOpFusedIsBitForBitTheUnfusedResult) {
  std::mt19937 rng(20);
  struct Geometry {
    std::vector<std::int64_t> xs, ws;
    std::int64_t group, pad = 1;
  };
  const std::vector<Geometry> geometries = {
      {{1, 3, 12, 12}, {8, 3, 3, 3}, 1},             // oneDNN (its blocked layout, padded channels)
      {{2, 4, 12, 12}, {8, 1, 3, 3}, 4},             // depthwise, a channel multiplier of 2
      {{1, 5, 24, 24}, {5, 1, 3, 3}, 5},             // depthwise, rows of 24 on the plane kernel
      {{1, 18, 7, 7}, {18, 1, 3, 3}, 18},            // depthwise in channel blocks (AVX-512)
      {{1, 4, 16, 16}, {6, 4, 1, 1}, 1},             // 1x1 over a large plane: one GEMM
      {{1, 4, 16, 21}, {7, 4, 1, 1}, 1, 0},          // 1x1 without pads: the pointwise kernel
      {{1, 2, 4, 4, 4, 4}, {3, 2, 2, 2, 2, 2}, 1}};  // 4 spatial dimensions: im2col
  for (const auto& g : geometries)
    for (const auto& fc : fusion_cases())
      for (const bool add_first : {false, true}) {
        if (add_first && fc.op != "Add") continue;
        SCOPED_TRACE(fc.op + " after a Conv of W " + ::testing::PrintToString(g.ws) +
                     (add_first ? ", the Add's input 1" : ""));
        const Tensor w = special_random(g.ws, rng), x = special_random(g.xs, rng);
        const Tensor probe =
            Executor(conv_then({.op = "Relu"}, g.xs, w, g.group, nullptr, false, g.pad))
                .run({{"x", x}})[0]
                .tensor;
        const Tensor addend = special_random(probe.shape(), rng);
        const auto m =
            conv_then(fc, g.xs, w, g.group, fc.op == "Add" ? &addend : nullptr, add_first, g.pad);
        EXPECT_TRUE(fused_as_unfused(m, x));
      }
}

// A Conv, an Add and each activation after it run as one (ResNet's residual blocks: Conv +
// Add + Relu), bit for bit the three nodes' results, NaN, infinities and signed zeros
// included, on the Conv kernel's paths, on 1 and 3 threads; an activation whose input
// another node reads too runs apart.
TEST(Fusion, AnActivationAfterAFusedAddFusesToo) {
  std::mt19937 rng(24);
  const std::vector<std::int64_t> xs{1, 4, 40, 41};
  for (const std::int64_t pad : {0, 1})  // the pointwise kernel; the 1x1 GEMM
    for (const auto& fc : fusion_cases())
      for (const int threads : {1, 3}) {
        if (fc.op == "Add") continue;
        SCOPED_TRACE(fc.op + " after Conv + Add, pads " + std::to_string(pad) + ", " +
                     std::to_string(threads) + " threads");
        const Tensor w = special_random({6, 4, 1, 1}, rng), x = special_random(xs, rng);
        const Tensor addend = special_random({1, 6, 40 + 2 * pad, 41 + 2 * pad}, rng);
        auto m = conv_then({.op = "Add"}, xs, w, 1, &addend, pad == 1, pad);
        m.graph.nodes.back().outputs[0] = "s";
        std::vector<std::string> in{"s"};
        in.insert(in.end(), fc.extra.begin(), fc.extra.end());
        for (const auto& [name, t] : fc.inits) m.graph.initializers.push_back({name, t});
        m.graph.nodes.push_back({"then", fc.op, "", in, {"y"}, fc.attrs, "", {}});
        RunOptions o;
        o.threads = threads;
        EXPECT_TRUE(fused_as_unfused(m, x, o));  // Add into the Conv, bit for bit
        Profiler profiler;
        o.profiler = &profiler;
        Executor(m, o).run({{"x", x}});
        std::string then_into;
        for (const auto& n : profiler.profile().nodes)
          if (n.path == "then") then_into = n.fused_into;
        EXPECT_EQ(then_into, "conv");
      }
  // The Add's output read by another node too: the Add fuses, the activation runs apart.
  const Tensor w = special_random({6, 4, 1, 1}, rng), x = special_random(xs, rng);
  const Tensor addend = special_random({1, 6, 40, 41}, rng);
  auto m = conv_then({.op = "Add"}, xs, w, 1, &addend, false, 0);
  m.graph.nodes.back().outputs[0] = "s";
  m.graph.nodes.push_back({"then", "Relu", "", {"s"}, {"y"}, {}, "", {}});
  m.graph.nodes.push_back({"other", "Sigmoid", "", {"s"}, {"z"}, {}, "", {}});
  m.graph.outputs.push_back({"z", 1, false, {}});
  RunOptions o;
  Profiler profiler;
  o.profiler = &profiler;
  EXPECT_TRUE(fused_as_unfused(m, x));
  Executor(m, o).run({{"x", x}});
  for (const auto& n : profiler.profile().nodes)
    if (n.path == "then") {
      EXPECT_EQ(n.fused_into, "");
    }
}

// An FPN's top-down merge: a lateral Conv, then the level above computed after it, then
// their Add and a Relu. The Conv waits for the Add's turn and runs fused with both (its
// input kept alive until then) where its input has no reader in between; where it has
// one, the Conv runs in its own turn and the Add apart. Bit for bit the unfused run either
// way, NaN, infinities and signed zeros included, on 1 and 3 threads.
TEST(Fusion, AConvWhoseAddendComesLaterRunsFusedInTheAddsTurn) {
  std::mt19937 rng(25);
  const std::vector<std::int64_t> xs{1, 4, 40, 41};
  const Tensor x = special_random(xs, rng), w = special_random({4, 4, 1, 1}, rng),
               bias = special_random({4}, rng);
  for (const bool read_between : {false, true})
    for (const int threads : {1, 3}) {
      SCOPED_TRACE(std::string(read_between ? "the Conv's input read in between"
                                            : "the Conv its input's last reader") +
                   ", " + std::to_string(threads) + " threads");
      test::GraphBuilder b(xs, "fpn.onnx");
      b.init("w", w).init("bias", bias);
      b.node("pre", "Relu", {"x"}, "p");
      b.node("conv", "Conv", {"p", "w", "bias"}, "c");
      b.node("up", "Sigmoid", {read_between ? "p" : "x"}, "u");
      b.node("act", "Add", {"c", "u"}, "s");
      b.node("then", "Relu", {"s"}, "y").output("y");
      RunOptions o;
      o.threads = threads;
      EXPECT_EQ(fused_as_unfused(b.m, x, o), !read_between);
      Profiler profiler;
      o.profiler = &profiler;
      const Executor ex(b.m, o);
      ex.run({{"x", x}});
      std::map<std::string, std::string> into;
      for (const auto& n : profiler.profile().nodes) into[n.path] = n.fused_into;
      EXPECT_EQ(into["then"], read_between ? "" : "conv");
    }
}

// A BatchNormalization (its planes split across threads) with each activation, or an Add
// on either side, fused into it gives the unfused result bit for bit, NaN, infinities and
// signed zeros included, on 1 and 3 threads.
TEST(Fusion, EachOpFusedIntoABatchNormIsBitForBitTheUnfusedResult) {
  std::mt19937 rng(22);
  const std::vector<std::int64_t> xs{2, 3, 130, 130};
  const Tensor x = special_random(xs, rng), addend = special_random(xs, rng);
  for (const auto& fc : fusion_cases())
    for (const bool add_first : {false, true})
      for (const int threads : {1, 3}) {
        if (add_first && fc.op != "Add") continue;
        SCOPED_TRACE(fc.op + " after a BatchNormalization on " + std::to_string(threads) +
                     " threads" + (add_first ? ", the Add's input 1" : ""));
        test::GraphBuilder b(xs, "bn_fusion.onnx");
        b.init("s", floats({3}, {1.5f, -0.5f, 2.0f}))
            .init("b", floats({3}, {0.25f, 0.0f, -1.0f}))
            .init("m", floats({3}, {0.1f, -0.2f, 0.0f}))
            .init("v", floats({3}, {1.0f, 4.0f, 0.5f}));
        b.node("conv", "BatchNormalization", {"x", "s", "b", "m", "v"}, "c");
        std::vector<std::string> in{"c"};
        if (fc.op == "Add") {
          b.init("a", addend);
          in = add_first ? std::vector<std::string>{"a", "c"} : std::vector<std::string>{"c", "a"};
        }
        in.insert(in.end(), fc.extra.begin(), fc.extra.end());
        for (const auto& [name, t] : fc.inits) b.init(name, t);
        b.node("act", fc.op, in, "y", fc.attrs).output("y");
        RunOptions o;
        o.threads = threads;
        EXPECT_TRUE(fused_as_unfused(b.m, x, o));
      }
}

// A Conv output that another node reads too, or that is a graph output, or an Add that
// broadcasts, runs apart.
TEST(Fusion, OnlyTheSoleReaderOfAnInnerValueFuses) {
  std::mt19937 rng(21);
  const std::vector<std::int64_t> xs{1, 3, 10, 10};
  const Tensor w = special_random({4, 3, 3, 3}, rng), x = special_random(xs, rng);
  auto two_readers = conv_then({.op = "Relu"}, xs, w, 1, nullptr, false);
  two_readers.graph.nodes.push_back({"other", "Sigmoid", "", {"c"}, {"z"}, {}, "", {}});
  two_readers.graph.outputs.push_back({"z", 1, false, {}});
  EXPECT_FALSE(fused_as_unfused(two_readers, x));
  auto conv_output = conv_then({.op = "Relu"}, xs, w, 1, nullptr, false);
  conv_output.graph.outputs.push_back({"c", 1, false, {}});
  EXPECT_FALSE(fused_as_unfused(conv_output, x));
  const Tensor row = special_random({1, 4, 1, 10}, rng);  // broadcast over the rows
  EXPECT_FALSE(fused_as_unfused(conv_then({.op = "Add"}, xs, w, 1, &row, false), x));
  EXPECT_TRUE(fused_as_unfused(conv_then({.op = "Relu"}, xs, w, 1, nullptr, false), x));
}

// A MatMul fuses an activation after it, or the Add of a bias along its last axis (either
// input of the Add; [N] or [1, N]) and an activation after that: bit for bit the unfused
// result, specials included; an addend broadcast another way runs apart.
TEST(Fusion, AMatMulFusesItsBiasAndActivation) {
  std::mt19937 rng(23);
  const std::vector<std::int64_t> xs{2, 5, 40};
  const Tensor x = special_random(xs, rng), w = special_random({40, 70}, rng);
  const auto model = [&](const std::string& op, const Tensor* addend, bool add_first,
                         bool relu_after) {
    test::GraphBuilder b(xs, "matmul_fusion.onnx");
    b.init("w", w).node("conv", "MatMul", {"x", "w"}, "c");
    std::vector<std::string> in{"c"};
    if (addend) {
      b.init("a", *addend);
      in = add_first ? std::vector<std::string>{"a", "c"} : std::vector<std::string>{"c", "a"};
    }
    b.node("act", op, in, relu_after ? "s" : "y");
    if (relu_after) b.node("then", "Relu", {"s"}, "y");
    return b.output("y").m;
  };
  const Tensor bias = special_random({70}, rng), bias2 = special_random({1, 70}, rng);
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    RunOptions o;
    o.threads = threads;
    EXPECT_TRUE(fused_as_unfused(model("Relu", nullptr, false, false), x, o));
    EXPECT_TRUE(fused_as_unfused(model("HardSwish", nullptr, false, false), x, o));
    for (const bool first : {false, true})
      for (const bool relu : {false, true}) {
        EXPECT_TRUE(fused_as_unfused(model("Add", &bias, first, relu), x, o));
        EXPECT_TRUE(fused_as_unfused(model("Add", &bias2, first, relu), x, o));
      }
    const Tensor column = special_random({5, 1}, rng);  // broadcast along the rows
    EXPECT_FALSE(fused_as_unfused(model("Add", &column, false, false), x, o));
  }
  // Emulated, as for a Conv: Relu fuses (it commutes with float16's rounding), and so does
  // the Add (each result rounded), but not HardSwish, which the kernel would apply before
  // the product is rounded.
  RunOptions fp16;
  fp16.policy.default_format = parse_format("float16");
  EXPECT_TRUE(fused_as_unfused(model("Relu", nullptr, false, false), x, fp16));
  EXPECT_FALSE(fused_as_unfused(model("HardSwish", nullptr, false, false), x, fp16));
  EXPECT_TRUE(fused_as_unfused(model("Add", &bias, false, false), x, fp16));
  EXPECT_TRUE(fused_as_unfused(model("Add", &bias2, true, true), x, fp16));
}

// GELU as exporters write it after a MatMul and its bias (BERT's erf form, GPT-2's tanh
// form, and one with Pow), scalars from initializers and from Constants that run after the
// MatMul: the Add and every node of the GELU run fused into the MatMul, bit for bit the
// unfused result, specials included, on 1 and 3 threads. Where a value inside is read
// elsewhere, or a scalar has a higher rank than the MatMul's output, they run apart; in
// emulated runs they fuse with each result rounded to the format, bit for bit the nodes
// apart, but not with stochastic rounding.
TEST(Fusion, AMatMulFusesItsBiasAndTheGeluAfterIt) {
  std::mt19937 rng(26);
  const std::vector<std::int64_t> xs{2, 5, 40};
  const Tensor x = special_random(xs, rng), w = special_random({40, 70}, rng),
               bias = special_random({70}, rng);
  const Tensor half = test::scalar(0.5f), one = test::scalar(1.0f);
  struct Step {
    std::string name, op;
    std::vector<std::string> in;
  };
  // MatMul "conv", Add "act" (its output "s"), then `steps` (the last one's output "y");
  // "k:<value>" inputs are Constants run right before their reader.
  const auto model = [&](const std::vector<Step>& steps, const Tensor& k = test::scalar(0)) {
    test::GraphBuilder b(xs, "gelu_fusion.onnx");
    b.init("w", w).init("bias", bias).init("half", half).init("one", one);
    b.node("conv", "MatMul", {"x", "w"}, "c").node("act", "Add", {"bias", "c"}, "s");
    for (std::size_t i = 0; i < steps.size(); ++i) {
      std::vector<std::string> in = steps[i].in;
      for (auto& v : in)
        if (v == "k") {
          v = steps[i].name + "_k";
          Tensor t = k;
          b.node(steps[i].name + "_const", "Constant", {}, v, {{"value", t, ""}});
        }
      b.node(steps[i].name, steps[i].op, in, i + 1 == steps.size() ? "y" : steps[i].name);
    }
    return b.output("y").m;
  };
  const std::vector<Step> erf_form = {{"div", "Div", {"s", "k"}},
                                      {"erf", "Erf", {"div"}},
                                      {"add1", "Add", {"erf", "one"}},
                                      {"mul", "Mul", {"s", "add1"}},
                                      {"mul2", "Mul", {"mul", "half"}}};
  const std::vector<Step> tanh_form = {{"sq", "Mul", {"s", "s"}},
                                       {"cube", "Mul", {"s", "sq"}},
                                       {"c3", "Mul", {"k", "cube"}},
                                       {"inner", "Add", {"s", "c3"}},
                                       {"scaled", "Mul", {"half", "inner"}},
                                       {"tanh", "Tanh", {"scaled"}},
                                       {"add1", "Add", {"one", "tanh"}},
                                       {"mul", "Mul", {"s", "add1"}},
                                       {"mul2", "Mul", {"half", "mul"}}};
  const std::vector<Step> pow_form = {{"cube", "Pow", {"s", "k"}},
                                      {"inner", "Sub", {"s", "cube"}},
                                      {"sig", "Sigmoid", {"inner"}},
                                      {"mul", "Mul", {"sig", "s"}}};
  // Runs `m` fused and apart (same bits) and returns the nodes that ran fused into "conv".
  const auto fused_nodes = [&](const model::Model& m, RunOptions o) {
    fused_as_unfused(m, x, o);
    Profiler profiler;
    o.profiler = &profiler;
    Executor(m, o).run({{"x", x}});
    std::set<std::string> into;
    for (const auto& n : profiler.profile().nodes)
      if (n.fused_into == "conv") into.insert(n.path);
    return into;
  };
  const auto names = [](const std::vector<Step>& steps) {
    std::set<std::string> out{"act"};
    for (const auto& s : steps) out.insert(s.name);
    return out;
  };
  for (const int threads : {1, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    RunOptions o;
    o.threads = threads;
    EXPECT_EQ(fused_nodes(model(erf_form, test::scalar(1.4142135f)), o), names(erf_form));
    EXPECT_EQ(fused_nodes(model(tanh_form, test::scalar(0.044715f)), o), names(tanh_form));
    EXPECT_EQ(fused_nodes(model(pow_form, test::scalar(3.0f)), o), names(pow_form));
  }
  // The Erf's output a graph output too: no run of the GELU's nodes is closed.
  auto read_elsewhere = model(erf_form, test::scalar(1.4142135f));
  read_elsewhere.graph.outputs.push_back({"erf", 1, false, {}});
  EXPECT_EQ(fused_nodes(read_elsewhere, {}), std::set<std::string>{"act"});
  // Its last Mul read by another node too: the nodes before it still fuse.
  auto last_read = model(erf_form, test::scalar(1.4142135f));
  last_read.graph.nodes.push_back({"other", "Relu", "", {"mul"}, {"z"}, {}, "", {}});
  last_read.graph.outputs.push_back({"z", 1, false, {}});
  auto before_last = names(erf_form);
  before_last.erase("mul2");
  EXPECT_EQ(fused_nodes(last_read, {}), before_last);
  // A scalar [1, 1, 1, 1] broadcasts the [2, 5, 70] output to rank 4: nothing fuses.
  Tensor rank4(DType::float32, {1, 1, 1, 1});
  rank4.data<float>()[0] = 1.4142135f;
  EXPECT_EQ(fused_nodes(model(erf_form, rank4), {}), std::set<std::string>{});
  for (const std::string format : {"float16", "bfloat16", "float8_e4m3fn"})
    for (const bool saturate : {false, true}) {
      SCOPED_TRACE(format + (saturate ? ", saturating" : ""));
      RunOptions o;
      o.policy.default_format = parse_format(format);
      o.policy.round_options.saturate = saturate;
      o.threads = 3;
      EXPECT_EQ(fused_nodes(model(erf_form, test::scalar(1.4142135f)), o), names(erf_form));
      EXPECT_EQ(fused_nodes(model(tanh_form, test::scalar(0.044715f)), o), names(tanh_form));
    }
  RunOptions stochastic;
  stochastic.policy.default_format = parse_format("float16");
  stochastic.policy.round_options.rounding = Rounding::stochastic;
  EXPECT_EQ(fused_nodes(model(erf_form, test::scalar(1.4142135f)), stochastic),
            std::set<std::string>{});
}

// An emulated run rounds the Conv's output to its format. An activation the kernel applies
// comes before that rounding: only Relu commutes with it, and only in formats where a
// negative value never rounds to NaN (with infinities), so only it fuses there. A fused
// Add rounds the Conv's output, its sums and each node's result after it (an activation)
// as the nodes apart do, whatever the format and its addend (a weight, a graph input),
// but not with stochastic rounding. The results stay bit for bit the unfused ones.
TEST(Fusion, EmulatedRunsFuseRoundingEachResultOrWhereReluCommutes) {
  std::mt19937 rng(22);
  const std::vector<std::int64_t> xs{1, 3, 12, 12};
  const Tensor w = special_random({8, 3, 3, 3}, rng), x = special_random(xs, rng);
  for (const std::string format : {"float16", "bfloat16", "float8_e5m2", "float8_e4m3fn"})
    for (const bool saturate : {false, true})
      for (const auto& fc : fusion_cases()) {
        SCOPED_TRACE(fc.op + " in " + format + (saturate ? ", saturating" : ""));
        RunOptions o;
        o.policy.default_format = parse_format(format);
        o.policy.round_options.saturate = saturate;
        const Tensor addend = special_random({1, 8, 12, 12}, rng);
        const auto m = conv_then(fc, xs, w, 1, fc.op == "Add" ? &addend : nullptr, false);
        const bool relu_exact = fc.op == "Relu" && format != "float8_e4m3fn";
        EXPECT_EQ(fused_as_unfused(m, x, o), relu_exact || fc.op == "Add");
        if (fc.op == "Add") continue;
        // Conv + Add + the activation: all three fused, each result rounded.
        auto chain = conv_then({.op = "Add"}, xs, w, 1, &addend, saturate);
        chain.graph.nodes.back().outputs[0] = "s";
        std::vector<std::string> in{"s"};
        in.insert(in.end(), fc.extra.begin(), fc.extra.end());
        for (const auto& [name, t] : fc.inits) chain.graph.initializers.push_back({name, t});
        chain.graph.nodes.push_back({"then", fc.op, "", in, {"y"}, fc.attrs, "", {}});
        EXPECT_TRUE(fused_as_unfused(chain, x, o));
        Profiler profiler;
        o.profiler = &profiler;
        Executor(chain, o).run({{"x", x}});
        for (const auto& n : profiler.profile().nodes)
          if (n.path == "then") {
            EXPECT_EQ(n.fused_into, "conv");
          }
      }
  // The addend a graph input (not rounded yet, no weight), and stochastic rounding.
  const Tensor addend = special_random({1, 8, 12, 12}, rng);
  auto input_addend = conv_then({.op = "Add"}, xs, w, 1, &addend, false);
  input_addend.graph.initializers.erase(std::find_if(input_addend.graph.initializers.begin(),
                                                     input_addend.graph.initializers.end(),
                                                     [](const auto& t) { return t.name == "a"; }));
  input_addend.graph.inputs.push_back({"a", 1, false, {}});
  for (const bool stochastic : {false, true}) {
    RunOptions o;
    o.policy.default_format = parse_format("bfloat16");
    if (stochastic) o.policy.round_options.rounding = Rounding::stochastic;
    Profiler profiler;
    o.profiler = &profiler;
    const Executor fused(input_addend, o);
    o.profiler = nullptr;
    o.fuse = false;
    const Executor apart(input_addend, o);
    const std::vector<NamedTensor> feeds{{"x", x}, {"a", addend}};
    EXPECT_TRUE(same_bits(fused.run(feeds)[0].tensor, apart.run(feeds)[0].tensor));
    for (const auto& n : profiler.profile().nodes)
      if (n.path == "act") {
        EXPECT_EQ(n.fused_into, stochastic ? "" : "conv");
      }
  }
  // A float16 model without emulation rounds the Conv's output to float16 storage.
  test::GraphBuilder b({1, 3, 12, 12}, "fp16.onnx");
  b.m.graph.inputs[0].elem_type = model::onnx_elem_type(DType::float16);
  b.init("w", convert(w, DType::float16));
  b.node("conv", "Conv", {"x", "w"}, "c").node("act", "Relu", {"c"}, "y").output("y");
  b.m.graph.outputs[0].elem_type = model::onnx_elem_type(DType::float16);
  EXPECT_TRUE(fused_as_unfused(b.m, convert(x, DType::float16)));
  b.m.graph.nodes[1].op_type = "Sigmoid";
  EXPECT_FALSE(fused_as_unfused(b.m, convert(x, DType::float16)));
}

// An observer that watches values sees every node, the Conv's output included; one that
// does not sees the Conv with the fused node's output, and not that node.
TEST(Fusion, AnObserverThatWatchesValuesTurnsItOff) {
  struct Blind : Recorder {
    bool watches_values() const override { return false; }
  };
  std::mt19937 rng(23);
  const std::vector<std::int64_t> xs{1, 3, 12, 12};
  const auto m =
      conv_then({.op = "Relu"}, xs, special_random({8, 3, 3, 3}, rng), 1, nullptr, false);
  const Tensor x = special_random(xs, rng);
  Recorder watching;
  RunOptions o;
  o.observer = &watching;
  const Tensor want = Executor(m, o).run({{"x", x}})[0].tensor;
  ASSERT_EQ(watching.calls.size(), 2u);
  EXPECT_EQ(watching.calls[0].outputs.at(0).name, "c");
  Blind blind;
  o.observer = &blind;
  EXPECT_TRUE(same_bits(Executor(m, o).run({{"x", x}})[0].tensor, want));
  ASSERT_EQ(blind.calls.size(), 1u);
  EXPECT_EQ(blind.calls[0].node, "conv");
  EXPECT_EQ(blind.calls[0].outputs.at(0).name, "y");
  // A Session stepped by an analysis never fuses: the Conv's output is there to read.
  const Executor ex(m);
  Session s(ex, std::vector<NamedTensor>{{"x", x}});
  s.step();
  EXPECT_NE(s.value("c"), nullptr);
  s.step();
  EXPECT_TRUE(same_bits(s.outputs().at(0).tensor, want));
}

}  // namespace
}  // namespace fpguard::exec
