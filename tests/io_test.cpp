// Tensor file I/O beyond .npy: .npz archives (stored and deflated), ONNX TensorProto .pb
// files (raw_data and every typed field), directories of tensors (ONNX test_data_set_N)
// and read_tensors' dispatch. Interoperability is checked both ways against NumPy and
// onnx themselves (tests/data/make_io_fixtures.py, run with Debian's /usr/bin/python3);
// every error names its file. Comparisons are exact: bytes, shapes, names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard {
namespace {

namespace fs = std::filesystem;

const fs::path kScript = fs::path(FPGUARD_SOURCE_DIR) / "tests/data/make_io_fixtures.py";
const fs::path kTestAdd = "/usr/share/libonnx-testdata/data/node/test_add/test_data_set_0";
constexpr const char* kPython = "/usr/bin/python3";  // Debian's, with numpy and onnx

constexpr DType kAllDTypes[] = {
    DType::float64, DType::float32, DType::float16, DType::bfloat16, DType::int8,
    DType::int16,   DType::int32,   DType::int64,   DType::uint8,    DType::uint16,
    DType::uint32,  DType::uint64,  DType::bool_,
};

fs::path fresh_dir(const std::string& tag) {
  std::random_device rd;
  const fs::path d =
      fs::temp_directory_path() /
      ("fpguard_io_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs the fixture script; throws with its output when it fails.
void run_script(const std::vector<std::string>& args, const fs::path& log) {
  std::string cmd = std::string(kPython) + " " + quote(kScript.string());
  for (const auto& a : args) (cmd += ' ') += quote(a);  // g++ 12 -O3 warns on " " + temp
  (cmd += " > ") += quote(log.string());
  cmd += " 2>&1";
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("fixture script failed: " + cmd + "\n" + slurp(log));
}

// The fixtures NumPy and onnx wrote, generated once per test process.
const fs::path& fixtures() {
  struct Dir {
    fs::path path = fresh_dir("fixtures");
    Dir() { run_script({path.string()}, path / "log.txt"); }
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

class Io : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = fresh_dir("case"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path path(const std::string& name) const { return dir_ / name; }
  fs::path dir_;
};

// A tensor whose bytes are a fixed pseudo-random pattern (every bit pattern is a valid
// value of every dtype but bool, which gets 0/1).
Tensor pattern_tensor(DType d, std::vector<std::int64_t> shape, std::uint32_t seed) {
  Tensor t(d, std::move(shape));
  std::mt19937 gen(seed);
  for (std::size_t i = 0; i < t.nbytes(); ++i)
    t.bytes()[i] = std::byte(d == DType::bool_ ? gen() & 1 : gen() & 0xff);
  return t;
}

std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(t.bytes());
  return {p, p + t.nbytes()};
}

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_EQ(to_string(got.dtype()), to_string(want.dtype())) << what;
  EXPECT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(bytes_of(got), bytes_of(want)) << what;
}

// Every DType in a few shapes: scalar, empty, and ordinary.
std::vector<NamedTensor> every_dtype(bool with_bfloat16) {
  std::vector<NamedTensor> v;
  std::uint32_t seed = 1;
  for (DType d : kAllDTypes) {
    if (d == DType::bfloat16 && !with_bfloat16) continue;
    const std::string n(to_string(d));
    v.push_back({n, pattern_tensor(d, {2, 3, 5}, seed++)});
    v.push_back({n + "_scalar", pattern_tensor(d, {}, seed++)});
    v.push_back({n + "_empty", pattern_tensor(d, {0, 4}, seed++)});
  }
  return v;
}

// f() must throw an Error located exactly at `where` whose message contains `what`.
void expect_error(const std::function<void()>& f, const std::string& where,
                  const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no Error; expected '" << what << "' at " << where;
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), where) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// ---- zip structure, read independently of libzip ------------------------------------

std::uint32_t le(const std::string& s, std::size_t at, int n) {
  std::uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(s.at(at + i));
  return v;
}

// The (name, compression method) of every central directory entry.
std::vector<std::pair<std::string, int>> zip_methods(const std::string& zip) {
  const std::size_t eocd = zip.rfind(std::string("PK\x05\x06", 4));
  if (eocd == std::string::npos) throw std::runtime_error("no end of central directory");
  const std::uint32_t entries = le(zip, eocd + 10, 2);
  std::size_t at = le(zip, eocd + 16, 4);
  std::vector<std::pair<std::string, int>> out;
  for (std::uint32_t i = 0; i < entries; ++i) {
    if (zip.compare(at, 4, std::string("PK\x01\x02", 4)) != 0)
      throw std::runtime_error("bad central directory");
    const int method = static_cast<int>(le(zip, at + 10, 2));
    const std::uint32_t name_len = le(zip, at + 28, 2);
    out.emplace_back(zip.substr(at + 46, name_len), method);
    at += 46 + name_len + le(zip, at + 30, 2) + le(zip, at + 32, 2);
  }
  return out;
}

// ---- .npz ------------------------------------------------------------------------------

TEST_F(Io, NpzRoundTripsEveryDTypeStoredAndDeflated) {
  const auto tensors = every_dtype(false);
  for (bool compress : {false, true}) {
    const fs::path p = path(compress ? "deflated.npz" : "stored.npz");
    write_npz(p, tensors, compress);
    const auto methods = zip_methods(slurp(p));
    ASSERT_EQ(methods.size(), tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_EQ(methods[i].first, tensors[i].name + ".npy");
      EXPECT_EQ(methods[i].second, compress ? 8 : 0) << methods[i].first;  // deflate, store
    }
    const auto back = read_npz(p);
    ASSERT_EQ(back.size(), tensors.size());
    for (std::size_t i = 0; i < back.size(); ++i) {
      EXPECT_EQ(back[i].name, tensors[i].name);
      expect_same(back[i].tensor, tensors[i].tensor, p.string() + " " + tensors[i].name);
    }
  }
}

TEST_F(Io, NpzDeflateCompresses) {
  const std::vector<NamedTensor> zeros = {{"z", Tensor(DType::float32, {1 << 16})}};
  write_npz(path("s.npz"), zeros, false);
  write_npz(path("d.npz"), zeros, true);
  EXPECT_GT(fs::file_size(path("s.npz")), std::uintmax_t{1 << 18});
  EXPECT_LT(fs::file_size(path("d.npz")), std::uintmax_t{4096});
  expect_same(read_npz(path("d.npz")).at(0).tensor, zeros[0].tensor, "deflated zeros");
}

TEST_F(Io, NpzEmptyArchive) {
  write_npz(path("e.npz"), {}, true);
  EXPECT_TRUE(read_npz(path("e.npz")).empty());
}

TEST_F(Io, NpzWriteRefusesBfloat16DuplicatesAndEmptyNamesLeavingTargetUntouched) {
  spit(path("x.npz"), "old");
  const Tensor t = pattern_tensor(DType::float32, {2}, 7);
  expect_error(
      [&] {
        write_npz(path("x.npz"), {{"a", t}, {"b", Tensor(DType::bfloat16, {2})}}, true);
      },
      path("x.npz").string() + ":b.npy", "bfloat16");
  expect_error(
      [&] {
        write_npz(path("x.npz"), {{"a", t}, {"a", t}}, false);
      },
      path("x.npz").string(), "two tensors are named 'a'");
  expect_error(
      [&] {
        write_npz(path("x.npz"), {{"", t}}, false);
      },
      path("x.npz").string(), "empty name");
  expect_error(
      [&] {
        write_npz(path("missing/x.npz"), {{"a", t}}, false);
      },
      path("missing/x.npz").string(), "does not exist");
  EXPECT_EQ(slurp(path("x.npz")), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), {}), 1);  // no temporary left
}

