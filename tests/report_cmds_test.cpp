// The report layer for `inspect`, `gemm-error`, `accum` and `targets`: each JSON is written,
// read back into the library's structs and written again to the same bytes; a bad field is
// named in the error; the text tables hold their numbers in the one policy, aligned with
// or without colour.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/format.hpp"
#include "fpguard/report.hpp"
#include "fpguard/stats.hpp"
#include "graph_util.hpp"

namespace fpguard::report {
namespace {

using test::floats;

// The problem of the Error that reading `j` throws ("" if none).
template <class Read>
std::string problem(Read read) {
  try {
    read();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "in.json");
    return e.problem();
  }
  return "";
}

std::vector<Format> formats(std::initializer_list<const char*> names) {
  std::vector<Format> out;
  for (const auto* n : names) out.push_back(parse_format(n));
  return out;
}

InspectedTensor inspected(const std::string& name, const Tensor& t) {
  StatsOptions o;
  o.threads = 1;
  return {.name = name,
          .dtype = t.dtype(),
          .shape = t.shape(),
          .stats = stats(t, formats({"float16", "float8_e4m3fn", "e5m7"}), o),
          .scaled = {scaled_stats(t, parse_scaled_format("mxfp4_e2m1"), -1, o),
                     scaled_stats(t, parse_scaled_format("block:float8_e4m3fn:e8m0:2"), 0, o)}};
}

// An overflow (70000 in fp16), an underflow, a NaN and an inf, a zero; an all-zero tensor
// (headroom +inf: null) and one without finite values (min, max, mean: null).
std::vector<InspectedTensor> inspected_tensors() {
  return {inspected("x", floats({2, 4}, {70000, -3, 1e-9f, 0, NAN, INFINITY, 0.1f, 2})),
          inspected("zeros", floats({3}, {0, 0, 0})),
          inspected("nans", floats({2}, {NAN, -INFINITY}))};
}

TEST(InspectJson, RoundTripsExactly) {
  const auto ts = inspected_tensors();
  const Json j = to_json(ts);
  EXPECT_EQ(j["schema_version"], kInspectSchema);
  EXPECT_EQ(j["tensors"][0]["formats"]["float16"]["overflow"], 1);
  EXPECT_EQ(j["tensors"][0]["formats"]["float16"]["verdict"], "nonfinite");
  EXPECT_TRUE(j["tensors"][1]["formats"]["float16"]["headroom_bits"].is_null());
  EXPECT_TRUE(j["tensors"][2]["min"].is_null());
  EXPECT_EQ(j["tensors"][0]["scaled_formats"]["mxfp4_e2m1"]["verdict"], "nonfinite");
  EXPECT_EQ(j["tensors"][1]["scaled_formats"]["block:float8_e4m3fn:float8_e8m0fnu:2"]["verdict"],
            "ok");
  const auto back = inspect_from_json(Json::parse(j.dump(2)), "in.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].dtype, DType::float32);
  EXPECT_EQ(back[0].shape, (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(back[0].stats.formats[2].format.name, "e5m7");  // a custom format by its name
  EXPECT_EQ(back[1].stats.formats[0].headroom_bits, INFINITY);
  EXPECT_EQ(back[0].stats.tensor.exponent_histogram, ts[0].stats.tensor.exponent_histogram);
  ASSERT_EQ(back[0].scaled.size(), 2u);
  EXPECT_EQ(back[0].scaled[1].format.block_size, 2);  // a custom block format by its name
  EXPECT_EQ(back[0].scaled[1].axis, 0);
  EXPECT_EQ(back[0].scaled[0].block_range_histogram, ts[0].scaled[0].block_range_histogram);
  ASSERT_GT(ts[0].scaled[0].nonzero, 0u);
  EXPECT_EQ(back[0].scaled[0].nonzero, ts[0].scaled[0].nonzero);
  // A file from before the check-side counts (nonzero, swamped, subnormal, clipped): 0.
  Json old = j;
  for (const char* key :
       {"nonzero", "swamped", "swamped_blocks", "subnormal", "clipped", "clipped_blocks"})
    old["tensors"][0]["scaled_formats"]["mxfp4_e2m1"].erase(key);
  EXPECT_EQ(inspect_from_json(old, "in.json")[0].scaled[0].nonzero, 0u);
  // One tensor alone, as the library's Stats.
  const Stats s = stats_from_json(j["tensors"][0], "in.json");
  EXPECT_EQ(s.tensor.std, ts[0].stats.tensor.std);
  EXPECT_EQ(s.formats[1].verdict, ts[0].stats.formats[1].verdict);
  // The text renders the same from either.
  std::ostringstream a, b;
  render(a, ts[0], {.histogram = true}, Terminal{});
  render(b, back[0], {.histogram = true}, Terminal{});
  EXPECT_EQ(a.str(), b.str());
}

TEST(InspectJson, BadFieldIsNamed) {
  const Json good = to_json(inspected_tensors());
  Json j = good;
  j["tensors"][1].erase("count");
  EXPECT_EQ(problem([&] { inspect_from_json(j, "in.json"); }),
            "\"tensors\"[1].\"count\" is missing");
  j = good;
  j["tensors"][0]["formats"]["float16"]["verdict"] = "dire";
  EXPECT_EQ(problem([&] { inspect_from_json(j, "in.json"); }),
            "\"tensors\"[0].\"formats\".\"float16\".\"verdict\" is not a known kind ('dire')");
  j = good;
  j["tensors"][0]["dtype"] = "float17";
  EXPECT_EQ(problem([&] { inspect_from_json(j, "in.json"); }),
            "\"tensors\"[0].\"dtype\" is not a known kind ('float17')");
  j = good;
  j["tensors"][0]["exponent_histogram"]["x"] = 1;
  EXPECT_NE(problem([&] { inspect_from_json(j, "in.json"); }).find("\"exponent_histogram\""),
            std::string::npos);
  j = good;
  j["tensors"][0]["nan"] = -1;
  EXPECT_EQ(problem([&] { inspect_from_json(j, "in.json"); }),
            "\"tensors\"[0].\"nan\" is not a count");
  j = good;
  j["tensors"][0]["formats"]["fp17"] = j["tensors"][0]["formats"]["float16"];
  EXPECT_NE(problem([&] {
              inspect_from_json(j, "in.json");
            }).find("\"tensors\"[0].\"formats\".\"fp17\" is not a format"),
            std::string::npos);
  j = good;
  j["tensors"][0]["scaled_formats"]["mxfp4_e2m1"]["verdict"] = "overflowish";
  EXPECT_EQ(problem([&] { inspect_from_json(j, "in.json"); }),
            "\"tensors\"[0].\"scaled_formats\".\"mxfp4_e2m1\".\"verdict\" is not a known kind "
            "('overflowish')");
  j = good;
  j["tensors"][0]["scaled_formats"]["mxfp5"] = j["tensors"][0]["scaled_formats"]["mxfp4_e2m1"];
  EXPECT_NE(problem([&] {
              inspect_from_json(j, "in.json");
            }).find("\"tensors\"[0].\"scaled_formats\".\"mxfp5\" is not a scaled format"),
            std::string::npos);
  j = good;
  j["schema_version"] = 2;
  EXPECT_EQ(problem([&] { inspect_from_json(j, "in.json"); }),
            "not inspect output of schema_version 1");
  EXPECT_EQ(problem([&] { stats_from_json(Json::array(), "in.json"); }),
            "the document is not an object");
}

TEST(InspectText, NumbersInOnePolicyVerdictsColouredAndAligned) {
  const auto x = inspected_tensors()[0];
  std::ostringstream plain;
  render(plain, x, {}, Terminal{});
  const std::string s = plain.str();
  EXPECT_EQ(s.rfind("x  float32 [2,4]  count 8  nan 1  +inf 1  -inf 0  zeros 1\n"
                    "  min -3  max 70000  absmax 70000  min|x|>0 1e-09",
                    0),
            0u)
      << s;
  EXPECT_NE(s.find("  format         verdict    overflow"), std::string::npos) << s;
  EXPECT_NE(s.find("  float16        nonfinite         1"), std::string::npos) << s;
  EXPECT_NE(s.find("-0.1b"), std::string::npos) << s;  // headroom of 70000 in fp16
  // Coloured, the same columns once the escapes are taken out.
  Terminal colour;
  colour.color = true;
  std::ostringstream c;
  render(c, x, {}, colour);
  std::string stripped = c.str();
  for (std::size_t at; (at = stripped.find('\033')) != std::string::npos;)
    stripped.erase(at, stripped.find('m', at) - at + 1);
  EXPECT_NE(c.str(), s);
  EXPECT_EQ(stripped, s);
}

// A scale is shown where the verdict needs one (an overflow, an underflow); scale_sq where
// the tensor's square would pass half the format's max. The JSON keeps both always.
TEST(InspectText, ScalesOnlyWhereTheyFixSomething) {
  // 300 is ok in float16 (max 65504), but its square, 90000, passes half the max (32752):
  // scale_sq is the largest 2^k with (300 * 2^k)^2 <= 32752, 2^-1 (150^2 = 22500).
  const auto ok = inspected("ok", floats({3}, {300, 1, -2}));
  const auto over = inspected("over", floats({2}, {70000, 1}));
  const auto row = [](const InspectedTensor& t, const std::string& format) {
    std::ostringstream out;
    render(out, t, {}, Terminal{});
    const std::string s = out.str();
    const auto at = s.find("\n  " + format + " ");
    return at == std::string::npos ? std::string()
                                   : s.substr(at + 3, s.find('\n', at + 1) - at - 3);
  };
  auto columns = [](const std::string& line) {
    std::vector<std::string> out;
    std::istringstream in(line);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
  };
  // format verdict overflow underflow subnormal headroom scale scale_sq ...
  const auto ok16 = columns(row(ok, "float16"));
  ASSERT_GE(ok16.size(), 8u) << row(ok, "float16");
  EXPECT_EQ(ok16[1], "ok");
  EXPECT_EQ(ok16[6], "-");
  EXPECT_EQ(ok16[7], "2^-1");
  EXPECT_EQ(ok.stats.formats[0].scale, 64.0);  // 300 * 64 = 19200 <= 32752: kept in JSON
  EXPECT_EQ(to_json(ok)["formats"]["float16"]["scale"], 64.0);
  const auto over16 = columns(row(over, "float16"));
  ASSERT_GE(over16.size(), 8u) << row(over, "float16");
  EXPECT_EQ(over16[1], "overflow");
  EXPECT_EQ(over16[6], "2^-2");  // 70000 / 4 = 17500 <= 32752
  EXPECT_EQ(over16[7], "2^-9");  // (70000 / 512)^2 = 18692 <= 32752
  // 1e-9 underflows in float16 (smallest subnormal 2^-24): the scale brings it up.
  const auto tiny = inspected("tiny", floats({1}, {1e-9f}));
  const auto tiny16 = columns(row(tiny, "float16"));
  ASSERT_GE(tiny16.size(), 8u);
  EXPECT_EQ(tiny16[1], "underflow");
  EXPECT_NE(tiny16[6], "-");
  EXPECT_EQ(tiny16[7], "-");
  std::ostringstream legend;
  render_inspect_legend(legend);
  EXPECT_NE(legend.str().find("scale_sq"), std::string::npos);
}

// `run --outputs`/`--dump-all` directories: written and read back, every kind of value.
bool same(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.dtype() == DType::string) {
    const auto x = a.data<std::string>(), y = b.data<std::string>();
    return std::equal(x.begin(), x.end(), y.begin(), y.end());
  }
  return a.nbytes() == b.nbytes() && std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0;
}

struct ValuesDir {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("fpguard_values_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  ValuesDir() { std::filesystem::remove_all(dir); }
  ~ValuesDir() { std::filesystem::remove_all(dir); }
  void manifest(const std::string& text) const { std::ofstream(dir / "outputs.json") << text; }
};

TEST(Values, WrittenAndReadBackAsTheyWere) {
  Tensor bf(DType::bfloat16, {2});
  bf.data<std::uint16_t>()[0] = 0x3F80;  // 1.0
  bf.data<std::uint16_t>()[1] = 0xC2C8;  // -100
  Tensor ints(DType::int64, {3});
  ints.data<std::int64_t>()[2] = -(std::int64_t{1} << 60);
  Tensor text(DType::string, {2});
  text.data<std::string>()[0] = "héllo";
  text.data<std::string>()[1] = "";
  const std::vector<NamedValue> values = {
      {"y_0", floats({2, 2}, {1, -2, 3.5f, NAN})},
      {"y/0", bf},  // the same file name once sanitised: y_0.npy, then y_0_1.npy
      {"ids", ints},
      {"words", text},
      {"s", Value::sequence({floats({1}, {7}), ints})},
      {"empty", Value::none()}};
  ValuesDir d;
  write_values(d.dir, values);
  const auto back = read_values(d.dir);
  ASSERT_EQ(back.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const Value &a = values[i].value, &b = back[i].value;
    EXPECT_EQ(back[i].name, values[i].name);
    ASSERT_EQ(a.kind, b.kind) << values[i].name;
    if (a.kind == ValueKind::tensor) {
      EXPECT_TRUE(same(a.tensor, b.tensor)) << values[i].name;
    }
    ASSERT_EQ(a.items.size(), b.items.size());
    for (std::size_t k = 0; k < a.items.size(); ++k) EXPECT_TRUE(same(a.items[k], b.items[k]));
  }
  // bfloat16 is stored as float32 (NumPy has none), exactly.
  const Tensor stored = read_npy(d.dir / "y_0_1.npy");
  EXPECT_EQ(stored.dtype(), DType::float32);
  EXPECT_EQ(stored.data<float>()[1], -100.0f);
}

TEST(Values, AMalformedManifestIsNamed) {
  ValuesDir d;
  write_values(d.dir, {{"y", floats({1}, {1})}});
  const std::string where = (d.dir / "outputs.json").string();
  auto read = [&] {
    try {
      read_values(d.dir);
    } catch (const Error& e) {
      EXPECT_EQ(e.where(), where);
      return e.problem();
    }
    return std::string("no error");
  };
  auto with = [&](const std::string& manifest) {
    d.manifest(manifest);
    return read();
  };
  EXPECT_EQ(with(R"({"schema_version": 1, "tensors": [{"name": "y", "kind": "tensor",
                       "file": "y.npy", "dtype": "int32"}]})"),
            "\"tensors\"[0].\"file\" says int32 but y.npy holds float32");
  EXPECT_EQ(with(R"({"schema_version": 1, "tensors": [{"name": "y", "kind": "tensor",
                       "file": "../y.npy", "dtype": "float32"}]})"),
            "\"tensors\"[0].\"file\" is not a file name in the directory");
  EXPECT_EQ(with(R"({"schema_version": 1, "tensors": [{"name": "y", "kind": "map"}]})"),
            "\"tensors\"[0].\"kind\" is not tensor, sequence or none");
  EXPECT_EQ(with(R"({"schema_version": 1, "tensors": [{"name": "y", "kind": "sequence",
                       "files": ["y.npy"], "dtypes": []}]})"),
            "\"tensors\"[0].\"dtypes\" has not one entry per file");
  EXPECT_EQ(with(R"({"schema_version": 2, "tensors": []})"),
            "not an outputs.json of schema_version 1");
  EXPECT_NE(with("{").find("not JSON"), std::string::npos);
  std::filesystem::remove(d.dir / "outputs.json");
  EXPECT_EQ(read(), "cannot open the file");
}

