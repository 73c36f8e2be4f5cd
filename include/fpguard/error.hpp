// fpguard::Error: the one exception type for bad input. It carries *where* the problem
// is (a file, a node, a flag) and *what* is wrong, so the CLI can print one line,
// `fpguard: error: <where>: <what>`, and exit 2. Bugs are not Errors: they are
// FPG_CHECK assertions, which abort with the source location.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace fpguard {

class Error : public std::runtime_error {
 public:
  Error(std::string where, std::string what)
      : std::runtime_error(where.empty() ? what : where + ": " + what),
        where_(std::move(where)),
        what_(std::move(what)) {}
  // An error in an option of a library call, named as the API names it ("keep_fp32",
  // "accumulation"), with the value given (may be empty). The library never spells a CLI
  // flag: the CLI words option() as its own flag when it prints the error.
  static Error in_option(std::string option, std::string value, std::string what) {
    Error e(value.empty() ? option : option + " " + value, std::move(what));
    e.option_ = std::move(option);
    e.value_ = std::move(value);
    return e;
  }
  // A refusal that a setting of the caller's governs, named as the API names it
  // ("max_memory" for set_memory_limit): the CLI adds its own flag for it to the message.
  Error&& governed_by(std::string setting) && {
    setting_ = std::move(setting);
    return std::move(*this);
  }
  const std::string& where() const { return where_; }
  const std::string& problem() const { return what_; }
  const std::string& option() const { return option_; }  // "" unless in_option
  const std::string& value() const { return value_; }
  const std::string& setting() const { return setting_; }  // "" unless governed_by

 private:
  std::string where_;
  std::string what_;
  std::string option_, value_, setting_;
};

// `s` as one printable line: control characters (newlines, NULs, terminal escapes, which
// names quoted from a hostile file may hold) become \xNN. Every error message is shown
// through it (the CLI's stderr line, the Python module's fpguard.Error).
std::string one_line(const std::string& s);

[[noreturn]] void check_failed(const char* expr, const char* file, int line);

// The closest candidate to `name` by edit distance, or "" when none is close enough
// to be a plausible typo. Used for every "did you mean".
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace fpguard

#define FPG_CHECK(cond) \
  ((cond) ? static_cast<void>(0) : ::fpguard::check_failed(#cond, __FILE__, __LINE__))
