// The model layer: ONNX load (initializers, external data, subgraphs, opsets), save and
// the round trip, validation errors, topological order, consumers and liveness.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fpguard/error.hpp"
#include "fpguard/model.hpp"

namespace fpguard::model {
namespace {

const std::filesystem::path kData = FPGUARD_MODEL_DATA;

std::string load_error(const std::filesystem::path& p) {
  try {
    load(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0);
}

void expect_same_graph(const Graph& a, const Graph& b);

void expect_same_attr(const Attribute& a, const Attribute& b) {
  EXPECT_EQ(a.name, b.name);
  ASSERT_EQ(a.value.index(), b.value.index()) << a.name;
  if (const auto* t = std::get_if<Tensor>(&a.value)) {
    EXPECT_TRUE(same_tensor(*t, std::get<Tensor>(b.value)));
  } else if (const auto* ts = std::get_if<std::vector<Tensor>>(&a.value)) {
    const auto& us = std::get<std::vector<Tensor>>(b.value);
    ASSERT_EQ(ts->size(), us.size());
    for (std::size_t i = 0; i < ts->size(); ++i) EXPECT_TRUE(same_tensor((*ts)[i], us[i]));
  } else if (const auto* g = std::get_if<GraphPtr>(&a.value)) {
    expect_same_graph(**g, *std::get<GraphPtr>(b.value));
  } else if (const auto* gs = std::get_if<std::vector<GraphPtr>>(&a.value)) {
    const auto& hs = std::get<std::vector<GraphPtr>>(b.value);
    ASSERT_EQ(gs->size(), hs.size());
    for (std::size_t i = 0; i < gs->size(); ++i) expect_same_graph(*(*gs)[i], *hs[i]);
  } else {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (!std::is_same_v<T, Tensor> && !std::is_same_v<T, GraphPtr> &&
                        !std::is_same_v<T, std::vector<Tensor>> &&
                        !std::is_same_v<T, std::vector<GraphPtr>>) {
            EXPECT_EQ(x, std::get<T>(b.value)) << a.name;
          }
        },
        a.value);
  }
}

void expect_same_graph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_EQ(a.value_info, b.value_info);
  ASSERT_EQ(a.initializers.size(), b.initializers.size());
  for (std::size_t i = 0; i < a.initializers.size(); ++i) {
    EXPECT_EQ(a.initializers[i].name, b.initializers[i].name);
    EXPECT_TRUE(same_tensor(a.initializers[i].tensor, b.initializers[i].tensor));
  }
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const auto &n = a.nodes[i], &m = b.nodes[i];
    EXPECT_EQ(n.name, m.name);
    EXPECT_EQ(n.op_type, m.op_type);
    EXPECT_EQ(n.domain, m.domain);
    EXPECT_EQ(n.inputs, m.inputs);
    EXPECT_EQ(n.outputs, m.outputs);
    EXPECT_EQ(n.doc_string, m.doc_string);
    EXPECT_EQ(n.metadata, m.metadata);
    ASSERT_EQ(n.attributes.size(), m.attributes.size());
    for (std::size_t k = 0; k < n.attributes.size(); ++k)
      expect_same_attr(n.attributes[k], m.attributes[k]);
  }
}

void expect_round_trip(const std::string& file) {
  const Model m = load(kData / file);
  const Model r = load_from_bytes(save_to_bytes(m), "saved", kData);
  EXPECT_EQ(m.ir_version, r.ir_version);
  EXPECT_EQ(m.opsets, r.opsets);
  EXPECT_EQ(m.producer_name, r.producer_name);
  expect_same_graph(m.graph, r.graph);
}