GemmErrorTable small_gemm() {
  GemmErrorOptions o;
  o.sizes = {8, 16};
  o.formats = {parse_format("float16"), parse_format("bfloat16")};
  o.samples = 2;
  o.seed = 3;
  o.threads = 1;
  o.distribution = parse_distribution("uniform:-2:3");
  GemmErrorTable t{o.distribution, o.seed, gemm_error(o)};
  // e5m2 accumulating in itself: n u >= 1, no bound (null) and no violation count.
  o.sizes = {16};
  o.formats = {parse_format("float8_e5m2")};
  o.accumulate = std::nullopt;
  for (auto& r : gemm_error(o)) t.rows.push_back(r);
  return t;
}

TEST(GemmErrorJson, RoundTripsExactly) {
  const GemmErrorTable t = small_gemm();
  const Json j = to_json(t);
  EXPECT_EQ(j["schema_version"], kExperimentsSchema);
  ASSERT_EQ(j["rows"].size(), 5u);
  EXPECT_TRUE(j["rows"][4]["bound_deterministic"].is_null());
  EXPECT_TRUE(j["rows"][4]["bound_violations"].is_null());
  EXPECT_EQ(j["rows"][0]["bound_violations"], 0);
  const GemmErrorTable back = gemm_error_from_json(Json::parse(j.dump(2)), "in.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_EQ(back.rows[4].bound_deterministic, INFINITY);
  EXPECT_EQ(back.rows[1].normwise_error, t.rows[1].normwise_error);
  std::ostringstream a, b;
  render(a, t, Terminal{});
  render(b, back, Terminal{});
  EXPECT_EQ(a.str(), b.str());
  EXPECT_NE(a.str().find("entries uniform:-2:3, 2 samples, seed 3."), std::string::npos) << a.str();
  EXPECT_NE(a.str().find("bound_det  bound_prob\n"), std::string::npos) << a.str();
  EXPECT_NE(a.str().find("\n16  float8_e5m2  float8_e5m2  sequential"), std::string::npos)
      << a.str();
}

TEST(GemmErrorJson, BadFieldIsNamed) {
  const Json good = to_json(small_gemm());
  Json j = good;
  j["rows"][1]["samples"] = "two";
  EXPECT_EQ(problem([&] { gemm_error_from_json(j, "in.json"); }),
            "\"rows\"[1].\"samples\" is not a count");
  j = good;
  j["rows"][0].erase("normwise_error");
  EXPECT_EQ(problem([&] { gemm_error_from_json(j, "in.json"); }),
            "\"rows\"[0].\"normwise_error\" is missing");
  j = good;
  j["rows"][2]["bound_violations"] = 0.5;
  EXPECT_EQ(problem([&] { gemm_error_from_json(j, "in.json"); }),
            "\"rows\"[2].\"bound_violations\" is not a count");
  j = good;
  j["distribution"] = "gauss";
  EXPECT_NE(problem([&] { gemm_error_from_json(j, "in.json"); }).find("\"distribution\""),
            std::string::npos);
}

std::vector<AccumEntry> accum_entries() {
  AccumOptions o;
  o.value = 0.1;
  o.n = 1000;
  std::vector<AccumEntry> out;
  for (const char* f : {"float16", "bfloat16", "float32"})
    out.push_back({f, accum_limits(parse_format(f), o), ""});
  out.push_back({"float4_e2m1fn", accum_limits(parse_format("float4_e2m1fn"), {.value = 0.5}), ""});
  o.value = 1e9;  // float16 cannot hold the increment: `accum --all` skips the row
  try {
    accum_limits(parse_format("float16"), o);
  } catch (const Error& e) {
    out.push_back({"float16", std::nullopt, e.where() + ": " + e.problem()});
  }
  // float8_e4m3fn (max 448): 400 + 100 overflows (NaN) before the sum stagnates.
  out.push_back({"float8_e4m3fn", accum_limits(parse_format("float8_e4m3fn"), {.value = 100}), ""});
  return out;
}

TEST(AccumJson, RoundTripsExactly) {
  const auto es = accum_entries();
  ASSERT_EQ(es.size(), 6u);
  ASSERT_FALSE(es[4].row);  // the skipped row
  const Json j = to_json(es);
  EXPECT_EQ(j["schema_version"], kExperimentsSchema);
  EXPECT_EQ(j["rows"][4]["skipped"], es[4].skipped);
  EXPECT_TRUE(j["rows"][5]["stagnation_count"].is_null()) << j["rows"][5];
  const auto back = accum_from_json(Json::parse(j.dump(2)), "in.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_EQ(back[0].row->stagnation_count, es[0].row->stagnation_count);
  EXPECT_EQ(back[5].row->overflow_count, es[5].row->overflow_count);
  std::ostringstream a, b;
  render(a, es, Terminal{});
  render(b, back, Terminal{});
  EXPECT_EQ(a.str(), b.str());
  EXPECT_NE(a.str().find("float32"), std::string::npos);
  EXPECT_NE(a.str().find("float16 skipped: value"), std::string::npos) << a.str();
  EXPECT_NE(a.str().find("ovf@"), std::string::npos) << a.str();
}

TEST(AccumJson, BadFieldIsNamed) {
  const Json good = to_json(accum_entries());
  Json j = good;
  j["rows"][2]["exact_count"] = "many";
  EXPECT_EQ(problem([&] { accum_from_json(j, "in.json"); }),
            "\"rows\"[2].\"exact_count\" is not a count");
  j = good;
  j["rows"][0].erase("format");
  EXPECT_EQ(problem([&] { accum_from_json(j, "in.json"); }), "\"rows\"[0].\"format\" is missing");
  j = good;
  j["rows"] = Json::object();
  EXPECT_EQ(problem([&] { accum_from_json(j, "in.json"); }), "\"rows\" is not an array");
}

TEST(TargetsJson, RoundTripsExactly) {
  for (const char* f : {"", "float8_e4m3fnuz", "bf16"}) {
    TargetTable t{targets(), std::nullopt};
    if (*f) t.format = parse_format(f);
    const Json j = to_json(t);
    EXPECT_EQ(j["schema_version"], kExperimentsSchema);
    const TargetTable back = targets_from_json(Json::parse(j.dump(2)), "in.json");
    EXPECT_EQ(to_json(back).dump(), j.dump()) << f;
    ASSERT_EQ(back.targets.size(), targets().size());
    EXPECT_EQ(back.targets[3].matrix_formats, targets()[3].matrix_formats);
    std::ostringstream a, b;
    render(a, t, Terminal{});
    render(b, back, Terminal{});
    EXPECT_EQ(a.str(), b.str());
  }
  std::ostringstream fnuz;
  render(fnuz, {targets(), parse_format("float8_e4m3fnuz")}, Terminal{});
  EXPECT_EQ(fnuz.str().rfind("target           runs    float8_e4m3fnuz\n", 0), 0u) << fnuz.str();
  EXPECT_NE(fnuz.str().find("\ncdna3            matrix  "), std::string::npos) << fnuz.str();
}

TEST(TargetsJson, BadFieldIsNamed) {
  const Json good = to_json(TargetTable{targets(), parse_format("float8_e4m3fn")});
  Json j = good;
  j["targets"][2]["aliases"] = {"a", 1};
  EXPECT_EQ(problem([&] { targets_from_json(j, "in.json"); }),
            "\"targets\"[2].\"aliases\" holds a non-string");
  j = good;
  j["targets"][0]["runs"] = "matrix";  // sm_70 has no fp8
  EXPECT_EQ(problem([&] { targets_from_json(j, "in.json"); }),
            "\"targets\"[0].\"runs\" is not \"no\", where the target runs float8_e4m3fn");
  j = good;
  j["targets"][1].erase("format");
  EXPECT_EQ(problem([&] { targets_from_json(j, "in.json"); }),
            "\"targets\"[1].\"format\" is missing");
}

TEST(FormatsJson, FinfoAndIinfoRoundTripExactly) {
  std::vector<FInfo> fs;
  for (const auto& f : named_formats()) fs.push_back(finfo(f));
  fs.push_back(finfo(parse_format("e5m7")));
  for (const auto& i : fs) {
    const Json j = to_json(i);
    EXPECT_EQ(to_json(finfo_from_json(Json::parse(j.dump()), "in.json")).dump(), j.dump());
  }
  for (const auto& i : integer_types()) {
    const Json j = to_json(i);
    EXPECT_EQ(to_json(iinfo_from_json(Json::parse(j.dump()), "in.json")).dump(), j.dump());
  }
  Json bad = to_json(fs[0]);
  bad["nan"] = "sometimes";
  EXPECT_EQ(problem([&] { finfo_from_json(bad, "in.json"); }),
            "\"nan\" is not a known kind ('sometimes')");
  bad = to_json(integer_types()[0]);
  bad.erase("max");
  EXPECT_EQ(problem([&] { iinfo_from_json(bad, "in.json"); }), "\"max\" is missing");
  std::ostringstream t;
  render(t, fs, Terminal{});
  EXPECT_NE(t.str().find("\nfloat16 "), std::string::npos) << t.str();
  EXPECT_NE(t.str().find(" 65504 "), std::string::npos) << t.str();
  std::ostringstream it;
  render(it, integer_types(), Terminal{});
  EXPECT_NE(it.str().find(" 18446744073709551615\n"), std::string::npos) << it.str();  // uint64
}

// A tensor with an inf (max inf: null) and a NaN (ignored), an empty one, a string one, a
// sequence and an empty optional.
RunSummary run_summary() {
  RunSummary r;
  r.outputs.push_back({"y", ValueKind::tensor, {summarize(floats({3}, {1, INFINITY, NAN}))}});
  r.outputs.push_back({"e", ValueKind::tensor, {summarize(floats({0, 2}, {}))}});
  Tensor words(DType::string, {2});
  r.outputs.push_back({"w", ValueKind::tensor, {summarize(words)}});
  r.outputs.push_back({"s",
                       ValueKind::sequence,
                       {summarize(floats({2}, {-3, 0.5f})), summarize(floats({1}, {7}))}});
  r.outputs.push_back({"o", ValueKind::none, {}});
  r.load_ms = 1.25;
  r.median_run_ms = 0.5;
  r.runs = 3;
  r.peak_rss_mib = 58.2;
  r.start_rss_mib = 12;
  return r;
}

// summarize reads a tensor a piece at a time: extremes placed in the last piece and a
// middle one are found, NaNs are skipped wherever they are (a piece of NaNs alone), and
// float16 storage is decoded.
TEST(RunJson, SummaryOfALargeTensorSeesEveryPiece) {
  Tensor t(DType::float32, {3, 5000});
  auto v = t.data<float>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
  for (std::size_t i = 4096; i < 8192; ++i) v[i] = NAN;  // the second piece: NaN only
  v[14999] = -41.5f;                                     // the last element
  v[9000] = 77.0f;
  const TensorSummary s = summarize(t);
  EXPECT_EQ(s.min, -41.5);
  EXPECT_EQ(s.max, 77.0);
  EXPECT_EQ(s.absmax, 77.0);
  Tensor h(DType::float16, {9000});
  auto codes = h.data<std::uint16_t>();
  for (auto& c : codes) c = 0x3c00;  // 1.0
  codes[8999] = 0xfbff;              // -65504
  codes[100] = 0x7e00;               // NaN
  const TensorSummary hs = summarize(h);
  EXPECT_EQ(hs.min, -65504.0);
  EXPECT_EQ(hs.max, 1.0);
  EXPECT_EQ(hs.absmax, 65504.0);
}

TEST(RunJson, RoundTripsExactly) {
  const RunSummary r = run_summary();
  const Json j = to_json(r);
  EXPECT_EQ(j["schema_version"], kRunSchema);
  EXPECT_EQ(j["outputs"][0]["min"], 1.0);
  EXPECT_TRUE(j["outputs"][0]["max"].is_null());  // inf
  EXPECT_EQ(j["outputs"][0]["absmax"], nullptr);  // inf
  EXPECT_TRUE(j["outputs"][1]["min"].is_null());  // empty
  EXPECT_FALSE(j["outputs"][2].contains("min"));  // string: no range
  EXPECT_EQ(j["outputs"][3]["items"][0]["min"], -3.0);
  EXPECT_EQ(j["outputs"][4]["kind"], "none");
  const RunSummary back = run_from_json(Json::parse(j.dump(2)), "in.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_EQ(back.outputs[0].items[0].max, INFINITY);
  EXPECT_EQ(back.outputs[3].kind, ValueKind::sequence);
  std::ostringstream t;
  render(t, r, Terminal{});
  EXPECT_EQ(t.str(),
            "y  float32 [3]  min 1  max inf  absmax inf\n"
            "e  float32 [0,2]\n"
            "w  string [2]\n"
            "s  sequence of 2 tensors\n"
            "  [0]  float32 [2]  min -3  max 0.5  absmax 3\n"
            "  [1]  float32 [1]  min 7  max 7  absmax 7\n"
            "o  empty optional\n"
            "load 1.25 ms, run 0.50 ms (median of 3), peak memory 58 MiB (12 MiB at start)\n");
}

TEST(RunJson, BadFieldIsNamed) {
  const Json good = to_json(run_summary());
  Json j = good;
  j["outputs"][3]["items"][1].erase("dtype");
  EXPECT_EQ(problem([&] { run_from_json(j, "in.json"); }),
            "\"outputs\"[3].\"items\"[1].\"dtype\" is missing");
  j = good;
  j["outputs"][4]["kind"] = "map";
  EXPECT_EQ(problem([&] { run_from_json(j, "in.json"); }),
            "\"outputs\"[4].\"kind\" is not tensor, sequence or none");
  j = good;
  j["timing"]["runs"] = -1;
  EXPECT_EQ(problem([&] { run_from_json(j, "in.json"); }), "\"timing\".\"runs\" is not a count");
  EXPECT_EQ(ops_json({"Add", "Mul"}).dump(), R"({"schema_version":1,"ops":["Add","Mul"]})");
}

TEST(ProfileJson, RoundTripsAndRendersTheTables) {
  exec::Profile p;
  p.runs = 4;
  p.nodes = {{.path = "conv1", .op_type = "Conv", .calls = 4, .ms = 2},
             {.path = "loop/body/relu", .op_type = "Relu", .calls = 12, .ms = 0.5},
             {.path = "conv2", .op_type = "Conv", .calls = 4, .ms = 1},
             {.path = "loop", .op_type = "Loop", .calls = 4, .ms = 0.5}};
  p.outside_ms = 0.25;
  const Json j = to_json(p);
  EXPECT_EQ(j["schema_version"], kProfileSchema);
  EXPECT_EQ(j["total_ms"], 4.0);
  EXPECT_EQ(j["outside_ms"], 0.25);
  EXPECT_EQ(j["op_types"][0]["op_type"], "Conv");
  EXPECT_EQ(j["op_types"][0]["nodes"], 2);
  EXPECT_EQ(j["op_types"][0]["average_ms"], 1.5);
  EXPECT_EQ(j["op_types"][0]["share"], 75.0);
  EXPECT_EQ(j["nodes"][1]["name"], "loop/body/relu");
  EXPECT_EQ(j["nodes"][1]["share"], 12.5);
  const exec::Profile back = profile_from_json(Json::parse(j.dump(2)), "p.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  std::ostringstream t;
  render(t, p, 2, Terminal{});
  EXPECT_EQ(t.str(),
            "profile: 4 ms a run in 4 nodes, 0.25 ms outside them (median of 4 runs)\n"
            "  op type  nodes  total ms  average ms  share\n"
            "  Conv         2         3         1.5  75.0%\n"
            "  Loop         1       0.5         0.5  12.5%\n"
            "  Relu         1       0.5         0.5  12.5%\n"
            "\n"
            "  node   op type  calls  ms  share\n"
            "  conv1  Conv         4   2  50.0%\n"
            "  conv2  Conv         4   1  25.0%\n"
            "  (2 slowest of 4 nodes; --profile-top 0 shows all)\n");
  Json older = j;  // written before outside_ms was
  older.erase("outside_ms");
  EXPECT_EQ(profile_from_json(older, "old.json").outside_ms, 0.0);
  Json bad = j;
  bad["nodes"][2].erase("ms");
  EXPECT_EQ(problem([&] { profile_from_json(bad, "in.json"); }), "\"nodes\"[2].\"ms\" is missing");
}

}  // namespace
}  // namespace fpguard::report
