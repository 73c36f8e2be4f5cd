// Model inputs from files, directories and seeded generators (include/fpguard/inputs.hpp).
#include "fpguard/inputs.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/io.hpp"
#include "fpguard/limits.hpp"

namespace fpguard::inputs {

namespace {

using Shapes = std::map<std::string, std::vector<std::int64_t>>;

std::pair<std::string, std::string> split_eq(const std::string& s, const std::string& option) {
  const auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0) throw Error::in_option(option, s, "expected NAME=VALUE");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

std::vector<std::int64_t> parse_dims(const std::string& text, const std::string& entry) {
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
      throw Error::in_option("shape", entry,
                             "'" + item + "' is not a dimension (non-negative integer)");
    }
  }
  return out;
}

double parse_double(const std::string& s, const std::string& name) {
  try {
    std::size_t pos = 0;
    const double v = std::stod(s, &pos);
    if (pos != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    throw Error::in_option("input", name, "'" + s + "' is not a number");
  }
}

std::string declared_shape(const model::ValueInfo& vi) {
  std::string out;
  for (std::size_t d = 0; d < vi.shape.size(); ++d)
    out += (d ? "," : "") + (vi.shape[d].fixed()         ? std::to_string(vi.shape[d].value)
                             : vi.shape[d].param.empty() ? std::string("?")
                                                         : vi.shape[d].param);
  return out;
}

// The shape an input gets: the one given (which may only fill in dynamic dimensions),
// else its declared fixed dims.
std::vector<std::int64_t> input_shape(const model::ValueInfo& vi, const Shapes& shapes,
                                      const std::string& model) {
  if (auto it = shapes.find(vi.name); it != shapes.end()) {
    const auto& s = it->second;
    if (vi.has_shape) {
      bool fits = s.size() == vi.shape.size();
      for (std::size_t d = 0; fits && d < s.size(); ++d)
        fits = !vi.shape[d].fixed() || vi.shape[d].value == s[d];
      if (!fits)
        throw Error::in_option("shape", vi.name,
                               "the model declares " + vi.name + " as [" + declared_shape(vi) +
                                   "]; a shape given may only fill in its dynamic dimensions");
    }
    return s;
  }
  const std::string where = model + ": input '" + vi.name + "': ";
  if (!vi.has_shape)
    throw Error::in_option(
        "shape", "", where + "the model declares no shape; give one as " + vi.name + "=D0,D1,...");
  std::vector<std::int64_t> out;
  for (std::size_t d = 0; d < vi.shape.size(); ++d) {
    if (!vi.shape[d].fixed())
      throw Error::in_option(
          "shape", "",
          where + "dimension " + std::to_string(d) +
              (vi.shape[d].param.empty() ? "" : " ('" + vi.shape[d].param + "')") +
              " is dynamic; give its shape as " + vi.name + "=D0,D1,...");
    out.push_back(vi.shape[d].value);
  }
  return out;
}

// Fills `v` from the generator (its parameters checked by parse_generator).
void draw(const Generator& g, std::mt19937_64& rng, std::span<double> v) {
  if (g.a == g.b || (g.distribution == "normal" && g.b == 0)) {
    // A constant (the normal distribution itself wants STD > 0).
    std::fill(v.begin(), v.end(), g.a);
  } else if (g.distribution == "uniform") {
    std::uniform_real_distribution<double> dist(g.a, g.b);
    for (auto& x : v) x = dist(rng);
  } else {
    std::normal_distribution<double> dist(g.a, g.b);
    for (auto& x : v) x = dist(rng);
  }
}

// Values of `g`, drawn from a random engine seeded by (seed, input index).
Tensor generate(const Generator& g, const model::ValueInfo& vi,
                const std::vector<std::int64_t>& shape, std::uint64_t seed, std::size_t index) {
  const auto dtype = vi.elem_type ? model::dtype_of(vi.elem_type) : DType::float32;
  if (!dtype)
    throw Error::in_option("input", vi.name,
                           "unsupported input type " + model::onnx_type_name(vi.elem_type));
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + index);
  try {  // the shape comes from the options or the model: refuse what cannot be held
    check_memory(element_count(shape, vi.name) * (sizeof(double) + itemsize(*dtype)), vi.name);
  } catch (const Error& e) {
    throw Error::in_option("input", vi.name, e.problem());
  }
  Tensor d(DType::float64, shape);
  draw(g, rng, d.data<double>());
  if (!exec::is_float(*dtype))
    for (auto& x : d.data<double>()) x = std::round(x);
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

// The options read against the model: shapes and specs by input name, and the values
// of the `inputs` directory by input name.
struct Parsed {
  Shapes shapes;
  std::map<std::string, std::string> specs;
  std::map<std::string, Value> given;
};

Parsed parse(const Options& o, const std::vector<const model::ValueInfo*>& runtime) {
  std::map<std::string, const model::ValueInfo*> by_name;
  for (const auto* v : runtime) by_name[v->name] = v;
  Parsed p;
  for (const auto& s : o.shape) {
    auto [name, dims] = split_eq(s, "shape");
    p.shapes[name] = parse_dims(dims, s);
  }
  if (!o.inputs.empty()) {
    auto tensors = read_input_dir(o.inputs, runtime);
    const bool by_names = std::all_of(tensors.begin(), tensors.end(),
                                      [&](const NamedValue& t) { return by_name.count(t.name); });
    if (!by_names && tensors.size() > runtime.size())
      throw Error::in_option("inputs", o.inputs,
                             std::to_string(tensors.size()) + " tensors for " +
                                 std::to_string(runtime.size()) + " model inputs");
    for (std::size_t i = 0; i < tensors.size(); ++i)
      p.given[by_names ? tensors[i].name : runtime[i]->name] = std::move(tensors[i].value);
  }
  for (const auto& s : o.input) {
    auto [name, spec] = split_eq(s, "input");
    if (!by_name.count(name)) {
      std::vector<std::string> names;
      for (const auto* v : runtime) names.push_back(v->name);
      std::string msg = "the model has no input named '" + name + "'";
      if (auto hint = did_you_mean(name, names); !hint.empty())
        msg += "; did you mean '" + hint + "'?";
      throw Error::in_option("input", s, msg);
    }
    p.specs[name] = spec;
  }
  return p;
}

// A file given for one input: one tensor (or a sequence/optional .pb for such an input).
Value read_given(const std::string& file, const model::ValueInfo& vi) {
  if (vi.kind != model::TypeKind::tensor && std::filesystem::path(file).extension() == ".pb")
    return read_value_pb(file, &vi).value;
  auto ts = read_tensors(file);
  if (ts.size() != 1)
    throw Error::in_option(
        "input", vi.name,
        "'" + file + "' holds " + std::to_string(ts.size()) + " tensors (expected 1)");
  return as_declared(Value(std::move(ts[0].tensor)), vi);
}

}  // namespace

