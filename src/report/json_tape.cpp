// The tape of a JSON or CBOR document (json_tape.hpp): JSON parsed by simdjson and its DOM
// walked into the tape; CBOR, and JSON simdjson refuses, from nlohmann's SAX events.
#include "json_tape.hpp"

#include <simdjson.h>

#include <cstring>
#include <limits>

#include "fpguard/error.hpp"

namespace fpguard::report::detail {

std::size_t JsonNode::size() const {
  if (kind_ == Kind::null) return 0;
  return is_array() || is_object() ? count_ : 1;
}

std::string_view JsonNode::text() const {
  if (kind_ != Kind::string) throw std::invalid_argument("JSON value is not a string");
  return {v_.s, count_};
}

JsonNode::const_iterator JsonNode::begin() const {
  return is_array() || is_object() ? const_iterator(this + 1, is_object()) : end();
}

JsonNode::const_iterator JsonNode::find(std::string_view key) const {
  const_iterator found = end();
  if (!is_object()) return found;
  for (auto it = begin(); it != end(); ++it)
    if (it.at_->text() == key) found = it;
  return found;
}

const JsonNode& JsonNode::operator[](std::size_t i) const {
  if (!is_array() || i >= count_) throw std::out_of_range("JSON array index out of range");
  if (span_ == count_ + 1) return this[1 + i];  // (elements of one entry each)
  auto it = begin();
  while (i--) ++it;
  return *it;
}

// nlohmann's SAX handler (json_sax) that appends each value to the tape.
struct TapeBuilder {
  using Str = Json::string_t;
  JsonTape& tape;
  std::size_t capacity;  // of tape.strings_: the input's size, which every string fits in
  std::size_t used = 0;
  std::vector<std::size_t> open{};  // the containers being read

