// Model inputs (include/fpguard/inputs.hpp), called as a library: errors name the option
// (Error::in_option "input", "inputs", "shape", "samples") and never a CLI flag; a seed
// reproduces its tensors, and they are the tensors `fpguard run` feeds the model (its
// --outputs of an Identity model, compared bit for bit); generated values follow their
// distribution (range, mean and spread within 6 standard errors); file paths are made
// absolute for plan.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "fpguard/error.hpp"
#include "fpguard/inputs.hpp"
#include "fpguard/model.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::inputs {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& tag) {
  std::random_device rd;
  const fs::path d = fs::temp_directory_path() /
                     ("fpguard_inputs_" + tag + "_" + std::to_string(rd()) + std::to_string(rd()));
  fs::create_directories(d);
  return d;
}

// y = Identity(x), z = Identity(k): x float32 [N, 4] (N dynamic), k int64 [2].
model::Model identity_model(const fs::path& path) {
  model::Model m;
  m.ir_version = 8;
  m.opsets[""] = 13;
  m.path = path;
  m.graph.inputs.push_back({"x", 1, true, {{-1, "N"}, {4, ""}}});
  m.graph.inputs.push_back({"k", 7, true, {{2, ""}}});
  m.graph.nodes.push_back({"idx", "Identity", "", {"x"}, {"y"}, {}, "", {}});
  m.graph.nodes.push_back({"idk", "Identity", "", {"k"}, {"z"}, {}, "", {}});
  m.graph.outputs.push_back({"y", 1, false, {}});
  m.graph.outputs.push_back({"z", 7, false, {}});
  return m;
}

// The option an Error names, after checking that its message names no CLI flag.
template <class F>
std::string option_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.problem().find("--"), std::string::npos) << e.what();
    return e.option();
  }
  ADD_FAILURE() << "no Error";
  return "";
}

bool same(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0;
}

TEST(Inputs, ErrorsNameTheOption) {
  const model::Model m = identity_model("m.onnx");
  const Options shaped{.shape = {"x=3,4"}};
  EXPECT_EQ(option_of([&] { gather({.input = {"y=uniform:0:1"}, .shape = {"x=3,4"}}, m); }),
            "input");
  EXPECT_EQ(option_of([&] { gather({.input = {"x"}}, m); }), "input");
  EXPECT_EQ(option_of([&] { gather({.input = {"x=uniform:1:0"}, .shape = {"x=3,4"}}, m); }),
            "input");
  EXPECT_EQ(option_of([&] { gather({.input = {"x=normal:0:abc"}, .shape = {"x=3,4"}}, m); }),
            "input");
  EXPECT_EQ(option_of([&] { gather({.shape = {"x=3,a"}}, m); }), "shape");
  EXPECT_EQ(option_of([&] { gather({.shape = {"x=3,5"}}, m); }), "shape");  // fixed dim is 4
  EXPECT_EQ(option_of([&] { gather({.shape = {"=3"}}, m); }), "shape");
  // The dynamic dimension with no shape given: the error says how to give it.
  try {
    gather({}, m);
    ADD_FAILURE() << "a dynamic dimension without a shape";
  } catch (const Error& e) {
    EXPECT_EQ(e.option(), "shape");
    EXPECT_NE(e.problem().find("x=D0,D1,..."), std::string::npos) << e.problem();
    EXPECT_NE(e.problem().find("'N'"), std::string::npos) << e.problem();
  }
  EXPECT_EQ(option_of([&] { gather_samples(shaped, m, 0); }), "samples");
  // A directory of more unnamed tensors than the model has inputs.
  const fs::path dir = fresh_dir("dir");
  for (const char* n : {"a", "b", "c"})
    write_npy(dir / (std::string(n) + ".npy"), Tensor(DType::float32, {1}));
  EXPECT_EQ(option_of([&] { gather({.inputs = dir.string(), .shape = {"x=3,4"}}, m); }), "inputs");
  fs::remove_all(dir);
}