TEST_F(Io, NpzWrittenByNumPy) {
  for (const std::string name : {"savez", "savez_compressed"}) {
    const fs::path p = fixtures() / (name + ".npz");
    const auto got = read_npz(p);
    std::istringstream order(slurp(fixtures() / (name + ".order.txt")));
    std::vector<std::string> want_names;
    for (std::string line; std::getline(order, line);) want_names.push_back(line);
    std::vector<std::string> names;
    for (const auto& t : got) names.push_back(t.name);
    EXPECT_EQ(names, want_names) << p;  // archive order, as np.load lists it
    const auto methods = zip_methods(slurp(p));
    ASSERT_FALSE(methods.empty());
    for (const auto& m : methods) EXPECT_EQ(m.second, name == "savez" ? 0 : 8) << m.first;
    for (const auto& t : got) {
      const std::string array = t.name == "arr_0" ? "f32" : t.name;
      expect_same(t.tensor, read_npy(fixtures() / "arrays" / (array + ".npy")),
                  p.string() + ":" + t.name);
    }
  }
}

TEST_F(Io, NpzReadableByNumPy) {
  const auto tensors = every_dtype(false);
  write_npz(path("ours_stored.npz"), tensors, false);
  write_npz(path("ours_deflated.npz"), tensors, true);
  const fs::path out = path("back");
  fs::create_directory(out);
  run_script({"--read", out.string(), path("ours_stored.npz").string(),
              path("ours_deflated.npz").string()},
             path("log.txt"));
  for (const std::string stem : {"ours_stored", "ours_deflated"})
    for (const auto& t : tensors)
      expect_same(read_npy(out / (stem + "." + t.name + ".npy")), t.tensor, stem + " " + t.name);
}

