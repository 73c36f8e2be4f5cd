// The tape merge reads a part through (src/report/json_tape.hpp: simdjson, nlohmann where
// simdjson refuses): any text gives a tape or an Error naming the file, and the tape holds
// exactly what nlohmann's own parser reads (the DOM built from the tape dumps the same,
// element and member access agree), so that merge reads what `fpguard check` wrote.
#include <string>

#include "fpguard/report.hpp"
#include "fuzz_util.hpp"
#include "report/json_tape.hpp"

using namespace fpguard;
using report::Json;
using report::detail::JsonNode;
using report::detail::JsonTape;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  Json want;
  bool dom_ok = true;
  try {
    want = Json::parse(text);
  } catch (const Json::exception&) {
    dom_ok = false;
  }
  bool tape_ok = false;
  fuzz::expect_errors_only([&] {
    const JsonTape tape = JsonTape::parse(text, "fuzz.json", "a part");
    tape_ok = true;
    FUZZ_ASSERT(dom_ok);
    FUZZ_ASSERT(report::detail::to_dom(tape.root()).dump() == want.dump());
    const JsonNode& root = tape.root();
    if (want.is_array()) {
      FUZZ_ASSERT(root.size() == want.size());
      std::size_t i = 0;
      for (const JsonNode& e : root) {
        FUZZ_ASSERT(report::detail::to_dom(e).dump() == want[i].dump());
        FUZZ_ASSERT(&root[i] == &e);
        ++i;
      }
    } else if (want.is_object()) {
      for (auto it = want.begin(); it != want.end(); ++it) {
        FUZZ_ASSERT(root.contains(it.key()));
        FUZZ_ASSERT(report::detail::to_dom(*root.find(it.key())).dump() == it.value().dump());
      }
    }
  });
  FUZZ_ASSERT(tape_ok == dom_ok);
  return 0;
}
