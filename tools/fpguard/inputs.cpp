// Model inputs for `fpguard run` and `fpguard check` (inputs.hpp).
#include "inputs.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/limits.hpp"

namespace fpguard::cli {

namespace {

std::pair<std::string, std::string> split_eq(const std::string& s, const std::string& flag) {
  const auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0) throw Error(flag + " " + s, "expected NAME=VALUE");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

std::vector<std::int64_t> parse_dims(const std::string& text, const std::string& where) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t pos = 0;
      const long long v = std::stoll(item, &pos);
      if (pos != item.size() || v < 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw Error(where, "'" + item + "' is not a dimension (non-negative integer)");
    }
  }
  return out;
}

double parse_double(const std::string& s, const std::string& where) {
  try {
    std::size_t pos = 0;
    const double v = std::stod(s, &pos);
    if (pos != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    throw Error(where, "'" + s + "' is not a number");
  }
}

// The shape an input gets: --shape, else its declared fixed dims.
std::vector<std::int64_t> input_shape(
    const model::ValueInfo& vi, const std::map<std::string, std::vector<std::int64_t>>& shapes,
    const std::string& model) {
  if (auto it = shapes.find(vi.name); it != shapes.end()) {
    // --shape fills in dynamic dimensions; it may not contradict fixed ones.
    const auto& s = it->second;
    if (vi.has_shape) {
      bool fits = s.size() == vi.shape.size();
      for (std::size_t d = 0; fits && d < s.size(); ++d)
        fits = !vi.shape[d].fixed() || vi.shape[d].value == s[d];
      if (!fits) {
        std::string declared;
        for (std::size_t d = 0; d < vi.shape.size(); ++d)
          declared += (d ? "," : "") + (vi.shape[d].fixed() ? std::to_string(vi.shape[d].value)
                                        : vi.shape[d].param.empty() ? std::string("?")
                                                                    : vi.shape[d].param);
        throw Error("--shape " + vi.name, "the model declares " + vi.name + " as [" + declared +
                                              "]; --shape may only fill in its dynamic dimensions");
      }
    }
    return s;
  }
  if (!vi.has_shape)
    throw Error(model + ": input '" + vi.name + "'",
                "the model declares no shape; give one with --shape " + vi.name + "=D0,D1,...");
  std::vector<std::int64_t> out;
  for (std::size_t d = 0; d < vi.shape.size(); ++d) {
    if (!vi.shape[d].fixed())
      throw Error(model + ": input '" + vi.name + "'",
                  "dimension " + std::to_string(d) +
                      (vi.shape[d].param.empty() ? "" : " ('" + vi.shape[d].param + "')") +
                      " is dynamic; give the shape with --shape " + vi.name + "=D0,D1,...");
    out.push_back(vi.shape[d].value);
  }
  return out;
}

// uniform:LO:HI or normal:MEAN:STD, drawn from a generator seeded by (seed, input index).
Tensor generate(const std::string& spec, const model::ValueInfo& vi,
                const std::vector<std::int64_t>& shape, std::uint64_t seed, std::size_t index) {
  const std::string where = "--input " + vi.name;
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  std::string p;
  while (std::getline(ss, p, ':')) parts.push_back(p);
  if (parts.size() != 3 || (parts[0] != "uniform" && parts[0] != "normal"))
    throw Error(where, "'" + spec + "' is not FILE, uniform:LO:HI or normal:MEAN:STD");
  const double a = parse_double(parts[1], where), b = parse_double(parts[2], where);
  const auto dtype = vi.elem_type ? model::dtype_of(vi.elem_type) : DType::float32;
  if (!dtype) throw Error(where, "unsupported input type " + model::onnx_type_name(vi.elem_type));
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + index);
  // The shape comes from the command line or the model: refuse what cannot be held.
  check_memory(element_count(shape, where) * (sizeof(double) + itemsize(*dtype)), where);
  Tensor d(DType::float64, shape);
  auto v = d.data<double>();
  if (!std::isfinite(a) || !std::isfinite(b))
    throw Error(where, "'" + spec + "': the parameters must be finite numbers");
  if (parts[0] == "uniform") {
    if (!(a <= b)) throw Error(where, "uniform needs LO <= HI");
    if (!std::isfinite(b - a)) throw Error(where, "uniform: HI - LO overflows a double");
    if (a == b) {
      std::fill(v.begin(), v.end(), a);
    } else {
      std::uniform_real_distribution<double> dist(a, b);
      for (auto& x : v) x = dist(rng);
    }
  } else {
    if (!(b >= 0)) throw Error(where, "normal needs STD >= 0");
    if (b == 0) {  // a constant (the distribution itself wants STD > 0)
      std::fill(v.begin(), v.end(), a);
    } else {
      std::normal_distribution<double> dist(a, b);
      for (auto& x : v) x = dist(rng);
    }
  }
  if (!exec::is_float(*dtype))
    for (auto& x : v) x = std::round(x);
  return exec::convert(d, *dtype);
}

