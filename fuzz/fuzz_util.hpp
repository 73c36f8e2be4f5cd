// Shared by the libFuzzer harnesses (fuzz/*_fuzz.cpp, docs/reliability.md). A harness
// feeds arbitrary bytes to one parser: an fpguard::Error is the expected answer to bad
// input and is swallowed; anything else (a crash, a sanitizer report, an FPG_CHECK
// abort, another exception, a leak, a timeout, an allocation beyond the fuzzer's limit)
// is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>

#include "fpguard/error.hpp"

namespace fpguard::fuzz {

inline std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// An invariant the harness checks on what a parser accepted; failing it is a finding.
#define FUZZ_ASSERT(cond)                                                                    \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

// Runs f(); an fpguard::Error is an accepted outcome.
template <class F>
void expect_errors_only(F&& f) {
  try {
    f();
  } catch (const fpguard::Error&) {
  }
}

// Tensors a harness may allocate: small enough that every input runs in well under a
// second, far below the fuzzer's -malloc_limit_mb. A file claiming more is refused by
// the readers' memory check, which is itself under test.
inline constexpr std::uint64_t kFuzzMemoryLimit = std::uint64_t{16} << 20;

}  // namespace fpguard::fuzz
