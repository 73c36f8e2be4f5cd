// Tensors and .npy files: round trips of every dtype and shape, the exact header NumPy
// expects, every read error naming the file, big-endian data, and atomic file output.
#include "fpguard/tensor.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"

namespace fpguard {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() /
           ("fpguard_tensor_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    ASSERT_TRUE(fs::create_directory(dir_));
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path path(const std::string& name) const { return dir_ / name; }
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir_), {}));
  }
  fs::path dir_;
};

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

// A version 1.0 .npy file as NumPy writes it (header padded to 64 bytes).
std::string npy_bytes(const std::string& descr, const std::string& shape,
                      const std::string& payload, const std::string& fortran = "False") {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + payload;
}

constexpr DType kAllDTypes[] = {DType::float64, DType::float32, DType::float16, DType::bfloat16,
                                DType::int8,    DType::int16,   DType::int32,   DType::int64,
                                DType::uint8,   DType::uint16,  DType::uint32,  DType::uint64,
                                DType::bool_};

using Npy = TempDir;

TEST_F(Npy, RoundTripsEveryDTypeAndShape) {
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {5}, {2, 3, 4}};
  std::mt19937 rng(1);
  for (DType d : kAllDTypes) {
    for (const auto& shape : shapes) {
      SCOPED_TRACE(std::string(to_string(d)) + " rank " + std::to_string(shape.size()));
      Tensor t(d, shape);
      for (std::size_t i = 0; i < t.nbytes(); ++i)
        t.bytes()[i] = static_cast<std::byte>(d == DType::bool_ ? rng() % 2 : rng() % 256);
      const fs::path p = path(std::string(to_string(d)) + ".npy");
      if (d == DType::bfloat16) {
        EXPECT_THROW(write_npy(p, t), Error);  // NumPy has no bfloat16
        EXPECT_FALSE(fs::exists(p));
        continue;
      }
      write_npy(p, t);
      const std::string raw = slurp(p);
      ASSERT_GE(raw.size(), 10u);
      const std::size_t header_end =
          10 + static_cast<unsigned char>(raw[8]) + 256 * static_cast<unsigned char>(raw[9]);
      EXPECT_EQ(header_end % 64, 0u);  // NumPy aligns the data to 64 bytes
      EXPECT_EQ(raw[header_end - 1], '\n');
      EXPECT_EQ(raw.size(), header_end + t.nbytes());
      const Tensor r = read_npy(p);
      EXPECT_EQ(r.dtype(), d);
      EXPECT_EQ(r.shape(), shape);
      EXPECT_EQ(r.size(), t.size());
      ASSERT_EQ(r.nbytes(), t.nbytes());
      if (t.nbytes() > 0) {  // an empty tensor has no storage to compare
        EXPECT_EQ(0, std::memcmp(r.bytes(), t.bytes(), t.nbytes()));
      }
    }
  }
  EXPECT_EQ(entries(), std::size(kAllDTypes) - 1);  // no temporary files left behind
}

TEST_F(Npy, WritesTheHeaderNumPyWrites) {
  Tensor t(DType::float32, {2, 3});
  write_npy(path("a.npy"), t);
  EXPECT_EQ(slurp(path("a.npy")), npy_bytes("<f4", "(2, 3)", std::string(24, '\0')));
  Tensor u(DType::uint8, {5});
  write_npy(path("b.npy"), u);
  EXPECT_EQ(slurp(path("b.npy")), npy_bytes("|u1", "(5,)", std::string(5, '\0')));
  Tensor s(DType::bool_, {});
  write_npy(path("c.npy"), s);
  EXPECT_EQ(slurp(path("c.npy")), npy_bytes("|b1", "()", std::string(1, '\0')));
}