TEST_F(Io, NpzZipBombGuardRefusesBeforeDecompressing) {
  EXPECT_EQ(kNpzMaxEntryBytes, std::uint64_t{4} << 30);
  // The entry declares 5 GiB (a zip64 size) but holds a few bytes: refused from the
  // directory alone, with the default limit.
  const fs::path bomb = fixtures() / "bomb.npz";
  expect_error([&] { read_npz(bomb); }, bomb.string() + ":big.npy",
               "uncompressed size 5368709120 bytes exceeds the limit of 4294967296 bytes");
  // 1 MiB of zeros deflates to about 1 KiB; a 64 KiB limit refuses it.
  const std::vector<NamedTensor> zeros = {{"z", Tensor(DType::uint8, {1 << 20})}};
  write_npz(path("z.npz"), zeros, true);
  expect_error([&] { read_npz(path("z.npz"), 1 << 16); }, path("z.npz").string() + ":z.npy",
               "exceeds the limit of 65536 bytes");
  const std::uint64_t exact = npy_header(zeros[0].tensor, "").size() + (1 << 20);
  EXPECT_EQ(read_npz(path("z.npz"), exact).at(0).tensor.size(), std::size_t{1} << 20);
  expect_error([&] { read_npz(path("z.npz"), exact - 1); }, path("z.npz").string() + ":z.npy",
               "exceeds the limit");
}

TEST_F(Io, NpzCorruptEntryIsFoundByItsCrc) {
  const std::vector<NamedTensor> t = {{"a", pattern_tensor(DType::int32, {64}, 3)},
                                      {"b", pattern_tensor(DType::int32, {64}, 4)}};
  write_npz(path("c.npz"), t, false);
  std::string zip = slurp(path("c.npz"));
  // Flip the last data byte of entry "b": the .npy parses, only the CRC can tell.
  const std::size_t b_local = zip.find(std::string("PK\x03\x04", 4), 4);
  ASSERT_NE(b_local, std::string::npos);
  const std::size_t b_data_end =
      b_local + 30 + le(zip, b_local + 26, 2) + le(zip, b_local + 28, 2) + le(zip, b_local + 18, 4);
  zip[b_data_end - 1] = static_cast<char>(zip[b_data_end - 1] ^ 1);
  spit(path("c.npz"), zip);
  expect_error([&] { read_npz(path("c.npz")); }, path("c.npz").string() + ":b.npy", "CRC");
}

TEST_F(Io, NpzErrorsNameArchiveAndEntry) {
  const fs::path fx = fixtures();
  expect_error([&] { read_npz(fx / "trailing.npz"); }, (fx / "trailing.npz").string() + ":t.npy",
               "unexpected bytes after the array data");
  expect_error([&] { read_npz(fx / "dup.npz"); }, (fx / "dup.npz").string() + ":x.npy",
               "duplicate entry");
  expect_error([&] { read_npz(fx / "other.npz"); }, (fx / "other.npz").string() + ":readme.txt",
               "not a .npy entry");
  // A .npy is not a zip.
  write_npy(path("a.npy"), pattern_tensor(DType::float32, {3}, 5));
  fs::copy_file(path("a.npy"), path("a.npz"));
  expect_error([&] { read_npz(path("a.npz")); }, path("a.npz").string(), "not a .npz file");
  expect_error([&] { read_npz(path("none.npz")); }, path("none.npz").string(), "cannot open");
  // An archive cut short loses its central directory.
  write_npz(path("t.npz"), {{"a", pattern_tensor(DType::float32, {100}, 6)}}, false);
  const std::string whole = slurp(path("t.npz"));
  spit(path("t.npz"), whole.substr(0, whole.size() / 2));
  expect_error([&] { read_npz(path("t.npz")); }, path("t.npz").string(), "not a .npz file");
  // An entry that is not a .npy inside, and one whose header asks for more than it holds.
  expect_error([&] { read_npz(fx / "badmagic.npz"); }, (fx / "badmagic.npz").string() + ":x.npy",
               "bad magic");
  expect_error([&] { read_npz(fx / "short.npz"); }, (fx / "short.npz").string() + ":s.npy",
               "truncated .npy data");
}

// ---- .npy from memory and streams --------------------------------------------------------

TEST_F(Io, NpyFromMemoryMatchesFile) {
  for (DType d : kAllDTypes) {
    if (d == DType::bfloat16) continue;
    const Tensor t = pattern_tensor(d, {3, 2}, 11);
    write_npy(path("m.npy"), t);
    const std::string file = slurp(path("m.npy"));
    EXPECT_EQ(file, npy_header(t, "") +
                        std::string(reinterpret_cast<const char*>(t.bytes()), t.nbytes()));
    const Tensor m = read_npy(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(file.data()), file.size()),
        "m");
    expect_same(m, t, std::string(to_string(d)));
    std::istringstream in(file);
    expect_same(read_npy(in, file.size(), "s"), t, std::string(to_string(d)) + " stream");
    // One stray byte after the data, in memory and in a file.
    const std::string more = file + "x";
    expect_error(
        [&] {
          read_npy(std::span<const std::byte>(reinterpret_cast<const std::byte*>(more.data()),
                                              more.size()),
                   "mem");
        },
        "mem", "1 unexpected bytes after the array data");
    spit(path("more.npy"), more);
    expect_error([&] { read_npy(path("more.npy")); }, path("more.npy").string(),
                 "unexpected bytes after the array data");
  }
}

