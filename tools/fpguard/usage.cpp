// What the CLI says when its command line cannot be parsed (cli.hpp): CLI11's messages
// reworded as fpguard's errors, with a "did you mean" over the options of the command.
#include <algorithm>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "fpguard/error.hpp"

namespace fpguard::cli {

namespace {

// The long options of `cmd`, its parents' included (global options such as --max-memory
// fall through to every command): "--precision", ... (a one-letter option is no typo of
// another one.)
std::vector<std::string> option_names(const CLI::App* cmd) {
  std::vector<std::string> out;
  for (const CLI::App* a = cmd; a; a = a->get_parent())
    for (const auto* opt : a->get_options())
      for (const auto& l : opt->get_lnames()) out.push_back("--" + l);
  return out;
}

// The one command the user named (or the app itself when none was parsed).
const CLI::App* command_of(const CLI::App& app) {
  const auto subs = app.get_subcommands();
  return subs.empty() ? &app : subs.front();
}

std::string name_of(const CLI::App* cmd) {
  return cmd->get_parent() ? cmd->get_name() : std::string("fpguard");
}

// An argument nobody expected: an option misspelled, or one positional too many.
ParseProblem unexpected(const CLI::App* cmd, std::vector<std::string> extras) {
  auto option = std::find_if(extras.begin(), extras.end(), [](const std::string& s) {
    return s.size() > 1 && s[0] == '-' && s != "--";
  });
  if (option == extras.end())
    return {name_of(cmd), "unexpected argument '" + extras.front() + "' (see fpguard " +
                              (cmd->get_parent() ? cmd->get_name() + " " : "") + "--help)"};
  std::string word = option->substr(0, option->find('='));
  std::string what = "unknown option of " + name_of(cmd);
  if (auto hint = word.starts_with("--") ? did_you_mean(word, option_names(cmd)) : "";
      !hint.empty())
    what += "; did you mean '" + hint + "'?";
  else
    what += " (see fpguard " + (cmd->get_parent() ? cmd->get_name() + " " : "") + "--help)";
  return {word, what};
}

}  // namespace

std::string short_usage(const CLI::App& app) {
  std::string out = "usage: fpguard COMMAND [OPTIONS]  (fpguard COMMAND --help for its options)\n";
  out += "commands:\n";
  std::size_t width = 0;
  for (const auto* sub : app.get_subcommands({})) width = std::max(width, sub->get_name().size());
  for (const auto* sub : app.get_subcommands({})) {
    std::string name = sub->get_name();
    out += "  " + name + std::string(width - name.size() + 2, ' ') + sub->get_description() + "\n";
  }
  return out;
}

ParseProblem explain(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::App* cmd = command_of(app);
  const std::string msg = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) || cmd == &app) {
    // The app holds what no command took; a command holds what it could not place.
    auto extras = cmd->remaining(false);
    if (extras.empty()) extras = app.remaining(false);
    if (!extras.empty()) return unexpected(cmd, extras);
  }
  // "Could not convert: --samples = abc"
  if (constexpr std::string_view conv = "Could not convert: "; msg.starts_with(conv)) {
    const std::string rest = msg.substr(conv.size());
    if (const auto eq = rest.find(" = "); eq != std::string::npos) {
      const std::string option = rest.substr(0, eq), value = rest.substr(eq + 3);
      std::string type;
      if (const auto* opt = cmd->get_option_no_throw(option)) type = opt->get_type_name();
      return {option + " " + value,
              "not a valid value" + (type.empty() ? std::string() : " (expected " + type + ")")};
    }
  }
  // "--precision: 1 required TEXT missing"
  if (const auto colon = msg.find(": "); colon != std::string::npos && msg.ends_with(" missing")) {
    std::istringstream words(msg.substr(colon + 2));
    std::string count, required, type;
    if (words >> count >> required >> type && required == "required" &&
        count.find_first_not_of("0123456789") == std::string::npos)
      return {msg.substr(0, colon), "expects a value (" + type + ")"};
  }
  // CLI11's own sentence, starting in lower case as ours do.
  std::string what = msg;
  if (!what.empty()) what[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(what[0])));
  return {name_of(cmd), what};
}

}  // namespace fpguard::cli
