// The report layer: the one number policy, tables sized from content and fitted to a
// width, the wording of structured findings, and JSON written and read back (a diagnosis
// and a plan made by real checks of crafted graphs survive the round trip exactly).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fpguard/analysis.hpp"
#include "fpguard/error.hpp"
#include "fpguard/report.hpp"
#include "graph_util.hpp"
#include "report/json_tape.hpp"

namespace fpguard::report {
namespace {

using analysis::CheckOptions;
using analysis::Diagnosis;
using test::floats;
using test::scalar;
using Builder = test::GraphBuilder;

TEST(Numbers, OnePolicy) {
  EXPECT_EQ(num(65504), "65504");
  EXPECT_EQ(num(448), "448");
  EXPECT_EQ(num(0.5), "0.5");
  EXPECT_EQ(num(12.3456), "12.35");      // 4 significant digits
  EXPECT_EQ(num(1234.5678), "1235");     // ... never a decimal point alone
  EXPECT_EQ(num(0.001234), "0.001234");  // down to 1e-3 as plain decimals
  EXPECT_EQ(num(0.0009765625), "0.0009766");
  EXPECT_EQ(num(5.960464477539063e-08), "5.96e-08");
  EXPECT_EQ(num(1e20), "1e+20");
  EXPECT_EQ(num(-1e9), "-1e+09");
  EXPECT_EQ(num(0), "0");
  EXPECT_EQ(num(-0.0), "0");
  EXPECT_EQ(num(INFINITY), "inf");
  EXPECT_EQ(num(-INFINITY), "-inf");
  EXPECT_EQ(num(NAN), "nan");
  EXPECT_EQ(count(0), "0");
  EXPECT_EQ(count(999), "999");
  EXPECT_EQ(count(659831), "659,831");
  EXPECT_EQ(count(1234567), "1,234,567");
  EXPECT_EQ(fixed(0.99912345, 6), "0.999123");
  EXPECT_EQ(fixed(NAN, 6), "nan");
  EXPECT_EQ(bits(12.34), "12.3b");
  EXPECT_EQ(bits(INFINITY), "-");
  EXPECT_TRUE(number(NAN).is_null());
  EXPECT_TRUE(number(INFINITY).is_null());
  EXPECT_EQ(number(0.25).get<double>(), 0.25);
}

TEST(Table, WidthsFromContentAndFitted) {
  Table t({{"node"}, {"op"}, {"count", Align::right}});
  t.add({"/encoder/layer.0/attention/self/Softmax", "Softmax", "7"});
  t.add({"/a", "Add", "12345"});
  std::ostringstream wide;
  t.render(wide, 0);
  EXPECT_EQ(wide.str(),
            "  node                                     op       count\n"
            "  /encoder/layer.0/attention/self/Softmax  Softmax      7\n"
            "  /a                                       Add      12345\n");
  std::ostringstream narrow;
  t.render(narrow, 40);
  std::istringstream lines(narrow.str());
  std::string line;
  while (std::getline(lines, line)) {
    std::size_t cols = 0;
    for (const char c : line) cols += (c & 0xC0) != 0x80;
    EXPECT_LE(cols, 40u) << line;
  }
  EXPECT_NE(narrow.str().find("/encoder/la…lf/Softmax"), std::string::npos) << narrow.str();
  EXPECT_NE(narrow.str().find("12345"), std::string::npos);  // numbers are never cut
}

TEST(Table, ShortensOnlyWhenThatFits) {
  Table t({{"node"}, {"op"}, {"count", Align::right}});
  t.add({"/encoder/layer.0/attention/self/Softmax", "Softmax", "7"});
  // 20 columns cannot hold the other columns and 12 of the name: the name stays whole.
  std::ostringstream tiny;
  t.render(tiny, 20);
  EXPECT_NE(tiny.str().find("/encoder/layer.0/attention/self/Softmax"), std::string::npos)
      << tiny.str();
  // Exactly wide enough with the name at 12 columns: shortened to 12.
  std::ostringstream fits;
  t.render(fits, 2 + 12 + 2 + 7 + 2 + 5);
  EXPECT_NE(fits.str().find("/encod…ftmax"), std::string::npos) << fits.str();
}

TEST(Table, ShortensInTheMiddle) {
  EXPECT_EQ(shorten_middle("abcdefghij", 10), "abcdefghij");
  EXPECT_EQ(shorten_middle("abcdefghij", 5), "ab…ij");
  EXPECT_EQ(shorten_middle("abcdefghij", 6), "abc…ij");
  EXPECT_EQ(shorten_middle("αβγδεζ", 4), "αβ…ζ");  // characters, not bytes
}

TEST(Terminal, ColorModes) {
  EXPECT_EQ(parse_color("auto", "--color"), ColorMode::automatic);
  EXPECT_EQ(parse_color("never", "--color"), ColorMode::never);
  EXPECT_THROW(parse_color("sometimes", "--color sometimes"), Error);
  Terminal t;
  EXPECT_EQ(t.bad("FAIL"), "FAIL");  // no colour: the text unchanged
  t.color = true;
  EXPECT_EQ(t.bad("FAIL"), "\033[1;31mFAIL\033[0m");
}

CheckOptions fp16() {
  CheckOptions o;
  o.precision = parse_format("float16");
  o.threads = 1;
  return o;
}

// x -> Mul(x, 400) -> Pow(., 2) -> ReduceMean -> y: the Pow overflows float16 (its fixes:
// a scaling, a float32 island, bfloat16); a -1e9 mask constant is an origin of its own.
Builder overflowing_graph(const std::string& last_node = "mean") {
  Builder b({2, 4});
  b.init("big", scalar(400.0f)).init("two", scalar(2.0f));
  b.init("mask", floats({2, 4}, {0, 0, -1e9f, 0, 0, 0, 0, -1e9f}));
  b.node("scale", "Mul", {"x", "big"}, "s")
      .node("square", "Pow", {"s", "two"}, "q")
      .node("masked", "Add", {"q", "mask"}, "m")
      .node(last_node, "ReduceMean", {"m"}, "y")
      .output("y");
  return b;
}

const std::vector<std::vector<NamedValue>> kOverflowingSample = {
    {{"x", floats({2, 4}, {1, -2, 3, 0.5f, 0.25f, 1, -1, 2})}}};

Diagnosis overflowing_check() {
  return analysis::check(overflowing_graph().m, kOverflowingSample, fp16());
}

TEST(Wording, OriginsAndFixesFromTheirData) {
  const Diagnosis d = overflowing_check();
  const analysis::Origin* square = nullptr;
  for (const auto& o : d.origins)
    if (o.node == "square") square = &o;
  ASSERT_NE(square, nullptr);
  EXPECT_EQ(square->cause, analysis::Cause::square);
  // (3 * 400)^2 = 1,440,000 > 65504: the sentence carries the numbers. x * 400 is 400,
  // -800, 1200, 200, 100, 400, -400, 800: the square of 6 of the 8 passes 255.9^2 = 65504,
  // counted in its local run, as the worst-node table's "local inf/NaN".
  EXPECT_EQ(describe(*square).rfind("`square` (Pow) squares values up to 1200: 1.44e+06 > "
                                    "float16 max 65504 (6 of 8 values become inf/NaN in its "
                                    "local run)",
                                    0),
            0u)
      << describe(*square);
  EXPECT_EQ(square->affected, 6u);
  ASSERT_FALSE(square->fixes.empty());
  const analysis::Fix& scale = square->fixes.front();
  EXPECT_EQ(scale.kind, analysis::FixKind::scale);
  // 1.44e6 / 2^a^2 <= 32752 -> a = 3 (2^-6 * 1.44e6 = 22500).
  EXPECT_EQ(scale.exponent, -3);
  EXPECT_EQ(scale.degree, 2);
  EXPECT_EQ(scale.value, "s");
  EXPECT_NE(describe(scale).find("2^-3 = 0.125"), std::string::npos) << describe(scale);
  // Its result feeds an Add, not a normalisation: the outputs must be rescaled, by
  // 2^(3 * 2) (the square of the scaling undone).
  EXPECT_TRUE(scale.undo);
  EXPECT_NE(describe(scale).find("the outputs must be rescaled: multiply its result by 2^6"),
            std::string::npos)
      << describe(scale);
  bool keep = false;
  for (const auto& f : square->fixes)
    if (f.kind == analysis::FixKind::keep_fp32)
      keep = describe(f).find("--keep-fp32 square") != std::string::npos;
  EXPECT_TRUE(keep);
}

TEST(Json, DiagnosisRoundTripsExactly) {
  const Diagnosis d = overflowing_check();
  ASSERT_FALSE(d.origins.empty());
  ASSERT_FALSE(d.rules.empty());
  const Json j = to_json(d);
  EXPECT_EQ(j["schema_version"], kCheckSchema);
  const Diagnosis back = diagnosis_from_json(j, "check.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  // Through text too (as a file would hold it).
  EXPECT_EQ(to_json(diagnosis_from_json(Json::parse(j.dump(2)), "check.json")).dump(), j.dump());
  ASSERT_EQ(back.nodes.size(), d.nodes.size());
  for (std::size_t i = 0; i < d.nodes.size(); ++i)
    for (std::size_t k = 0; k < back.nodes[i].outputs.size(); ++k) {
      const auto& a = d.nodes[i].outputs[k].propagated;
      const auto& b = back.nodes[i].outputs[k].propagated;
      EXPECT_EQ(a.dd, b.dd);
      if (!std::isnan(a.cosine())) {
        EXPECT_EQ(a.cosine(), b.cosine());
      }
    }
  // The text renders the same from either.
  std::ostringstream x, y;
  render(x, d, {}, Terminal{});
  render(y, back, {}, Terminal{});
  EXPECT_EQ(x.str(), y.str());
}

// A scaled precision's check: the operand counts and the block_underflow origin (its
// operand, blocks, scaled_format fixes) read back exactly, in the check's JSON and in a part.
TEST(Json, ScaledOriginsRoundTrip) {
  const auto [b, x] = test::outlier_matmul();
  CheckOptions o = fp16();
  o.precision = parse_format("bfloat16");
  o.scaled = parse_scaled_format("mxfp4_e2m1");
  const Diagnosis d = analysis::check(b.m, {{{"x", x}}}, o);
  ASSERT_EQ(d.origins.size(), 1u);
  ASSERT_EQ(d.origins[0].kind, analysis::OriginKind::block_underflow);
  const Json j = to_json(d);
  EXPECT_EQ(j["origins"][0]["kind"], "block_underflow");
  EXPECT_EQ(j["origins"][0]["operand"], 0);
  EXPECT_EQ(j["origins"][0]["blocks_affected"], 2);
  EXPECT_EQ(j["origins"][0]["fixes"][0]["kind"], "keep_unscaled");
  EXPECT_EQ(j["origins"][0]["fixes"][0]["format"], "bfloat16");
  EXPECT_EQ(j["origins"][0]["fixes"][2]["kind"], "scaled_format");
  EXPECT_EQ(j["nodes"][0]["scaled_operands"][0]["swamped"], 62);
  const Diagnosis back = diagnosis_from_json(Json::parse(j.dump(2)), "check.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_EQ(back.origins[0].blocks, 4u);
  EXPECT_EQ(back.nodes[0].scaled_operands[1].blocks, 8u);
  CheckPart p{.model = {.path = "m.onnx", .sha256 = "ab"}, .total_sets = 1, .set_names = {"s0"}};
  p.checks.push_back({.options = o, .state = analysis::accumulate(b.m, {{{"x", x}}}, o, {0})});
  const Json pj = to_json(p);
  const CheckPart pb = check_part_from_json(Json::parse(pj.dump()), "part.json");
  EXPECT_EQ(to_json(pb).dump(), pj.dump());
  EXPECT_EQ(pb.checks[0].state.nodes[0].scaled_operands[0].swamped, 62u);
  Json bad = j;
  bad["nodes"][0]["scaled_operands"][0]["swamped"] = -1;
  EXPECT_THROW(diagnosis_from_json(bad, "check.json"), Error);
}

// A sequence output's elements and a length mismatch read back exactly, in the check's JSON
// and in a part; the text words the mismatch in one line; files without them read as outputs
// without elements.
TEST(Json, SequenceOutputsRoundTrip) {
  Diagnosis d = overflowing_check();
  analysis::OutputVerdict& v = d.outputs[0];
  v.elements = {{.name = v.name + "[0]", .cosine = 0.5, .nonfinite = 2, .pass = false},
                {.name = v.name + "[1]"}};
  v.mismatched_sets = 2;
  v.mismatch = analysis::OutputMismatch{.set = 3,
                                        .reference = {.kind = ValueKind::sequence, .length = 10},
                                        .emulated = {.kind = ValueKind::none}};
  const Json j = to_json(d);
  EXPECT_EQ(j["outputs"][0]["elements"][0]["name"], v.name + "[0]");
  EXPECT_EQ(j["outputs"][0]["mismatch"]["reference"]["length"], 10);
  EXPECT_EQ(j["outputs"][0]["mismatch"]["emulated"]["kind"], "empty optional");
  const std::string said =
      "the emulated run gives an empty optional where the reference gives a sequence of 10 "
      "(input set 3; 2 sets in all)";
  EXPECT_EQ(j["outputs"][0]["mismatch"]["message"], said);
  const Diagnosis back = diagnosis_from_json(Json::parse(j.dump(2)), "check.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_EQ(back.outputs[0].mismatch, v.mismatch);
  std::ostringstream text;
  render(text, back, {}, Terminal{});
  EXPECT_NE(text.str().find("its kind or length differs: " + said), std::string::npos);
  EXPECT_NE(text.str().find("FAIL " + v.name + "[0]:"), std::string::npos) << text.str();
  Json older = j;
  for (const char* k : {"elements", "mismatched_sets", "mismatch"}) older["outputs"][0].erase(k);
  const Diagnosis old = diagnosis_from_json(older, "check.json");
  EXPECT_TRUE(old.outputs[0].elements.empty() && !old.outputs[0].mismatch);
  CheckPart p{.model = {.path = "m.onnx", .sha256 = "ab"}, .total_sets = 4, .set_names = {"s3"}};
  p.checks.push_back(
      {.options = fp16(),
       .state = analysis::accumulate(overflowing_graph().m, kOverflowingSample, fp16(), {3})});
  analysis::CheckState& st = p.checks[0].state;
  st.verdicts[0].elements = {{.name = "y[0]", .nonfinite = 1}, {.name = "y[1]"}};
  st.element_cmp[0] = {{.count = 4, .overflow = 1, .dot = 0x1p-60}, {.count = 2}};
  st.verdicts[0].mismatched_sets = 1;
  st.verdicts[0].mismatch = v.mismatch;
  const Json pj = to_json(p);
  const CheckPart pb = check_part_from_json(Json::parse(pj.dump()), "part.json");
  EXPECT_EQ(to_json(pb).dump(), pj.dump());
  EXPECT_EQ(pb.checks[0].state.element_cmp[0][0].dot, 0x1p-60);
  EXPECT_EQ(pb.checks[0].state.verdicts[0].elements[0].nonfinite, 1u);
  EXPECT_EQ(pb.checks[0].state.verdicts[0].mismatch, v.mismatch);
}

// A sharded check's part reads back exactly (every number, inf and NaN included), and
// parts of other options are refused naming the option.
TEST(Json, CheckPartRoundTripsExactly) {
  CheckOptions o = fp16();
  o.atol = 0.5;
  o.fail_on = {analysis::OriginKind::nan};
  o.generated = {{.name = "x", .generator = {.distribution = "normal", .a = 0, .b = 2}}};
  CheckPart p{.model = {.path = "m.onnx", .sha256 = "ab"},
              .inputs = {.input = {"k=uniform:0:1"}, .inputs = "/sets", .seed = 3},
              .total_sets = 9,
              .shard = {.index = 1, .count = 3},
              .set_names = {"s1"},
              .first_set_sha256 = "cd"};
  p.checks.push_back(
      {.options = o,
       .state = analysis::accumulate(overflowing_graph().m, kOverflowingSample, o, {1})});
  p.checks[0].state.nodes[0].input_error = INFINITY;
  p.checks[0].state.output_cmp[0].lo.dot = 0x1p-60;
  // A comparison of nothing is null in the part; one whose only non-zero bit is a sign is
  // an array, and its -0.0 reads back.
  ASSERT_FALSE(p.checks[0].state.nodes[0].outputs.empty());
  analysis::TensorRecord& t0 = p.checks[0].state.nodes[0].outputs[0];
  t0.against_original = {};
  t0.local = {};
  t0.local.lo.rr = -0.0;
  p.checks[0].state.constants.push_back({.name = "c",
                                         .label = "c",
                                         .kind = "initializer",
                                         .size = 3,
                                         .overflow = 1,
                                         .min = -INFINITY,
                                         .max = 0x1.fffffep+127,
                                         .min_abs_nonzero = NAN,
                                         .sumsq = 0x1p-1074,
                                         .absmax = INFINITY,
                                         .nonfinite = true});
  for (int b = 0; b < 256; ++b) p.graph += static_cast<char>(b);  // 256: base64 padded "=="
  const Json j = to_json(p);
  EXPECT_EQ(j["schema_version"], kCheckPartSchema);
  const CheckPart back = check_part_from_json(Json::parse(j.dump()), "part.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_EQ(back.graph, p.graph);
  for (const std::string g : {"", "a", "ab", "abc", "abcd"}) {  // every padding
    CheckPart q = p;
    q.graph = g;
    EXPECT_EQ(check_part_from_json(to_json(q), "part.json").graph, g);
  }
  EXPECT_EQ(j["graph"].get<std::string>().substr(0, 8), "AAECAwQF");  // RFC 4648
  ASSERT_EQ(back.checks[0].state.constants.size(), p.checks[0].state.constants.size());
  EXPECT_EQ(back.checks[0].state.constants.back().sumsq, 0x1p-1074);
  EXPECT_TRUE(std::isnan(back.checks[0].state.constants.back().min_abs_nonzero));
  EXPECT_EQ(back.checks[0].state.nodes[0].input_error, INFINITY);
  EXPECT_EQ(back.checks[0].state.output_cmp[0].lo.dot, 0x1p-60);
  const Json& t0j = j["states"][0]["nodes"][0]["outputs"][0];
  EXPECT_TRUE(t0j["against_original"].is_null());
  ASSERT_TRUE(t0j["local"].is_array());
  EXPECT_EQ(t0j["local"].size(), 19u);
  EXPECT_TRUE(std::signbit(back.checks[0].state.nodes[0].outputs[0].local.lo.rr));
  EXPECT_EQ(back.checks[0].state.nodes[0].outputs[0].against_original.count, 0u);
  for (const char* bad : {R"([1, 2])", R"("x")", R"([-1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0])"}) {
    Json q = j;
    q["states"][0]["nodes"][0]["outputs"][0]["local"] = Json::parse(bad);
    EXPECT_THROW(check_part_from_json(q, "part.json"), Error) << bad;
  }
  Json odd = j;  // a histogram of [exponent, count] pairs
  odd["states"][0]["nodes"][0]["outputs"][0]["exponent_histogram"] = Json::parse("[3]");
  EXPECT_THROW(check_part_from_json(odd, "part.json"), Error);
  EXPECT_EQ(back.checks[0].options.fail_on, o.fail_on);
  EXPECT_EQ(back.checks[0].options.generated, o.generated);
  EXPECT_NO_THROW(require_same_check(j, "a.json", j, "b.json"));
  CheckPart other = back;
  other.checks[0].options.min_cosine = 0.99;
  try {
    require_same_check(j, "a.json", to_json(other), "b.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "b.json: not a part of the same check as a.json: its option \"min_cosine\" is 0.99, "
              "a.json's 0.999");
  }
  // A scaled precision's options (its other precision, margin and calibrated amax) too,
  // and parts calibrated differently are refused.
  CheckPart scaled = back;
  CheckOptions& so = scaled.checks[0].options;
  const Precision fp8 = parse_precision("fp8", "bfloat16");
  so.precision = fp8.format;
  so.scaled = fp8.scaled;
  so.amax_margin = 2;
  so.activation_amax = analysis::ActivationAmax{{{"mm", 0}, 0x1.8p+3}, {{"mm", 1}, 0x1p-149}};
  so.keep_unscaled = {"mm"};
  const Json sj = to_json(scaled);
  const CheckPart sb = check_part_from_json(Json::parse(sj.dump()), "part.json");
  EXPECT_EQ(to_json(sb).dump(), sj.dump());
  EXPECT_EQ(sb.checks[0].options.scaled->name, fp8.scaled->name);
  EXPECT_EQ(sb.checks[0].options.precision.name, "bfloat16");
  EXPECT_EQ(sb.checks[0].options.amax_margin, 2);
  EXPECT_EQ(sb.checks[0].options.activation_amax, so.activation_amax);
  EXPECT_EQ(sb.checks[0].options.keep_unscaled, so.keep_unscaled);
  CheckPart recal = sb;
  recal.checks[0].options.activation_amax->at({"mm", 0}) = 13;
  EXPECT_THROW(require_same_check(sj, "a.json", to_json(recal), "b.json"), Error);
  CheckPart scaled_mm = sb;  // the GEMM quantized in one part, not in the other
  scaled_mm.checks[0].options.keep_unscaled.clear();
  EXPECT_THROW(require_same_check(sj, "a.json", to_json(scaled_mm), "b.json"), Error);
  Json bad = j;
  bad["states"][0]["nodes"][0]["input_error"] = "lots";
  EXPECT_THROW(check_part_from_json(bad, "part.json"), Error);
  for (const char* not64 : {"abc", "ab=c", "a===", "ab$d"}) {
    bad = j;
    bad["graph"] = not64;
    EXPECT_THROW(check_part_from_json(bad, "part.json"), Error) << not64;
  }
}

// The tape a part is read through (report/json_tape.hpp) holds what nlohmann's DOM parser
// reads, from JSON text and from CBOR: every kind of value, nesting, escapes, duplicate
// keys (the last kept), the extremes of the integer kinds; and element, member and
// iterator access agree with the DOM's. Text that is not JSON is an Error naming the file.
TEST(Json, TapeReadsWhatTheDomReads) {
  using detail::JsonTape;
  for (const char* text :
       {R"({"a": [1, -2, 3.5, "x", null, true, false, [], {}], "b": {"c": [[1], [2, [3]]]}})",
        R"([18446744073709551615, -9223372036854775808, 1e308, -0.0, 5e-324, "\u00e9\n\"\t"])",
        R"({"k": 1, "k": 2, "z": {"k": [3]}})", R"({"k": 1, "k": null})",
        R"([{"a": [1], "a": null}, -0, 18446744073709551616, -9223372036854775809])",
        "\xEF\xBB\xBF[1]", R"("alone")", "7", "[]", "{}",
        R"([{"name": "n", "outputs": [{"v": [1, 2, 3]}, {"v": []}]}, {"name": "m"}])"}) {
    const Json want = Json::parse(text);
    const JsonTape tape = JsonTape::parse(text, "doc.json", "a test document");
    EXPECT_EQ(detail::to_dom(tape.root()).dump(), want.dump()) << text;
    const std::vector<std::uint8_t> cbor = Json::to_cbor(want);
    const JsonTape from_cbor = JsonTape::parse_cbor(
        std::string_view(reinterpret_cast<const char*>(cbor.data()), cbor.size()), "rank 1",
        "check states");
    EXPECT_EQ(detail::to_dom(from_cbor.root()).dump(), want.dump()) << text;
    const detail::JsonNode& root = tape.root();
    if (!want.is_object()) {
      EXPECT_EQ(root.size(), want.size()) << text;
    }
    if (want.is_array()) {
      std::size_t i = 0;
      for (const auto& e : root) {
        EXPECT_EQ(detail::to_dom(e).dump(), want[i].dump()) << text;
        EXPECT_EQ(detail::to_dom(root[i]).dump(), want[i].dump()) << text;
        ++i;
      }
      EXPECT_EQ(i, want.size());
    }
    if (want.is_object())
      for (auto it = want.begin(); it != want.end(); ++it) {
        ASSERT_TRUE(root.contains(it.key())) << text;
        EXPECT_EQ(detail::to_dom(*root.find(it.key())).dump(), it.value().dump()) << text;
      }
  }
  // Nesting past simdjson's depth (1,024) is read as well.
  const std::string deep = std::string(3000, '[') + std::string(3000, ']');
  EXPECT_EQ(detail::to_dom(JsonTape::parse(deep, "d", "x").root()).dump(),
            Json::parse(deep).dump());
  const JsonTape t = JsonTape::parse(R"({"n": 3, "u": 18446744073709551615, "i": -4})", "d", "x");
  EXPECT_TRUE(t.root().find("n")->is_number_unsigned());
  EXPECT_EQ(t.root().find("u")->get<std::uint64_t>(), UINT64_MAX);
  EXPECT_TRUE(t.root().find("i")->is_number_integer());
  EXPECT_FALSE(t.root().find("i")->is_number_unsigned());
  EXPECT_EQ(t.root().find("i")->get<std::int64_t>(), -4);
  EXPECT_FALSE(t.root().contains("m"));
  // An object's members as written: a duplicate key counts, find() gives the last.
  const JsonTape dup = JsonTape::parse(R"({"k": 1, "k": 2})", "d", "x");
  EXPECT_EQ(dup.root().size(), 2u);
  EXPECT_EQ(dup.root().find("k")->get<int>(), 2);
  for (const char* bad : {"", "{", "[1,]", R"({"a" 1})", "1 2", "nul", "1e999"}) {
    try {
      (void)JsonTape::parse(bad, "doc.json", "a test document");
      ADD_FAILURE() << "no error: " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "doc.json: not JSON (expected a test document)") << bad;
    }
  }
}

// An amax file (fpguard calibrate) reads back exactly; another kind of file is refused.
TEST(Json, AmaxFileRoundTripsExactly) {
  const AmaxFile a{.model = {.path = "m.onnx", .sha256 = "ab"},
                   .data = {{.path = "/m/w.bin", .sha256 = "ef"}},
                   .reference = "float64",
                   .inputs = {.input = {"k=uniform:0:1"}, .inputs = "/sets", .seed = 3},
                   .total_sets = 9,
                   .sets = {1, 4, 7},
                   .amax = {{{"a/b", 0}, 0x1.fffffep+127}, {{"c", 2}, 0x1p-149}}};
  namespace fs = std::filesystem;
  const fs::path f = fs::temp_directory_path() / ("fpguard_amax_" + std::to_string(::getpid()));
  {
    std::ofstream out(f);
    out << to_json(a).dump(1);
  }
  const AmaxFile b = read_amax_file(f);
  EXPECT_EQ(to_json(b).dump(), to_json(a).dump());
  EXPECT_EQ(b.amax, a.amax);
  EXPECT_EQ(b.sets, a.sets);
  EXPECT_EQ(b.inputs, a.inputs);
  EXPECT_EQ(b.data, a.data);
  {
    std::ofstream out(f);
    out << R"({"schema_version": 1, "kind": "fpguard check part"})";
  }
  EXPECT_THROW(read_amax_file(f), Error);
  fs::remove(f);
}

// The verdict's data (generated inputs, absorbed origins, fail_on, the new output errors,
// errors with no value) survives the round trip, and the text says the same from either.
TEST(Json, VerdictDataRoundTrips) {
  Diagnosis d = overflowing_check();
  d.generated = {{.name = "x", .generator = {.a = -1, .b = 1}, .by_default = true},
                 {.name = "z", .generator = {"normal", 0, 2}, .by_default = false}};
  d.fail_on = {analysis::OriginKind::overflow, analysis::OriginKind::nan};
  d.absorbed = {"square"};
  d.outputs[0].max_abs_error = NAN;  // no finite pair
  d.outputs[0].rel_rms_error = NAN;
  const Json j = to_json(d);
  EXPECT_EQ(j["inputs"], "generated");
  EXPECT_EQ(j["generated_inputs"][1]["std"], 2);
  EXPECT_EQ(j["fail_on"], Json({"overflow", "nan"}));
  EXPECT_EQ(j["absorbed"], Json({"square"}));
  EXPECT_TRUE(j["outputs"][0]["max_abs_error"].is_null());
  const Diagnosis back = diagnosis_from_json(Json::parse(j.dump(2)), "check.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_TRUE(std::isnan(back.outputs[0].max_abs_error));
  EXPECT_EQ(back.generated, d.generated);
  EXPECT_EQ(back.absorbed, d.absorbed);
  std::ostringstream x, y;
  render(x, d, {}, Terminal{});
  render(y, back, {}, Terminal{});
  EXPECT_EQ(x.str(), y.str());
  EXPECT_NE(x.str().find("max abs error n/a"), std::string::npos) << x.str();
  // "inputs" must agree with the list.
  Json k = j;
  k["inputs"] = "given";
  EXPECT_THROW(diagnosis_from_json(k, "check.json"), Error);
  Json w = j;
  w["fail_on"] = Json({"accuracy"});
  EXPECT_THROW(diagnosis_from_json(w, "check.json"), Error);
}

// Body-node fields (parent, runs, iterations) and first_trouble are written and read back
// unchanged, and older files without them still read.
TEST(Json, BodyNodeFieldsAndFirstTroubleRoundTrip) {
  Builder b({2});
  b.node("n", "Relu", {"x"}, "y").output("y");
  Diagnosis d = analysis::check(b.m, {{{"x", floats({2}, {1, 2})}}}, {});
  ASSERT_EQ(d.nodes.size(), 1u);
  d.nodes[0].parent = "If_0";
  d.nodes[0].runs = 3;
  d.nodes[0].first_overflow_iteration = {4, 1};
  d.pass = false;
  d.first_trouble = analysis::FirstTrouble{
      .tensor = "If_0/then_branch/y", .node = "If_0/then_branch/n", .op_type = "Relu"};
  const Json j = to_json(d);
  EXPECT_EQ(j["nodes"][0]["first_overflow_iteration"], Json({4, 1}));
  EXPECT_EQ(j["first_trouble"]["tensor"], "If_0/then_branch/y");
  const Diagnosis back = diagnosis_from_json(Json::parse(j.dump(2)), "check.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  Json old = j;
  old.erase("first_trouble");
  for (const char* k : {"parent", "runs", "first_overflow_iteration"}) old["nodes"][0].erase(k);
  const Diagnosis older = diagnosis_from_json(old, "check.json");
  EXPECT_FALSE(older.first_trouble);
  EXPECT_EQ(older.nodes[0].runs, 0u);
}

// The reference-model fields (reference_model, a tensor's original and against_original) and
// the type rules' types are written and read back unchanged; older files without them read.
TEST(Json, ReferenceModelFieldsRoundTrip) {
  Builder b({2});
  b.node("n", "Relu", {"x"}, "y").output("y");
  Diagnosis d = analysis::check(b.m, {{{"x", floats({2}, {1, 2})}}}, {});
  ASSERT_EQ(d.nodes.size(), 1u);
  d.reference_model = "original.onnx";
  auto& t = d.nodes[0].outputs[0];
  t.original = "y_orig";
  t.against_original = t.propagated;
  t.against_original.overflow = 1;
  analysis::RuleFinding r;
  r.id = "cast-chain";
  r.node = "n";
  r.types = {"FLOAT", "FLOAT16", "FLOAT"};
  r.margin_bits = NAN;
  d.rules.push_back(r);
  const Json j = to_json(d);
  EXPECT_EQ(j["nodes"][0]["outputs"][0]["original"], "y_orig");
  EXPECT_EQ(j["nodes"][0]["outputs"][0]["against_original"]["overflow"], 1);
  EXPECT_EQ(j["rules"].back()["types"], Json({"FLOAT", "FLOAT16", "FLOAT"}));
  const Diagnosis back = diagnosis_from_json(Json::parse(j.dump(2)), "check.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_TRUE(std::isnan(back.rules.back().margin_bits));
  Json old = j;
  old.erase("reference_model");
  for (const char* k : {"original", "against_original"}) old["nodes"][0]["outputs"][0].erase(k);
  old["rules"].back().erase("types");
  const Diagnosis older = diagnosis_from_json(old, "check.json");
  EXPECT_EQ(older.reference_model, "");
  EXPECT_EQ(older.nodes[0].outputs[0].original, "");
  EXPECT_TRUE(older.rules.back().types.empty());
}

// Comparisons over no finite pair: their errors are null, read back as no error.
TEST(Json, NodeErrorsWithoutFinitePairsAreNull) {
  Builder b({2});
  b.init("c", scalar(3e4f));
  b.node("mul_big", "Mul", {"x", "c"}, "a").node("relu_after", "Relu", {"a"}, "y").output("y");
  const Diagnosis d = analysis::check(b.m, {{{"x", floats({2}, {4, 8})}}}, [] {
    CheckOptions o;
    o.precision = parse_format("float16");
    return o;
  }());
  const Json j = to_json(d);
  const Json& boom = j["nodes"][0]["outputs"][0];
  EXPECT_EQ(boom["local"]["finite"], 0);
  for (const char* k :
       {"max_abs_error", "max_rel_error", "mean_rel_error", "rel_rms_error", "cosine", "snr_db"}) {
    EXPECT_TRUE(boom["local"][k].is_null()) << k;
    EXPECT_TRUE(boom["propagated"][k].is_null()) << k;
  }
  EXPECT_EQ(to_json(diagnosis_from_json(j, "check.json")).dump(), j.dump());
  // The text's worst-node table counts them instead: mul_big overflowed on its own
  // (local), relu_after inherited it (nothing compared locally).
  std::ostringstream out;
  render(out, d, {}, Terminal{});
  const std::string text = out.str();
  const auto row = [&](const std::string& name) {
    const auto at = text.find(name + " ");
    return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
  };
  EXPECT_NE(row("mul_big").find("2 non-finite"), std::string::npos) << text;
  EXPECT_NE(row("relu_after").find("n/a"), std::string::npos) << text;
  EXPECT_NE(row("relu_after").find("2 non-finite"), std::string::npos) << text;
}

TEST(Wording, ThePlannersStepsFromTheirData) {
  using analysis::PlanStep, analysis::PlanStepKind;
  EXPECT_EQ(describe(PlanStep{}), "the model as it is");
  EXPECT_EQ(describe(PlanStep{.kind = PlanStepKind::scaling, .node = "/Pow"}),
            "scaling the input of /Pow");
  EXPECT_EQ(describe(PlanStep{.kind = PlanStepKind::after_scaling}), "after scaling");
  EXPECT_EQ(describe(PlanStep{.kind = PlanStepKind::growing, .fp32 = 1}), "1 node in float32");
  EXPECT_EQ(describe(PlanStep{.kind = PlanStepKind::growing, .fp32 = 3}), "3 nodes in float32");
  EXPECT_EQ(describe(PlanStep{.kind = PlanStepKind::pruning, .node = "/Add"}), "without /Add");
}

TEST(Wording, TheVerdictSaysWhatItHoldsUnder) {
  Diagnosis d;
  EXPECT_EQ(verdict_qualifiers(d), "");
  d.generated = {{.name = "image", .generator = {.a = -1, .b = 1}}};
  EXPECT_EQ(verdict_qualifiers(d), "(generated inputs: image uniform [-1, 1]; ranges unverified)");
  d.origins.resize(2);
  d.origins[0].node = "/ln1/Pow";
  d.origins[1].node = "/ln2/Pow";
  d.absorbed = {"/ln1/Pow", "/ln2/Pow"};
  EXPECT_EQ(verdict_qualifiers(d),
            "(generated inputs: image uniform [-1, 1]; ranges unverified) "
            "(2 overflows absorbed: /ln1/Pow, /ln2/Pow)");
  d.generated.clear();
  d.fail_on = {analysis::OriginKind::overflow};
  EXPECT_EQ(verdict_qualifiers(d),
            "(2 overflows absorbed, failed by --fail-on overflow: /ln1/Pow, /ln2/Pow)");
}

// Two origins (the mask constant, the square): one line fixes both, and its --keep-fp32
// list, the union of theirs, makes the check pass.
TEST(Wording, OneLineFixesEveryOrigin) {
  const auto& sample = kOverflowingSample;
  const Diagnosis d = analysis::check(overflowing_graph().m, sample, fp16());
  ASSERT_EQ(d.origins.size(), 2u);
  const CombinedFix c = combine_fixes(d);
  EXPECT_EQ(c.origins, 2u);
  // The square's region (square, the Add reading its squares, the mean of those) and the
  // mask's reader (masked), in topological order.
  EXPECT_EQ(c.keep_fp32, (std::vector<std::string>{"square", "masked", "mean"}));
  ASSERT_EQ(c.scalings.size(), 1u);  // the square's; the mask has none
  EXPECT_EQ(c.scalings[0].value, "s");
  EXPECT_EQ(c.keep_rest, std::vector<std::string>{"masked"});
  const std::string line = describe(c);
  EXPECT_EQ(line.rfind("fix all 2 at once: keep 3 nodes in float32 (--keep-fp32 "
                       "square,masked,mean); or scale `s` by 2^-3 for `square` (exact), then "
                       "rescale the outputs as each fix says, and keep the rest in float32 "
                       "(--keep-fp32 masked); `fpguard plan`",
                       0),
            0u)
      << line;
  CheckOptions keep = fp16();
  keep.keep_fp32 = {c.keep_fp32.begin(), c.keep_fp32.end()};
  EXPECT_TRUE(analysis::check(overflowing_graph().m, sample, keep).pass);
  // One origin: its own fixes say it all.
  Diagnosis one = d;
  one.origins.resize(1);
  EXPECT_EQ(describe(combine_fixes(one)), "");
  std::ostringstream out;
  render(out, d, {}, Terminal{});
  EXPECT_NE(out.str().find("\n  " + line + "\n"), std::string::npos) << out.str();
}

// A FAIL without origin says what to do next: the nodes of highest damage, and plan.
TEST(Wording, AFailWithoutOriginSaysWhatNext) {
  Diagnosis d;
  d.pass = false;
  EXPECT_EQ(next_steps(d).rfind("no single node starts the failure", 0), 0u);
  for (const auto& [name, damage] : std::vector<std::pair<std::string, double>>{
           {"a", 1e-4}, {"b", 3e-4}, {"c", 2e-4}, {"d", 5e-5}}) {
    analysis::NodeRecord n;
    n.name = name, n.op_type = "Mul", n.emulated = true, n.damage = damage;
    n.outputs.push_back({});
    n.outputs.back().floating = true;
    d.nodes.push_back(n);
  }
  const std::string next = next_steps(d);
  EXPECT_NE(next.find("the most damaging (worst nodes below): `b` (0.0003), `c` (0.0002), `a` "
                      "(0.0001); next: `fpguard plan`"),
            std::string::npos)
      << next;
  std::ostringstream out;
  render(out, d, {}, Terminal{});
  EXPECT_NE(out.str().find("Origins (where the trouble starts):\n  none: " + next + "\n"),
            std::string::npos)
      << out.str();
  // A pass, or a failure with an origin, has none.
  d.origins.resize(1);
  EXPECT_EQ(next_steps(d), "");
  d.origins.clear();
  d.pass = true;
  EXPECT_EQ(next_steps(d), "");
}

// The text lists the major findings and counts the minor ones; the JSON keeps all, with
// their severity, and reads them back.
TEST(Wording, MinorFindingsAreCounted) {
  Diagnosis d = overflowing_check();
  const std::size_t before = d.rules.size();
  analysis::RuleFinding minor;
  minor.id = "constant-underflow";
  minor.node = "tiny_weights";
  minor.op_type = "initializer";
  minor.format = "float16";
  minor.count = 2, minor.total = 100000, minor.parameter = 1e-9, minor.limit = 5.96e-8;
  minor.margin_bits = NAN, minor.norm_share = 1e-11;
  minor.severity = analysis::Severity::minor;
  d.rules.push_back(minor);
  minor.node = "more_tiny_weights";
  d.rules.push_back(minor);
  std::ostringstream out;
  render(out, d, {}, Terminal{});
  const std::string text = out.str();
  EXPECT_EQ(text.find("tiny_weights"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  and 2 more findings below the threshold (a margin of 2^4 or more, "
                      "under 0.1% of a tensor's values and of its L2 norm); --json has all\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Risk rules (" + std::to_string(before + 2) + ";"), std::string::npos);
  const Json j = to_json(d);
  EXPECT_EQ(j["rules"].size(), before + 2);
  EXPECT_EQ(j["rules"][before]["severity"], "minor");
  EXPECT_TRUE(j["rules"][before]["margin_bits"].is_null());
  const Diagnosis back = diagnosis_from_json(Json::parse(j.dump()), "check.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_EQ(back.rules[before].severity, analysis::Severity::minor);
  // Only minor ones: the count alone.
  d.rules.erase(d.rules.begin(), d.rules.begin() + static_cast<std::ptrdiff_t>(before));
  std::ostringstream only;
  render(only, d, {}, Terminal{});
  EXPECT_NE(only.str().find("\n  2 findings below the threshold"), std::string::npos) << only.str();
}

TEST(Json, BadDiagnosisNamesTheField) {
  Json j = to_json(overflowing_check());
  j["nodes"][1].erase("precision");
  try {
    diagnosis_from_json(j, "check.json");
    FAIL() << "accepted a node without a precision";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "check.json");
    EXPECT_EQ(e.problem(), "\"nodes\"[1].\"precision\" is missing");
  }
  Json k = to_json(overflowing_check());
  k["origins"][0]["kind"] = "explosion";
  EXPECT_THROW(diagnosis_from_json(k, "check.json"), Error);
  Json v = to_json(overflowing_check());
  v["schema_version"] = 1;
  EXPECT_THROW(diagnosis_from_json(v, "check.json"), Error);
}

TEST(Json, PlanWrittenAndReadBack) {
  Builder b({4});
  b.init("big", scalar(3e4f));  // in range: 4 * 3e4 overflows at the Mul
  b.node("boom", "Mul", {"x", "big"}, "a").node("shift", "Add", {"a", "x"}, "s");
  b.node("act", "Relu", {"s"}, "y").output("y");
  analysis::PlanOptions o;
  o.check = fp16();
  analysis::Plan p = analysis::plan(b.m, {{{"x", floats({4}, {1, 2, -3, 4})}}}, o);
  Json j = to_json(p);
  EXPECT_EQ(j["schema_version"], kPlanSchema);
  EXPECT_EQ(j["islands"][0]["why"]["kind"], "origin");
  EXPECT_EQ(j["islands"][0]["reason"], "overflow origin boom");
  EXPECT_TRUE(j["inputs"].is_null());  // the caller recorded none
  analysis::PlanFile back = parse_plan(j.dump(), "plan.json");
  EXPECT_EQ(back.precision, "float16");
  EXPECT_EQ(back.fp32_nodes, p.fp32_nodes);
  EXPECT_TRUE(back.unscaled_nodes.empty());
  EXPECT_FALSE(back.inputs);
  // A scaled plan's unscaled GEMMs come back in order; a plan.json of before has none.
  p.unscaled_nodes = {"shift", "boom"};
  j = to_json(p);
  EXPECT_EQ(parse_plan(j.dump(), "plan.json").unscaled_nodes, p.unscaled_nodes);
  j.erase("unscaled_nodes");
  EXPECT_TRUE(parse_plan(j.dump(), "plan.json").unscaled_nodes.empty());
  j["unscaled_nodes"] = {"boom", 3};
  try {
    parse_plan(j.dump(), "plan.json");
    ADD_FAILURE() << "a malformed \"unscaled_nodes\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.problem(), "\"unscaled_nodes\" holds a non-string");
  }
  p.unscaled_nodes.clear();
  // The inputs it was made with come back exactly (a seed beyond 2^53 included).
  p.inputs = inputs::Provenance{
      .options = {.input = {"x=/data/x.npy", "m=normal:0:2"},
                  .inputs = "/data/sets",
                  .shape = {"x=4"},
                  .seed = (std::uint64_t{1} << 63) + 1},
      .samples = 3,
      .generated = {{.name = "k"},
                    {.name = "m", .generator = {"normal", 0, 2}, .by_default = false}}};
  j = to_json(p);
  EXPECT_EQ(j["inputs"]["generated"][0]["generator"], "uniform:0:0");
  EXPECT_EQ(j["inputs"]["generated"][1]["generator"], "normal:0:2");
  back = parse_plan(j.dump(), "plan.json");
  EXPECT_EQ(back.inputs, p.inputs);
  p.inputs->options.inputs = "";  // no directory: null
  j = to_json(p);
  EXPECT_TRUE(j["inputs"]["inputs"].is_null());
  EXPECT_EQ(parse_plan(j.dump(), "plan.json").inputs, p.inputs);
  // A subset of the sets, recorded only when chosen.
  EXPECT_FALSE(j["inputs"].contains("max_sets"));
  p.inputs->options.sample_sets = 40;
  j = to_json(p);
  EXPECT_EQ(j["inputs"]["sample_sets"], 40);
  EXPECT_EQ(parse_plan(j.dump(), "plan.json").inputs, p.inputs);
  // A plan.json of before: no "inputs" at all.
  j.erase("inputs");
  EXPECT_FALSE(parse_plan(j.dump(), "plan.json").inputs);
  j["inputs"] = {{"input", "x=a.npy"}};
  try {
    parse_plan(j.dump(), "plan.json");
    ADD_FAILURE() << "a malformed \"inputs\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.problem(), "\"inputs\".\"input\" is not an array");
  }
  EXPECT_THROW(parse_plan("{\"schema_version\": 3}", "plan.json"), Error);
  EXPECT_THROW(parse_plan("[]", "plan.json"), Error);
}

// Which formats convert writes is the library's (rewrite::can_convert): a plan in another
// format prints the quantization path instead of a convert command convert would refuse,
// and a plan that scales warns beside its --emit lists.
TEST(Text, PlanDeploymentFollowsWhatConvertWrites) {
  analysis::Plan p;
  p.model = "m.onnx";
  p.fp32_nodes = {"/Pow"};
  const PlanText text{.model_arg = "m.onnx", .plan_file = "plan.json"};
  const Terminal plain;
  for (const char* f : {"float16", "bfloat16", "float8_e4m3fn", "float4_e2m1fn"}) {
    p.precision = f;
    std::ostringstream out;
    render(out, p, text, plain);
    const bool converts = std::string(f).find("float8") == std::string::npos &&
                          std::string(f).find("float4") == std::string::npos;
    EXPECT_EQ(out.str().find("fpguard convert m.onnx --precision") != std::string::npos, converts)
        << out.str();
    EXPECT_EQ(out.str().find("quantization tool") != std::string::npos, !converts) << out.str();
  }
  EXPECT_EQ(emit_warning(p, text), "");
  p.scaled = {{"/Pow", "x", 2}};
  EXPECT_NE(emit_warning(p, text).find("fpguard convert m.onnx --plan plan.json --scale-only"),
            std::string::npos)
      << emit_warning(p, text);
  std::ostringstream fp4;
  render(fp4, p, text, plain);
  EXPECT_NE(fp4.str().find("rescale first: fpguard convert m.onnx --plan plan.json --scale-only"),
            std::string::npos)
      << fp4.str();
}

// ---- Netron annotations ----------------------------------------------------------------

std::string meta(const model::Node& n, const std::string& key) {
  for (const auto& [k, v] : n.metadata)
    if (k == key) return v;
  return "(absent)";
}

// overflowing_check()'s graph with its last node unnamed (display name "ReduceMean_3")
// and a node carrying its own doc_string and metadata.
Builder annotated_graph() {
  Builder b = overflowing_graph("");
  auto& scale = b.m.graph.nodes[0];
  scale.doc_string = "the user's words";
  scale.metadata = {{"owner", "me"}, {"fpguard.stale", "1"}};
  return b;
}

const auto& kAnnotateSample = kOverflowingSample;

TEST(Annotate, EachNodeGetsItsNumbersAndOrigins) {
  const model::Model m = annotated_graph().m;
  const Diagnosis d = analysis::check(m, kAnnotateSample, fp16());
  const model::Model a = annotate(m, d);
  const auto& nodes = a.graph.nodes;
  ASSERT_EQ(d.nodes.size(), 4u);
  EXPECT_EQ(d.nodes[3].name, "ReduceMean_3");
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& r = d.nodes[i];
    const auto& n = nodes[r.index];  // the graph is in topological order
    EXPECT_EQ(meta(n, "fpguard.precision"), r.precision) << r.name;
    EXPECT_EQ(meta(n, "fpguard.headroom_bits"), num(r.outputs[0].headroom_bits)) << r.name;
    EXPECT_EQ(meta(n, "fpguard.overflow_local"),
              std::to_string(r.outputs[0].local.overflow + r.outputs[0].local.nan));
    EXPECT_EQ(meta(n, "fpguard.overflow_propagated"),
              std::to_string(r.outputs[0].propagated.overflow + r.outputs[0].propagated.nan));
    EXPECT_EQ(meta(n, "fpguard.damage"), std::isinf(r.damage) ? "inf/NaN" : num(r.damage));
    // Errors over the values finite in both runs: n/a where there is none.
    const auto error = [](const analysis::Comparison& c) {
      return c.finite ? num(c.nrmse()) : "n/a";
    };
    EXPECT_EQ(meta(n, "fpguard.local_error"), error(r.outputs[0].local));
    EXPECT_EQ(meta(n, "fpguard.propagated_error"), error(r.outputs[0].propagated));
    EXPECT_EQ(meta(n, "fpguard.plan"), "(absent)");
  }
  EXPECT_EQ(nodes[3].name, "");  // unnamed nodes stay unnamed
  // The Pow origin on its node; the mask constant's on the node that reads it.
  EXPECT_EQ(meta(nodes[1], "fpguard.origin"), "overflow (square)");
  EXPECT_EQ(meta(nodes[2], "fpguard.origin"), "overflow (constant 'mask')");
  EXPECT_EQ(meta(nodes[0], "fpguard.origin"), "(absent)");
  // The origin's count is the node's local count, the same number in both places.
  for (const auto& o : d.origins)
    if (o.node == "square") {
      EXPECT_EQ(meta(nodes[1], "fpguard.overflow_local"), std::to_string(o.affected));
    }
  for (const auto& o : d.origins) {
    const auto& n = nodes[o.node == "square" ? 1 : 2];
    EXPECT_NE(n.doc_string.find("origin: " + describe(o)), std::string::npos) << n.doc_string;
    for (const auto& f : o.fixes)
      EXPECT_NE(n.doc_string.find("fix: " + describe(f)), std::string::npos) << n.doc_string;
  }
  // The node's own doc_string and keys stay; stale fpguard keys go.
  EXPECT_EQ(nodes[0].doc_string.rfind("the user's words\n\n[fpguard] check in float16", 0), 0u);
  EXPECT_EQ(meta(nodes[0], "owner"), "me");
  EXPECT_EQ(meta(nodes[0], "fpguard.stale"), "(absent)");
  const std::vector<std::pair<std::string, std::string>> model_meta = {
      {"fpguard.precision", "float16"}, {"fpguard.verdict", "fail"}};
  EXPECT_EQ(a.metadata, model_meta);
  EXPECT_TRUE(m.graph.nodes[1].metadata.empty());  // the input is left alone
}

TEST(Annotate, NothingElseChangesAndAgainReplaces) {
  const model::Model m = annotated_graph().m;
  const Diagnosis d = analysis::check(m, kAnnotateSample, fp16());
  const model::Model a = annotate(m, d);
  const model::Model twice = annotate(a, d);
  EXPECT_EQ(model::save_to_bytes(twice), model::save_to_bytes(a));
  // Without what annotate writes, the same model byte for byte.
  model::Model bare = a, orig = m;
  for (auto* x : {&bare, &orig}) {
    x->metadata.clear();
    for (auto& n : x->graph.nodes) n.metadata.clear(), n.doc_string.clear();
  }
  EXPECT_EQ(model::save_to_bytes(bare), model::save_to_bytes(orig));
}

TEST(Annotate, PlanSaysFloat32AndWhy) {
  Builder b({4});
  b.init("big", scalar(3e4f));  // in range: 4 * 3e4 overflows at the Mul
  b.node("boom", "Mul", {"x", "big"}, "a").node("", "Add", {"a", "x"}, "s");
  b.node("act", "Relu", {"s"}, "y").output("y");
  const model::Model& m = b.m;
  const std::vector<std::vector<NamedValue>> sample = {{{"x", floats({4}, {1, 2, -3, 4})}}};
  analysis::PlanOptions o;
  o.check = fp16();
  model::Model named = m;  // as the CLI plans (analysis::name_nodes)
  analysis::name_nodes(named);
  const analysis::Plan p = analysis::plan(named, sample, o);
  ASSERT_FALSE(p.fp32_nodes.empty());
  const Diagnosis d = analysis::check(m, sample, fp16());
  const model::Model a = annotate(m, d, &p);
  const auto names = analysis::display_names(m);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto it = p.reasons.find(names[i]);
    const std::string want =
        it != p.reasons.end() ? "float32: " + describe(it->second, "float16") : "float16";
    EXPECT_EQ(meta(a.graph.nodes[i], "fpguard.plan"), want) << names[i];
    EXPECT_NE(a.graph.nodes[i].doc_string.find("plan: " + want), std::string::npos);
  }
}

TEST(Annotate, ADiagnosisOfAnotherModelIsRefused) {
  const model::Model m = annotated_graph().m;
  Diagnosis d = analysis::check(m, kAnnotateSample, fp16());
  d.nodes[1].name = "sqaure";
  EXPECT_THROW(annotate(m, d), Error);
}

}  // namespace
}  // namespace fpguard::report