bool is_generator(std::string_view value) {
  return value.rfind("uniform:", 0) == 0 || value.rfind("normal:", 0) == 0;
}

std::string Generator::spec() const {
  const auto text = [](double x) {  // the shortest text that reads back as x
    char buf[32];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, x).ptr);
  };
  return distribution + ":" + text(a) + ":" + text(b);
}

Generator parse_generator(std::string_view spec_text, const std::string& input) {
  const std::string spec(spec_text);
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string p; std::getline(ss, p, ':');) parts.push_back(p);
  if (parts.size() != 3 || (parts[0] != "uniform" && parts[0] != "normal"))
    throw Error::in_option("input", input,
                           "'" + spec + "' is not FILE, uniform:LO:HI or normal:MEAN:STD");
  const Generator g{.distribution = parts[0],
                    .a = parse_double(parts[1], input),
                    .b = parse_double(parts[2], input)};
  if (!std::isfinite(g.a) || !std::isfinite(g.b))
    throw Error::in_option("input", input, "'" + spec + "': the parameters must be finite numbers");
  if (g.distribution == "uniform" && !(g.a <= g.b))
    throw Error::in_option("input", input, "uniform needs LO <= HI");
  if (g.distribution == "uniform" && !std::isfinite(g.b - g.a))
    throw Error::in_option("input", input, "uniform: HI - LO overflows a double");
  if (g.distribution == "normal" && !(g.b >= 0))
    throw Error::in_option("input", input, "normal needs STD >= 0");
  return g;
}

