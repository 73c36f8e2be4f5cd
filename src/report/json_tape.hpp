// A JSON (or CBOR) document read into one flat array of its values in document order, a
// "tape": each container is followed by its members (an object's as key, value, key,
// value, ...) and knows how many entries its subtree spans, so that the next sibling is
// one step away. Reading a large document this way costs two allocations (the tape, and
// one block that holds every string) instead of nlohmann's one or more per value, and no
// walk to free it: merge reads the parts of a sharded check so (docs/scale.md). Read-only;
// JsonNode offers the part of nlohmann::json's interface that the report layer's readers
// use (detail::BasicJsonReader), so that one reader serves both. Internal to src/report.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "fpguard/report.hpp"

namespace fpguard::report::detail {

class JsonNode {
 public:
  enum class Kind : std::uint8_t { null, boolean, integer, count, real, string, array, object };

  bool is_null() const { return kind_ == Kind::null; }
  bool is_boolean() const { return kind_ == Kind::boolean; }
  bool is_number() const { return is_number_integer() || kind_ == Kind::real; }
  // As nlohmann's: an integer, and a non-negative one (a JSON integer without a sign).
  bool is_number_integer() const { return kind_ == Kind::integer || kind_ == Kind::count; }
  bool is_number_unsigned() const { return kind_ == Kind::count; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_object() const { return kind_ == Kind::object; }
  // An array's elements, an object's members (as written: a duplicate key counts); 0 for
  // null, 1 for any other value.
  std::size_t size() const;
  bool empty() const { return size() == 0; }

  // A number as T (converted as nlohmann converts), a boolean, or a string; a value of
  // another kind throws (the readers check the kind first).
  template <class T>
  T get() const;
  std::string_view text() const;  // a string's

  // Iterates an array's elements or an object's values (key() names the member).
  class const_iterator {
   public:
    const JsonNode& operator*() const { return object_ ? at_[1] : *at_; }
    const JsonNode* operator->() const { return &**this; }
    const_iterator& operator++() {
      at_ += object_ ? 1 + at_[1].span_ : at_->span_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return at_ == o.at_; }
    std::string key() const { return std::string(at_->text()); }
    const JsonNode& value() const { return **this; }

   private:
    friend class JsonNode;
    const_iterator(const JsonNode* at, bool object) : at_(at), object_(object) {}
    const JsonNode* at_;
    bool object_;
  };
  const_iterator begin() const;
  const_iterator end() const { return {after(), is_object()}; }
  // An object's member of that name (the last, as nlohmann keeps the last of duplicate
  // keys), or end().
  const_iterator find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != end(); }
  // An array's element.
  const JsonNode& operator[](std::size_t i) const;
  // The entry after this value's subtree (its next sibling, or its container's end).
  const JsonNode* after() const { return this + span_; }

 private:
  friend struct TapeBuilder;
  Kind kind_ = Kind::null;
  std::uint32_t count_ = 0;  // a container's elements or members; a string's bytes
  std::uint32_t span_ = 1;   // entries of the subtree, this one included
  union {
    bool b;
    std::int64_t i;
    std::uint64_t u;
    double d;
    const char* s;
  } v_{};
};

template <class T>
T JsonNode::get() const {
  if constexpr (std::is_same_v<T, std::string>) {
    return std::string(text());
  } else if constexpr (std::is_same_v<T, bool>) {
    if (kind_ != Kind::boolean) throw std::invalid_argument("JSON value is not a boolean");
    return v_.b;
  } else {
    static_assert(std::is_arithmetic_v<T>);
    switch (kind_) {
      case Kind::integer:
        return static_cast<T>(v_.i);
      case Kind::count:
        return static_cast<T>(v_.u);
      case Kind::real:
        return static_cast<T>(v_.d);
      default:
        throw std::invalid_argument("JSON value is not a number");
    }
  }
}

class JsonTape {
 public:
  // The document in `text` (JSON) or `bytes` (CBOR); Error(where, "not JSON (expected
  // <expected>)") or "not CBOR ..." when it is not one.
  static JsonTape parse(std::string_view text, const std::string& where, const char* expected);
  static JsonTape parse_cbor(std::string_view bytes, const std::string& where,
                             const char* expected);
  const JsonNode& root() const { return nodes_.front(); }

 private:
  friend struct TapeBuilder;
  std::vector<JsonNode> nodes_;
  std::unique_ptr<char[]> strings_;  // every string's bytes (stable: moves keep them)
};

// The value as nlohmann's DOM (for what compares or prints it: a part's identity).
Json to_dom(const JsonNode& n);

}  // namespace fpguard::report::detail
