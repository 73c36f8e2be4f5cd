// The text primitives of the report layer: one number policy, tables sized from their
// content and fitted to the terminal, the terminal itself (TTY, NO_COLOR, width) and the
// one progress line.
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "fpguard/error.hpp"
#include "fpguard/report.hpp"

namespace fpguard::report {

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::fabs(v) >= 1e6 || (v != 0 && std::fabs(v) < 1e-3)) return fmt::format("{:.4g}", v);
  // 4 significant digits as plain decimals, trailing zeros dropped.
  const int magnitude = v == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(v))));
  const int decimals = std::max(0, 3 - magnitude);
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

std::string count(std::uint64_t n) {
  const std::string s = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string fixed(double v, int digits) {
  if (!std::isfinite(v)) return num(v);
  return fmt::format("{:.{}f}", v, digits);
}

std::string bits(double v) {
  if (std::isinf(v) && v > 0) return "-";
  if (!std::isfinite(v)) return num(v);
  return fmt::format("{:.1f}b", v);
}

Json number(double v) {
  return std::isfinite(v) ? Json(v) : Json(nullptr);
}

std::string num_na(double v) {
  return std::isnan(v) ? "n/a" : num(v);
}

namespace {

// Display width of UTF-8 text: code points (continuation bytes do not count), and no
// width for colour escapes (ESC [ ... m), so that a coloured verdict aligns like a plain one.
std::size_t columns(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\033' && i + 1 < s.size() && s[i + 1] == '[') {
      while (i < s.size() && s[i] != 'm') ++i;
      continue;
    }
    n += (s[i] & 0xC0) != 0x80;
  }
  return n;
}

// The byte offset of code point `cp` in `s`.
std::size_t offset(std::string_view s, std::size_t cp) {
  std::size_t i = 0, seen = 0;
  for (; i < s.size(); ++i)
    if ((s[i] & 0xC0) != 0x80 && seen++ == cp) break;
  return i;
}

}  // namespace

std::string shorten_middle(std::string_view s, std::size_t width) {
  const std::size_t n = columns(s);
  if (n <= width) return std::string(s);
  if (width == 0) return "";
  const std::size_t keep = width - 1, head = (keep + 1) / 2, tail = keep - head;
  return std::string(s.substr(0, offset(s, head))) + "…" +
         std::string(s.substr(offset(s, n - tail)));
}

void Table::add(std::vector<std::string> cells) {
  FPG_CHECK(cells.size() == columns_.size());
  rows_.push_back(std::move(cells));
}

void Table::render(std::ostream& out, std::size_t width, std::string_view indent) const {
  const std::size_t n = columns_.size();
  std::vector<std::size_t> w(n);
  for (std::size_t c = 0; c < n; ++c) {
    w[c] = columns(columns_[c].header);
    for (const auto& r : rows_) w[c] = std::max(w[c], columns(r[c]));
  }
  // Fit: shorten the widest left-aligned column, never below its header or 12 columns,
  // and only when that makes the table fit: a table too wide anyway keeps whole names.
  if (width > 0) {
    std::size_t total = indent.size() + 2 * (n - 1);
    for (auto x : w) total += x;
    std::size_t widest = n;
    for (std::size_t c = 0; c < n; ++c)
      if (columns_[c].align == Align::left && (widest == n || w[c] > w[widest])) widest = c;
    if (total > width && widest < n) {
      const std::size_t floor = std::max<std::size_t>(12, columns(columns_[widest].header));
      const std::size_t excess = total - width;
      if (w[widest] >= floor + excess) w[widest] -= excess;
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s(indent);
    for (std::size_t c = 0; c < n; ++c) {
      const std::string cell = shorten_middle(cells[c], w[c]);
      const std::string pad(w[c] - columns(cell), ' ');
      const bool last = c + 1 == n;
      if (columns_[c].align == Align::right)
        s += pad + cell;
      else
        s += cell + (last ? "" : pad);
      if (!last) s += "  ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();  // an empty last cell
    out << s << "\n";
  };
  std::vector<std::string> header;
  for (const auto& c : columns_) header.push_back(c.header);
  line(header);
  for (const auto& r : rows_) line(r);
}

ColorMode parse_color(const std::string& value, const std::string& where) {
  if (value == "auto") return ColorMode::automatic;
  if (value == "always") return ColorMode::always;
  if (value == "never") return ColorMode::never;
  throw Error(where, "expected auto, always or never");
}

Terminal Terminal::detect(ColorMode mode, bool quiet) {
  Terminal t;
  const bool tty = isatty(1) != 0;
  const char* no_color = std::getenv("NO_COLOR");  // no-color.org: set and not empty
  const bool colour_off = no_color && *no_color;
  t.color = mode == ColorMode::always || (mode == ColorMode::automatic && tty && !colour_off);
  t.progress = !quiet && isatty(2) != 0;
  if (tty) {
    winsize ws{};
    if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) t.width = ws.ws_col;
  }
  if (const char* c = std::getenv("COLUMNS"); c && tty && std::atoi(c) > 0)
    t.width = static_cast<std::size_t>(std::atoi(c));
  return t;
}

namespace {
std::string styled(bool on, const char* code, std::string_view s) {
  if (!on) return std::string(s);
  return std::string("\033[") + code + "m" + std::string(s) + "\033[0m";
}
double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::string Terminal::bold(std::string_view s) const {
  return styled(color, "1", s);
}
std::string Terminal::good(std::string_view s) const {
  return styled(color, "1;32", s);
}
std::string Terminal::bad(std::string_view s) const {
  return styled(color, "1;31", s);
}
std::string Terminal::dim(std::string_view s) const {
  return styled(color, "2", s);
}

Progress::Progress(const Terminal& t, std::string label)
    : on_(t.progress), label_(std::move(label)), start_(now_s()) {}

Progress::~Progress() {
  if (on_ && drawn_) std::cerr << "\r\033[K" << std::flush;
}

void Progress::update(std::size_t done, std::size_t total, std::string_view detail) {
  if (!on_ || total == 0) return;
  const int pct = static_cast<int>(100 * done / total);
  if (pct == last_) return;
  last_ = pct;
  drawn_ = true;
  const int filled = pct * 30 / 100;
  std::string eta;
  const double spent = now_s() - start_;
  if (done > 0 && done < total && spent > 1)
    eta = fmt::format(" ETA {:.0f}s",
                      spent * static_cast<double>(total - done) / static_cast<double>(done));
  std::cerr << "\r\033[K" << label_ << " [" << std::string(filled, '#')
            << std::string(30 - filled, '.') << "] " << pct << "%" << (detail.empty() ? "" : " ")
            << detail << eta << std::flush;
}

void Progress::step(std::string_view what) {
  if (!on_) return;
  drawn_ = true;
  std::cerr << "\r\033[K" << label_ << ": " << what << std::flush;
}

}  // namespace fpguard::report