namespace {

// The generator of input `vi` when it is not read from data: the one asked for, else the
// default of its type; nullopt when it is read from a file or the `inputs` directory.
std::optional<Generated> generator_of(const model::ValueInfo& vi, const Parsed& p) {
  if (auto spec = p.specs.find(vi.name); spec != p.specs.end()) {
    if (!is_generator(spec->second)) return std::nullopt;
    return Generated{
        .name = vi.name, .generator = parse_generator(spec->second, vi.name), .by_default = false};
  }
  if (p.given.count(vi.name)) return std::nullopt;
  const auto dtype = vi.elem_type ? model::dtype_of(vi.elem_type) : DType::float32;
  const auto def = dtype && exec::is_float(*dtype) ? kFloatingDefault : kIntegerDefault;
  return Generated{.name = vi.name, .generator = parse_generator(def, vi.name)};
}

// Options::require_inputs: generating any input is an Error naming them all.
void refuse_generated(const Options& o, const std::vector<Generated>& drawn) {
  if (!o.require_inputs || drawn.empty()) return;
  std::string list;
  for (const auto& g : drawn)
    list += (list.empty() ? "" : ", ") + g.name + "=" + g.generator.spec();
  throw Error::in_option("require_inputs", "",
                         "these inputs have no data and would be generated: " + list);
}

}  // namespace

std::vector<NamedValue> gather(const Options& o, const model::Model& m, std::uint64_t sample,
                               std::vector<Generated>* generated) {
  const auto runtime = m.graph.runtime_inputs();
  Parsed p = parse(o, runtime);
  const std::string model = m.path.string();
  std::vector<Generated> drawn;
  for (const auto* vi : runtime)
    if (auto g = generator_of(*vi, p)) {
      if (vi->kind != model::TypeKind::tensor)
        throw Error::in_option("input", "",
                               model + ": input '" + vi->name +
                                   "' is not a tensor (a sequence or an optional) and cannot be "
                                   "generated; give it as a SequenceProto/OptionalProto .pb "
                                   "file: " +
                                   vi->name + "=FILE.pb");
      drawn.push_back(std::move(*g));
    }
  refuse_generated(o, drawn);
  std::vector<NamedValue> out;
  auto next = drawn.begin();
  for (std::size_t i = 0; i < runtime.size(); ++i) {
    const auto& vi = *runtime[i];
    if (next != drawn.end() && next->name == vi.name) {
      const auto shape = input_shape(vi, p.shapes, model);
      out.push_back({vi.name, generate((next++)->generator, vi, shape, o.seed + sample, i)});
    } else if (auto spec = p.specs.find(vi.name); spec != p.specs.end()) {
      out.push_back({vi.name, read_given(spec->second, vi)});
    } else {
      out.push_back({vi.name, as_declared(std::move(p.given.at(vi.name)), vi)});
    }
  }
  if (generated) generated->insert(generated->end(), drawn.begin(), drawn.end());
  // Each run copies its inputs into the executor's values: shared, a copy is a reference
  // (a 600 KiB image read from a file under 1 MiB, or drawn, was copied every run).
  for (auto& v : out)
    if (v.value.is_tensor()) v.value.tensor = Tensor::shared(std::move(v.value.tensor));
  return out;
}

std::vector<std::string> set_dirs(const std::string& dir) {
  std::vector<std::string> out, npz;
  bool own_tensors = false;  // `dir` is a set itself: its .npz files are not sets
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const auto ext = e.path().extension();
    if (!e.is_directory()) {
      if (ext == ".npz" && e.is_regular_file()) npz.push_back(e.path().string());
      own_tensors = own_tensors || ext == ".npy" || ext == ".pb";
      continue;
    }
    bool has_tensors = false;
    for (const auto& f : std::filesystem::directory_iterator(e.path(), ec)) {
      const auto fx = f.path().extension();
      if (fx == ".npy" || fx == ".pb") has_tensors = true;
    }
    if (has_tensors) out.push_back(e.path().string());
  }
  if (!own_tensors) out.insert(out.end(), npz.begin(), npz.end());
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) { return natural_less(a, b); });
  return out;
}

Shard parse_shard(std::string_view spec) {
  const std::string s(spec);
  const auto slash = s.find('/');
  auto number = [&](const std::string& t, std::size_t& out) {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos)
      return false;
    out = std::stoul(t);
    return true;
  };
  Shard sh;
  if (slash == std::string::npos || !number(s.substr(0, slash), sh.index) ||
      !number(s.substr(slash + 1), sh.count))
    throw Error::in_option("shard", s, "expected I/N, e.g. 0/4");
  if (sh.count == 0)
    throw Error::in_option("shard", s, "the number of shards N must be at least 1");
  if (sh.index >= sh.count)
    throw Error::in_option("shard", s,
                           "the shard index I must be less than N (shards are 0 to " +
                               std::to_string(sh.count - 1) + ")");
  return sh;
}