TEST_F(Npy, ReadsBigEndianAndOtherOrders) {
  // 1.0f and -2.5f big-endian: 3f800000, c0200000
  spit(path("be.npy"),
       npy_bytes(">f4", "(2,)", std::string("\x3f\x80\x00\x00\xc0\x20\x00\x00", 8)));
  const Tensor t = read_npy(path("be.npy"));
  ASSERT_EQ(t.dtype(), DType::float32);
  EXPECT_EQ(t.data<float>()[0], 1.0f);
  EXPECT_EQ(t.data<float>()[1], -2.5f);

  spit(path("be8.npy"), npy_bytes(">f8", "(1,)", std::string("\x3f\xf8\0\0\0\0\0\0", 8)));
  EXPECT_EQ(read_npy(path("be8.npy")).data<double>()[0], 1.5);

  spit(path("be2.npy"), npy_bytes(">i2", "(2,)", std::string("\x01\x02\xff\xfe", 4)));
  const Tensor i = read_npy(path("be2.npy"));
  EXPECT_EQ(i.data<std::int16_t>()[0], 0x0102);
  EXPECT_EQ(i.data<std::int16_t>()[1], -2);

  spit(path("h.npy"), npy_bytes("<f2", "(1,)", std::string("\x00\x3c", 2)));  // 1.0 as float16
  const Tensor h = read_npy(path("h.npy"));
  ASSERT_EQ(h.dtype(), DType::float16);
  EXPECT_EQ(h.data<std::uint16_t>()[0], 0x3C00);

  // Format version 2.0: a 4-byte header length.
  std::string v2 = npy_bytes("<i4", "(1,)", std::string("\x07\0\0\0", 4));
  v2[6] = '\x02';
  v2.insert(10, std::string("\0\0", 2));  // header length 2 -> 4 bytes; pad stays valid
  spit(path("v2.npy"), v2);
  EXPECT_EQ(read_npy(path("v2.npy")).data<std::int32_t>()[0], 7);
}

// NpyReader hands out the array in pieces, from its memory map (little-endian) or read
// (big-endian), equal to read_npy's; bytes past the array are an error at once.
TEST_F(Npy, ReadsInPieces) {
  Tensor t(DType::float32, {1000});
  for (std::size_t i = 0; i < 1000; ++i) t.data<float>()[i] = static_cast<float>(i) * 0.5f - 7;
  write_npy(path("le.npy"), t);
  std::string be;
  for (const float v : t.data<float>()) {
    const auto b = std::bit_cast<std::uint32_t>(v);
    for (int k = 3; k >= 0; --k) be.push_back(static_cast<char>(b >> (8 * k)));
  }
  spit(path("be.npy"), npy_bytes(">f4", "(1000,)", be));
  for (const char* name : {"le.npy", "be.npy"}) {
    NpyReader r(path(name));
    EXPECT_EQ(r.dtype(), DType::float32);
    EXPECT_EQ(r.shape(), (std::vector<std::int64_t>{1000}));
    std::vector<float> got;
    for (std::span<const std::byte> piece; !(piece = r.next(300)).empty();) {
      EXPECT_LE(piece.size(), 300u * 4) << name;
      const auto* f = reinterpret_cast<const float*>(piece.data());
      got.insert(got.end(), f, f + piece.size() / 4);
    }
    EXPECT_TRUE(std::equal(got.begin(), got.end(), t.data<float>().begin(), t.data<float>().end()))
        << name;
  }
  std::vector<std::byte> buf(4 * 999);
  NpyReader r(path("le.npy"));
  EXPECT_EQ(r.read(buf), 999u);
  EXPECT_EQ(r.read(buf), 1u);
  EXPECT_EQ(r.read(buf), 0u);
  spit(path("long.npy"), slurp(path("le.npy")) + "xx");
  EXPECT_THROW(NpyReader{path("long.npy")}, Error);
  spit(path("short.npy"), slurp(path("le.npy")).substr(0, 200));
  EXPECT_THROW(NpyReader{path("short.npy")}, Error);
}

void expect_read_error(const fs::path& p, const std::string& what);