// A .pb file for an input of declared type `vi`: a TensorProto, or a SequenceProto /
// OptionalProto for an input of sequence / optional type.
NamedValue read_value_pb(const std::filesystem::path& path, const model::ValueInfo* vi) {
  if (vi && vi->kind == model::TypeKind::sequence) return read_sequence_pb(path);
  if (vi && vi->kind == model::TypeKind::optional) return read_optional_pb(path);
  auto t = read_tensor_pb(path);
  return {std::move(t.name), std::move(t.tensor)};
}

// An ONNX test_data_set holds input_N.pb and output_N.pb: only the inputs are read, in
// the order of N (input_N is of the type of runtime input N). Any other directory is
// read whole (NAME.npy files).
std::vector<NamedValue> read_input_dir(const std::filesystem::path& dir,
                                       const std::vector<const model::ValueInfo*>& runtime) {
  std::vector<std::pair<long, std::filesystem::path>> files;
  std::error_code ec;
  bool test_data_set = false;
  if (std::filesystem::is_directory(dir, ec))
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string stem = e.path().stem().string();
      if (e.path().extension() == ".pb" &&
          (stem.rfind("input_", 0) == 0 || stem.rfind("output_", 0) == 0))
        test_data_set = true;
      if (stem.rfind("input_", 0) == 0 && e.path().extension() == ".pb") {
        try {
          files.emplace_back(std::stol(stem.substr(6)), e.path());
        } catch (const std::exception&) {
        }
      }
    }
  std::vector<NamedValue> out;
  if (!test_data_set) {
    for (auto& t : read_tensors(dir)) out.push_back({std::move(t.name), std::move(t.tensor)});
    return out;
  }
  std::sort(files.begin(), files.end());
  for (const auto& [n, path] : files)
    out.push_back(read_value_pb(
        path, n >= 0 && static_cast<std::size_t>(n) < runtime.size() ? runtime[n] : nullptr));
  return out;
}

// Floating data for an input declared in another floating type (float32 arrays for a
// float16 model) is converted to it (rounded to nearest even); anything else is passed
// as it is, for the executor to accept or refuse.
Value as_declared(Value v, const model::ValueInfo& vi) {
  if (!v.is_tensor()) return v;
  Tensor t = std::move(v.tensor);
  const auto want = vi.elem_type ? model::dtype_of(vi.elem_type) : std::nullopt;
  if (want && *want != t.dtype() && exec::is_float(*want) && exec::is_float(t.dtype()))
    return exec::convert(t, *want);
  return t;
}

}  // namespace

std::vector<NamedValue> gather_inputs(const InputArgs& a, const model::Model& m,
                                      std::uint64_t sample, std::vector<std::string>* generated) {
  const auto runtime = m.graph.runtime_inputs();
  std::map<std::string, const model::ValueInfo*> by_name;
  for (const auto* v : runtime) by_name[v->name] = v;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& s : a.shapes) {
    auto [name, dims] = split_eq(s, "--shape");
    shapes[name] = parse_dims(dims, "--shape " + s);
  }
  std::map<std::string, Value> given;
  if (!a.inputs_dir.empty()) {
    auto tensors = read_input_dir(a.inputs_dir, runtime);
    const bool by_names = std::all_of(tensors.begin(), tensors.end(),
                                      [&](const NamedValue& t) { return by_name.count(t.name); });
    if (!by_names && tensors.size() > runtime.size())
      throw Error("--inputs " + a.inputs_dir, std::to_string(tensors.size()) + " tensors for " +
                                                  std::to_string(runtime.size()) + " model inputs");
    for (std::size_t i = 0; i < tensors.size(); ++i)
      given[by_names ? tensors[i].name : runtime[i]->name] = std::move(tensors[i].value);
  }
  std::map<std::string, std::string> specs;
  for (const auto& s : a.inputs) {
    auto [name, spec] = split_eq(s, "--input");
    if (!by_name.count(name)) {
      std::vector<std::string> names;
      for (const auto* v : runtime) names.push_back(v->name);
      std::string msg = "the model has no input named '" + name + "'";
      if (auto hint = did_you_mean(name, names); !hint.empty())
        msg += "; did you mean '" + hint + "'?";
      throw Error("--input " + s, msg);
    }
    specs[name] = spec;
  }
  std::vector<NamedValue> out;
  for (std::size_t i = 0; i < runtime.size(); ++i) {
    const auto& vi = *runtime[i];
    const bool tensor = vi.kind == model::TypeKind::tensor;
    auto spec = specs.find(vi.name);
    const bool generate_it = spec == specs.end() ? !given.count(vi.name)
                                                 : spec->second.rfind("uniform:", 0) == 0 ||
                                                       spec->second.rfind("normal:", 0) == 0;
    if (!tensor && generate_it)
      throw Error(m.path.string() + ": input '" + vi.name + "'",
                  "is not a tensor (a sequence or an optional) and cannot be generated; give it "
                  "as a SequenceProto/OptionalProto .pb file with --input " +
                      vi.name + "=FILE.pb");
    if (spec != specs.end()) {
      const std::string& sp = spec->second;
      if (sp.rfind("uniform:", 0) == 0 || sp.rfind("normal:", 0) == 0)
        out.push_back({vi.name, generate(sp, vi, input_shape(vi, shapes, m.path.string()),
                                         a.seed + sample, i)});
      else if (!tensor && std::filesystem::path(sp).extension() == ".pb")
        out.push_back({vi.name, read_value_pb(sp, &vi).value});
      else {
        auto ts = read_tensors(sp);
        if (ts.size() != 1)
          throw Error("--input " + vi.name,
                      "'" + sp + "' holds " + std::to_string(ts.size()) + " tensors (expected 1)");
        out.push_back({vi.name, as_declared(Value(std::move(ts[0].tensor)), vi)});
      }
    } else if (auto g = given.find(vi.name); g != given.end()) {
      out.push_back({vi.name, as_declared(std::move(g->second), vi)});
    } else {
      const auto dtype = vi.elem_type ? model::dtype_of(vi.elem_type) : DType::float32;
      const bool fl = dtype && exec::is_float(*dtype);
      out.push_back(
          {vi.name, generate(fl ? "uniform:-1:1" : "uniform:0:0", vi,
                             input_shape(vi, shapes, m.path.string()), a.seed + sample, i)});
      if (generated) generated->push_back(vi.name);
    }
  }
  return out;
}

