// stats(): the C++ API. Field-by-field comparisons with NumPy live in
// tests/reference/stats_test.py; here: the properties NumPy cannot see (SIMD vs scalar
// kernels, thread counts, chunk tails, dtypes) and hand-checked small cases.
#include "fpguard/stats.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <utility>

#include "fpguard/round.hpp"
#include "fpguard/tensor.hpp"
#include "targets.hpp"

namespace fpguard {
namespace {

const std::vector<Format> kFormats = {parse_format("float16"), parse_format("bfloat16"),
                                      parse_format("float8_e4m3fn"), parse_format("fp4")};

std::vector<float> wide_data(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-30, 30);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(nd(rng), ex(rng));
  return v;
}

void expect_same_counts(const Stats& a, const Stats& b) {
  EXPECT_EQ(a.tensor.count, b.tensor.count);
  EXPECT_EQ(a.tensor.nan, b.tensor.nan);
  EXPECT_EQ(a.tensor.posinf, b.tensor.posinf);
  EXPECT_EQ(a.tensor.neginf, b.tensor.neginf);
  EXPECT_EQ(a.tensor.zeros, b.tensor.zeros);
  EXPECT_EQ(a.tensor.min, b.tensor.min);
  EXPECT_EQ(a.tensor.max, b.tensor.max);
  EXPECT_EQ(a.tensor.min_abs_nonzero, b.tensor.min_abs_nonzero);
  EXPECT_EQ(a.tensor.exponent_histogram, b.tensor.exponent_histogram);
  EXPECT_NEAR(a.tensor.mean, b.tensor.mean, 1e-12 * std::fabs(a.tensor.std) + 1e-300);
  EXPECT_NEAR(a.tensor.std, b.tensor.std, 1e-12 * a.tensor.std);
  ASSERT_EQ(a.formats.size(), b.formats.size());
  for (std::size_t i = 0; i < a.formats.size(); ++i) {
    SCOPED_TRACE(a.formats[i].format.name);
    EXPECT_EQ(a.formats[i].overflow, b.formats[i].overflow);
    EXPECT_EQ(a.formats[i].underflow, b.formats[i].underflow);
    EXPECT_EQ(a.formats[i].subnormal, b.formats[i].subnormal);
    EXPECT_EQ(a.formats[i].precision_loss, b.formats[i].precision_loss);
    EXPECT_EQ(a.formats[i].max_abs_error, b.formats[i].max_abs_error);
    EXPECT_EQ(a.formats[i].max_rel_error, b.formats[i].max_rel_error);
    EXPECT_NEAR(a.formats[i].mean_rel_error, b.formats[i].mean_rel_error,
                1e-12 * a.formats[i].mean_rel_error);
    EXPECT_EQ(a.formats[i].scale, b.formats[i].scale);
    EXPECT_EQ(a.formats[i].verdict, b.formats[i].verdict);
  }
}

// The float32 SIMD kernels against the float64 scalar kernels on the same values: every
// float32 is a float64, so all counts and extremes must agree exactly.
TEST(Stats, Float32KernelsMatchFloat64Kernels) {
  auto x = wide_data(100'003, 1);
  x[7] = std::numeric_limits<float>::quiet_NaN();
  x[8] = std::numeric_limits<float>::infinity();
  x[9] = -std::numeric_limits<float>::infinity();
  x[10] = 0.0f;
  x[11] = -0.0f;
  x[12] = 0x1p-140f;  // float32 subnormal
  x[13] = 65520.0f;   // float16 overflow threshold, inclusive
  x[14] = 464.0f;     // float8_e4m3fn tie that rounds down to 448: no overflow
  std::vector<double> xd(x.begin(), x.end());
  StatsOptions o;
  o.threads = 1;
  const Stats f = stats(std::span<const float>(x), kFormats, o);
  // The float64 path rounds in double and measures relative errors in double: compare
  // the exact quantities.
  const Stats d = stats(std::span<const double>(xd), kFormats, o);
  EXPECT_EQ(f.tensor.exponent_histogram, d.tensor.exponent_histogram);
  EXPECT_EQ(f.tensor.nan, 1u);
  EXPECT_EQ(f.tensor.posinf, 1u);
  EXPECT_EQ(f.tensor.neginf, 1u);
  EXPECT_EQ(f.tensor.zeros, d.tensor.zeros);
  EXPECT_EQ(f.tensor.min, d.tensor.min);
  EXPECT_EQ(f.tensor.max, d.tensor.max);
  EXPECT_EQ(f.tensor.min_abs_nonzero, 0x1p-140);
  EXPECT_NEAR(f.tensor.mean, d.tensor.mean, 1e-12 * d.tensor.std);
  EXPECT_NEAR(f.tensor.std, d.tensor.std, 1e-12 * d.tensor.std);
  for (std::size_t i = 0; i < kFormats.size(); ++i) {
    SCOPED_TRACE(kFormats[i].name);
    EXPECT_EQ(f.formats[i].overflow, d.formats[i].overflow);
    EXPECT_EQ(f.formats[i].underflow, d.formats[i].underflow);
    EXPECT_EQ(f.formats[i].subnormal, d.formats[i].subnormal);
    EXPECT_EQ(f.formats[i].max_abs_error, d.formats[i].max_abs_error);
  }
}

// N(0,1) values with some scaled far down or up (the formats' subnormal, underflow and
// overflow paths, in vectors that are mostly in range), and a few NaN.
std::vector<float> mixed_data(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> v(n);
  for (auto& x : v) {
    const int p = pick(rng);
    x = nd(rng) * (p < 5 ? 1e-3f : p < 7 ? 1e-6f : p < 9 ? 3e4f : 1.0f);
    if (p == 99 && pick(rng) == 0) x = std::numeric_limits<float>::quiet_NaN();
  }
  return v;
}

// The float32 kernels measure several formats in one pass over each chunk: each format's
// numbers, its float sum of relative errors included, are those of a run with that format
// alone, bit for bit.
// (The kernels take each chunk one of three ways per format, chosen from the chunk's range
// and the format alone; the mixed data has chunks of all three, the N(0, 1) values with
// zeros among them the two without a test per vector, for several formats together.)
TEST(Stats, FormatsTogetherMatchOneAtATime) {
  const std::vector<Format> formats = {parse_format("float16"), parse_format("bfloat16"),
                                       parse_format("float8_e4m3fn"), parse_format("float8_e5m2"),
                                       parse_format("fp4")};
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> normal(200'003);
  for (std::size_t i = 0; i < normal.size(); ++i) normal[i] = i % 1000 ? nd(rng) : 0.0f;
  for (const auto& x : {mixed_data(200'003, 5), mixed_data(200'003, 6), normal}) {
    StatsOptions o;
    o.threads = 1;
    test::on_every_target([&] {
      const Stats all = stats(std::span<const float>(x), formats, o);
      for (std::size_t i = 0; i < formats.size(); ++i) {
        SCOPED_TRACE(formats[i].name);
        const FormatStats one = stats(std::span<const float>(x), {formats[i]}, o).formats[0];
        const FormatStats& f = all.formats[i];
        EXPECT_EQ(f.overflow, one.overflow);
        EXPECT_EQ(f.underflow, one.underflow);
        EXPECT_EQ(f.subnormal, one.subnormal);
        EXPECT_EQ(f.precision_loss, one.precision_loss);
        EXPECT_EQ(f.max_abs_error, one.max_abs_error);
        EXPECT_EQ(f.max_rel_error, one.max_rel_error);
        EXPECT_EQ(f.mean_rel_error, one.mean_rel_error);
      }
    });
  }
}

// The largest quotient |round(x) - x| / |x| computed in float, value by value, over the
// nonzero finite values that did not overflow (the formats it is used with overflow to
// inf or NaN: a finite result did not overflow).
float largest_quotient(const std::vector<float>& x, const Format& f) {
  std::vector<float> r(x.size());
  fpguard::round(std::span<const float>(x), std::span<float>(r), f, RoundOptions{});
  float want = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float ax = std::fabs(x[i]);
    if (ax == 0 || !std::isfinite(ax) || !std::isfinite(r[i])) continue;
    want = std::max(want, std::fabs(r[i] - x[i]) / ax);
  }
  return want;
}

// The largest relative error is the largest float quotient (the kernels take most
// quotients as a product with 1/|x| and divide only where the maximum may change).
TEST(Stats, MaxRelativeErrorIsTheLargestFloatQuotient) {
  const auto x = mixed_data(300'007, 7);
  StatsOptions o;
  o.threads = 2;
  for (const char* name : {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"}) {
    SCOPED_TRACE(name);
    const Format f = parse_format(name);
    EXPECT_EQ(stats(std::span<const float>(x), {f}, o).formats[0].max_rel_error,
              largest_quotient(x, f));
  }
}

// A format's counts and largest absolute error from the float32 kernels (f) against the
// float64 kernels' (d): exactly; its mean relative error (float quotients, partly as
// products with 1/|x|, summed in float blocks) to 1e-5.
void expect_float64_counts(const FormatStats& f, const FormatStats& d) {
  EXPECT_EQ(f.overflow, d.overflow);
  EXPECT_EQ(f.underflow, d.underflow);
  EXPECT_EQ(f.subnormal, d.subnormal);
  EXPECT_EQ(f.precision_loss, d.precision_loss);
  EXPECT_EQ(f.max_abs_error, d.max_abs_error);
  EXPECT_NEAR(f.mean_rel_error, d.mean_rel_error, 1e-5 * d.mean_rel_error);
}

// Data mostly beyond float8's range (N(0,1) x 3e4: most vectors overflow float8_e4m3fn
// in every lane, which the float32 kernels count without rounding them), with NaN and
// infinities among them: the counts and largest errors of the float64 kernels.
TEST(Stats, WideDataMatchesFloat64Kernels) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 3e4f);
  std::vector<float> x(100'003);
  for (auto& v : x) v = nd(rng);
  x[100] = std::numeric_limits<float>::quiet_NaN();
  x[205] = std::numeric_limits<float>::infinity();
  x[310] = 448.0f;  // float8_e4m3fn's max: no overflow
  x[311] = 464.0f;  // its tie above max, which rounds down to 448: no overflow either
  const std::vector<double> xd(x.begin(), x.end());
  StatsOptions o;
  o.threads = 1;
  const Stats f = stats(std::span<const float>(x), kFormats, o);
  const Stats d = stats(std::span<const double>(xd), kFormats, o);
  for (std::size_t i = 0; i < kFormats.size(); ++i) {
    SCOPED_TRACE(kFormats[i].name);
    expect_float64_counts(f.formats[i], d.formats[i]);
    EXPECT_NEAR(f.formats[i].max_rel_error, d.formats[i].max_rel_error,
                1e-6 * d.formats[i].max_rel_error);
  }
  EXPECT_GT(f.formats[2].overflow, x.size() * 9 / 10);  // (the path this test is for)
}

// A ReLU's outputs: half the values exactly 0 (some -0), the rest N(0, 1), a few under the
// formats' smallest normals; most vectors mix zeros with in-range values, which the float32
// kernels take inline (stats_simd.cpp, EachFormat<true>). Zeros have no relative error:
// they must not count in its mean, nor as underflow; the counts and largest errors are the
// float64 kernels', the largest relative error the largest float quotient.
TEST(Stats, ReluOutputsMatchFloat64Kernels) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(200'003);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = std::max(nd(rng), 0.0f);
    if (i % 97 == 0) x[i] = -0.0f;
    if (i % 89 == 0) x[i] *= 1e-4f;  // under float8's 2^-6 and bfloat16's quantum of 1
  }
  const std::vector<double> xd(x.begin(), x.end());
  StatsOptions o;
  o.threads = 1;
  const std::vector<Format> formats = {parse_format("float16"), parse_format("bfloat16"),
                                       parse_format("float8_e4m3fn")};
  const Stats d = stats(std::span<const double>(xd), formats, o);
  test::on_every_target([&] {
    const Stats f = stats(std::span<const float>(x), formats, o);
    EXPECT_EQ(f.tensor.zeros, d.tensor.zeros);
    EXPECT_GT(f.tensor.zeros, x.size() / 3);
    for (std::size_t i = 0; i < formats.size(); ++i) {
      SCOPED_TRACE(formats[i].name);
      expect_float64_counts(f.formats[i], d.formats[i]);
      EXPECT_EQ(f.formats[i].max_rel_error, largest_quotient(x, formats[i]));
    }
    EXPECT_GT(f.formats[2].subnormal + f.formats[2].underflow, 0u);  // (the lanes it is for)
  });
}

// N(0, 1) values, the common case: no chunk needs a test per vector. float16 and bfloat16
// have few or no values under their smallest normals in a chunk, float8_e4m3fn about 1.3%
// (2^-6), float8_e5m2 and fp4 (2^-14 and 1) others; fp4's largest value (6) is passed in
// some chunks. The counts and largest errors are the float64 kernels', the largest
// relative error the largest float quotient.
TEST(Stats, NormalDataMatchesFloat64Kernels) {
  std::mt19937 rng(10);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(300'007);
  for (auto& v : x) v = nd(rng);
  const std::vector<double> xd(x.begin(), x.end());
  StatsOptions o;
  o.threads = 1;
  const std::vector<Format> formats = {parse_format("float16"), parse_format("bfloat16"),
                                       parse_format("float8_e4m3fn"), parse_format("float8_e5m2"),
                                       parse_format("fp4")};
  const Stats d = stats(std::span<const double>(xd), formats, o);
  test::on_every_target([&] {
    const Stats f = stats(std::span<const float>(x), formats, o);
    for (std::size_t i = 0; i < formats.size(); ++i) {
      SCOPED_TRACE(formats[i].name);
      expect_float64_counts(f.formats[i], d.formats[i]);
      EXPECT_EQ(f.formats[i].max_rel_error, largest_quotient(x, formats[i]));
    }
    EXPECT_GT(f.formats[2].subnormal, 1000u);  // (the lanes it is for)
    EXPECT_GT(f.formats[2].underflow, 100u);
    EXPECT_GT(f.formats[2].precision_loss, 100u);
  });
}

// distribution = false: the same counts, extremes and format numbers, without the
// histogram and moments; histogram = false: without the histogram alone.
TEST(Stats, WithoutTheDistributionTheRestIsUnchanged) {
  const auto x = wide_data(100'003, 4);
  StatsOptions full, light;
  light.distribution = false;
  const Stats a = stats(std::span<const float>(x), kFormats, full);
  const Stats b = stats(std::span<const float>(x), kFormats, light);
  EXPECT_TRUE(b.tensor.exponent_histogram.empty());
  EXPECT_TRUE(std::isnan(b.tensor.mean));
  EXPECT_TRUE(std::isnan(b.tensor.std));
  EXPECT_EQ(a.tensor.zeros, b.tensor.zeros);
  EXPECT_EQ(a.tensor.nan, b.tensor.nan);
  EXPECT_EQ(a.tensor.min, b.tensor.min);
  EXPECT_EQ(a.tensor.max, b.tensor.max);
  EXPECT_EQ(a.tensor.absmax, b.tensor.absmax);
  EXPECT_EQ(a.tensor.min_abs_nonzero, b.tensor.min_abs_nonzero);
  for (std::size_t i = 0; i < kFormats.size(); ++i) {
    SCOPED_TRACE(kFormats[i].name);
    EXPECT_EQ(a.formats[i].overflow, b.formats[i].overflow);
    EXPECT_EQ(a.formats[i].underflow, b.formats[i].underflow);
    EXPECT_EQ(a.formats[i].subnormal, b.formats[i].subnormal);
    EXPECT_EQ(a.formats[i].max_rel_error, b.formats[i].max_rel_error);
    EXPECT_EQ(a.formats[i].verdict, b.formats[i].verdict);
  }
  // Without the histogram alone: the same mean and std, bit for bit, and the rest.
  StatsOptions moments;
  moments.histogram = false;
  const Stats c = stats(std::span<const float>(x), kFormats, moments);
  EXPECT_FALSE(a.tensor.exponent_histogram.empty());
  EXPECT_TRUE(c.tensor.exponent_histogram.empty());
  EXPECT_EQ(a.tensor.mean, c.tensor.mean);
  EXPECT_EQ(a.tensor.std, c.tensor.std);
  auto without_histogram = a;
  without_histogram.tensor.exponent_histogram.clear();
  expect_same_counts(without_histogram, c);
}

// Threads take blocks of chunks as they come free, and each block's sums are added in
// order: every number, the float sums included, is the same on any number of threads. The
// data has chunks for each of the kernels' passes: N(0, 1) values, a ReLU's outputs, wide
// values, and a NaN.
TEST(Stats, EveryNumberIsTheSameOnAnyNumberOfThreads) {
  auto x = wide_data(1'000'003, 2);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (std::size_t i = 0; i < 2'000'000; ++i)
    x.push_back(i < 1'000'000 ? nd(rng) : std::max(nd(rng), 0.0f));
  x[1'500'001] = std::numeric_limits<float>::quiet_NaN();
  StatsOptions o;
  o.threads = 1;
  const Stats one = stats(std::span<const float>(x), kFormats, o);
  for (const int threads : {2, 3, 5}) {
    SCOPED_TRACE(threads);
    o.threads = threads;
    const Stats s = stats(std::span<const float>(x), kFormats, o);
    expect_same_counts(one, s);
    EXPECT_EQ(one.tensor.mean, s.tensor.mean);
    EXPECT_EQ(one.tensor.std, s.tensor.std);
    for (std::size_t i = 0; i < kFormats.size(); ++i)
      EXPECT_EQ(one.formats[i].mean_rel_error, s.formats[i].mean_rel_error) << kFormats[i].name;
  }
}

// The exponent histogram against a count made here with std::ilogb, on values over the
// whole float range (subnormals, zeros, inf and NaN among them), on one and two threads:
// the accumulators are merged and summarised only between the bins of their smallest and
// largest |value|, so bins at both ends must survive.
TEST(Stats, ExponentHistogramAgainstIlogb) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-149, 127), pick(0, 50);
  for (const std::size_t n : {std::size_t{1}, std::size_t{4097}, std::size_t{300'001}}) {
    std::vector<float> x(n);
    std::map<int, std::uint64_t> want;
    for (std::size_t i = 0; i < n; ++i) {
      const int p = pick(rng);
      x[i] = p == 0   ? 0.0f
             : p == 1 ? std::numeric_limits<float>::quiet_NaN()
             : p == 2 ? -std::numeric_limits<float>::infinity()
                      : (p % 2 ? -1.0f : 1.0f) * std::ldexp(mant(rng), ex(rng));
      if (std::isfinite(x[i]) && x[i] != 0) ++want[std::ilogb(x[i])];
    }
    for (const int threads : {1, 2}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " threads=" + std::to_string(threads));
      StatsOptions o;
      o.threads = threads;
      EXPECT_EQ(stats(std::span<const float>(x), {}, o).tensor.exponent_histogram, want);
      const std::vector<double> xd(x.begin(), x.end());
      EXPECT_EQ(stats(std::span<const double>(xd), {}, o).tensor.exponent_histogram, want);
    }
  }
}

// The same on chunks whose values span few binades (the histogram's byte-compare path):
// N(0,1) values scaled into the normal range, across the subnormal boundary and into the
// subnormals, with zeros among them, for one to several groups of fields per chunk.
TEST(Stats, NarrowExponentHistogramAgainstIlogb) {
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 20);
  for (const int k : {0, -60, -118, -122, -135}) {
    for (const float spread : {1.0f, 1e-3f}) {
      std::vector<float> x(3 * 4096 + 100);
      std::map<int, std::uint64_t> want;
      for (auto& v : x) {
        const float base = pick(rng) == 0 ? 0.0f : nd(rng);
        v = std::ldexp(pick(rng) == 1 ? base * spread : base, k);
        if (v != 0) ++want[std::ilogb(v)];
      }
      SCOPED_TRACE("k=" + std::to_string(k) + " spread=" + std::to_string(spread));
      StatsOptions o;
      o.threads = 1;
      EXPECT_EQ(stats(std::span<const float>(x), {}, o).tensor.exponent_histogram, want);
    }
  }
}

// Every length up to a few SIMD vectors past a chunk, so every tail path runs.
TEST(Stats, EveryTailLength) {
  const auto all = wide_data(2048 + 70, 3);
  StatsOptions o;
  o.threads = 1;
  for (std::size_t n :
       {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 2047, 2048, 2049, 2048 + 70}) {
    SCOPED_TRACE(n);
    std::vector<float> x(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<double> xd(x.begin(), x.end());
    const Stats f = stats(std::span<const float>(x), kFormats, o);
    const Stats d = stats(std::span<const double>(xd), kFormats, o);
    EXPECT_EQ(f.tensor.count, n);
    EXPECT_EQ(f.tensor.exponent_histogram, d.tensor.exponent_histogram);
    EXPECT_EQ(f.tensor.zeros, d.tensor.zeros);
    if (n) {
      EXPECT_EQ(f.tensor.min, d.tensor.min);
      EXPECT_EQ(f.tensor.max, d.tensor.max);
    }
    for (std::size_t i = 0; i < kFormats.size(); ++i) {
      EXPECT_EQ(f.formats[i].overflow, d.formats[i].overflow);
      EXPECT_EQ(f.formats[i].underflow, d.formats[i].underflow);
      EXPECT_EQ(f.formats[i].subnormal, d.formats[i].subnormal);
    }
  }
}

// A tensor viewing a large .npy file's map gives back the pages each thread has read
// (StatsOptions::release_pages, Tensor::release_pages): the numbers are those of the same
// values in memory, and the tensor's values, read again, are intact; an owned tensor is
// left alone.
TEST(Stats, FileMappedTensorsAreGivenBackIntact) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fpguard_stats_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto values = mixed_data(600'011, 9);  // 2.4 MB: mapped, not read
  for (const DType dtype : {DType::float32, DType::float64}) {
    SCOPED_TRACE(to_string(dtype));
    Tensor owned(dtype, {static_cast<std::int64_t>(values.size())});
    if (dtype == DType::float32)
      std::copy(values.begin(), values.end(), owned.data<float>().begin());
    else
      std::copy(values.begin(), values.end(), owned.data<double>().begin());
    const auto path = dir / "x.npy";
    write_npy(path, owned);
    const Tensor mapped = read_npy(path);
    ASSERT_TRUE(mapped.is_view());
    for (const int threads : {1, 2, 3}) {
      StatsOptions o;
      o.threads = threads;
      o.release_pages = true;
      const Stats want = dtype == DType::float32
                             ? stats(std::span<const float>(values), kFormats, o)
                             : stats(std::span<const double>(owned.data<double>()), kFormats, o);
      for (const Tensor* t : {&mapped, static_cast<const Tensor*>(&owned)}) {
        expect_same_counts(stats(*t, kFormats, o), want);
        ASSERT_EQ(std::memcmp(t->bytes(), std::as_const(owned).bytes(), owned.nbytes()), 0);
      }
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Stats, HandCheckedFloat16) {
  // 65504 = max (no error), 65520 overflows, 2^-25 underflows (tie to 0), 3 * 2^-26 rounds
  // to 2^-24 (a subnormal), 1 + 2^-11 ties to 1 (rel error 2^-11 / (1 + 2^-11)).
  const std::vector<float> x = {65504.0f, 65520.0f, 0x1p-25f, 0x3p-26f, 1.0f + 0x1p-11f, 0.0f};
  const Stats s = stats(std::span<const float>(x), {parse_format("float16")});
  const FormatStats& f = s.formats[0];
  EXPECT_EQ(f.overflow, 1u);
  EXPECT_EQ(f.underflow, 1u);
  EXPECT_EQ(f.subnormal, 1u);
  EXPECT_EQ(f.max_abs_error, 0x1p-11);  // 1 + 2^-11 -> 1
  EXPECT_EQ(f.max_rel_error, 1.0);      // the underflowed 2^-25: all of it lost
  EXPECT_EQ(f.verdict, Verdict::overflow);
  EXPECT_EQ(s.tensor.absmax, 65520.0);
  EXPECT_DOUBLE_EQ(f.headroom_bits, std::log2(65504.0 / 65520.0));
  EXPECT_EQ(f.scale, 0x1p-2);             // 65520 / 2 = 32760 > 0.5 * 65504 = 32752
  EXPECT_EQ(f.scale_for_square, 0x1p-9);  // (65520/512)^2 = 16376 <= 32752
}

TEST(Stats, ScaleIsLargestPowerOfTwo) {
  // absmax 1000 into float16 with margin 0.5: 1000 * 2^5 = 32000 <= 32752 < 64000.
  const std::vector<float> x = {-1000.0f, 3.0f};
  const Stats s = stats(std::span<const float>(x), {parse_format("float16")});
  EXPECT_EQ(s.formats[0].scale, 32.0);
  // squared: (1000 * 2^k)^2 <= 32752 -> k = -3 (125^2 = 15625), k = -2 gives 62500.
  EXPECT_EQ(s.formats[0].scale_for_square, 0.125);
  EXPECT_EQ(s.formats[0].verdict, Verdict::ok);
}

TEST(Stats, Verdicts) {
  StatsOptions o;
  const Format e4m3 = parse_format("float8_e4m3fn");
  {  // NaN present: nonfinite, whatever else
    const std::vector<float> x = {1.0f, std::numeric_limits<float>::quiet_NaN(), 1e6f};
    EXPECT_EQ(stats(std::span<const float>(x), {e4m3}, o).formats[0].verdict, Verdict::nonfinite);
  }
  {  // 2 of 100 non-zero values underflow (> 1%)
    std::vector<float> x(100, 1.0f);
    x[0] = x[1] = 1e-6f;
    EXPECT_EQ(stats(std::span<const float>(x), {e4m3}, o).formats[0].verdict, Verdict::underflow);
    x[1] = 1.0f;  // 1 of 100: not more than 1%
    EXPECT_EQ(stats(std::span<const float>(x), {e4m3}, o).formats[0].verdict, Verdict::ok);
  }
  {  // subnormal e4m3 values that keep 1 of 4 bits: precision
    std::vector<float> x(100, 1.0f);
    x[0] = x[1] = 0x1.8p-10f;  // 0.75 * 2^-9 rounds to 2^-9: rel error 1/3 > 2^-2
    const Stats s = stats(std::span<const float>(x), {e4m3}, o);
    EXPECT_EQ(s.formats[0].precision_loss, 2u);
    EXPECT_EQ(s.formats[0].verdict, Verdict::precision);
  }
}

TEST(Stats, EmptyAndAllZero) {
  const std::vector<float> empty;
  const Stats s = stats(std::span<const float>(empty), kFormats);
  EXPECT_EQ(s.tensor.count, 0u);
  EXPECT_TRUE(std::isnan(s.tensor.min));
  EXPECT_TRUE(std::isnan(s.tensor.mean));
  EXPECT_EQ(s.formats[0].verdict, Verdict::ok);
  const std::vector<float> zeros(10, -0.0f);
  const Stats z = stats(std::span<const float>(zeros), kFormats);
  EXPECT_EQ(z.tensor.zeros, 10u);
  EXPECT_EQ(z.tensor.absmax, 0.0);
  EXPECT_TRUE(std::isnan(z.tensor.min_abs_nonzero));
  EXPECT_TRUE(std::isinf(z.formats[0].headroom_bits));
  EXPECT_EQ(z.formats[0].scale, 1.0);
}

TEST(Stats, TensorDtypes) {
  Tensor h(DType::float16, {3});
  const Format f16 = parse_format("float16");
  auto codes = h.data<std::uint16_t>();
  codes[0] = static_cast<std::uint16_t>(encode(1.5, f16));
  codes[1] = static_cast<std::uint16_t>(encode(-65504.0, f16));
  codes[2] = static_cast<std::uint16_t>(encode(0x1p-24, f16));
  const Stats s = stats(h, {parse_format("bfloat16")});
  EXPECT_EQ(s.tensor.min, -65504.0);
  EXPECT_EQ(s.tensor.min_abs_nonzero, 0x1p-24);
  Tensor i(DType::int32, {4});
  auto iv = i.data<std::int32_t>();
  iv[0] = 70000, iv[1] = -3, iv[2] = 0, iv[3] = 1;
  const Stats si = stats(i, {f16});
  EXPECT_EQ(si.tensor.max, 70000.0);
  EXPECT_EQ(si.tensor.zeros, 1u);
  EXPECT_EQ(si.formats[0].overflow, 1u);
}

}  // namespace
}  // namespace fpguard