// A view shares its bytes with its copies and its owner; the first write access through
// a tensor copies them into its own storage and leaves the viewed bytes as they were.
TEST(TensorView, CopiesOnWrite) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1.5f, -2, 3, 0x1p-140f});
  const auto* bytes = reinterpret_cast<const std::byte*>(owner->data());
  Tensor v = Tensor::view(DType::float32, {2, 2}, bytes, owner);
  EXPECT_TRUE(v.is_view());
  EXPECT_EQ(v.nbytes(), 16u);
  EXPECT_EQ(std::as_const(v).bytes(), bytes);
  Tensor copy = v;  // shares the view
  EXPECT_TRUE(copy.is_view());
  EXPECT_EQ(std::as_const(copy).bytes(), bytes);
  EXPECT_EQ(std::as_const(copy).data<float>()[3], 0x1p-140f);
  copy.data<float>()[0] = 7;  // write access: copy's own storage now
  EXPECT_FALSE(copy.is_view());
  EXPECT_NE(std::as_const(copy).bytes(), bytes);
  EXPECT_EQ((*owner)[0], 1.5f);
  EXPECT_EQ(std::as_const(v).data<float>()[0], 1.5f);
  EXPECT_EQ(copy.data<float>()[0], 7.0f);
  for (std::size_t i = 1; i < 4; ++i) EXPECT_EQ(copy.data<float>()[i], (*owner)[i]);
  v.bytes()[0] = std::byte{0};  // bytes() is write access too
  EXPECT_FALSE(v.is_view());
  EXPECT_EQ((*owner)[0], 1.5f);
  // The owner lives as long as a view of it does.
  std::weak_ptr<std::vector<float>> alive = owner;
  Tensor last = Tensor::view(DType::float32, {4}, bytes, std::move(owner));
  EXPECT_FALSE(alive.expired());
  last = Tensor();
  EXPECT_TRUE(alive.expired());
}

// Tensor::shared: a view of the tensor's own bytes, which its copies share (no copy per
// copy) until one is written through; views, strings and empty tensors as they were.
TEST(TensorView, SharedCopiesShareTheBytes) {
  Tensor t(DType::float32, {3});
  t.data<float>()[0] = 1, t.data<float>()[1] = -0.0f, t.data<float>()[2] = 0x1p-149f;
  const Tensor expect = t;
  Tensor s = Tensor::shared(std::move(t));
  EXPECT_TRUE(s.is_view());
  EXPECT_EQ(s.shape(), expect.shape());
  ASSERT_EQ(s.nbytes(), expect.nbytes());
  EXPECT_EQ(std::memcmp(std::as_const(s).bytes(), expect.bytes(), s.nbytes()), 0);
  Tensor copy = s;
  EXPECT_TRUE(copy.is_view());
  EXPECT_EQ(std::as_const(copy).bytes(), std::as_const(s).bytes());
  copy.data<float>()[0] = 7;  // its own bytes now; s's unchanged
  EXPECT_FALSE(copy.is_view());
  EXPECT_EQ(std::as_const(s).data<float>()[0], 1.0f);
  // The bytes live as long as a view of them does.
  const std::byte* shared_bytes = std::as_const(s).bytes();
  Tensor last = s;
  s = Tensor();
  EXPECT_EQ(std::as_const(last).bytes(), shared_bytes);
  EXPECT_EQ(std::as_const(last).data<float>()[2], 0x1p-149f);
  EXPECT_FALSE(Tensor::shared(Tensor(DType::float32, {0})).is_view());
  EXPECT_FALSE(Tensor::shared(Tensor(DType::string, {2})).is_view());
  const Tensor viewed = Tensor::shared(Tensor(DType::int64, {2}));
  const Tensor again = Tensor::shared(viewed);
  EXPECT_EQ(again.bytes(), viewed.bytes());
}

