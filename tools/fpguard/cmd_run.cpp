// `fpguard run`: runs an ONNX model on the CPU (optionally emulating a low precision per
// node), writes the outputs as .npy + outputs.json and prints a summary. `fpguard ops`
// lists the registered operators (the conformance runner asks it). The summary is rendered
// by the report layer.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "fpguard/io.hpp"
#include "fpguard/model.hpp"
#include "fpguard/report.hpp"
#include "fpguard/tensor.hpp"
#include "inputs.hpp"

namespace fpguard::cli {

namespace {

struct RunArgs {
  std::string model;
  inputs::Options in;
  std::vector<std::string> exclude;
  std::string precision = "float32", outputs_dir, dump_dir, accumulate, accumulation = "sequential";
  int repeat = 1, warmup = 0, threads = 0;
  bool json = false;
  bool no_fusion = false;
  bool profile = false;      // --profile given
  std::string profile_file;  // --profile FILE
  std::size_t profile_top = 20;
  ScaledArgs scaled;
};

// --dump-all: every node output that is a tensor, in execution order; a body node's by its
// key, "<body prefix><name>" (loop/body/acc_out), once per run of its body.
class DumpObserver : public exec::Observer {
 public:
  void on_node(const model::Node&, std::size_t, const std::vector<const Tensor*>&,
               const std::vector<NamedTensor>& outputs) override {
    for (const auto& o : outputs) values.push_back({o.name, o.tensor});
  }
  void on_body_node(const exec::BodyNode& b, const std::vector<const Tensor*>&,
                    const std::vector<NamedTensor>& outputs) override {
    const auto& body = b.enclosing.back();
    const std::string prefix = body.path + "/" + body.attribute + "/";
    for (const auto& o : outputs) values.push_back({prefix + o.name, o.tensor});
  }
  bool reads_weights(bool) const override { return false; }  // outputs only
  std::vector<NamedValue> values;
};

// This process's resident memory now and at its peak, in MiB: VmRSS and VmHWM of
// /proc/self/status (getrusage's ru_maxrss would include a parent's peak, kept across exec).
double status_mib(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::strtod(line.c_str() + key.size(), nullptr) / 1024.0;
  return 0;
}
double rss_mib() {
  return status_mib("VmRSS");
}
double peak_rss_mib() {
  return status_mib("VmHWM");
}

// The executor's options from the command line: precision, exclusions, scaled formats.
exec::RunOptions run_options(const RunArgs& a, const model::Model& m) {
  exec::RunOptions opts;
  opts.threads = a.threads;
  opts.fuse = !a.no_fusion;
  const Precision precision = parse_precision(a.precision, a.scaled.other);
  const Format& fmt = precision.format;
  if (fmt.name == "float64") {
    // The truth run: every floating value carried in double; nothing is emulated.
    opts.carrier = DType::float64;
    if (!a.accumulate.empty())
      throw Error("--accumulate", "applies to emulated nodes; --precision float64 emulates none");
    if (!a.exclude.empty())
      throw Error("--exclude", "--precision float64 runs every node in float64");
  } else if (fmt.name != "float32") {
    opts.policy.default_format = fmt;
  }
  if (!a.accumulate.empty()) opts.policy.accumulate = parse_format(a.accumulate);
  opts.policy.accumulation = parse_accumulation_order(a.accumulation).value_or(AccumulationOrder{});
  for (const auto& e : a.exclude) {
    if (exec::Registry::global().find(e))
      opts.policy.exclude_op_types.insert(e);
    else
      opts.policy.exclude_names.insert(e);
  }
  if (precision.scaled) {
    opts.policy.scaled = precision.scaled;
    opts.policy.amax_margin = a.scaled.amax_margin;
  }
  opts.policy.unscaled_names = unscaled_nodes(a.scaled, precision);
  exec::check_unscaled_names(m, opts.policy);
  return opts;
}

// What `run` prints: each output summarised, the times and the memory.
report::RunSummary run_summary(const std::vector<NamedValue>& outputs, std::vector<double> times,
                               double load_ms, double base_mib) {
  report::RunSummary summary;
  for (const auto& [name, v] : outputs) {
    report::OutputSummary o{name, v.kind, {}};
    if (v.is_tensor()) o.items.push_back(report::summarize(v.tensor));
    for (const auto& item : v.items) o.items.push_back(report::summarize(item));
    summary.outputs.push_back(std::move(o));
  }
  std::sort(times.begin(), times.end());
  summary.load_ms = load_ms;
  summary.median_run_ms = (times[(times.size() - 1) / 2] + times[times.size() / 2]) / 2;
  summary.runs = times.size();
  summary.peak_rss_mib = peak_rss_mib();
  summary.start_rss_mib = base_mib;
  return summary;
}

void run(const RunArgs& a) {
  using clock = std::chrono::steady_clock;
  if (a.warmup < 0) throw Error("--warmup", "must be 0 or more");
  const double base_mib = rss_mib();  // before the model: the program and its libraries
  if (!a.profile_file.empty()) check_output_file(a.model, a.profile_file, "--profile");
  const auto t0 = clock::now();
  const model::Model m = model::load(a.model);
  const double load_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();

  exec::RunOptions opts = run_options(a, m);
  const auto feed = inputs::gather(a.in, m);
  DumpObserver dump;
  if (!a.dump_dir.empty()) opts.observer = &dump;
  exec::Profiler profiler;
  if (a.profile) opts.profiler = &profiler;
  const exec::Executor ex = exec::calibrated_executor(m, opts, {feed});

  // --warmup runs first, untimed; without them the profile leaves out the first of
  // several runs (weights rounded, memory first touched), and the median includes it.
  const int repeat = std::max(1, a.repeat);
  std::vector<double> times;
  std::vector<NamedValue> outputs;
  for (int r = 0; r < a.warmup + repeat; ++r) {
    const auto s = clock::now();
    outputs = ex.run_values(feed);
    if (r >= a.warmup)
      times.push_back(std::chrono::duration<double, std::milli>(clock::now() - s).count());
    if (r == 0 && opts.observer) opts.observer = nullptr;  // dump the first run only
    if (r + 1 == std::max(a.warmup, repeat > 1 ? 1 : 0)) profiler.clear();
  }

  if (!a.outputs_dir.empty()) report::write_values(a.outputs_dir, outputs);
  if (!a.dump_dir.empty()) report::write_values(a.dump_dir, dump.values);

  report::RunSummary summary = run_summary(outputs, std::move(times), load_ms, base_mib);
  if (a.profile) summary.profile = profiler.profile();
  summary.profile_top = a.profile_top;
  if (!a.profile_file.empty()) {
    const auto j = report::to_json(*summary.profile);
    write_file_atomic(a.profile_file, [&](std::ostream& out) { out << j.dump(2) << "\n"; });
  }
  if (a.json)
    std::cout << report::to_json(summary).dump(2) << "\n";
  else
    report::render(std::cout, summary, report::Terminal::detect(report::ColorMode::never, true));
}

}  // namespace

void add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* cmd =
      app.add_subcommand("run", "Run an ONNX model on the CPU (optionally emulating a precision)");
  mark_runs_models(*cmd);
  cmd->add_option("model", a->model, "ONNX model")->required();
  add_input_options(*cmd, a->in);
  cmd->add_option("--precision", a->precision,
                  "Format of every floating node (default float32; float64: the truth run, "
                  "every floating value carried in double), or a scaled format for "
                  "MatMul/Gemm/Conv inputs (fp8, channel:float8_e4m3fn, mxfp8_e4m3, nvfp4, ...)");
  add_scaled_options(*cmd, a->scaled);
  cmd->add_option("--accumulate", a->accumulate,
                  "Format MatMul/Gemm/Conv and sum reductions of emulated nodes accumulate in "
                  "(default float32)");
  cmd->add_option("--accumulation", a->accumulation,
                  "Order of that accumulation: sequential (default), pairwise, blocked:K");
  cmd->add_option("--exclude", a->exclude, "Keep these nodes (by name or op type) in float32")
      ->take_all();
  cmd->add_option("--outputs", a->outputs_dir, "Write outputs as .npy + outputs.json here");
  cmd->add_option("--dump-all", a->dump_dir, "Write every node output as .npy + outputs.json here");
  cmd->add_option("--repeat", a->repeat, "Run N times and report the median time");
  cmd->add_option("--warmup", a->warmup,
                  "Untimed runs before the timed ones (default 0; as trtexec's --warmUp)");
  cmd->add_option("--threads", a->threads, "Threads (default: the cores this process may use)");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->add_flag("--no-fusion", a->no_fusion,
                "Run each Conv or MatMul apart from the activation, Add and element-wise "
                "nodes after it (fused by default, with the same results bit for bit)");
  auto* profile = cmd->add_option("--profile", a->profile_file,
                                  "Time every node and op type (median of the timed runs, "
                                  "after the first when --repeat > 1 without --warmup) and "
                                  "print it; with FILE, also write it there as JSON");
  profile->expected(0, 1);
  cmd->add_option("--profile-top", a->profile_top,
                  "Nodes in the profile's node table, slowest first (default 20; 0: all)");
  cmd->callback([a, profile] {
    a->profile = profile->count() > 0;
    run(*a);
  });

  auto json_flag = std::make_shared<bool>(false);
  auto* ops = app.add_subcommand("ops", "List the operators `fpguard run` supports");
  ops->add_flag("--json", *json_flag, "Print JSON");
  ops->callback([json_flag] {
    const auto names = exec::Registry::global().names();
    if (*json_flag) {
      std::cout << report::ops_json(names).dump() << "\n";
    } else {
      for (const auto& n : names) std::cout << n << "\n";
    }
  });
}

}  // namespace fpguard::cli
