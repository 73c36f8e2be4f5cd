// The report layer for `inspect`: its JSON is written, read back into the library's structs
// and written again to the same bytes; a bad field is named in the error; the text tables
// hold their numbers in the one policy, aligned with or without colour.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "fpguard/error.hpp"
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
  return {name, t.dtype(), t.shape(), stats(t, formats({"float16", "float8_e4m3fn", "e5m7"}), o)};
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
  const auto back = inspect_from_json(Json::parse(j.dump(2)), "in.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].dtype, DType::float32);
  EXPECT_EQ(back[0].shape, (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(back[0].stats.formats[2].format.name, "e5m7");  // a custom format by its name
  EXPECT_EQ(back[1].stats.formats[0].headroom_bits, INFINITY);
  EXPECT_EQ(back[0].stats.tensor.exponent_histogram, ts[0].stats.tensor.exponent_histogram);
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

}  // namespace
}  // namespace fpguard::report