// A file's map: its bytes as read from the file; an empty file maps to nothing; a
// directory or a missing file is an Error naming it.
TEST_F(Npy, FileMapHoldsTheFilesBytes) {
  std::string bytes(10000, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 3);
  spit(path("f.bin"), bytes);
  const auto m = FileMap::open(path("f.bin"), "f.bin");
  ASSERT_EQ(m->size(), bytes.size());
  EXPECT_EQ(std::memcmp(m->data(), bytes.data(), bytes.size()), 0);
  m->release(0, m->size());  // given back: read again from the file
  EXPECT_EQ(std::memcmp(m->data(), bytes.data(), bytes.size()), 0);
  spit(path("empty.bin"), "");
  EXPECT_EQ(FileMap::open(path("empty.bin"), "e")->size(), 0u);
  EXPECT_THROW(FileMap::open(dir_, "dir"), Error);
  try {
    FileMap::open(path("missing.bin"), "missing.bin");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "missing.bin");
    EXPECT_NE(e.problem().find("cannot open"), std::string::npos) << e.what();
  }
}

// Pages discarded from a map hold no memory and keep their addresses: the bytes around
// them are the file's, and a new map is not placed in the hole (the map's own munmap
// would take it away).
TEST_F(Npy, FileMapDiscardKeepsTheRestAndTheAddresses) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::string bytes(8 * page, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 11 + 5);
  spit(path("d.bin"), bytes);
  const auto m = FileMap::open(path("d.bin"), "d.bin");
  const std::size_t from = 2 * page + 100, to = 6 * page + 100;  // whole pages 3 to 5
  m->discard(from, to - from);
  EXPECT_EQ(std::memcmp(m->data(), bytes.data(), 3 * page), 0);
  EXPECT_EQ(std::memcmp(m->data() + 6 * page, bytes.data() + 6 * page, 2 * page), 0);
  unsigned char resident[3] = {1, 1, 1};
  void* hole = const_cast<std::byte*>(m->data()) + 3 * page;
  ASSERT_EQ(::mincore(hole, 3 * page, resident), 0);  // mapped (no ENOMEM), nothing held
  EXPECT_EQ(resident[0] | resident[1] | resident[2], 0);
  void* other = ::mmap(hole, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(other, MAP_FAILED);
  EXPECT_NE(other, hole);
  ::munmap(other, page);
}

// A FileCopy reads nothing until asked, then the file's bytes of its range (not the map's:
// the range is discarded from the map here); given back, whole or in part, it reads them
// again, on any number of threads at once; from a file cut short since, an Error.
TEST_F(Npy, FileCopyReadsTheFileWhenAskedAndAgainAfterRelease) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::string bytes(5 * page + 77, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 3);
  spit(path("c.bin"), bytes);
  const auto m = FileMap::open(path("c.bin"), "c.bin", FileMap::Keep::map_and_descriptor);
  const std::size_t from = 3, n = bytes.size() - 3;
  FileCopy c(m, from, n, "c.bin: w");
  m->discard(from, n);
  EXPECT_FALSE(c.held());
  unsigned char resident = 1;
  ASSERT_EQ(::mincore(const_cast<std::byte*>(c.address()), page, &resident), 0);
  EXPECT_EQ(resident & 1, 0);  // no memory before the values are asked for
  const auto same = [&] { return std::memcmp(c.data(), bytes.data() + from, n) == 0; };
  EXPECT_TRUE(same());
  EXPECT_TRUE(c.held());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c.address()) % page, 0u);
  c.release(0, n);
  EXPECT_FALSE(c.held());
  ASSERT_EQ(::mincore(const_cast<std::byte*>(c.address()), page, &resident), 0);
  EXPECT_EQ(resident & 1, 0);
  EXPECT_TRUE(same());
  c.release(page + 1, page);  // no whole page inside: nothing given back
  EXPECT_TRUE(c.held());
  c.release(page, 2 * page);
  EXPECT_FALSE(c.held());
  std::vector<std::thread> readers;
  std::atomic<int> equal = 0;
  for (int i = 0; i < 4; ++i) readers.emplace_back([&] { equal += same() ? 1 : 0; });
  for (auto& r : readers) r.join();
  EXPECT_EQ(equal, 4);
  // Through a Tensor: release_pages gives the copy's pages back, bytes() reads them again.
  const auto shared = std::make_shared<const FileCopy>(m, 1, 4 * page, "c.bin: v");
  const Tensor t = Tensor::view(DType::float32, {static_cast<std::int64_t>(page)}, shared);
  EXPECT_TRUE(t.maps_file());
  EXPECT_EQ(t.file_copy(), shared.get());
  EXPECT_EQ(t.address(), shared->address());
  EXPECT_FALSE(shared->held());  // address() reads nothing
  EXPECT_EQ(std::memcmp(t.bytes(), bytes.data() + 1, 4 * page), 0);
  t.release_pages();
  EXPECT_FALSE(shared->held());
  EXPECT_EQ(std::memcmp(t.bytes(), bytes.data() + 1, 4 * page), 0);
  Tensor owned = t;
  owned.data<float>()[0] = 1.0f;  // copy on write, from the values
  EXPECT_EQ(std::memcmp(owned.bytes() + 4, bytes.data() + 5, 4 * page - 4), 0);
  EXPECT_EQ(owned.file_copy(), nullptr);
  std::filesystem::resize_file(path("c.bin"), page);
  c.release(0, n);
  try {
    c.data();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "c.bin: w");
    EXPECT_NE(e.problem().find("changed"), std::string::npos) << e.what();
  }
}

