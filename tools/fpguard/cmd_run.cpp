// `fpguard run`: runs an ONNX model on the CPU (optionally emulating a low precision per
// node), writes the outputs as .npy + outputs.json and prints a summary. `fpguard ops`
// lists the registered operators (the conformance runner asks it).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/io.hpp"
#include "fpguard/model.hpp"
#include "fpguard/tensor.hpp"

namespace fpguard::cli {

namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs, shapes, exclude;
  std::string inputs_dir, precision = "float32", outputs_dir, dump_dir;
  std::uint64_t seed = 0;
  int repeat = 1, threads = 0;
  bool json = false;
};

using json = nlohmann::ordered_json;

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
    const model::ValueInfo& vi, const std::map<std::string, std::vector<std::int64_t>>& shapes) {
  if (auto it = shapes.find(vi.name); it != shapes.end()) return it->second;
  if (!vi.has_shape)
    throw Error("input '" + vi.name + "'",
                "the model declares no shape; give one with --shape " + vi.name + "=D0,D1,...");
  std::vector<std::int64_t> out;
  for (std::size_t d = 0; d < vi.shape.size(); ++d) {
    if (!vi.shape[d].fixed())
      throw Error("input '" + vi.name + "'",
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
  Tensor d(DType::float64, shape);
  auto v = d.data<double>();
  if (parts[0] == "uniform") {
    if (!(a <= b)) throw Error(where, "uniform needs LO <= HI");
    std::uniform_real_distribution<double> dist(a, b);
    for (auto& x : v) x = dist(rng);
  } else {
    if (!(b >= 0)) throw Error(where, "normal needs STD >= 0");
    std::normal_distribution<double> dist(a, b);
    for (auto& x : v) x = dist(rng);
  }
  if (!exec::is_float(*dtype))
    for (auto& x : v) x = std::round(x);
  return exec::convert(d, *dtype);
}

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

// NumPy has no bfloat16: such tensors are written as float32 (exact); outputs.json says so.
void write_tensors(const std::filesystem::path& dir, const std::vector<NamedTensor>& tensors,
                   const std::vector<DType>& dtypes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir.string(), "cannot create the directory: " + ec.message());
  std::set<std::string> used;
  json files = json::array();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    const std::string file = file_name_for(t.name, used);
    const Tensor& w =
        t.tensor.dtype() == DType::bfloat16 ? exec::convert(t.tensor, DType::float32) : t.tensor;
    write_npy(dir / file, w);
    files.push_back(
        {{"name", t.name}, {"file", file}, {"dtype", std::string(to_string(dtypes[i]))}});
  }
  json j = {{"schema_version", 1}, {"tensors", files}};
  write_file_atomic(dir / "outputs.json", [&](std::ostream& out) { out << j.dump(2) << "\n"; });
}

// --dump-all: every node output, in execution order.
class DumpObserver : public exec::Observer {
 public:
  void on_node(const model::Node&, std::size_t, const std::vector<const Tensor*>&,
               const std::vector<NamedTensor>& outputs) override {
    for (const auto& o : outputs) {
      tensors.push_back(o);
      dtypes.push_back(o.tensor.dtype());
    }
  }
  std::vector<NamedTensor> tensors;
  std::vector<DType> dtypes;
};

// An ONNX test_data_set holds input_N.pb and output_N.pb: only the inputs are read, in
// the order of N. Any other directory is read whole (NAME.npy files).
std::vector<NamedTensor> read_input_dir(const std::filesystem::path& dir) {
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
  if (!test_data_set) return read_tensors(dir);
  std::sort(files.begin(), files.end());
  std::vector<NamedTensor> out;
  for (const auto& [n, path] : files) out.push_back(read_tensor_pb(path));
  return out;
}

std::vector<NamedTensor> gather_inputs(const RunArgs& a, const model::Model& m) {
  const auto runtime = m.graph.runtime_inputs();
  std::map<std::string, const model::ValueInfo*> by_name;
  for (const auto* v : runtime) by_name[v->name] = v;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& s : a.shapes) {
    auto [name, dims] = split_eq(s, "--shape");
    shapes[name] = parse_dims(dims, "--shape " + s);
  }
  std::map<std::string, Tensor> given;
  if (!a.inputs_dir.empty()) {
    auto tensors = read_input_dir(a.inputs_dir);
    const bool by_names = std::all_of(tensors.begin(), tensors.end(),
                                      [&](const NamedTensor& t) { return by_name.count(t.name); });
    if (!by_names && tensors.size() > runtime.size())
      throw Error("--inputs " + a.inputs_dir, std::to_string(tensors.size()) + " tensors for " +
                                                  std::to_string(runtime.size()) + " model inputs");
    for (std::size_t i = 0; i < tensors.size(); ++i)
      given[by_names ? tensors[i].name : runtime[i]->name] = std::move(tensors[i].tensor);
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
  std::vector<NamedTensor> out;
  for (std::size_t i = 0; i < runtime.size(); ++i) {
    const auto& vi = *runtime[i];
    auto spec = specs.find(vi.name);
    if (spec != specs.end()) {
      const std::string& sp = spec->second;
      if (sp.rfind("uniform:", 0) == 0 || sp.rfind("normal:", 0) == 0)
        out.push_back({vi.name, generate(sp, vi, input_shape(vi, shapes), a.seed, i)});
      else {
        auto ts = read_tensors(sp);
        if (ts.size() != 1)
          throw Error("--input " + vi.name,
                      "'" + sp + "' holds " + std::to_string(ts.size()) + " tensors (expected 1)");
        out.push_back({vi.name, std::move(ts[0].tensor)});
      }
    } else if (auto g = given.find(vi.name); g != given.end()) {
      out.push_back({vi.name, std::move(g->second)});
    } else {
      const auto dtype = vi.elem_type ? model::dtype_of(vi.elem_type) : DType::float32;
      const bool fl = dtype && exec::is_float(*dtype);
      out.push_back({vi.name, generate(fl ? "uniform:-1:1" : "uniform:0:0", vi,
                                       input_shape(vi, shapes), a.seed, i)});
    }
  }
  return out;
}