TEST_F(Io, NpyHeaderClaimingHugeShapeIsRefusedBeforeAllocating) {
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }";
  dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
  dict.push_back('\n');
  const std::string file = std::string("\x93NUMPY\x01\x00", 8) +
                           static_cast<char>(dict.size() & 0xff) +
                           static_cast<char>(dict.size() >> 8) + dict + std::string(8, '\0');
  expect_error(
      [&] {
        read_npy(std::span<const std::byte>(reinterpret_cast<const std::byte*>(file.data()),
                                            file.size()),
                 "huge");
      },
      "huge", "needs 8000000000000 bytes");
}

// ---- ONNX TensorProto .pb -----------------------------------------------------------------

TEST_F(Io, PbRoundTripsEveryDType) {
  for (const auto& t : every_dtype(true)) {
    const fs::path p = path(t.name + ".pb");
    write_tensor_pb(p, t);
    const NamedTensor back = read_tensor_pb(p);
    EXPECT_EQ(back.name, t.name);
    expect_same(back.tensor, t.tensor, p.string());
  }
  // Without a name, the file stem names it.
  write_tensor_pb(path("stem.pb"), {"", pattern_tensor(DType::int16, {3}, 9)});
  EXPECT_EQ(read_tensor_pb(path("stem.pb")).name, "stem");
}