std::vector<std::string> input_set_dirs(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (!e.is_directory()) continue;
    bool has_tensors = false;
    for (const auto& f : std::filesystem::directory_iterator(e.path(), ec)) {
      const auto ext = f.path().extension();
      if (ext == ".npy" || ext == ".pb") has_tensors = true;
    }
    if (has_tensors) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
// The analyses (check, plan, convert) take tensors: an input that is not one is refused.
std::vector<NamedTensor> tensors_of(std::vector<NamedValue> values, const model::Model& m) {
  std::vector<NamedTensor> out;
  for (auto& v : values) {
    if (!v.value.is_tensor())
      throw Error(m.path.string() + ": input '" + v.name + "'",
                  "is not a tensor (" + std::string(to_string(v.value.kind)) +
                      "); the analyses (check, plan, convert) take tensor inputs only");
    out.push_back({std::move(v.name), std::move(v.value.tensor)});
  }
  return out;
}
}  // namespace

std::vector<std::vector<NamedTensor>> gather_samples(const InputArgs& a, const model::Model& m,
                                                     std::size_t samples,
                                                     std::vector<std::string>& generated) {
  if (samples == 0) throw Error("--samples 0", "expected at least 1");
  std::vector<std::vector<NamedTensor>> out;
  const auto set_dirs =
      a.inputs_dir.empty() ? std::vector<std::string>{} : input_set_dirs(a.inputs_dir);
  if (!set_dirs.empty()) {
    for (const auto& dir : set_dirs) {
      InputArgs one = a;
      one.inputs_dir = dir;
      out.push_back(tensors_of(gather_inputs(one, m, 0, &generated), m));
    }
  } else {
    for (std::size_t s = 0; s < samples; ++s)
      out.push_back(tensors_of(gather_inputs(a, m, s, s == 0 ? &generated : nullptr), m));
  }
  std::sort(generated.begin(), generated.end());
  generated.erase(std::unique(generated.begin(), generated.end()), generated.end());
  return out;
}

std::string generated_note(const std::vector<std::string>& generated) {
  std::string list;
  for (const auto& g : generated) list += (list.empty() ? "" : ", ") + g;
  return "NO INPUTS GIVEN: " + list +
         " generated (floating: uniform in [-1, 1]); ranges and overflows depend on the "
         "inputs, so give real ones with --input/--inputs";
}

void add_input_options(CLI::App& cmd, InputArgs& a) {
  cmd.add_option("--input", a.inputs, "NAME=FILE.npy|FILE.pb|uniform:LO:HI|normal:MEAN:STD")
      ->take_all();
  cmd.add_option("--inputs", a.inputs_dir, "Directory of inputs (ONNX test_data_set or NAME.npy)");
  cmd.add_option("--shape", a.shapes, "NAME=D0,D1,... for inputs with dynamic dimensions")
      ->take_all();
  cmd.add_option("--seed", a.seed, "Seed of generated inputs (default 0)");
}

}  // namespace fpguard::cli