TEST(Inputs, SeedReproducesAndSamplesOffsetIt) {
  const model::Model m = identity_model("m.onnx");
  std::vector<Generated> generated;
  const auto a = gather({.shape = {"x=3,4"}, .seed = 7}, m, 0, &generated);
  const auto b = gather({.shape = {"x=3,4"}, .seed = 7}, m);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].name, "x");
  EXPECT_EQ(a[0].value.tensor.shape(), (std::vector<std::int64_t>{3, 4}));
  EXPECT_TRUE(same(a[0].value.tensor, b[0].value.tensor));
  EXPECT_FALSE(same(a[0].value.tensor, gather({.shape = {"x=3,4"}, .seed = 8}, m)[0].value.tensor));
  // Input set s draws with seed + s.
  EXPECT_TRUE(same(gather({.shape = {"x=3,4"}, .seed = 7}, m, 1)[0].value.tensor,
                   gather({.shape = {"x=3,4"}, .seed = 8}, m, 0)[0].value.tensor));
  EXPECT_EQ(generated, (std::vector<Generated>{{.name = "x", .generator = {.a = -1, .b = 1}},
                                               {.name = "k", .generator = {.a = 0, .b = 0}}}));
  for (const float v : a[0].value.tensor.data<float>()) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LE(v, 1.0f);
  }
  EXPECT_EQ(a[1].value.tensor.dtype(), DType::int64);
  for (const auto v : a[1].value.tensor.data<std::int64_t>()) EXPECT_EQ(v, 0);
  // Shared (Tensor::shared): an executor copies its inputs into its values every run, and
  // a copy is then a reference.
  EXPECT_TRUE(a[0].value.tensor.is_view());
  EXPECT_TRUE(a[1].value.tensor.is_view());

  const Samples s = gather_samples({.shape = {"x=3,4"}, .seed = 7}, m, 3);
  ASSERT_EQ(s.sets.size(), 3u);
  EXPECT_TRUE(
      same(s.sets[2][0].value.tensor, gather({.shape = {"x=3,4"}, .seed = 9}, m)[0].value.tensor));
  EXPECT_EQ(s.generated, generated);  // once each, in the model's order
}

// Mean and standard deviation of n draws against the distribution's, within 6 standard
// errors (the standard error of a sample variance is sigma^2 sqrt(2 / n) for a normal and
// sigma^2 sqrt(0.8 / n) for a uniform: its excess kurtosis is -1.2).
void expect_moments(const Tensor& t, double mean, double sd, double var_se_factor) {
  double sum = 0, sum2 = 0;
  const auto v = t.data<float>();
  for (const float x : v) sum += x;
  const double n = static_cast<double>(v.size()), mu = sum / n;
  for (const float x : v) sum2 += (x - mu) * (x - mu);
  EXPECT_NEAR(mu, mean, 6 * sd / std::sqrt(n));
  EXPECT_NEAR(sum2 / n, sd * sd, 6 * sd * sd * std::sqrt(var_se_factor / n));
}

TEST(Inputs, GeneratorsFollowTheirDistributions) {
  const model::Model m = identity_model("m.onnx");
  const auto u = gather({.input = {"x=uniform:2:6"}, .shape = {"x=50000,4"}, .seed = 3}, m);
  expect_moments(u[0].value.tensor, 4, 4 / std::sqrt(12.0), 0.8);
  for (const float x : u[0].value.tensor.data<float>()) {
    EXPECT_GE(x, 2.0f);
    EXPECT_LE(x, 6.0f);
  }
  const auto g = gather({.input = {"x=normal:-1:0.5"}, .shape = {"x=50000,4"}, .seed = 3}, m);
  expect_moments(g[0].value.tensor, -1, 0.5, 2);
}

