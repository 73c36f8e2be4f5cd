// A ModelProto parsed from a buffer (a file's map) without copying the tensors' raw_data:
// protobuf parses every field but those; their payloads stay in the buffer, where the
// loaded tensors view or copy them (onnx_load.cpp). Protobuf cannot leave a bytes field
// where it is, so the messages on the way to them (model -> graph -> initializer, node ->
// attribute -> tensor or subgraph) are walked here field by field, and every other field
// is handed to protobuf unchanged, in file order: the result is what ParseFromArray
// gives, less those raw_data.
#include "model/onnx_parse.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <climits>
#include <cstdint>

#include "fpguard/error.hpp"
#include "fpguard/limits.hpp"

namespace fpguard::model {

namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// protobuf's own limit on nested messages (CodedInputStream's default).
constexpr int kMaxDepth = 100;

class Walker {
 public:
  Walker(std::span<const std::byte> buffer, std::string where)
      : data_(reinterpret_cast<const std::uint8_t*>(buffer.data())),
        in_(data_, static_cast<int>(buffer.size())),
        where_(std::move(where)) {}

  MappedRaw model(onnx::ModelProto& mp) {
    fields(mp, 0, [&](int number, int depth) {
      if (number != 7) return false;
      graph(*mp.mutable_graph(), depth);
      return true;
    });
    return std::move(raw_);
  }

 private:
  [[noreturn]] void fail() const {
    throw Error(where_, "not an ONNX model (corrupt or not protobuf data)");
  }

  void graph(onnx::GraphProto& g, int depth) {
    fields(g, depth, [&](int number, int d) {
      if (number == 1) return node(*g.add_node(), d), true;
      if (number == 5) return tensor(*g.add_initializer(), d), true;
      return false;
    });
  }

  void node(onnx::NodeProto& n, int depth) {
    fields(n, depth, [&](int number, int d) {
      if (number != 5) return false;
      attribute(*n.add_attribute(), d);
      return true;
    });
  }

  void attribute(onnx::AttributeProto& a, int depth) {
    fields(a, depth, [&](int number, int d) {
      if (number == 5) return tensor(*a.mutable_t(), d), true;
      if (number == 6) return graph(*a.mutable_g(), d), true;
      if (number == 10) return tensor(*a.add_tensors(), d), true;
      if (number == 11) return graph(*a.add_graphs(), d), true;
      return false;
    });
  }

  void tensor(onnx::TensorProto& t, int depth) {
    fields(t, depth, [&](int number, int) {
      if (number != 9) return false;
      // raw_data: its place, not its bytes (a later raw_data replaces it, as in protobuf).
      const int begin = in_.CurrentPosition();
      const int size = in_.BytesUntilLimit();
      if (!in_.Skip(size)) fail();
      raw_[&t] = RawRange{.offset = static_cast<std::size_t>(begin),
                          .size = static_cast<std::size_t>(size)};
      return true;
    });
  }

  // The fields of `msg` up to the stream's limit (or its end). A length-delimited field
  // that `take(number, depth)` takes is read by it, the stream limited to the field's
  // payload; runs of the other fields go to protobuf's MergePartialFromCodedStream. (The
  // taken fields are never merged by protobuf, so merging the runs after them changes
  // nothing: only repeats of one field depend on their order, and that order is kept.)
  template <class Message, class Take>
  void fields(Message& msg, int depth, Take&& take) {
    if (depth > kMaxDepth) fail();
    int run = in_.CurrentPosition();
    for (;;) {
      const int at = in_.CurrentPosition();
      const std::uint32_t tag = in_.ReadTag();
      if (tag == 0) {
        // The limit or the end of the data (nothing read); a zero tag (read) or the data's
        // end inside a field are corrupt, as protobuf has them.
        if (in_.CurrentPosition() != at || in_.BytesUntilLimit() > 0 ||
            (in_.BytesUntilLimit() < 0 && !in_.ExpectAtEnd()))
          fail();
        merge(msg, run, at, depth);
        return;
      }
      if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        if (!WireFormatLite::SkipField(&in_, tag)) fail();
        continue;
      }
      std::uint32_t length = 0;
      if (!in_.ReadVarint32(&length) || length > static_cast<std::uint32_t>(INT_MAX)) fail();
      const int payload = in_.CurrentPosition();
      const auto limit = in_.PushLimit(static_cast<int>(length));
      if (in_.BytesUntilLimit() != static_cast<int>(length)) fail();  // past the parent's end
      const int number = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
      if (take(number, depth + 1)) {
        merge(msg, run, at, depth);
        run = payload + static_cast<int>(length);
      } else if (!in_.Skip(static_cast<int>(length))) {
        fail();
      }
      in_.PopLimit(limit);
    }
  }

  // Bytes [begin, end) of the data, whole fields of `msg`, merged into it by protobuf. What
  // protobuf parses (typed values such as float_data included) is checked against the
  // memory limit before it is parsed, as a model's whole size was before it was mapped.
  template <class Message>
  void merge(Message& msg, int begin, int end, int depth) {
    if (end <= begin) return;
    parsed_ += static_cast<std::uint64_t>(end - begin);
    check_memory(parsed_, where_);
    CodedInputStream sub(data_ + begin, end - begin);
    sub.SetRecursionLimit(kMaxDepth - depth);
    if (!msg.MergePartialFromCodedStream(&sub) || sub.CurrentPosition() != end - begin) fail();
  }

  const std::uint8_t* data_;
  CodedInputStream in_;
  std::string where_;
  MappedRaw raw_;
  std::uint64_t parsed_ = 0;  // bytes handed to protobuf so far
};

}  // namespace

MappedRaw parse_mapped(std::span<const std::byte> buffer, onnx::ModelProto& mp,
                       const std::string& where) {
  if (buffer.size() >= static_cast<std::size_t>(INT_MAX))
    throw Error(where, "not an ONNX model (corrupt or not protobuf data)");
  if (buffer.empty()) return {};  // an empty message: a model without a graph
  return Walker(buffer, where).model(mp);
}

}  // namespace fpguard::model
