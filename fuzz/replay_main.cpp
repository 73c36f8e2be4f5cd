// A main() for the fuzz harnesses without libFuzzer: runs LLVMFuzzerTestOneInput once
// on every file named (directories: every file in them, sorted). `make test` builds each
// harness with it and replays tests/regressions/<harness>/ (tests/badinput.cmake), so
// every input that once crashed keeps being checked, with any compiler, under ASan in
// `make test-sanitize`, and the harnesses keep compiling.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file() && e.path().filename().string().front() != '.')
          files.push_back(e.path());  // not .keep
    } else if (fs::exists(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  // A regression entry that replays nothing passes while checking nothing: refuse it.
  if (files.empty()) {
    std::fprintf(stderr, "no input to replay (regression folders hold at least one)\n");
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    std::printf("replay %s (%zu bytes)\n", f.c_str(), bytes.size());
    std::fflush(stdout);
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replayed %zu input(s)\n", files.size());
  return 0;
}