// Every generated input is recorded, asked for or by default, in the model's order;
// require_inputs refuses them all in one error; a generator's spec reads back exactly.
TEST(Inputs, GeneratedInputsAreRecordedAndCanBeRefused) {
  const model::Model m = identity_model("m.onnx");
  std::vector<Generated> generated;
  gather({.input = {"k=normal:0.1:2.5"}, .shape = {"x=2,4"}}, m, 0, &generated);
  EXPECT_EQ(generated, (std::vector<Generated>{
                           {.name = "x", .generator = {.a = -1, .b = 1}},
                           {.name = "k", .generator = {"normal", 0.1, 2.5}, .by_default = false}}));
  EXPECT_EQ(generated[1].generator.spec(), "normal:0.1:2.5");
  EXPECT_EQ(parse_generator(generated[1].generator.spec(), "k"), generated[1].generator);
  try {
    gather({.input = {"k=uniform:0:3"}, .shape = {"x=2,4"}, .require_inputs = true}, m);
    ADD_FAILURE() << "require_inputs generated inputs";
  } catch (const Error& e) {
    EXPECT_EQ(e.option(), "require_inputs");
    EXPECT_NE(e.problem().find("x=uniform:-1:1, k=uniform:0:3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(option_of([] { parse_generator("uniform:3:1", "x"); }), "input");
  EXPECT_EQ(option_of([] { parse_generator("normal:0:-1", "x"); }), "input");
  EXPECT_EQ(option_of([] { parse_generator("normal:0:inf", "x"); }), "input");
  EXPECT_EQ(option_of([] { parse_generator("gauss:0:1", "x"); }), "input");
}

// `fpguard run` feeds the model the library's tensors: an Identity model's outputs, as
// --outputs writes them, equal gather() with the same options bit for bit.
TEST(Inputs, SameTensorsAsTheCli) {
  const fs::path dir = fresh_dir("cli");
  const model::Model m = identity_model(dir / "identity.onnx");
  model::save(m, m.path);
  const std::string cmd = std::string(FPGUARD_BIN) + " run " + m.path.string() +
                          " --shape x=5,4 --seed 11 --input k=uniform:-3:3 --outputs " +
                          (dir / "out").string() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto want =
      gather({.input = {"k=uniform:-3:3"}, .shape = {"x=5,4"}, .seed = 11}, model::load(m.path));
  const auto y = read_tensors(dir / "out" / "y.npy"), z = read_tensors(dir / "out" / "z.npy");
  ASSERT_EQ(y.size(), 1u);
  ASSERT_EQ(z.size(), 1u);
  EXPECT_TRUE(same(y[0].tensor, want[0].value.tensor));
  EXPECT_TRUE(same(z[0].tensor, want[1].value.tensor));
  fs::remove_all(dir);
}

TEST(Inputs, AbsolutePathsForThePlan) {
  const Options o{.input = {"x=a/../b/x.npy", "k=uniform:0:1", "/abs/z.npy"},
                  .inputs = "sets/",
                  .shape = {"x=3,4"},
                  .seed = 5};
  const Options a = absolute(o);
  const fs::path cwd = fs::current_path();
  EXPECT_EQ(a.input[0], "x=" + (cwd / "b/x.npy").string());
  EXPECT_EQ(a.input[1], "k=uniform:0:1");  // generators stay as given
  EXPECT_EQ(a.input[2], "/abs/z.npy");     // not NAME=VALUE: left for gather to refuse
  EXPECT_EQ(a.inputs, (cwd / "sets/").string());
  EXPECT_EQ(a.shape, o.shape);
  EXPECT_EQ(a.seed, 5u);
  EXPECT_EQ(absolute(a), a);
  EXPECT_TRUE(is_generator("normal:0:1"));
  EXPECT_FALSE(is_generator("uniform.npy"));
}

TEST(Inputs, NaturalOrderAndShards) {
  EXPECT_TRUE(natural_less("set_2", "set_10"));
  EXPECT_FALSE(natural_less("set_10", "set_2"));
  EXPECT_TRUE(natural_less("a9b", "a10a"));
  EXPECT_TRUE(natural_less("x1", "x01"));  // the same number: fewer leading zeros first
  EXPECT_FALSE(natural_less("x01", "x1"));
  EXPECT_TRUE(natural_less("abc", "abd"));
  EXPECT_TRUE(natural_less("ab", "abc"));
  EXPECT_FALSE(natural_less("abc", "abc"));
  EXPECT_EQ(parse_shard("2/5"), (Shard{.index = 2, .count = 5}));
  for (const char* bad : {"5/5", "0/0", "1", "a/2", "1/", "/2", "-1/2", "1/2/3"})
    EXPECT_EQ(option_of([&] { parse_shard(bad); }), "shard") << bad;

  // 12 sets test_data_set_0 .. 11: shard 1/3 reads sets 1, 4, 7, 10 (natural order).
  const fs::path dir = fresh_dir("shard");
  const model::Model m = identity_model(dir / "identity.onnx");
  for (int s = 0; s < 12; ++s) {
    const fs::path d = dir / "sets" / ("test_data_set_" + std::to_string(s));
    fs::create_directories(d);
    Tensor x(DType::float32, {1, 4});
    for (auto& v : x.data<float>()) v = static_cast<float>(s);
    write_npy(d / "x.npy", x);
    Tensor k(DType::int64, {2});
    write_npy(d / "k.npy", k);
  }
  const Samples got = gather_samples({.inputs = (dir / "sets").string()}, m, 1, {1, 3});
  EXPECT_EQ(got.total, 12u);
  EXPECT_EQ(got.indices, (std::vector<std::size_t>{1, 4, 7, 10}));
  EXPECT_EQ(got.names, (std::vector<std::string>{"test_data_set_1", "test_data_set_4",
                                                 "test_data_set_7", "test_data_set_10"}));
  ASSERT_EQ(got.sets.size(), 4u);
  EXPECT_EQ(got.sets[3][0].value.tensor.data<float>()[0], 10.0f);
  EXPECT_EQ(set_sha256(got.sets[0]), set_sha256(got.sets[0]));
  EXPECT_NE(set_sha256(got.sets[0]), set_sha256(got.sets[1]));
  // A subset first: the first 5, or 4 drawn with the seed (the same each time, in natural
  // order), then sharded.
  const std::string sets = (dir / "sets").string();
  const Samples first = gather_samples({.inputs = sets, .max_sets = 5}, m, 1, {0, 2});
  EXPECT_EQ(first.total, 5u);
  EXPECT_EQ(first.names,
            (std::vector<std::string>{"test_data_set_0", "test_data_set_2", "test_data_set_4"}));
  const Options sample{.inputs = sets, .seed = 9, .sample_sets = 4};
  const Samples a = gather_samples(sample, m, 1), b = gather_samples(sample, m, 1);
  EXPECT_EQ(a.total, 4u);
  EXPECT_EQ(a.names, b.names);
  EXPECT_TRUE(std::is_sorted(a.names.begin(), a.names.end(),
                             [](const auto& x, const auto& y) { return natural_less(x, y); }));
  std::set<std::vector<std::string>> drawn;
  for (std::uint64_t seed = 0; seed < 8; ++seed)
    drawn.insert(gather_samples({.inputs = sets, .seed = seed, .sample_sets = 4}, m, 1).names);
  EXPECT_GT(drawn.size(), 4u);  // other seeds, other samples
  EXPECT_EQ(
      option_of([&] { gather_samples({.inputs = sets, .max_sets = 2, .sample_sets = 2}, m, 1); }),
      "sample_sets");
  // .npz files are sets too (one each), in the same natural order.
  const fs::path npz = dir / "npz";
  fs::create_directories(npz);
  for (int s = 0; s < 3; ++s) {
    Tensor x(DType::float32, {1, 4});
    for (auto& v : x.data<float>()) v = static_cast<float>(s);
    write_npz(npz / ("set_" + std::to_string(10 - 4 * s) + ".npz"),
              {{"x", x}, {"k", Tensor(DType::int64, {2})}}, false);
  }
  const Samples z = gather_samples({.inputs = npz.string()}, m, 1);
  EXPECT_EQ(z.names, (std::vector<std::string>{"set_2.npz", "set_6.npz", "set_10.npz"}));
  EXPECT_EQ(z.sets[0][0].name, "x");
  EXPECT_EQ(z.sets[0][0].value.tensor.data<float>()[0], 2.0f);  // set_2.npz holds the 2s
  // Listed lazily, read one at a time: the same sets.
  const SetList listed = list_samples({.inputs = (dir / "sets").string()}, m, 1, {1, 3});
  EXPECT_EQ(listed.indices, got.indices);
  EXPECT_EQ(listed.names, got.names);
  EXPECT_EQ(listed.total, 12u);
  for (std::size_t k = 0; k < listed.size(); ++k)
    EXPECT_EQ(set_sha256(listed.read(k)), set_sha256(got.sets[k])) << k;
  // Generated sets shard too: set s is drawn with seed + s, whichever shard draws it.
  const Options gen{.shape = {"x=1,4"}, .seed = 5};
  const Samples all = gather_samples(gen, m, 5);
  const SetList odd = list_samples(gen, m, 5, {1, 2});
  EXPECT_EQ(odd.indices, (std::vector<std::size_t>{1, 3}));
  EXPECT_EQ(odd.total, 5u);
  std::vector<Generated> made;
  EXPECT_EQ(set_sha256(odd.read(1, &made)), set_sha256(all.sets[3]));
  EXPECT_EQ(made, all.generated);
  EXPECT_NE(set_sha256(all.sets[1]), set_sha256(all.sets[3]));
  // A shard with no sets.
  EXPECT_EQ(option_of([&] { gather_samples({}, m, 2, {2, 3}); }), "shard");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fpguard::inputs