TEST(Load, MlpHasNodesInitializersAndIo) {
  const Model m = load(kData / "mlp.onnx");
  EXPECT_EQ(m.default_opset(), 17);
  ASSERT_EQ(m.graph.nodes.size(), 4u);
  EXPECT_EQ(m.graph.nodes[3].op_type, "Gemm");
  EXPECT_EQ(m.graph.nodes[3].attr_int("transB", 0), 1);
  EXPECT_EQ(m.graph.nodes[3].attr_float("alpha", 0), 1.0f);
  ASSERT_EQ(m.graph.initializers.size(), 4u);
  EXPECT_EQ(m.graph.find_initializer("w1")->tensor.shape(), (std::vector<std::int64_t>{4, 8}));
  ASSERT_EQ(m.graph.runtime_inputs().size(), 1u);
  EXPECT_EQ(m.graph.inputs[0].elem_type, 1);
  EXPECT_EQ(m.graph.inputs[0].shape, (std::vector<Dim>{{2, ""}, {4, ""}}));
}

// Shape inference types the values of each body in that body's map (the then-branch's
// Add of the outer float Relu output), not in the main graph's.
TEST(Typing, EveryGraphGetsItsOwnTypes) {
  const Model m = load(kData / "subgraph.onnx");
  const auto types = infer_graph_elem_types(m);
  const Graph* then_g = nullptr;
  for (const auto& n : m.graph.nodes)
    if (const auto* a = n.find_attr("then_branch")) then_g = std::get<GraphPtr>(a->value).get();
  ASSERT_NE(then_g, nullptr);
  ASSERT_EQ(types.size(), 3u);  // main, then, else
  EXPECT_EQ(types.at(then_g).at("t"), 1);
  EXPECT_FALSE(types.at(then_g).count("y"));
  EXPECT_EQ(types.at(&m.graph).at("y"), 1);
  EXPECT_FALSE(types.at(&m.graph).count("t"));
}

TEST(Load, AttributeOfTheWrongTypeNamesTheNode) {
  const Model m = load(kData / "mlp.onnx");
  try {
    m.graph.nodes[3].attr_ints("transB");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'gemm2' (Gemm)"), std::string::npos) << e.what();
  }
}

TEST(Load, ExternalDataRelativeToTheModel) {
  const Model m = load(kData / "external.onnx");
  const auto* t = m.graph.find_initializer("ext");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->tensor.size(), 64u);
  EXPECT_EQ(t->tensor.data<float>()[63], 63.0f);
}

