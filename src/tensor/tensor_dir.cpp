// Sets of named tensors: a directory of .npy/.pb files (ONNX test_data_set_N), and the
// one entry point that picks the reader from what a path is.
#include <algorithm>
#include <cctype>
#include <map>

#include "fpguard/error.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard {

namespace fs = std::filesystem;

namespace {

std::string lower_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

}  // namespace

bool natural_less(std::string_view a, std::string_view b) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      std::size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      // Leading zeros aside, the longer run is the larger number; then digit by digit.
      std::size_t i0 = i, j0 = j;
      while (i0 + 1 < ie && a[i0] == '0') ++i0;
      while (j0 + 1 < je && b[j0] == '0') ++j0;
      const auto x = a.substr(i0, ie - i0), y = b.substr(j0, je - j0);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      if (ie - i != je - j) return ie - i < je - j;  // fewer leading zeros first
      i = ie, j = je;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

std::vector<NamedTensor> read_tensor_dir(const fs::path& dir) {
  const std::string where = dir.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(where, "not a directory");
  std::vector<fs::path> files;
  try {
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string ext = lower_extension(e.path());
      if ((ext == ".npy" || ext == ".pb") && e.is_regular_file()) files.push_back(e.path());
    }
  } catch (const fs::filesystem_error& e) {
    throw Error(where, std::string("cannot list: ") + e.code().message());
  }
  if (files.empty()) throw Error(where, "no .npy or .pb files in the directory");
  // A stable order whatever readdir says: natural order of the file names.
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return natural_less(a.filename().string(), b.filename().string());
  });

  std::vector<NamedTensor> out;
  std::map<std::string, fs::path> origin;
  for (const auto& f : files) {
    NamedTensor t = lower_extension(f) == ".npy" ? NamedTensor{f.stem().string(), read_npy(f)}
                                                 : read_tensor_pb(f);
    const auto [it, fresh] = origin.emplace(t.name, f);
    if (!fresh)
      throw Error(where, "two files give the tensor name '" + t.name + "': " +
                             it->second.filename().string() + " and " + f.filename().string());
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<NamedTensor> read_tensors(const fs::path& path) {
  const std::string where = path.string();
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw Error(where, "does not exist");
  if (fs::is_directory(status)) return read_tensor_dir(path);
  const std::string ext = lower_extension(path);
  std::vector<NamedTensor> out;
  if (ext == ".npy") {
    out.push_back({path.stem().string(), read_npy(path)});
  } else if (ext == ".npz") {
    out = read_npz(path);
  } else if (ext == ".pb") {
    out.push_back(read_tensor_pb(path));
  } else {
    throw Error(where, "unsupported tensor file" +
                           (ext.empty() ? std::string() : " type '" + ext + "'") +
                           " (expected .npy, .npz, .pb, or a directory of .npy/.pb files)");
  }
  return out;
}

}  // namespace fpguard
