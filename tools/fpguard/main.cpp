// fpguard: the command-line front end. main() only wires subcommands and turns errors
// into one line on stderr and exit code 2; the work is in the library.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "fpguard/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"fpguard: make low-precision (FP16/BF16/FP8/FP6/FP4) deployment safe", "fpguard"};
  app.set_version_flag("--version", std::string("fpguard ") + fpguard::kVersion);
  app.require_subcommand(1);
  fpguard::cli::add_finfo(app);
  fpguard::cli::add_iinfo(app);
  fpguard::cli::add_round(app);
  fpguard::cli::add_inspect(app);

  auto fail = [](const std::string& where, const std::string& what) {
    std::fprintf(stderr, "fpguard: error: %s%s%s\n", where.c_str(), where.empty() ? "" : ": ",
                 what.c_str());
    return 2;
  };
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
    std::string where = "fpguard";
    for (const auto* sub : app.get_subcommands()) where += " " + sub->get_name();
    return fail(where, e.what());
  } catch (const fpguard::Error& e) {
    return fail(e.where(), e.problem());
  } catch (const std::bad_alloc&) {
    return fail("", "out of memory");
  }
  return fpguard::cli::exit_code;
}
