// Values as a directory of .npy files + outputs.json (report.hpp): what `fpguard run
// --outputs/--dump-all` writes, and reads back.
#include <filesystem>
#include <fstream>
#include <set>

#include "fpguard/exec.hpp"
#include "fpguard/io.hpp"
#include "fpguard/report.hpp"
#include "json_reader.hpp"

namespace fpguard::report {

namespace {

// A file name for `name`: characters outside [A-Za-z0-9_.-] become '_', a leading '.' is
// guarded, and a name already taken gets _1, _2, ...
std::string file_name_for(const std::string& name, std::set<std::string>& used) {
  std::string s;
  for (char c : name)
    s +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  if (s.empty() || s[0] == '.') s = "_" + s;
  std::string candidate = s;
  for (int i = 1; used.count(candidate); ++i) candidate = s + "_" + std::to_string(i);
  used.insert(candidate);
  return candidate + ".npy";
}

// One tensor as a .npy file for `name` in `dir`; returns the file name. NumPy has no
// bfloat16: such tensors are written as float32 (exact); the manifest says so.
std::string write_one(const std::filesystem::path& dir, const std::string& name, const Tensor& t,
                      std::set<std::string>& used) {
  const std::string file = file_name_for(name, used);
  write_npy(dir / file, t.dtype() == DType::bfloat16 ? exec::convert(t, DType::float32) : t);
  return file;
}

// A file the manifest names: a plain name inside the directory, never a path out of it.
Tensor read_one(const std::filesystem::path& dir, const detail::JsonReader& r,
                const std::string& file, const std::string& dtype, const std::string& path) {
  if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
    r.fail(path, "is not a file name in the directory");
  Tensor t = read_npy(dir / file);
  if (dtype == "bfloat16" && t.dtype() == DType::float32) return exec::convert(t, DType::bfloat16);
  if (dtype != to_string(t.dtype()))
    r.fail(path, "says " + dtype + " but " + file + " holds " + std::string(to_string(t.dtype())));
  return t;
}

}  // namespace

void write_values(const std::filesystem::path& dir, const std::vector<NamedValue>& values) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir.string(), "cannot create the directory: " + ec.message());
  std::set<std::string> used;
  Json entries = Json::array();
  for (const auto& [name, v] : values) {
    Json e = {{"name", name},
              {"kind", v.kind == ValueKind::tensor     ? "tensor"
                       : v.kind == ValueKind::sequence ? "sequence"
                                                       : "none"}};
    if (v.kind == ValueKind::tensor) {
      e["file"] = write_one(dir, name, v.tensor, used);
      e["dtype"] = std::string(to_string(v.tensor.dtype()));
    } else if (v.kind == ValueKind::sequence) {
      Json files = Json::array(), dtypes = Json::array();
      for (std::size_t i = 0; i < v.items.size(); ++i) {
        files.push_back(write_one(dir, name + "_" + std::to_string(i), v.items[i], used));
        dtypes.push_back(std::string(to_string(v.items[i].dtype())));
      }
      e["files"] = files;
      e["dtypes"] = dtypes;
    } else {
      e["file"] = nullptr;
    }
    entries.push_back(e);
  }
  const Json j = {{"schema_version", kValuesSchema}, {"tensors", entries}};
  write_file_atomic(dir / "outputs.json", [&](std::ostream& out) { out << j.dump(2) << "\n"; });
}

std::vector<NamedValue> read_values(const std::filesystem::path& dir) {
  const std::string where = (dir / "outputs.json").string();
  std::ifstream in(dir / "outputs.json");
  if (!in) throw Error(where, "cannot open the file");
  Json j;
  try {
    j = Json::parse(in);
  } catch (const Json::exception& e) {
    throw Error(where, std::string("not JSON: ") + e.what());
  }
  const detail::JsonReader r{where};
  r.schema(j, kValuesSchema, "an outputs.json");
  const Json& tensors = r.array(j, "tensors", "");
  std::vector<NamedValue> out;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string path = detail::item("", "tensors", i);
    const Json& e = tensors[i];
    const std::string name = r.str(e, "name", path), kind = r.str(e, "kind", path);
    if (kind == "tensor") {
      out.push_back({name, read_one(dir, r, r.str(e, "file", path), r.str(e, "dtype", path),
                                    r.field(path, "file"))});
    } else if (kind == "sequence") {
      const auto files = r.strings(e, "files", path), dtypes = r.strings(e, "dtypes", path);
      if (files.size() != dtypes.size())
        r.fail(r.field(path, "dtypes"), "has not one entry per file");
      std::vector<Tensor> items;
      for (std::size_t k = 0; k < files.size(); ++k)
        items.push_back(read_one(dir, r, files[k], dtypes[k], detail::item(path, "files", k)));
      out.push_back({name, Value::sequence(std::move(items))});
    } else if (kind == "none") {
      out.push_back({name, Value::none()});
    } else {
      r.fail(r.field(path, "kind"), "is not tensor, sequence or none");
    }
  }
  return out;
}

}  // namespace fpguard::report