// A large .npy file is read as a view of its memory map, with the values read_npy gives
// from a stream; the file is not written (even when the tensor is), and errors stay those
// of the stream reader (bytes past the array, a truncated file).
TEST_F(Npy, ReadsLargeFilesAsAMemoryMap) {
  Tensor t = Tensor::uninitialized(DType::float32, {512, 1024});  // 2 MiB
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (float& v : t.data<float>()) v = normal(rng);
  write_npy(path("big.npy"), t);
  const std::string file = slurp(path("big.npy"));
  Tensor m = read_npy(path("big.npy"));
  EXPECT_TRUE(m.is_view());
  std::istringstream in(file);
  const Tensor streamed = read_npy(in, file.size(), "big.npy");
  EXPECT_FALSE(streamed.is_view());
  ASSERT_EQ(m.shape(), t.shape());
  EXPECT_EQ(std::memcmp(std::as_const(m).bytes(), streamed.bytes(), m.nbytes()), 0);
  EXPECT_EQ(std::memcmp(std::as_const(m).bytes(), t.bytes(), m.nbytes()), 0);
  m.data<float>()[0] = 1e30f;
  EXPECT_EQ(slurp(path("big.npy")), file);
  // Small files are read (a map would cost a page and a mapping per file).
  write_npy(path("small.npy"), Tensor(DType::float32, {16}));
  EXPECT_FALSE(read_npy(path("small.npy")).is_view());
  spit(path("long.npy"), file + "x");
  expect_read_error(path("long.npy"), "unexpected bytes after the array data");
  spit(path("short.npy"), file.substr(0, file.size() - 4));
  expect_read_error(path("short.npy"), "truncated .npy data");
}

