// The format table against the specifications (IEEE 754, OCP FP8, OCP MX v1.0), name
// resolution, finfo/iinfo against NumPy/torch, and an exhaustive sweep of every code of
// every named format of 16 bits or fewer.
#include "fpguard/format.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "fpguard/error.hpp"
#include "fpguard/round.hpp"
#include "test_util.hpp"

namespace fpguard {
namespace {

using test::named;
using test::Same;

struct Spec {
  const char* name;
  int bits, e, m, bias;
  NanEncoding nan;
  double max, smallest_normal, smallest_subnormal, eps;
};

// Values straight from the specifications; decimal in the comments.
const Spec kSpecs[] = {
    // 0x1.fffffffffffffp+1023 = 1.7976931348623157e308
    {"float64", 64, 11, 52, 1023, NanEncoding::ieee, 0x1.fffffffffffffp+1023, 0x1p-1022, 0x1p-1074,
     0x1p-52},
    // 0x1.fffffep+127 = 3.4028234663852886e38
    {"float32", 32, 8, 23, 127, NanEncoding::ieee, 0x1.fffffep+127, 0x1p-126, 0x1p-149, 0x1p-23},
    // (2 - 2^-10) * 2^127 = 3.4011621342146535e38
    {"tf32", 19, 8, 10, 127, NanEncoding::ieee, 0x1.ffcp+127, 0x1p-126, 0x1p-136, 0x1p-10},
    // 65504
    {"float16", 16, 5, 10, 15, NanEncoding::ieee, 0x1.ffcp+15, 0x1p-14, 0x1p-24, 0x1p-10},
    // 0x1.fep+127 = 3.3895313892515355e38
    {"bfloat16", 16, 8, 7, 127, NanEncoding::ieee, 0x1.fep+127, 0x1p-126, 0x1p-133, 0x1p-7},
    // 448
    {"float8_e4m3fn", 8, 4, 3, 7, NanEncoding::fn, 0x1.cp+8, 0x1p-6, 0x1p-9, 0x1p-3},
    // 240
    {"float8_e4m3fnuz", 8, 4, 3, 8, NanEncoding::fnuz, 0x1.ep+7, 0x1p-7, 0x1p-10, 0x1p-3},
    // 57344
    {"float8_e5m2", 8, 5, 2, 15, NanEncoding::ieee, 0x1.cp+15, 0x1p-14, 0x1p-16, 0x1p-2},
    // 57344
    {"float8_e5m2fnuz", 8, 5, 2, 16, NanEncoding::fnuz, 0x1.cp+15, 0x1p-15, 0x1p-17, 0x1p-2},
    // 7.5, normal 1, subnormal 0.125
    {"float6_e2m3fn", 6, 2, 3, 1, NanEncoding::none, 0x1.ep+2, 0x1p0, 0x1p-3, 0x1p-3},
    // 28, normal 0.25, subnormal 0.0625
    {"float6_e3m2fn", 6, 3, 2, 3, NanEncoding::none, 0x1.cp+4, 0x1p-2, 0x1p-4, 0x1p-2},
    // 6, normal 1, subnormal 0.5
    {"float4_e2m1fn", 4, 2, 1, 1, NanEncoding::none, 0x1.8p+2, 0x1p0, 0x1p-1, 0x1p-1},
    // 2^127 = 1.7014118346046923e38, min 2^-127 = 5.877471754111438e-39
    {"float8_e8m0fnu", 8, 8, 0, 127, NanEncoding::fn, 0x1p127, 0x1p-127, 0x1p-127, 0x1p0},
};

TEST(Format, TableMatchesSpecifications) {
  const auto& formats = named_formats();
  ASSERT_EQ(formats.size(), std::size(kSpecs));
  for (std::size_t i = 0; i < formats.size(); ++i) {
    const Format& f = formats[i];
    const Spec& s = kSpecs[i];
    SCOPED_TRACE(s.name);
    EXPECT_EQ(f.name, s.name);
    EXPECT_EQ(f.bits(), s.bits);
    EXPECT_EQ(f.exponent_bits, s.e);
    EXPECT_EQ(f.mantissa_bits, s.m);
    EXPECT_EQ(f.bias, s.bias);
    EXPECT_EQ(f.nan, s.nan);
    EXPECT_EQ(f.has_inf(), s.nan == NanEncoding::ieee);
    EXPECT_TRUE(Same(f.max(), s.max));
    EXPECT_TRUE(Same(f.smallest_normal(), s.smallest_normal));
    EXPECT_TRUE(Same(f.smallest_subnormal(), s.smallest_subnormal));
    EXPECT_TRUE(Same(f.eps(), s.eps));
    const bool e8m0 = f.name == "float8_e8m0fnu";
    EXPECT_EQ(f.is_signed, !e8m0);
    EXPECT_EQ(f.has_subnormals, !e8m0);
    EXPECT_EQ(f.has_negative_zero(), !e8m0 && s.nan != NanEncoding::fnuz);
  }
}

void expect_resolves(const char* name, const char* canonical) {
  SCOPED_TRACE(name);
  const auto f = find_format(name);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->name, canonical);
  EXPECT_EQ(parse_format(name).name, canonical);
}

// holds_every_value against enumeration: every code of every format of up to 16 bits,
// decoded, is a value of the wide format exactly when rounding it there changes nothing.
TEST(Format, HoldsEveryValueMatchesEnumeration) {
  for (const char* wide_name :
       {"float16", "bfloat16", "float32", "float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz"}) {
    const Format wide = parse_format(wide_name);
    for (const Format& f : named_formats()) {
      if (f.bits() > 16) continue;
      bool all = true;
      for (std::uint64_t code = 0; code < (std::uint64_t{1} << f.bits()) && all; ++code) {
        const double v = decode(code, f);
        if (std::isnan(v))
          all = wide.has_nan();
        else if (std::isinf(v))
          all = wide.has_inf();
        else
          all = round(v, wide) == v;
      }
      EXPECT_EQ(holds_every_value(wide, f), all) << f.name << " in " << wide.name;
    }
  }
  EXPECT_TRUE(holds_every_value(parse_format("float16"), parse_format("float8_e4m3fn")));
  EXPECT_FALSE(holds_every_value(parse_format("float16"), parse_format("bfloat16")));
}

TEST(Format, AliasesResolveCaseInsensitively) {
  expect_resolves("fp16", "float16");
  expect_resolves("half", "float16");
  expect_resolves("HALF", "float16");
  expect_resolves("Float16", "float16");
  expect_resolves("bf16", "bfloat16");
  expect_resolves("BF16", "bfloat16");
  expect_resolves("e4m3", "float8_e4m3fn");
  expect_resolves("E4M3", "float8_e4m3fn");
  expect_resolves("e5m2", "float8_e5m2");
  expect_resolves("fp4", "float4_e2m1fn");
  expect_resolves("e8m0", "float8_e8m0fnu");
  expect_resolves("fp64", "float64");
  expect_resolves("double", "float64");
  expect_resolves("float", "float32");
  expect_resolves("fp6_e3m2", "float6_e3m2fn");
  for (const auto& name : format_names()) EXPECT_TRUE(find_format(name).has_value()) << name;
}

TEST(Format, CustomSpellingsEqualToNamedFormatsResolveToThem) {
  expect_resolves("e4m3fnuz", "float8_e4m3fnuz");
  expect_resolves("E4M3FNUZ", "float8_e4m3fnuz");
  expect_resolves("e5m2fnuz", "float8_e5m2fnuz");
  expect_resolves("e4m3fn", "float8_e4m3fn");
  expect_resolves("e5m10", "float16");
  expect_resolves("E5M10", "float16");
  expect_resolves("e8m7", "bfloat16");
  expect_resolves("e8m23", "float32");
  expect_resolves("e11m52", "float64");
}

TEST(Format, CustomSpellingsParse) {
  const Format a = parse_format("e5m7");
  EXPECT_EQ(a.name, "e5m7");
  EXPECT_EQ(a.exponent_bits, 5);
  EXPECT_EQ(a.mantissa_bits, 7);
  EXPECT_EQ(a.bias, 15);
  EXPECT_EQ(a.nan, NanEncoding::ieee);
  EXPECT_EQ(a.bits(), 13);
  EXPECT_TRUE(Same(a.max(), 0x1.fep+15));  // (2 - 2^-7) * 2^15 = 65280
  EXPECT_TRUE(Same(a.smallest_subnormal(), 0x1p-21));

  const Format b = parse_format("e6m9");
  EXPECT_EQ(b.name, "e6m9");
  EXPECT_EQ(b.bias, 31);
  EXPECT_TRUE(Same(b.max(), 0x1.ff8p+31));  // (2 - 2^-9) * 2^31 = 4292870144
  EXPECT_TRUE(Same(b.smallest_normal(), 0x1p-30));

  const Format c = parse_format("e3m4fnuz");
  EXPECT_EQ(c.nan, NanEncoding::fnuz);
  EXPECT_EQ(c.bias, 4);
  EXPECT_TRUE(Same(c.max(), 0x1.fp+3));  // 31/16 * 8 = 15.5

  const Format d = parse_format("e4m0fn");  // no mantissa: only the top code is NaN
  EXPECT_TRUE(Same(d.max(), 0x1p7));        // 128
}

void expect_error(const char* name, const std::string& fragment) {
  SCOPED_TRACE(name);
  try {
    parse_format(name);
    ADD_FAILURE() << "no Error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), std::string("format '") + name + "'");
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Format, BadNamesThrowWithAReason) {
  expect_error("flaot16", "did you mean 'float16'?");
  expect_error("bfloat17", "did you mean 'bfloat16'?");
  expect_error("e4m3fz", "did you mean");
  expect_error("e12m3", "2 <= X <= 11");
  expect_error("e1m2", "2 <= X <= 11");
  expect_error("e5m53", "0 <= Y <= 52");
  expect_error("e5m0", "e5m0fn");
  expect_error("e11m52fnuz", "do not fit in float64");
  expect_error("completely-unknown-name", "known: float64");
  EXPECT_FALSE(find_format("flaot16").has_value());
  EXPECT_FALSE(find_format("").has_value());
}

TEST(Format, FInfoMatchesNumPy) {
  const FInfo h = finfo(named("float16"));
  EXPECT_EQ(h.maxexp, 16);
  EXPECT_EQ(h.minexp, -14);
  EXPECT_EQ(h.precision, 3);
  EXPECT_EQ(h.resolution, 1e-3);
  EXPECT_EQ(h.bits, 16);
  EXPECT_TRUE(Same(h.tiny, 0x1p-14));
  EXPECT_TRUE(Same(h.smallest_subnormal, 0x1p-24));
  EXPECT_TRUE(Same(h.min, -0x1.ffcp+15));  // -65504

  const FInfo b = finfo(named("bfloat16"));
  EXPECT_EQ(b.maxexp, 128);
  EXPECT_EQ(b.minexp, -126);
  EXPECT_EQ(b.precision, 2);
  EXPECT_EQ(b.resolution, 1e-2);

  const FInfo s = finfo(named("float32"));
  EXPECT_EQ(s.maxexp, 128);
  EXPECT_EQ(s.minexp, -126);
  EXPECT_EQ(s.precision, 6);
  EXPECT_EQ(s.resolution, 1e-6);

  const FInfo d = finfo(named("float64"));
  EXPECT_EQ(d.maxexp, 1024);
  EXPECT_EQ(d.minexp, -1022);
  EXPECT_EQ(d.precision, 15);
  EXPECT_EQ(d.resolution, 1e-15);

  const FInfo u = finfo(named("float8_e8m0fnu"));  // unsigned: min is the smallest value
  EXPECT_TRUE(Same(u.min, 0x1p-127));
  EXPECT_EQ(u.maxexp, 128);
  EXPECT_EQ(u.minexp, -127);
}

TEST(Format, TorchStrings) {
  EXPECT_EQ(to_torch_string(finfo(named("float16"))),
            "finfo(resolution=0.001, min=-65504, max=65504, eps=0.000976562, "
            "smallest_normal=6.10352e-05, tiny=6.10352e-05, dtype=float16)");
  EXPECT_EQ(to_torch_string(finfo(named("float32"))),
            "finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, "
            "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)");
  EXPECT_EQ(to_torch_string(finfo(named("float64"))),
            "finfo(resolution=1e-15, min=-1.79769e+308, max=1.79769e+308, eps=2.22045e-16, "
            "smallest_normal=2.22507e-308, tiny=2.22507e-308, dtype=float64)");
  EXPECT_EQ(to_torch_string(finfo(named("bfloat16"))),
            "finfo(resolution=0.01, min=-3.38953e+38, max=3.38953e+38, eps=0.0078125, "
            "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=bfloat16)");
  EXPECT_EQ(to_torch_string(iinfo("int8")), "iinfo(min=-128, max=127, dtype=int8)");
  EXPECT_EQ(to_torch_string(iinfo("int32")),
            "iinfo(min=-2.14748e+09, max=2.14748e+09, dtype=int32)");
}

TEST(Format, IInfo) {
  const IInfo i8 = iinfo("INT8");
  EXPECT_EQ(i8.min, -128);
  EXPECT_EQ(i8.max, 127u);
  const IInfo u64 = iinfo("uint64");
  EXPECT_EQ(u64.min, 0);
  EXPECT_EQ(u64.max, 0xffffffffffffffffull);
  const IInfo i4 = iinfo("int4");
  EXPECT_EQ(i4.min, -8);
  EXPECT_EQ(i4.max, 7u);
  try {
    iinfo("itn32");
    ADD_FAILURE() << "no Error thrown";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'int32'?"), std::string::npos) << e.what();
  }
}

// ---- every code of every named format of at most 16 bits -----------------------------

bool is_nan_code(std::uint64_t c, const Format& f) {
  return std::isnan(decode(c, f));
}

// The named formats of at most 16 bits and custom ones with unusual corners (no mantissa
// bit with a sign and subnormals; a 2-bit exponent with inf; fnuz with a 3-bit exponent).
std::vector<Format> small_formats() {
  std::vector<Format> v;
  for (const Format& f : named_formats())
    if (f.bits() <= 16) v.push_back(f);
  for (const char* name : {"e2m0fn", "e4m0fn", "e2m1", "e3m4fnuz", "e5m7", "e6m9"})
    v.push_back(parse_format(name));
  return v;
}

TEST(FormatCodes, PositiveCodesAreStrictlyIncreasing) {
  for (const Format& f : small_formats()) {
    SCOPED_TRACE(f.name);
    const std::uint64_t positive =
        f.is_signed ? std::uint64_t{1} << (f.bits() - 1) : std::uint64_t{1} << f.bits();
    double prev = -test::kInf;
    std::uint64_t finite = 0, nans = 0;
    for (std::uint64_t c = 0; c < positive; ++c) {
      const double v = decode(c, f);
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      ASSERT_GT(v, prev) << "code 0x" << std::hex << c;
      prev = v;
      finite += std::isfinite(v);
      if (f.is_signed && !(f.nan == NanEncoding::fnuz && c == 0)) {
        // The sign bit mirrors the value (its -0 included).
        EXPECT_TRUE(Same(decode(c | positive, f), -v)) << "code 0x" << std::hex << c;
      }
    }
    EXPECT_TRUE(Same(prev, f.has_inf() ? test::kInf : f.max()));
    EXPECT_TRUE(Same(decode(0, f), f.is_signed ? 0.0 : f.smallest_normal()));
    // NaN codes among the positive half: IEEE all of exponent-all-ones but inf; fn one.
    const std::uint64_t want_nans = f.nan == NanEncoding::ieee ? (1u << f.mantissa_bits) - 1
                                    : f.nan == NanEncoding::fn ? 1
                                                               : 0;
    EXPECT_EQ(nans, want_nans);
    EXPECT_EQ(finite, positive - nans - (f.has_inf() ? 1 : 0));
    if (f.nan == NanEncoding::fnuz) {
      EXPECT_TRUE(is_nan_code(positive, f));  // the "-0" code
    }
  }
}

TEST(FormatCodes, EncodeInvertsDecodeAndCodesAreFixedPointsOfRound) {
  for (const Format& f : small_formats()) {
    SCOPED_TRACE(f.name);
    for (std::uint64_t c = 0; c < (std::uint64_t{1} << f.bits()); ++c) {
      if (is_nan_code(c, f)) continue;
      const double v = decode(c, f);
      ASSERT_EQ(encode(v, f), c) << "value " << test::hex(v);
      for (Rounding r : test::kDirectedAndNearest) {
        for (bool flush : {false, true}) {
          if (flush && std::fabs(v) < f.smallest_normal() && f.has_subnormals) continue;
          const RoundOptions o = test::options(r, /*saturate=*/false, flush);
          ASSERT_TRUE(Same(round(v, f, o), v)) << to_string(r) << " flush " << flush;
          // Every value of these formats is a float32 value too.
          ASSERT_TRUE(Same(round(static_cast<float>(v), f, o), static_cast<float>(v)))
              << to_string(r) << " flush " << flush;
        }
      }
      const RoundOptions sr = test::options(Rounding::stochastic);
      ASSERT_TRUE(Same(round(v, f, sr, c), v));
    }
  }
}

}  // namespace
}  // namespace fpguard