  bool push(JsonNode n) {
    if (!open.empty() && tape.nodes_[open.back()].is_array()) ++tape.nodes_[open.back()].count_;
    tape.nodes_.push_back(n);
    return tape.nodes_.size() < std::numeric_limits<std::uint32_t>::max();
  }
  JsonNode of(JsonNode::Kind k) {
    JsonNode n;
    n.kind_ = k;
    return n;
  }
  bool null() { return push(of(JsonNode::Kind::null)); }
  bool boolean(bool b) {
    JsonNode n = of(JsonNode::Kind::boolean);
    n.v_.b = b;
    return push(n);
  }
  bool number_integer(std::int64_t i) {
    JsonNode n = of(JsonNode::Kind::integer);
    n.v_.i = i;
    return push(n);
  }
  bool number_unsigned(std::uint64_t u) {
    JsonNode n = of(JsonNode::Kind::count);
    n.v_.u = u;
    return push(n);
  }
  bool real(double d) {
    JsonNode n = of(JsonNode::Kind::real);
    n.v_.d = d;
    return push(n);
  }
  bool number_float(double d, const Str&) { return real(d); }
  JsonNode text(std::string_view s) {
    JsonNode n = of(JsonNode::Kind::string);
    if (s.size() > capacity - used) throw std::length_error("JSON strings past the input's size");
    char* at = tape.strings_.get() + used;
    if (!s.empty()) std::memcpy(at, s.data(), s.size());
    used += s.size();
    n.v_.s = at;
    n.count_ = static_cast<std::uint32_t>(s.size());
    return n;
  }
  bool string(std::string_view s) { return push(text(s)); }
  bool string(Str& s) { return string(std::string_view(s)); }
  bool binary(Json::binary_t&) { return false; }  // (CBOR byte strings: not in a report)
  bool key(std::string_view s) {
    ++tape.nodes_[open.back()].count_;
    tape.nodes_.push_back(text(s));
    return true;
  }
  bool start(JsonNode::Kind k) {
    const bool ok = push(of(k));
    open.push_back(tape.nodes_.size() - 1);
    return ok;
  }
  bool end() {
    JsonNode& n = tape.nodes_[open.back()];
    n.span_ = static_cast<std::uint32_t>(tape.nodes_.size() - open.back());
    open.pop_back();
    return true;
  }
  bool start_object(std::size_t) { return start(JsonNode::Kind::object); }
  bool end_object() { return end(); }
  bool start_array(std::size_t) { return start(JsonNode::Kind::array); }
  bool end_array() { return end(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

  // simdjson's value `e` and its subtree, as nlohmann's events would add them: a number
  // without a sign is a count, with one an integer (simdjson reads "-0" as the integer 0:
  // a count here, an integer there, the same number). Recursive: simdjson's DOM is at most
  // its parser's max_depth (1024) deep.
  bool add(simdjson::dom::element e) {
    using T = simdjson::dom::element_type;
    switch (e.type()) {
      case T::ARRAY: {
        const simdjson::dom::array a = e.get_array().value_unsafe();
        if (!start_array(0)) return false;
        for (simdjson::dom::element x : a)
          if (!add(x)) return false;
        return end_array();
      }
      case T::OBJECT: {
        const simdjson::dom::object o = e.get_object().value_unsafe();
        if (!start_object(0)) return false;
        for (simdjson::dom::key_value_pair m : o) {
          key(m.key);
          if (!add(m.value)) return false;
        }
        return end_object();
      }
      case T::INT64: {
        const std::int64_t i = e.get_int64().value_unsafe();
        return i >= 0 ? number_unsigned(static_cast<std::uint64_t>(i)) : number_integer(i);
      }
      case T::UINT64:
        return number_unsigned(e.get_uint64().value_unsafe());
      case T::DOUBLE:
        return real(e.get_double().value_unsafe());
      case T::STRING:
        return string(e.get_string().value_unsafe());
      case T::BOOL:
        return boolean(e.get_bool().value_unsafe());
      case T::NULL_VALUE:
        return null();
    }
    return false;
  }

  static JsonTape start_tape(std::string_view in, const std::string& where,
                             const std::string& problem) {
    if (in.size() >= std::numeric_limits<std::uint32_t>::max())
      throw Error(where, "is larger than 4 GiB (" + problem + ")");
    JsonTape t;
    t.nodes_.reserve(in.size() / 8 + 1);
    t.strings_ = std::make_unique_for_overwrite<char[]>(in.size() + 1);
    return t;
  }

  static JsonTape read(std::string_view in, nlohmann::detail::input_format_t format,
                       const std::string& where, const std::string& problem) {
    JsonTape t = start_tape(in, where, problem);
    TapeBuilder b{.tape = t, .capacity = in.size()};
    if (!Json::sax_parse(in.begin(), in.end(), &b, format) || t.nodes_.empty())
      throw Error(where, problem);
    return t;
  }

  // JSON by simdjson, several times faster than nlohmann's lexer (merge reads its parts so:
  // docs/scale.md). What simdjson refuses, nlohmann reads or words the error of: integers
  // beyond 64 bits (a double there), nesting past 1024, a byte order mark.
  static JsonTape read_json(std::string_view in, const std::string& where,
                            const std::string& problem) {
    JsonTape t = start_tape(in, where, problem);
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(in.data(), in.size()).get(root) == simdjson::SUCCESS) {
      TapeBuilder b{.tape = t, .capacity = in.size()};
      if (b.add(root)) return t;
    }
    return read(in, nlohmann::detail::input_format_t::json, where, problem);
  }
};

JsonTape JsonTape::parse(std::string_view text, const std::string& where, const char* expected) {
  return TapeBuilder::read_json(text, where, std::string("not JSON (expected ") + expected + ")");
}

JsonTape JsonTape::parse_cbor(std::string_view bytes, const std::string& where,
                              const char* expected) {
  return TapeBuilder::read(bytes, nlohmann::detail::input_format_t::cbor, where,
                           std::string("not CBOR (expected ") + expected + ")");
}

Json to_dom(const JsonNode& root) {
  Json out;
  struct Open {
    Json* j;
    const JsonNode* end;
  };
  std::vector<Open> open;  // the containers being filled (iterative: any depth)
  const JsonNode* const end = root.after();
  for (const JsonNode* n = &root; n != end; ++n) {
    while (!open.empty() && n == open.back().end) open.pop_back();
    Json* slot = &out;
    if (!open.empty() && open.back().j->is_object()) {
      slot = &(*open.back().j)[std::string(n->text())];
      ++n;
    } else if (!open.empty()) {
      open.back().j->push_back(nullptr);
      slot = &open.back().j->back();
    }
    if (n->is_object() || n->is_array()) {
      *slot = n->is_object() ? Json::object() : Json::array();
      open.push_back({slot, n->after()});
    } else if (n->is_boolean()) {
      *slot = n->get<bool>();
    } else if (n->is_number_unsigned()) {
      *slot = n->get<std::uint64_t>();
    } else if (n->is_number_integer()) {
      *slot = n->get<std::int64_t>();
    } else if (n->is_number()) {
      *slot = n->get<double>();
    } else if (n->is_string()) {
      *slot = n->get<std::string>();
    } else {
      *slot = nullptr;  // (also over an earlier member of the same key: the last one counts)
    }
  }
  return out;
}

}  // namespace fpguard::report::detail