TEST(Load, ExternalDataLeavingTheDirectoryIsRefused) {
  const auto msg = load_error(kData / "escaping.onnx");
  EXPECT_NE(msg.find("leaves the model's directory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("escaping.onnx"), std::string::npos) << msg;
}

TEST(Load, SubgraphsAreKeptWithTheirOuterReferences) {
  const Model m = load(kData / "subgraph.onnx");  // opset 21: newer than libonnx 1.12
  EXPECT_EQ(m.default_opset(), 21);
  const Node& n = m.graph.nodes[1];
  ASSERT_EQ(n.op_type, "If");
  const auto* a = n.find_attr("then_branch");
  ASSERT_NE(a, nullptr);
  const auto& g = *std::get<GraphPtr>(a->value);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Add");
  EXPECT_EQ(outer_references(g), (std::vector<std::string>{"x"}));
  EXPECT_EQ(node_reads(n), (std::vector<std::string>{"c", "x"}));
  EXPECT_EQ(consumers(m.graph).at("x"), (std::vector<std::size_t>{1}));
}

TEST(Load, CycleNamesANode) {
  const Model m = load(kData / "cycle.onnx");
  try {
    topological_order(m.graph, "cycle.onnx");
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(Relu)"), std::string::npos) << msg;
  }
}

TEST(Load, MissingInputNamesFileNodeAndValue) {
  const auto msg = load_error(kData / "missing_input.onnx");
  EXPECT_NE(msg.find("missing_input.onnx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'lost' (Relu)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'nowhere'"), std::string::npos) << msg;
}

// Opsets 1-6: an op defined then as at opset 7 loads; one redefined since is refused by
// node, with the version that the model's opset defines.
TEST(Load, OpRedefinedSinceAnOldOpsetIsRefused) {
  const auto msg = load_error(kData / "opset5.onnx");
  EXPECT_NE(msg.find("node 'r' (Relu)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unsupported at opset 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Relu-1"), std::string::npos) << msg;
}

TEST(Load, OldOpsetWithUnchangedOpsLoads) {
  const auto m = model::load(kData / "opset6.onnx");
  EXPECT_EQ(m.default_opset(), 6);
  EXPECT_EQ(m.graph.nodes.size(), 2u);
}

TEST(Load, NotAModel) {
  const auto msg = load_error(kData / "mlp_x.npy");
  EXPECT_NE(msg.find("not an ONNX model"), std::string::npos) << msg;
}

TEST(Save, RoundTripKeepsTheIr) {
  for (const char* f :
       {"mlp.onnx", "subgraph.onnx", "attrs.onnx", "half.onnx", "dynamic.onnx", "external.onnx"}) {
    SCOPED_TRACE(f);
    expect_round_trip(f);
  }
}

// Node metadata_props (field 22, unknown to libonnx 1.12) and doc_strings survive a save
// and a load, in the main graph and in subgraphs; tests/cli/annotate_test.py reads the
// same bytes with an independent decoder.
TEST(Save, NodeMetadataAndDocStringsRoundTrip) {
  Model m = load(kData / "subgraph.onnx");
  Node* inner = nullptr;
  for (auto& n : m.graph.nodes)
    for (auto& a : n.attributes)
      if (auto* g = std::get_if<GraphPtr>(&a.value); g && !(*g)->nodes.empty())
        inner = &(*g)->nodes.front();
  ASSERT_NE(inner, nullptr);
  inner->metadata = {{"fpguard.precision", "float16"}, {"", ""}};
  m.graph.nodes.front().metadata = {{"a", "1"}, {"a", "2"}, {"b", std::string("\0x", 2)}};
  m.graph.nodes.front().doc_string = "line 1\nline 2";
  const Model r = load_from_bytes(save_to_bytes(m), "saved", kData);
  expect_same_graph(m.graph, r.graph);
  EXPECT_EQ(r.graph.nodes.front().metadata.size(), 3u);
  EXPECT_EQ(r.graph.nodes.front().metadata[2].second, std::string("\0x", 2));
}

TEST(Save, SavedModelPassesTheOnnxChecker) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fpg_model_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* f : {"mlp.onnx", "external.onnx", "half.onnx"}) {
    const auto out = dir / f;
    save(load(kData / f), out);
    const std::string cmd = std::string(FPGUARD_TEST_PYTHON) + " " + FPGUARD_SOURCE_DIR +
                            "/tests/data/make_models.py --check " + out.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << f;
  }
  std::filesystem::remove_all(dir);
}

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("fpg_model_ext_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Initializers in an external data file: read back by fpguard and by Python's onnx (an
// independent reader), with the same values as the inline model.
TEST(Save, ExternalDataIsReadBackByOnnxAndByFpguard) {
  const TempDir dir;
  const Model m = load(kData / "mlp.onnx");
  SaveOptions o;
  o.external = SaveOptions::External::always;
  o.min_external_bytes = 0;
  const auto out = dir.path / "mlp_ext.onnx";
  const SaveResult r = save(m, out, o);
  EXPECT_EQ(r.data_file, dir.path / "mlp_ext.onnx.data");
  EXPECT_EQ(r.external_tensors, m.graph.initializers.size());
  std::size_t bytes = 0;
  for (const auto& t : m.graph.initializers) bytes += t.tensor.nbytes();
  EXPECT_EQ(r.external_bytes, bytes);
  EXPECT_GE(std::filesystem::file_size(r.data_file), bytes);
  const Model back = load(out);
  expect_same_graph(m.graph, back.graph);
  EXPECT_EQ(back.external_files.size(), 1u);
  const std::string cmd = std::string(FPGUARD_TEST_PYTHON) + " " + FPGUARD_SOURCE_DIR +
                          "/tests/data/make_models.py --check " + out.string() + " --same-as " +
                          (kData / "mlp.onnx").string() + " --all-external";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

// automatic: external data only when the inline model would reach the limit (protobuf's
// 2 GiB by default; a small limit here), and only for initializers of min_external_bytes.
TEST(Save, ExternalDataWhenTheInlineModelWouldBeTooLarge) {
  const TempDir dir;
  const Model m = load(kData / "mlp.onnx");
  SaveOptions o;
  EXPECT_TRUE(save(m, dir.path / "inline.onnx", o).data_file.empty());
  EXPECT_FALSE(std::filesystem::exists(dir.path / "inline.onnx.data"));
  o.inline_limit = 64;
  o.min_external_bytes = 64;
  const SaveResult r = save(m, dir.path / "big.onnx", o);
  EXPECT_EQ(r.data_file, dir.path / "big.onnx.data");
  std::size_t large = 0;
  for (const auto& t : m.graph.initializers) large += t.tensor.nbytes() >= 64;
  EXPECT_EQ(r.external_tensors, large);
  expect_same_graph(m.graph, load(dir.path / "big.onnx").graph);
  o.external = SaveOptions::External::never;
  EXPECT_TRUE(save(m, dir.path / "never.onnx", o).data_file.empty());
}

// A model read from a.onnx + a.onnx.data, saved again as a.onnx: its data file is an
// input, so the save is refused and nothing is touched.
TEST(Save, TheInputsExternalDataFileIsNeverOverwritten) {
  const TempDir dir;
  SaveOptions o;
  o.external = SaveOptions::External::always;
  o.min_external_bytes = 0;
  const auto a = dir.path / "a.onnx";
  save(load(kData / "mlp.onnx"), a, o);
  const std::string model_before = file_bytes(a), data_before = file_bytes(a.string() + ".data");
  const Model m = load(a);
  try {
    save(m, a, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("refusing to overwrite"), std::string::npos) << e.what();
  }
  EXPECT_EQ(file_bytes(a), model_before);
  EXPECT_EQ(file_bytes(a.string() + ".data"), data_before);
}

// Nor when the model itself is written onto it (fpguard check --annotate a.onnx.data).
TEST(Save, TheInputsExternalDataFileIsNotAnOutput) {
  const TempDir dir;
  SaveOptions o;
  o.external = SaveOptions::External::always;
  o.min_external_bytes = 0;
  const auto a = dir.path / "a.onnx";
  const auto data = dir.path / "a.onnx.data";
  save(load(kData / "mlp.onnx"), a, o);
  const std::string data_before = file_bytes(data);
  const Model m = load(a);
  ASSERT_EQ(m.external_files.size(), 1u);
  EXPECT_THROW(save(m, data), Error);
  EXPECT_EQ(file_bytes(data), data_before);
}

TEST(Analysis, TopologicalOrderSortsAShuffledGraph) {
  Model m = load(kData / "mlp.onnx");
  std::swap(m.graph.nodes[0], m.graph.nodes[3]);  // Gemm first, MatMul last
  const auto order = topological_order(m.graph, "");
  std::vector<std::string> ops;
  for (auto i : order) ops.push_back(m.graph.nodes[i].op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"MatMul", "Add", "Relu", "Gemm"}));
}

TEST(Analysis, LastUseIsThePositionOfTheLastReader) {
  const Model m = load(kData / "shared_weight.onnx");
  const auto order = topological_order(m.graph, "");
  const auto lu = last_use(m.graph, order);
  EXPECT_EQ(lu.at("x"), 2u);  // read by mm_a (0) and reshape (2)
  EXPECT_EQ(lu.at("w"), 1u);  // read by mm_a and mm_b
  EXPECT_EQ(lu.at("a"), 1u);
  EXPECT_FALSE(lu.count("b"));  // graph outputs are never freed
  EXPECT_FALSE(lu.count("r"));
}

}  // namespace
}  // namespace fpguard::model
