// fpguard: the command-line front end. main() only wires subcommands and turns errors
// into one line on stderr and exit code 2; the work is in the library.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/io.hpp"
#include "fpguard/limits.hpp"
#include "fpguard/version.hpp"
#include "mpi.hpp"

namespace fpguard::cli {

std::string flag_of(const std::string& option) {
  if (option == "disabled_rules") return "--disable-rule";
  std::string flag = "--" + option;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string where_of(const Error& e) {
  if (e.option().empty()) return e.where();
  return flag_of(e.option()) + (e.value().empty() ? "" : " " + e.value());
}

std::string problem_of(const Error& e) {
  if (e.setting().empty()) return e.problem();
  return e.problem() + " (" + flag_of(e.setting()) + ")";
}

std::set<std::string>& model_runners() {
  static std::set<std::string> names;
  return names;
}

void mark_runs_models(CLI::App& cmd) {
  model_runners().insert(cmd.get_name());
}

// The commands that mark themselves (run, check, plan, ...) make many short parallel
// regions, where how OpenMP's threads wait matters and is worth a second start: a dynamic
// link of every library and libhwy's timer calibration, ~15 ms, a fifth of `round`'s time
// on 256 MiB and a quarter of `merge`'s. The other commands make a few long parallel
// regions at most, whose waits spin on a core that would idle anyway; `merge` runs the
// model once at most (set 0, for accuracy origins).
bool runs_models(const std::string& command) {
  return model_runners().count(command) > 0;
}

}  // namespace fpguard::cli

namespace {

// `fpguard: error: WHERE: WHAT` on stderr: always exactly one line (names and header text
// quoted from a hostile file may hold newlines, NULs or terminal escapes; they are shown
// as \xNN); `prefix` goes before WHERE.
void print_error(const std::string& where, const std::string& what, const std::string& prefix) {
  using fpguard::one_line;
  const std::string line = "fpguard: error: " + prefix + one_line(where) +
                           (where.empty() ? "" : ": ") + one_line(what) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

// Exit 2 with the error. Under mpirun, rank 0 alone prints: an error of one rank reaches
// every rank through the exchange of results (distributed.cpp), and the others are those
// of the command line, the same on every rank.
int fail(const std::string& where, const std::string& what) {
  if (fpguard::cli::mpi::world().root()) print_error(where, what, "");
  return 2;
}

// A failure of this rank alone, outside the exchanges (out of memory between them): a
// rank other than 0 says so itself and leaves without MPI_Finalize, so that mpirun ends
// the job instead of the other ranks waiting for it.
int local_failure(const std::string& where, const std::string& what) {
  const auto& w = fpguard::cli::mpi::world();
  if (w.root()) return fail(where, what);
  print_error(where, what, "rank " + std::to_string(w.rank) + ": ");
  std::_Exit(2);
}

// The command line: every subcommand, with the global options they inherit.
std::unique_ptr<CLI::App> make_app() {
  auto app = std::make_unique<CLI::App>(
      "fpguard: make low-precision (FP16/BF16/FP8/FP6/FP4) deployment safe", "fpguard");
  app->set_version_flag("--version", std::string("fpguard ") + fpguard::kVersion);
  app->require_subcommand(1);
  // Before the subcommands are added, so that they inherit it: global options such as
  // --max-memory may also be given after the subcommand.
  app->fallthrough();
  app->add_option_function<std::string>(
         "--max-memory",
         [](const std::string& v) {
           fpguard::set_memory_limit(fpguard::parse_byte_size(v, "--max-memory"));
         },
         "Largest tensor to read, in bytes (K/M/G/T suffixes); default: the available memory")
      ->type_name("BYTES");
  for (const auto add :
       {fpguard::cli::add_finfo, fpguard::cli::add_iinfo, fpguard::cli::add_round,
        fpguard::cli::add_inspect, fpguard::cli::add_check, fpguard::cli::add_plan,
        fpguard::cli::add_convert, fpguard::cli::add_merge, fpguard::cli::add_calibrate,
        fpguard::cli::add_run, fpguard::cli::add_gemm_error, fpguard::cli::add_accum,
        fpguard::cli::add_targets})
    add(*app);
  return app;
}

int run(CLI::App& app, int argc, char** argv) {
  fpguard::reuse_freed_memory();
  fpguard::install_interrupt_cleanup();  // Ctrl-C leaves no partial output
  if (argc == 1) {
    std::fputs(fpguard::cli::short_usage(app).c_str(), stderr);
    return 2;
  }
  // An unknown subcommand gets a "did you mean" before CLI11 sees it.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    const std::string word = argv[1];
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      std::string msg = "unknown subcommand";
      if (auto hint = fpguard::did_you_mean(word, names); !hint.empty())
        msg += "; did you mean '" + hint + "'?";
      else
        msg += " (see fpguard --help)";
      return fail("'" + word + "'", msg);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion&) {
    std::printf("fpguard %s\n", fpguard::kVersion);
    return 0;
  } catch (const CLI::ParseError& e) {
    const auto problem = fpguard::cli::explain(app, e);
    return fail(problem.where, problem.what);
  } catch (const fpguard::Error& e) {
    return fail(fpguard::cli::where_of(e), fpguard::cli::problem_of(e));
  } catch (const std::bad_alloc&) {
    return local_failure("", "out of memory");
  } catch (const std::exception& e) {
    // What no check anticipated (a system error, a file changing underneath) is still one
    // line and exit 2, not an abort. The fuzz harnesses count these as findings.
    return local_failure("", std::string("unexpected error: ") + e.what());
  }
  return fpguard::cli::exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP threads spin briefly, then sleep, while they wait when a core is busy at the
  // start, unless the user chose otherwise (fpguard/limits.hpp); libgomp has read its
  // environment already, so the process starts again (once: the variable is set now).
  // Should the exec fail, the run goes on with libgomp's default.
  const auto app = make_app();
  if (argc > 1 && fpguard::cli::runs_models(argv[1]) && fpguard::prefer_bounded_openmp_wait())
    execv("/proc/self/exe", argv);
  try {
    fpguard::cli::mpi::start(&argc, &argv);
  } catch (const fpguard::Error& e) {
    return fail(fpguard::cli::where_of(e), fpguard::cli::problem_of(e));
  }
  return fpguard::cli::mpi::stop(run(*app, argc, argv));
}
