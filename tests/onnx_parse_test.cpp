// parse_mapped (src/model/onnx_parse.cpp) against protobuf's own parser: the same message,
// less the raw_data it leaves in the buffer, on every ONNX node test model and on corrupted
// bytes; and load() of a model file: values aligned for their type view the file's map,
// the others are FileCopies or copies, all equal to protobuf's raw_data.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fpguard/error.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/model.hpp"
#include "model/onnx_parse.hpp"

using namespace fpguard;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// protobuf's parse, serialized; nullopt where protobuf refuses the bytes.
std::optional<std::string> by_protobuf(const std::string& bytes) {
  onnx::ModelProto mp;
  if (!mp.ParseFromString(bytes)) return std::nullopt;
  return mp.SerializeAsString();
}

// parse_mapped's, with the raw_data it left in the buffer put back, serialized; nullopt
// where it refuses the bytes.
std::optional<std::string> by_walker(const std::string& bytes, std::size_t* left = nullptr) {
  onnx::ModelProto mp;
  model::MappedRaw raw;
  try {
    raw = model::parse_mapped(std::as_bytes(std::span(bytes)), mp, "m.onnx");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an ONNX model"), std::string::npos) << e.what();
    return std::nullopt;
  }
  for (const auto& [proto, range] : raw) {
    EXPECT_FALSE(proto->has_raw_data());
    const_cast<onnx::TensorProto*>(proto)->set_raw_data(bytes.substr(range.offset, range.size));
  }
  if (left) *left = raw.size();
  return mp.SerializeAsString();
}

std::vector<fs::path> node_test_models() {
  std::vector<fs::path> out;
  for (const auto& d : fs::directory_iterator("/usr/share/libonnx-testdata/data/node"))
    if (fs::exists(d.path() / "model.onnx")) out.push_back(d.path() / "model.onnx");
  for (const auto& f : fs::directory_iterator(FPGUARD_MODEL_DATA))
    if (f.path().extension() == ".onnx") out.push_back(f.path());
  for (const char* e : {"clean_cnn", "superres", "transformer_block"})
    out.push_back(fs::path(FPGUARD_SOURCE_DIR) / "examples" / e / "model.onnx");
  return out;
}

TEST(ParseMapped, MatchesProtobufOnEveryTestModel) {
  const auto models = node_test_models();
  ASSERT_GT(models.size(), 900u);
  std::size_t with_raw = 0, subgraph_raw = 0;
  for (const auto& p : models) {
    const std::string bytes = read_file(p);
    std::size_t left = 0;
    const auto want = by_protobuf(bytes);
    ASSERT_TRUE(want) << p;
    const auto got = by_walker(bytes, &left);
    ASSERT_TRUE(got) << p;
    EXPECT_EQ(*got, *want) << p;
    with_raw += left > 0;
    if (left > 0 && p.parent_path().filename().string().rfind("test_if", 0) == 0) ++subgraph_raw;
  }
  // The node tests keep their values in inputs, a few in raw_data (Constant attributes,
  // some inside subgraphs: If's branches); the test models and examples in initializers.
  EXPECT_GE(with_raw, 10u);
  EXPECT_GT(subgraph_raw, 0u);
}

// Each model truncated at every length and with bytes overwritten: parse_mapped refuses
// what protobuf refuses, and reads the same message from what it accepts.
TEST(ParseMapped, MatchesProtobufOnCorruptedBytes) {
  std::mt19937 rng(20261207);
  std::size_t accepted = 0, refused = 0;
  for (const char* name : {"subgraph.onnx", "attrs.onnx", "mlp.onnx"}) {
    const std::string bytes = read_file(fs::path(FPGUARD_MODEL_DATA) / name);
    ASSERT_FALSE(bytes.empty()) << name;
    const std::size_t step = std::max<std::size_t>(1, bytes.size() / 2000);
    for (std::size_t n = 0; n < bytes.size(); n += step) {
      const std::string cut = bytes.substr(0, n);
      const auto want = by_protobuf(cut);
      EXPECT_EQ(by_walker(cut), want) << name << " cut at " << n;
    }
    for (int i = 0; i < 3000; ++i) {
      std::string bad = bytes;
      const auto at = std::uniform_int_distribution<std::size_t>(0, bad.size() - 1)(rng);
      const unsigned char values[] = {0x00, 0xff, 0x80, 0x08, 0x0a, 0x12, 0x2a, 0x4a, 0x01};
      bad[at] = static_cast<char>(values[std::uniform_int_distribution<int>(0, 8)(rng)]);
      const auto want = by_protobuf(bad);
      (want ? accepted : refused) += 1;
      EXPECT_EQ(by_walker(bad), want)
          << name << " byte " << at << " = " << int(static_cast<unsigned char>(bad[at])) << " was "
          << int(static_cast<unsigned char>(bytes[at]));
    }
  }
  EXPECT_GT(accepted, 100u);
  EXPECT_GT(refused, 100u);
}

