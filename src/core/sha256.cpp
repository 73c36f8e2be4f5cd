// SHA-256 (FIPS 180-4) of bytes and of files: what identifies a model and its data in the
// partial results of a sharded check (docs/scale.md). A scalar implementation, and the
// x86 SHA extensions (SHA-NI) where the CPU has them: merge hashes the model again, and a
// scalar hash of a 20 MB model was a third of its time.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>

#include "fpguard/error.hpp"
#include "fpguard/io.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define FPGUARD_SHA_NI 1
#endif

namespace fpguard {

namespace {

constexpr std::array<std::uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

#if FPGUARD_SHA_NI

// CPUID: SSE4.1 is leaf 1's ECX bit 19, SHA leaf 7's EBX bit 29. (Not
// __builtin_cpu_supports("sha"): clang 14, which `make fuzz` builds with, does not know it.)
bool has_sha_ni() {
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19))) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (b & (1u << 29)) != 0;
  }();
  return yes;
}

// One 64-byte block with the SHA extensions (Intel's SHA-NI scheme: the state as ABEF and
// CDGH, four rounds per sha256rnds2 pair, the schedule by sha256msg1/msg2).
__attribute__((target("sha,sse4.1"))) void block_sha_ni(std::uint32_t* state,
                                                        const unsigned char* p) {
  const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state)), 0xB1);
  __m128i s1 =
      _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4)), 0x1B);
  __m128i s0 = _mm_alignr_epi8(tmp, s1, 8);  // ABEF
  s1 = _mm_blend_epi16(s1, tmp, 0xF0);       // CDGH
  const __m128i abef = s0, cdgh = s1;
  __m128i w[4];
  for (int j = 0; j < 16; ++j) {  // rounds 4j .. 4j+3
    if (j < 4)
      w[j] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * j)), mask);
    __m128i msg = _mm_add_epi32(
        w[j % 4], _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRound.data() + 4 * j)));
    s1 = _mm_sha256rnds2_epu32(s1, s0, msg);
    if (j >= 3 && j <= 14) {  // w[j+1] = W[4(j+1) ..]: finished from w[j] and w[j-1]
      __m128i& next = w[(j + 1) % 4];
      next = _mm_add_epi32(next, _mm_alignr_epi8(w[j % 4], w[(j + 3) % 4], 4));
      next = _mm_sha256msg2_epu32(next, w[j % 4]);
    }
    msg = _mm_shuffle_epi32(msg, 0x0E);
    s0 = _mm_sha256rnds2_epu32(s0, s1, msg);
    if (j >= 1 && j <= 12) w[(j + 3) % 4] = _mm_sha256msg1_epu32(w[(j + 3) % 4], w[j % 4]);
  }
  s0 = _mm_add_epi32(s0, abef);
  s1 = _mm_add_epi32(s1, cdgh);
  tmp = _mm_shuffle_epi32(s0, 0x1B);    // FEBA
  s1 = _mm_shuffle_epi32(s1, 0xB1);     // DCHG
  s0 = _mm_blend_epi16(tmp, s1, 0xF0);  // DCBA
  s1 = _mm_alignr_epi8(s1, tmp, 8);     // ABEF
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), s0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), s1);
}

#endif

}  // namespace

Sha256::Sha256()
    : state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
             0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::block(const unsigned char* p) {
#if FPGUARD_SHA_NI
  if (has_sha_ni()) return block_sha_ni(state_.data(), p);
#endif
  std::uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = std::uint32_t{p[4 * i]} << 24 | std::uint32_t{p[4 * i + 1]} << 16 |
           std::uint32_t{p[4 * i + 2]} << 8 | std::uint32_t{p[4 * i + 3]};
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3], e = state_[4],
                f = state_[5], g = state_[6], h = state_[7];
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t t1 =
        h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    const std::uint32_t t2 =
        (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  const std::uint32_t out[8] = {a, b, c, d, e, f, g, h};
  for (int i = 0; i < 8; ++i) state_[i] += out[i];
}

void Sha256::update(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  length_ += n;
  while (n > 0) {
    if (used_ == 0 && n >= buffer_.size()) {  // whole blocks straight from the input
      block(p);
      p += buffer_.size(), n -= buffer_.size();
      continue;
    }
    const std::size_t take = std::min(n, buffer_.size() - used_);
    std::copy(p, p + take, buffer_.begin() + static_cast<std::ptrdiff_t>(used_));
    used_ += take, p += take, n -= take;
    if (used_ == buffer_.size()) block(buffer_.data()), used_ = 0;
  }
}

std::string Sha256::hex() {
  const std::uint64_t bits = length_ * 8;
  const unsigned char one = 0x80, zero = 0;
  update(&one, 1);
  while (used_ != 56) update(&zero, 1);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
  update(len, 8);
  std::string out;
  char buf[9];
  for (const std::uint32_t s : state_) {
    std::snprintf(buf, sizeof buf, "%08x", s);
    out += buf;
  }
  return out;
}

std::string sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string(), "cannot be read");
  Sha256 h;
  const auto buf = std::make_unique<char[]>(std::size_t{1} << 20);
  while (in) {
    in.read(buf.get(), std::size_t{1} << 20);
    h.update(buf.get(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(path.string(), "cannot be read");
  return h.hex();
}

}  // namespace fpguard