TEST_F(Io, PbWrittenByOnnxRawAndTyped) {
  const fs::path fx = fixtures();
  int checked = 0;
  for (const std::string kind : {"pb_raw", "pb_typed"}) {
    for (const auto& e : fs::directory_iterator(fx / kind)) {
      const std::string stem = e.path().stem().string();
      const NamedTensor t = read_tensor_pb(e.path());
      EXPECT_EQ(t.name, stem);
      if (stem == "bf16") {
        ASSERT_EQ(t.tensor.dtype(), DType::bfloat16);
        const Tensor bits = read_npy(fx / "arrays/bf16_bits.npy");
        EXPECT_EQ(t.tensor.shape(), bits.shape());
        EXPECT_EQ(bytes_of(t.tensor), bytes_of(bits)) << e.path();
        // 1.0, -2.5, 2^-7, bf16 max, -0.0, inf, 2^-133 (the smallest subnormal)
        std::vector<double> v(t.tensor.size());
        to_double(t.tensor, v);
        const std::vector<double> want = {1.0, -2.5, 0x1p-7, 0x1.fep127, -0.0, INFINITY, 0x1p-133};
        EXPECT_EQ(v, want);
        EXPECT_TRUE(std::signbit(v[4]));
      } else {
        expect_same(t.tensor, read_npy(fx / "arrays" / (stem + ".npy")), e.path().string());
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 15 + 13);  // raw: 14 arrays + bf16; typed: 12 (no scalar, empty) + bf16
  // Two spot checks that do not go through read_npy: float16 and bool.
  const Tensor h = read_tensor_pb(fx / "pb_raw/f16.pb").tensor;
  EXPECT_EQ(h.data<std::uint16_t>()[0], 0x3c00);  // 1.0
  EXPECT_EQ(h.data<std::uint16_t>()[1], 0xc100);  // -2.5
  EXPECT_EQ(h.data<std::uint16_t>()[2], 0x7bff);  // 65504
  const Tensor b = read_tensor_pb(fx / "pb_typed/b.pb").tensor;
  EXPECT_EQ(b.shape(), (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(bytes_of(b), (std::vector<std::uint8_t>{1, 0, 1}));
}

TEST_F(Io, PbReadableByOnnx) {
  const auto tensors = every_dtype(true);
  std::vector<std::string> args = {"--read", path("back").string()};
  fs::create_directory(path("back"));
  for (const auto& t : tensors) {
    write_tensor_pb(path(t.name + ".pb"), t);
    args.push_back(path(t.name + ".pb").string());
  }
  run_script(args, path("log.txt"));
  for (const auto& t : tensors) {
    EXPECT_EQ(slurp(path("back") / (t.name + ".name.txt")), t.name);
    const Tensor back = read_npy(path("back") / (t.name + ".npy"));
    if (t.tensor.dtype() != DType::bfloat16) {
      expect_same(back, t.tensor, t.name);
      continue;
    }
    // onnx turns bfloat16 into float32 by shifting the bits up 16.
    ASSERT_EQ(back.dtype(), DType::float32) << t.name;
    EXPECT_EQ(back.shape(), t.tensor.shape());
    const auto f = back.data<float>();
    const auto h = t.tensor.data<std::uint16_t>();
    for (std::size_t i = 0; i < h.size(); ++i)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(f[i]), std::uint32_t{h[i]} << 16) << t.name << i;
  }
}

// Protobuf wire format, written by hand so the error cases do not depend on onnx.
class Pb {
 public:
  Pb& varint(int field, std::int64_t v) {
    tag(field, 0);
    raw_varint(static_cast<std::uint64_t>(v));
    return *this;
  }
  Pb& bytes(int field, const std::string& s) {
    tag(field, 2);
    raw_varint(s.size());
    out_ += s;
    return *this;
  }
  Pb& packed(int field, const std::vector<std::int64_t>& v) {
    std::string body;
    std::swap(body, out_);
    for (auto x : v) raw_varint(static_cast<std::uint64_t>(x));
    std::swap(body, out_);
    return bytes(field, body);
  }
  Pb& packed_floats(int field, const std::vector<float>& v) {
    return bytes(field, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  }
  Pb& packed_doubles(int field, const std::vector<double>& v) {
    return bytes(field, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8));
  }
  const std::string& str() const { return out_; }

 private:
  void tag(int field, int wire) { raw_varint(static_cast<std::uint64_t>(field << 3 | wire)); }
  void raw_varint(std::uint64_t v) {
    while (v >= 0x80) out_.push_back(static_cast<char>((v & 0x7f) | 0x80)), v >>= 7;
    out_.push_back(static_cast<char>(v));
  }
  std::string out_;
};

// TensorProto field numbers.
enum : int {
  kDims = 1,
  kDataType = 2,
  kSegment = 3,
  kFloatData = 4,
  kInt32Data = 5,
  kStringData = 6,
  kInt64Data = 7,
  kName = 8,
  kRawData = 9,
  kDoubleData = 10,
  kUint64Data = 11,
  kExternalData = 13,
  kDataLocation = 14,
};

TEST_F(Io, PbTypedFieldsOfEveryDType) {
  struct Case {
    int data_type;
    DType dtype;
    Pb pb;
    std::vector<double> want;
  };
  std::vector<Case> cases;
  cases.push_back({1, DType::float32, Pb().packed_floats(kFloatData, {1.5f, -0.0f}), {1.5, -0.0}});
  cases.push_back(
      {11, DType::float64, Pb().packed_doubles(kDoubleData, {0x1p-1074, 3.0}), {0x1p-1074, 3.0}});
  cases.push_back({10, DType::float16, Pb().packed(kInt32Data, {0x3c00, 0x0001}), {1.0, 0x1p-24}});
  cases.push_back(
      {16, DType::bfloat16, Pb().packed(kInt32Data, {0x3f80, 0xff80}), {1.0, -INFINITY}});
  cases.push_back({3, DType::int8, Pb().packed(kInt32Data, {-128, 127}), {-128, 127}});
  cases.push_back({5, DType::int16, Pb().packed(kInt32Data, {-32768, 32767}), {-32768, 32767}});
  cases.push_back(
      {6, DType::int32, Pb().packed(kInt32Data, {INT32_MIN, INT32_MAX}), {INT32_MIN, INT32_MAX}});
  cases.push_back(
      {7, DType::int64, Pb().packed(kInt64Data, {-(1ll << 53), 1ll << 53}), {-0x1p53, 0x1p53}});
  cases.push_back({2, DType::uint8, Pb().packed(kInt32Data, {0, 255}), {0, 255}});
  cases.push_back({4, DType::uint16, Pb().packed(kInt32Data, {0, 65535}), {0, 65535}});
  cases.push_back(
      {12, DType::uint32, Pb().packed(kUint64Data, {0, 4294967295}), {0, 4294967295.0}});
  cases.push_back({13, DType::uint64, Pb().packed(kUint64Data, {1ll << 53, 7}), {0x1p53, 7}});
  cases.push_back({9, DType::bool_, Pb().packed(kInt32Data, {1, 0}), {1, 0}});
  for (auto& c : cases) {
    const fs::path p = path(std::string("t") + std::to_string(c.data_type) + ".pb");
    spit(p, Pb().varint(kDims, 2).varint(kDataType, c.data_type).str() + c.pb.str());
    const NamedTensor t = read_tensor_pb(p);
    EXPECT_EQ(t.name, p.stem().string());
    ASSERT_EQ(t.tensor.dtype(), c.dtype) << p;
    EXPECT_EQ(t.tensor.shape(), std::vector<std::int64_t>{2});
    std::vector<double> v(2);
    to_double(t.tensor, v);
    EXPECT_EQ(v, c.want) << p;
    EXPECT_EQ(std::signbit(v[1]), std::signbit(c.want[1])) << p;
  }
  // uint64 beyond 2^53 and int64 extremes, checked as integers.
  spit(path("u.pb"), Pb().varint(kDims, 1).varint(kDataType, 13).packed(kUint64Data, {-1}).str());
  EXPECT_EQ(read_tensor_pb(path("u.pb")).tensor.data<std::uint64_t>()[0], UINT64_MAX);
  spit(path("i.pb"),
       Pb().varint(kDims, 1).varint(kDataType, 7).packed(kInt64Data, {INT64_MIN}).str());
  EXPECT_EQ(read_tensor_pb(path("i.pb")).tensor.data<std::int64_t>()[0], INT64_MIN);
  // Unpacked repeated values are accepted too (protobuf parsers must).
  spit(path("up.pb"), Pb().varint(kDims, 2)
                          .varint(kDataType, 3)
                          .varint(kInt32Data, -5)
                          .varint(kInt32Data, 6)
                          .bytes(kName, "n")
                          .str());
  const NamedTensor up = read_tensor_pb(path("up.pb"));
  EXPECT_EQ(up.name, "n");
  EXPECT_EQ(up.tensor.data<std::int8_t>()[0], -5);
  EXPECT_EQ(up.tensor.data<std::int8_t>()[1], 6);
}

// Strings: UTF-8 text in string_data, and NumPy's '<U<n>' (UTF-32) in .npy, read back
// from both, the .npy by NumPy too.
TEST_F(Io, StringsRoundTripThroughPbAndNpy) {
  Tensor t(DType::string, {2, 2});
  const std::vector<std::string> text = {"0.5", "", "h\xc3\xa9llo", "\xe6\x97\xa5\xf0\x9f\x99\x82"};
  std::copy(text.begin(), text.end(), t.data<std::string>().begin());
  write_tensor_pb(path("s.pb"), {"s", t});
  const auto pb = read_tensor_pb(path("s.pb"));
  ASSERT_EQ(pb.tensor.dtype(), DType::string);
  EXPECT_EQ(pb.tensor.shape(), t.shape());
  EXPECT_EQ(std::vector<std::string>(pb.tensor.data<std::string>().begin(),
                                     pb.tensor.data<std::string>().end()),
            text);
  write_npy(path("s.npy"), t);
  const std::string file = slurp(path("s.npy"));
  EXPECT_NE(file.find("'descr': '<U5'"), std::string::npos);  // "héllo": 5 code points
  const Tensor back = read_npy(path("s.npy"));
  ASSERT_EQ(back.dtype(), DType::string);
  EXPECT_EQ(back.shape(), t.shape());
  EXPECT_EQ(
      std::vector<std::string>(back.data<std::string>().begin(), back.data<std::string>().end()),
      text);
  expect_error([&] { npy_header(t, "x"); }, "x", "write_npy only");
}

TEST_F(Io, PbErrorsNameTheFile) {
  struct Case {
    std::string file;
    std::string bytes;
    std::string what;
  };
  const Pb f2 = Pb().varint(kDims, 2).varint(kDataType, 1);  // FLOAT [2]
  const std::string eight(8, '\0');
  const std::vector<Case> cases = {
      {"string.pb", Pb().varint(kDims, 2).varint(kDataType, 8).bytes(kStringData, "a").str(),
       "string_data has 1 values, but dims [2] need 2"},
      {"string_raw.pb", Pb().varint(kDims, 1).varint(kDataType, 8).bytes(kRawData, "a").str(),
       "STRING tensor has raw_data (expected string_data)"},
      {"fp8.pb", Pb().varint(kDims, 1).varint(kDataType, 17).bytes(kRawData, "\x01").str(),
       "unsupported data_type FLOAT8E4M3FN (17)"},
      {"complex.pb", Pb().varint(kDims, 1).varint(kDataType, 14).str(),
       "unsupported data_type COMPLEX64 (14)"},
      {"undefined.pb", Pb().varint(kDims, 1).bytes(kRawData, "\x01").str(),
       "unsupported data_type UNDEFINED (0)"},
      {"unknown.pb", Pb().varint(kDataType, 99).str(), "unsupported data_type unknown (99)"},
      {"empty.pb", "", "unsupported data_type UNDEFINED (0)"},
      {"external.pb",
       f2.str() + Pb().bytes(kExternalData, Pb().bytes(1, "location").bytes(2, "w.bin").str())
                      .varint(kDataLocation, 1)
                      .str(),
       "stored externally"},
      {"external2.pb", f2.str() + Pb().varint(kDataLocation, 1).str(), "stored externally"},
      {"segment.pb",
       f2.str() + Pb().bytes(kSegment, Pb().varint(1, 0).varint(2, 1).str()).str() +
           Pb().bytes(kRawData, eight).str(),
       "segmented"},
      {"short_raw.pb", f2.str() + Pb().bytes(kRawData, std::string(7, '\0')).str(),
       "raw_data has 7 bytes, but dims [2] of FLOAT need 8"},
      {"long_raw.pb", f2.str() + Pb().bytes(kRawData, std::string(12, '\0')).str(),
       "raw_data has 12 bytes, but dims [2] of FLOAT need 8"},
      {"short_typed.pb", f2.str() + Pb().packed_floats(kFloatData, {1}).str(),
       "float_data has 1 values, but dims [2] of FLOAT need 2"},
      {"long_typed.pb",
       Pb().varint(kDims, 2)
           .varint(kDims, 2)
           .varint(kDataType, 7)
           .packed(kInt64Data, {1, 2, 3, 4, 5})
           .str(),
       "int64_data has 5 values, but dims [2, 2] of INT64 need 4"},
      {"no_data.pb", f2.str(), "float_data has 0 values, but dims [2] of FLOAT need 2 (no data)"},
      {"negative.pb", Pb().varint(kDims, -1).varint(kDataType, 1).str(), "negative dimension -1"},
      {"both.pb", f2.str() + Pb().bytes(kRawData, eight).packed_floats(kFloatData, {1, 2}).str(),
       "has both raw_data and float_data"},
      {"wrong_field.pb", f2.str() + Pb().packed(kInt32Data, {1, 2}).str(),
       "FLOAT tensor has values in int32_data (expected raw_data or float_data)"},
      {"int8_range.pb",
       Pb().varint(kDims, 2).varint(kDataType, 3).packed(kInt32Data, {1, 128}).str(),
       "int32_data[1] = 128 is out of range for INT8"},
      {"uint8_range.pb", Pb().varint(kDims, 1).varint(kDataType, 2).packed(kInt32Data, {-1}).str(),
       "int32_data[0] = -1 is out of range for UINT8"},
      {"f16_range.pb",
       Pb().varint(kDims, 1).varint(kDataType, 10).packed(kInt32Data, {65536}).str(),
       "int32_data[0] = 65536 is out of range for FLOAT16"},
      {"u32_range.pb",
       Pb().varint(kDims, 1).varint(kDataType, 12).packed(kUint64Data, {1ll << 32}).str(),
       "uint64_data[0] = 4294967296 is out of range for UINT32"},
      {"bool_typed.pb", Pb().varint(kDims, 1).varint(kDataType, 9).packed(kInt32Data, {2}).str(),
       "int32_data[0] = 2 is out of range for BOOL"},
      {"bool_raw.pb", Pb().varint(kDims, 2).varint(kDataType, 9).bytes(kRawData, "\x01\x02").str(),
       "raw_data[1] = 2 is not a BOOL"},
      {"corrupt.pb", std::string("\x0a\xff\xff", 3), "not an ONNX TensorProto"},
      {"truncated.pb", f2.str() + Pb().bytes(kRawData, eight).str().substr(0, 5),
       "not an ONNX TensorProto"},
  };
  for (const auto& c : cases) {
    spit(path(c.file), c.bytes);
    expect_error([&] { read_tensor_pb(path(c.file)); }, path(c.file).string(), c.what);
  }
  // A .npy is not a TensorProto.
  write_npy(path("a.npy"), pattern_tensor(DType::float32, {3}, 5));
  expect_error([&] { read_tensor_pb(path("a.npy")); }, path("a.npy").string(),
               "not an ONNX TensorProto");
  expect_error([&] { read_tensor_pb(path("none.pb")); }, path("none.pb").string(), "cannot open");
}

// ---- directories and dispatch ------------------------------------------------------------

TEST_F(Io, OnnxTestDataSetDirectory) {
  ASSERT_TRUE(fs::is_directory(kTestAdd)) << kTestAdd << " (installed by scripts/setup)";
  for (const auto& got : {read_tensor_dir(kTestAdd), read_tensors(kTestAdd)}) {
    ASSERT_EQ(got.size(), 3u);
    // Names from TensorProto.name, in file order: input_0, input_1, output_0.
    EXPECT_EQ(got[0].name, "x");
    EXPECT_EQ(got[1].name, "y");
    EXPECT_EQ(got[2].name, "sum");
    for (const auto& t : got) {
      EXPECT_EQ(t.tensor.dtype(), DType::float32);
      EXPECT_EQ(t.tensor.shape(), (std::vector<std::int64_t>{3, 4, 5}));
      expect_same(t.tensor, read_npy(fixtures() / "testadd" / (t.name + ".npy")), t.name);
    }
    // The data set is consistent: sum = x + y, exactly in float32.
    for (std::size_t i = 0; i < got[2].tensor.size(); ++i)
      EXPECT_EQ(got[2].tensor.data<float>()[i],
                got[0].tensor.data<float>()[i] + got[1].tensor.data<float>()[i]);
  }
}

TEST_F(Io, DirectoryOfNpyAndPb) {
  const Tensor a = pattern_tensor(DType::float32, {2}, 1);
  const Tensor b = pattern_tensor(DType::bfloat16, {3}, 2);
  const Tensor c = pattern_tensor(DType::bool_, {4}, 3);
  write_npy(path("zeta.npy"), a);
  write_tensor_pb(path("input_0.pb"), {"beta", b});
  write_tensor_pb(path("input_1.pb"), {"", c});  // no name: the stem
  spit(path("README.txt"), "ignored");
  fs::create_directory(path("sub.npy"));  // not a file: ignored
  const auto got = read_tensor_dir(dir_);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].name, "beta");
  expect_same(got[0].tensor, b, "beta");
  EXPECT_EQ(got[1].name, "input_1");
  expect_same(got[1].tensor, c, "input_1");
  EXPECT_EQ(got[2].name, "zeta");
  expect_same(got[2].tensor, a, "zeta");

  // Two files giving one name.
  write_tensor_pb(path("other.pb"), {"zeta", a});
  expect_error([&] { read_tensor_dir(dir_); }, dir_.string(),
               "two files give the tensor name 'zeta'");
  fs::remove(path("other.pb"));
  // A bad file inside names that file.
  spit(path("bad.pb"), "\x0a\xff");
  expect_error([&] { read_tensor_dir(dir_); }, path("bad.pb").string(), "not an ONNX TensorProto");
  fs::remove(path("bad.pb"));
  // No tensors at all; not a directory.
  fs::create_directory(path("empty"));
  expect_error([&] { read_tensor_dir(path("empty")); }, path("empty").string(),
               "no .npy or .pb files");
  expect_error([&] { read_tensor_dir(path("zeta.npy")); }, path("zeta.npy").string(),
               "not a directory");
}

TEST_F(Io, DirectoryIsReadInNaturalFileOrder) {
  // input_10 after input_2 (graph-input order), whatever the tensor names are.
  const std::pair<int, const char*> files[] = {{10, "a"}, {2, "b"}, {0, "c"}, {1, "d"}};
  for (const auto& [i, name] : files)
    write_tensor_pb(path("input_" + std::to_string(i) + ".pb"),
                    {name, pattern_tensor(DType::float32, {1}, i)});
  const auto got = read_tensor_dir(dir_);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].name, "c");  // input_0
  EXPECT_EQ(got[1].name, "d");  // input_1
  EXPECT_EQ(got[2].name, "b");  // input_2
  EXPECT_EQ(got[3].name, "a");  // input_10
}