// A model of one Identity over a float32 initializer whose raw_data is preceded by a
// doc_string of `pad` bytes: the value's offset in the file moves with it.
std::string padded_model(int pad, std::vector<float>& values) {
  onnx::ModelProto mp;
  mp.set_ir_version(8);
  mp.add_opset_import()->set_version(17);
  mp.set_doc_string(std::string(static_cast<std::size_t>(pad), 'x'));
  auto* g = mp.mutable_graph();
  g->set_name("g");
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(static_cast<std::int64_t>(values.size()));
  w->set_raw_data(values.data(), values.size() * sizeof(float));
  auto* n = g->add_node();
  n->set_op_type("Identity");
  n->add_input("w");
  n->add_output("y");
  auto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return mp.SerializeAsString();
}

// The memory limit bounds what protobuf parses (float_data here), not the raw_data left in
// the buffer.
TEST(ParseMapped, WhatProtobufParsesIsCheckedAgainstTheMemoryLimit) {
  std::vector<float> values(3000, 1.5f);
  const std::string raw = padded_model(0, values);
  onnx::ModelProto typed_proto;
  ASSERT_TRUE(typed_proto.ParseFromString(raw));
  auto* w = typed_proto.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  for (float v : values) w->add_float_data(v);
  const std::string typed = typed_proto.SerializeAsString();
  const std::uint64_t before = memory_limit();
  set_memory_limit(8000);  // under the 12,000 bytes of float_data, over the rest
  onnx::ModelProto a, b;
  EXPECT_NO_THROW(model::parse_mapped(std::as_bytes(std::span(raw)), a, "raw.onnx"));
  try {
    model::parse_mapped(std::as_bytes(std::span(typed)), b, "typed.onnx");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "typed.onnx");
    EXPECT_NE(e.problem().find("memory limit"), std::string::npos) << e.what();
  }
  set_memory_limit(before);
}

// Values at an address fit for their type are views of the map; the others FileCopies
// (64 KiB and more: nothing read at load, the values read from the file when asked, and
// again after release_pages) or copies (smaller).
TEST(ParseMapped, LoadViewsTheFileWhereAlignedAndCopiesElsewhere) {
  const fs::path dir = fs::path(testing::TempDir()) / "fpguard_parse_mapped";
  fs::create_directories(dir);
  for (const std::size_t count : {3000, 20000}) {  // 12 KB, 80 KB
    std::vector<float> values(count);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 7.0f;
    int views = 0, file_copies = 0, copies = 0;
    for (int pad = 0; pad < 8; ++pad) {
      const fs::path file = dir / ("pad" + std::to_string(pad) + ".onnx");
      {
        const std::string bytes = padded_model(pad, values);
        std::ofstream(file, std::ios::binary)
            .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      }
      const model::Model m = model::load(file);
      ASSERT_EQ(m.graph.initializers.size(), 1u);
      const Tensor& t = m.graph.initializers[0].tensor;
      ASSERT_EQ(t.size(), values.size());
      const FileCopy* c = t.file_copy();
      if (c) {
        EXPECT_FALSE(c->held()) << pad;  // nothing read yet
      }
      EXPECT_EQ(std::memcmp(t.bytes(), values.data(), t.nbytes()), 0) << pad;
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.bytes()) % alignof(float), 0u) << pad;
      if (c) {
        EXPECT_TRUE(c->held());
        t.release_pages();
        EXPECT_FALSE(c->held());
        EXPECT_EQ(std::memcmp(t.bytes(), values.data(), t.nbytes()), 0) << pad;
      }
      (c ? file_copies : t.maps_file() ? views : copies) += 1;
      // The same from bytes in memory: always a copy.
      const model::Model b = model::load_from_bytes(read_file(file), "b.onnx", dir);
      EXPECT_FALSE(b.graph.initializers[0].tensor.maps_file());
      EXPECT_EQ(std::memcmp(b.graph.initializers[0].tensor.bytes(), values.data(), t.nbytes()), 0);
    }
    // Two paddings in eight put the values at a multiple of 4 bytes.
    EXPECT_EQ(views, 2) << count;
    EXPECT_EQ(count < 16384 ? copies : file_copies, 6) << count;
  }
  fs::remove_all(dir);
}

}  // namespace
