#include "fpguard/io.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <system_error>

#include "fpguard/error.hpp"

namespace fpguard {

namespace fs = std::filesystem;

void write_file_atomic(const fs::path& path, const std::function<void(std::ostream&)>& write) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(path.string(), "cannot write: directory '" + dir.string() + "' does not exist");
  if (fs::is_directory(path, ec)) throw Error(path.string(), "cannot write: it is a directory");
  std::random_device rd;
  std::string tmp_name = ".";  // appended piecewise: g++ 12 -O3 warns on a + chain here
  tmp_name += path.filename().string();
  tmp_name += ".tmp";
  tmp_name += std::to_string(rd() % 1000000);
  const fs::path tmp = dir / tmp_name;
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw Error(path.string(), std::string("cannot write: ") + std::strerror(errno));
      write(out);
      out.flush();
      if (!out) throw Error(path.string(), "write failed (disk full?)");
    }
    fs::rename(tmp, path, ec);
    if (ec) throw Error(path.string(), "cannot write: " + ec.message());
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
}

void check_not_same_file(const fs::path& input, const fs::path& output, const std::string& flag) {
  std::error_code ec;
  const bool same = fs::exists(output, ec) ? fs::equivalent(input, output, ec)
                                           : fs::weakly_canonical(input, ec) ==
                                                 fs::weakly_canonical(output, ec);
  if (same)
    throw Error(flag, "output '" + output.string() + "' is the input file; refusing to overwrite it");
}

}  // namespace fpguard