TEST_F(Io, ReadTensorsDispatchesOnWhatThePathIs) {
  const Tensor a = pattern_tensor(DType::int16, {5}, 1);
  write_npy(path("one.npy"), a);
  write_npz(path("two.npz"), {{"p", a}, {"q", pattern_tensor(DType::uint8, {2}, 2)}}, true);
  write_tensor_pb(path("three.pb"), {"named", a});
  const auto npy = read_tensors(path("one.npy"));
  ASSERT_EQ(npy.size(), 1u);
  EXPECT_EQ(npy[0].name, "one");
  expect_same(npy[0].tensor, a, "npy");
  const auto npz = read_tensors(path("two.npz"));
  ASSERT_EQ(npz.size(), 2u);
  EXPECT_EQ(npz[0].name, "p");
  EXPECT_EQ(npz[1].name, "q");
  const auto pb = read_tensors(path("three.pb"));
  ASSERT_EQ(pb.size(), 1u);
  EXPECT_EQ(pb[0].name, "named");
  expect_same(pb[0].tensor, a, "pb");
  fs::copy_file(path("one.npy"), path("UPPER.NPY"));
  EXPECT_EQ(read_tensors(path("UPPER.NPY")).at(0).name, "UPPER");

  spit(path("model.onnx"), "x");
  expect_error([&] { read_tensors(path("model.onnx")); }, path("model.onnx").string(),
               "unsupported tensor file type '.onnx' (expected .npy, .npz, .pb, or a directory");
  spit(path("noext"), "x");
  expect_error([&] { read_tensors(path("noext")); }, path("noext").string(),
               "unsupported tensor file (expected");
  expect_error([&] { read_tensors(path("missing.npy")); }, path("missing.npy").string(),
               "does not exist");
}

// The FIPS 180-4 examples (one and two blocks, and a million 'a's across many updates),
// and a file's hash equal to that of its bytes.
TEST(Sha256, StandardVectors) {
  auto hex = [](const std::string& s) {
    Sha256 h;
    h.update(s.data(), s.size());
    return h.hex();
  };
  EXPECT_EQ(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 m;
  const std::string a(1000, 'a');  // (not a multiple of the 64-byte block)
  for (int i = 0; i < 1000; ++i) m.update(a.data(), a.size());
  EXPECT_EQ(m.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  const fs::path f = fs::temp_directory_path() / ("fpguard_sha_" + std::to_string(::getpid()));
  {
    std::ofstream out(f, std::ios::binary);
    out << "abc";
  }
  EXPECT_EQ(sha256_file(f), hex("abc"));
  fs::remove(f);
  EXPECT_THROW(sha256_file(f), Error);
}

}  // namespace
}  // namespace fpguard
