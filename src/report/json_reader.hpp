// Reading back the report layer's JSON: field access that names what is wrong, as
// "<where>: \"tensors\"[3].\"count\" is not a count". Shared by every reader (check,
// inspect, gemm-error, accum, targets), of nlohmann's DOM (JsonReader) or of a tape
// (json_tape.hpp: a part of a sharded check); internal to src/report.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fpguard/error.hpp"
#include "fpguard/report.hpp"

namespace fpguard::report::detail {

// `"key"[i]`: the path of an array element.
inline std::string item(const std::string& path, const char* key, std::size_t i) {
  return path + (path.empty() ? "" : ".") + "\"" + key + "\"[" + std::to_string(i) + "]";
}

template <class J>
struct BasicJsonReader {
  const std::string& where;

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(where, path + " " + what);
  }
  static std::string field(const std::string& path, const char* key) {
    return path + (path.empty() ? "" : ".") + "\"" + key + "\"";
  }
  const J& at(const J& j, const char* key, const std::string& path) const {
    if (!j.is_object()) fail(path.empty() ? "the document" : path, "is not an object");
    auto it = j.find(key);
    if (it == j.end()) fail(field(path, key), "is missing");
    return *it;
  }
  std::string str(const J& j, const char* key, const std::string& path) const {
    const J& v = at(j, key, path);
    if (!v.is_string()) fail(field(path, key), "is not a string");
    return v.template get<std::string>();
  }
  // A number; null reads as `null_is` (what the writer wrote null for).
  double real(const J& j, const char* key, const std::string& path,
              double null_is = std::numeric_limits<double>::quiet_NaN()) const {
    const J& v = at(j, key, path);
    if (v.is_null()) return null_is;
    if (!v.is_number()) fail(field(path, key), "is not a number");
    return v.template get<double>();
  }
  std::uint64_t u64(const J& j, const char* key, const std::string& path) const {
    const J& v = at(j, key, path);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.template get<std::int64_t>() >= 0))
      fail(field(path, key), "is not a count");
    return v.template get<std::uint64_t>();
  }
  // A count or null (nullopt).
  std::optional<std::uint64_t> opt_u64(const J& j, const char* key, const std::string& path) const {
    if (at(j, key, path).is_null()) return std::nullopt;
    return u64(j, key, path);
  }
  std::int64_t i64(const J& j, const char* key, const std::string& path) const {
    const J& v = at(j, key, path);
    if (!v.is_number_integer()) fail(field(path, key), "is not an integer");
    return v.template get<std::int64_t>();
  }
  bool boolean(const J& j, const char* key, const std::string& path) const {
    const J& v = at(j, key, path);
    if (!v.is_boolean()) fail(field(path, key), "is not true or false");
    return v.template get<bool>();
  }
  // An array of counts.
  std::vector<std::size_t> sizes(const J& j, const char* key, const std::string& path) const {
    std::vector<std::size_t> out;
    for (const auto& v : array(j, key, path)) {
      if (!v.is_number_unsigned()) fail(field(path, key), "holds a non-count");
      out.push_back(v.template get<std::size_t>());
    }
    return out;
  }
  std::vector<std::string> strings(const J& j, const char* key, const std::string& path) const {
    const J& v = array(j, key, path);
    std::vector<std::string> out;
    for (const auto& s : v) {
      if (!s.is_string()) fail(field(path, key), "holds a non-string");
      out.push_back(s.template get<std::string>());
    }
    return out;
  }
  std::vector<std::int64_t> integers(const J& j, const char* key, const std::string& path) const {
    const J& v = array(j, key, path);
    std::vector<std::int64_t> out;
    for (const auto& d : v) {
      if (!d.is_number_integer()) fail(field(path, key), "holds a non-integer");
      out.push_back(d.template get<std::int64_t>());
    }
    return out;
  }
  const J& array(const J& j, const char* key, const std::string& path) const {
    const J& v = at(j, key, path);
    if (!v.is_array()) fail(field(path, key), "is not an array");
    return v;
  }
  const J& object(const J& j, const char* key, const std::string& path) const {
    const J& v = at(j, key, path);
    if (!v.is_object()) fail(field(path, key), "is not an object");
    return v;
  }
  // An enum written by to_string (found by argument-dependent lookup): the value whose
  // name it is.
  template <class E>
  E kind(const J& j, const char* key, const std::string& path, E last) const {
    const std::string s = str(j, key, path);
    for (int i = 0; i <= static_cast<int>(last); ++i)
      if (to_string(static_cast<E>(i)) == s) return static_cast<E>(i);
    fail(field(path, key), "is not a known kind ('" + s + "')");
  }
  // {"k": n}: floor(log2|x|) -> count.
  std::map<int, std::uint64_t> histogram(const J& j, const char* key,
                                         const std::string& path) const {
    const J& h = object(j, key, path);
    std::map<int, std::uint64_t> out;
    for (auto it = h.begin(); it != h.end(); ++it) {
      int e = 0;
      try {
        std::size_t used = 0;
        e = std::stoi(it.key(), &used);
        if (used != it.key().size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        fail(field(path, key), "has a key that is not an integer ('" + it.key() + "')");
      }
      if (!it.value().is_number_unsigned())
        fail(field(path, key) + ".\"" + it.key() + "\"", "is not a count");
      out[e] = it.value().template get<std::uint64_t>();
    }
    return out;
  }
  // The document's schema_version is `version`.
  void schema(const J& j, int version, const char* what) const {
    const auto it = j.is_object() ? j.find("schema_version") : j.end();
    if (it == j.end() || !it->is_number() || it->template get<double>() != version)
      throw Error(where,
                  std::string("not ") + what + " of schema_version " + std::to_string(version));
  }
};

using JsonReader = BasicJsonReader<Json>;

}  // namespace fpguard::report::detail