namespace {
// The sets Options::max_sets or sample_sets choose, in natural order.
std::vector<std::string> chosen_sets(std::vector<std::string> dirs, const Options& o) {
  if (o.max_sets && o.sample_sets)
    throw Error::in_option("sample_sets", std::to_string(o.sample_sets),
                           "the sets are chosen by count (max_sets) or by sample, not both");
  if (o.max_sets && o.max_sets < dirs.size()) dirs.resize(o.max_sets);
  if (o.sample_sets && o.sample_sets < dirs.size()) {
    // A partial Fisher-Yates shuffle on mt19937_64 (specified bit for bit by the standard):
    // the same sets on every machine.
    std::mt19937_64 rng(o.seed);
    std::vector<std::size_t> idx(dirs.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    for (std::size_t i = 0; i < o.sample_sets; ++i)
      std::swap(idx[i], idx[i + rng() % (idx.size() - i)]);
    idx.resize(o.sample_sets);
    std::sort(idx.begin(), idx.end());
    std::vector<std::string> out;
    for (const auto i : idx) out.push_back(dirs[i]);
    dirs = std::move(out);
  }
  return dirs;
}
}  // namespace

SetList list_samples(const Options& o, const model::Model& m, std::size_t samples,
                     const Shard& shard) {
  if (samples == 0) throw Error::in_option("samples", "0", "expected at least 1");
  SetList out{.options = o, .model = &m};
  const auto dirs =
      o.inputs.empty() ? std::vector<std::string>{} : chosen_sets(set_dirs(o.inputs), o);
  out.total = dirs.empty() ? samples : dirs.size();
  for (std::size_t i = shard.index; i < out.total; i += shard.count) {
    out.indices.push_back(i);
    out.names.push_back(dirs.empty() ? "" : std::filesystem::path(dirs[i]).filename().string());
    if (!dirs.empty()) out.paths.push_back(dirs[i]);
  }
  if (out.indices.empty())
    throw Error::in_option(
        "shard", std::to_string(shard.index) + "/" + std::to_string(shard.count),
        "this shard has no input sets: there are only " + std::to_string(out.total));
  return out;
}

std::vector<NamedValue> SetList::read(std::size_t k, std::vector<Generated>* generated) const {
  std::vector<Generated> drawn;
  std::vector<NamedValue> set;
  if (paths.empty()) {
    set = gather(options, *model, indices.at(k), &drawn);
  } else {
    Options one = options;
    one.inputs = paths.at(k);
    set = gather(one, *model, 0, &drawn);
  }
  // Once each (the sets of a directory may generate the same input), in first-seen order.
  if (generated)
    for (auto& g : drawn)
      if (std::find(generated->begin(), generated->end(), g) == generated->end())
        generated->push_back(std::move(g));
  return set;
}

Samples gather_samples(const Options& o, const model::Model& m, std::size_t samples,
                       const Shard& shard) {
  const SetList list = list_samples(o, m, samples, shard);
  Samples out{.sets = {},
              .generated = {},
              .indices = list.indices,
              .names = list.names,
              .total = list.total};
  for (std::size_t k = 0; k < list.size(); ++k) out.sets.push_back(list.read(k, &out.generated));
  return out;
}

namespace {
void hash_tensor(Sha256& h, std::string head, const Tensor& t) {
  head += std::string(to_string(t.dtype()));
  for (const auto d : t.shape()) head += ',' + std::to_string(d);
  head += '\0';
  h.update(head.data(), head.size());
  h.update(t.bytes(), t.nbytes());
}
}  // namespace

std::string set_sha256(const std::vector<NamedValue>& set) {
  Sha256 h;
  for (const auto& v : set) {
    if (v.value.is_tensor()) {  // as sets of tensors always hashed
      hash_tensor(h, v.name + '\0', v.value.tensor);
      continue;
    }
    // Kind and length first, so that no set of tensors hashes the same.
    const std::string head = v.name + '\0' + std::string(to_string(v.value.kind)) + '\0' +
                             std::to_string(v.value.items.size()) + '\0';
    h.update(head.data(), head.size());
    for (const auto& t : v.value.items) hash_tensor(h, "", t);
  }
  return h.hex();
}

Options absolute(const Options& o) {
  auto resolve = [](const std::string& path) {
    std::error_code ec;
    const auto abs = std::filesystem::absolute(path, ec);
    return ec ? path : abs.lexically_normal().string();
  };
  Options out = o;
  for (auto& entry : out.input) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || is_generator(entry.substr(eq + 1))) continue;
    entry = entry.substr(0, eq + 1) + resolve(entry.substr(eq + 1));
  }
  if (!out.inputs.empty()) out.inputs = resolve(out.inputs);
  return out;
}

}  // namespace fpguard::inputs