// read_npy(p) must throw an Error located at the file, saying `what`.
void expect_read_error(const fs::path& p, const std::string& what) {
  try {
    read_npy(p);
    ADD_FAILURE() << "no Error for " << p;
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), p.string());
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST_F(Npy, ReadErrorsNameTheFile) {
  const std::string good = npy_bytes("<f4", "(2,)", std::string(8, '\0'));
  spit(path("magic.npy"), "\x93NUMPX" + good.substr(6));
  expect_read_error(path("magic.npy"), "bad magic");
  spit(path("empty.npy"), "");
  expect_read_error(path("empty.npy"), "bad magic");
  spit(path("header.npy"), good.substr(0, 40));
  expect_read_error(path("header.npy"), "truncated .npy header");
  spit(path("len.npy"), good.substr(0, 9));
  expect_read_error(path("len.npy"), "truncated .npy header");
  spit(path("data.npy"), good.substr(0, good.size() - 1));
  expect_read_error(path("data.npy"), "truncated .npy data");
  spit(path("fortran.npy"), npy_bytes("<f4", "(2, 2)", std::string(16, '\0'), "True"));
  expect_read_error(path("fortran.npy"), "Fortran");
  spit(path("c8.npy"), npy_bytes("<c8", "(1,)", std::string(8, '\0')));
  expect_read_error(path("c8.npy"), "unsupported dtype '<c8'");
  spit(path("obj.npy"), npy_bytes("|O", "(1,)", std::string(8, '\0')));
  expect_read_error(path("obj.npy"), "unsupported dtype '|O'");
  spit(path("f3.npy"), npy_bytes("<f3", "(1,)", std::string(3, '\0')));
  expect_read_error(path("f3.npy"), "unsupported dtype");
  spit(path("shape.npy"), npy_bytes("<f4", "(-1,)", ""));
  expect_read_error(path("shape.npy"), "negative dimension");
  std::string v9 = good;
  v9[6] = '\x09';
  spit(path("version.npy"), v9);
  expect_read_error(path("version.npy"), "unsupported .npy version 9");
  expect_read_error(path("missing.npy"), "cannot open");
}

using AtomicWrite = TempDir;

TEST_F(AtomicWrite, WritesTheWholeFile) {
  write_file_atomic(path("out.txt"), [](std::ostream& out) { out << "hello"; });
  EXPECT_EQ(slurp(path("out.txt")), "hello");
  write_file_atomic(path("out.txt"), [](std::ostream& out) { out << "bye"; });
  EXPECT_EQ(slurp(path("out.txt")), "bye");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicWrite, LeavesNothingWhenTheWriterThrows) {
  auto failing = [](std::ostream& out) {
    out << "partial";
    throw std::runtime_error("writer failed");
  };
  EXPECT_THROW(write_file_atomic(path("new.txt"), failing), std::runtime_error);
  EXPECT_EQ(entries(), 0u);  // neither the target nor a temporary file
  spit(path("old.txt"), "original");
  EXPECT_THROW(write_file_atomic(path("old.txt"), failing), std::runtime_error);
  EXPECT_EQ(slurp(path("old.txt")), "original");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicWrite, RefusesAMissingDirectory) {
  const fs::path p = path("no_such_dir") / "out.npy";
  try {
    write_file_atomic(p, [](std::ostream& out) { out << "x"; });
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), p.string());
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_npy(p, Tensor(DType::float32, {1})), Error);
  EXPECT_FALSE(fs::exists(path("no_such_dir")));
}

using SameFile = TempDir;

TEST_F(SameFile, RefusesTheInputAsOutput) {
  spit(path("in.npy"), "x");
  const auto expect_refused = [&](const fs::path& out) {
    try {
      check_not_same_file(path("in.npy"), out, "--output");
      ADD_FAILURE() << "not refused: " << out;
    } catch (const Error& e) {
      EXPECT_EQ(e.where(), "--output");
    }
  };
  expect_refused(path("in.npy"));
  expect_refused(dir_ / "." / "in.npy");
  fs::create_directory(path("sub"));
  expect_refused(dir_ / "sub" / ".." / "in.npy");
  fs::create_symlink(path("in.npy"), path("link.npy"));
  expect_refused(path("link.npy"));
  fs::create_hard_link(path("in.npy"), path("hard.npy"));
  expect_refused(path("hard.npy"));

  EXPECT_NO_THROW(check_not_same_file(path("in.npy"), path("out.npy"), "--output"));
  spit(path("other.npy"), "y");
  EXPECT_NO_THROW(check_not_same_file(path("in.npy"), path("other.npy"), "--output"));
}

}  // namespace
}  // namespace fpguard