void run(const RunArgs& a) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const model::Model m = model::load(a.model);
  const double load_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();

  exec::RunOptions opts;
  opts.threads = a.threads;
  const Format fmt = parse_format(a.precision);
  if (fmt.name != "float32") opts.policy.default_format = fmt;
  for (const auto& e : a.exclude) {
    if (exec::Registry::global().find(e))
      opts.policy.exclude_op_types.insert(e);
    else
      opts.policy.exclude_names.insert(e);
  }
  DumpObserver dump;
  if (!a.dump_dir.empty()) opts.observer = &dump;
  const exec::Executor ex(m, opts);
  const auto inputs = gather_inputs(a, m);

  std::vector<double> times;
  std::vector<NamedTensor> outputs;
  for (int r = 0; r < std::max(1, a.repeat); ++r) {
    const auto s = clock::now();
    outputs = ex.run(inputs);
    times.push_back(std::chrono::duration<double, std::milli>(clock::now() - s).count());
    if (r == 0 && opts.observer) opts.observer = nullptr;  // dump the first run only
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];

  std::vector<DType> dtypes;
  for (const auto& o : outputs) dtypes.push_back(o.tensor.dtype());
  if (!a.outputs_dir.empty()) write_tensors(a.outputs_dir, outputs, dtypes);
  if (!a.dump_dir.empty()) write_tensors(a.dump_dir, dump.tensors, dump.dtypes);

  json outs = json::array();
  std::string text;
  for (const auto& o : outputs) {
    std::vector<double> v(o.tensor.size());
    to_double(o.tensor, v);
    double mn = INFINITY, mx = -INFINITY, am = 0;
    for (double x : v)
      if (!std::isnan(x))
        mn = std::min(mn, x), mx = std::max(mx, x), am = std::max(am, std::fabs(x));
    json shape = o.tensor.shape();
    outs.push_back({{"name", o.name},
                    {"shape", shape},
                    {"dtype", std::string(to_string(o.tensor.dtype()))},
                    {"min", v.empty() ? json(nullptr) : json_number(mn)},
                    {"max", v.empty() ? json(nullptr) : json_number(mx)},
                    {"absmax", v.empty() ? json(nullptr) : json_number(am)}});
    text += fmt::format("{}  {} {}  min {:.6g}  max {:.6g}  absmax {:.6g}\n", o.name,
                        to_string(o.tensor.dtype()), shape.dump(), mn, mx, am);
  }
  if (a.json) {
    json j = {
        {"schema_version", 1},
        {"outputs", outs},
        {"timing", {{"load_ms", load_ms}, {"median_run_ms", median}, {"runs", times.size()}}}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << text
              << fmt::format("load {:.2f} ms, run {:.2f} ms (median of {})\n", load_ms, median,
                             times.size());
  }
}

}  // namespace

void add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* cmd =
      app.add_subcommand("run", "Run an ONNX model on the CPU (optionally emulating a precision)");
  cmd->add_option("model", a->model, "ONNX model")->required();
  cmd->add_option("--input", a->inputs, "NAME=FILE.npy|FILE.pb|uniform:LO:HI|normal:MEAN:STD")
      ->take_all();
  cmd->add_option("--inputs", a->inputs_dir,
                  "Directory of inputs (ONNX test_data_set or NAME.npy)");
  cmd->add_option("--shape", a->shapes, "NAME=D0,D1,... for inputs with dynamic dimensions")
      ->take_all();
  cmd->add_option("--seed", a->seed, "Seed of generated inputs (default 0)");
  cmd->add_option("--precision", a->precision, "Format of every floating node (default float32)");
  cmd->add_option("--exclude", a->exclude, "Keep these nodes (by name or op type) in float32")
      ->take_all();
  cmd->add_option("--outputs", a->outputs_dir, "Write outputs as .npy + outputs.json here");
  cmd->add_option("--dump-all", a->dump_dir, "Write every node output as .npy + outputs.json here");
  cmd->add_option("--repeat", a->repeat, "Run N times and report the median time");
  cmd->add_option("--threads", a->threads, "Threads (default: all cores)");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] { run(*a); });

  auto json_flag = std::make_shared<bool>(false);
  auto* ops = app.add_subcommand("ops", "List the operators `fpguard run` supports");
  ops->add_flag("--json", *json_flag, "Print JSON");
  ops->callback([json_flag] {
    const auto names = exec::Registry::global().names();
    if (*json_flag) {
      std::cout << json({{"schema_version", 1}, {"ops", names}}).dump() << "\n";
    } else {
      for (const auto& n : names) std::cout << n << "\n";
    }
  });
}

}  // namespace fpguard::cli
