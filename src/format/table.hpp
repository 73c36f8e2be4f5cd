// The shape both format tables share (scalar formats in format.cpp, scaled formats in
// scaled.cpp): rows of a format and its aliases, looked up case-insensitively, and custom
// spellings that resolve to a named row when they describe the same format.
#pragma once

#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fpguard::detail {

template <class F>
struct NamedRow {
  F format;
  std::vector<std::string> aliases;
};

inline std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

template <class F>
std::vector<F> formats_of(const std::vector<NamedRow<F>>& rows) {
  std::vector<F> v;
  for (const auto& r : rows) v.push_back(r.format);
  return v;
}

// Canonical names and aliases, in table order.
template <class F>
std::vector<std::string> names_of(const std::vector<NamedRow<F>>& rows) {
  std::vector<std::string> names;
  for (const auto& r : rows) {
    names.push_back(r.format.name);
    for (const auto& a : r.aliases) names.push_back(a);
  }
  return names;
}

// The row named `key` (lower case) by name or alias; else `custom(key)` (nullopt: not a
// spelling at all), resolved to the named row equal to it where there is one.
template <class F, class Custom>
std::optional<F> lookup(const std::vector<NamedRow<F>>& rows, const std::string& key,
                        Custom&& custom) {
  for (const auto& r : rows) {
    if (key == r.format.name) return r.format;
    for (const auto& a : r.aliases)
      if (key == a) return r.format;
  }
  std::optional<F> c = custom(key);
  if (!c) return std::nullopt;
  for (const auto& r : rows)
    if (r.format == *c) return r.format;
  return c;
}

}  // namespace fpguard::detail
