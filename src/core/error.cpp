#include "fpguard/error.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace fpguard {

void check_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "fpguard: internal error: %s:%d: FPG_CHECK(%s) failed\n", file, line, expr);
  std::abort();
}

std::string one_line(const std::string& s) {
  std::string r;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      r += c;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      r += hex;
    }
  }
  return r;
}

namespace {
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = ~std::size_t{0};
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(name, c);
    if (d < best_d) best_d = d, best = c;
  }
  // A typo is a few edits away; anything further is a different word.
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  return best_d <= limit ? best : std::string{};
}

}  // namespace fpguard
