#include "data/json_last_field.hpp"

#include <cstdint>

namespace megatron::data {

simdjson::error_code find_last_field(simdjson::ondemand::object& object, std::string_view key,
                                     simdjson::ondemand::value& value) {
  // Another key's lookup may have left the object anywhere.
  if (const auto error = object.reset().error()) return error;
  int64_t last = -1, index = 0;
  for (auto field : object) {
    // Raw keys, compared as simdjson's find_field compares them: unescaping every key here
    // writes into the parser's string buffer, which holds one document's worth, and a second
    // walk (another --json-keys entry, or the error's list of keys) overran it (found by
    // fuzzing: tests/fuzz/crashes/corpus/).
    simdjson::ondemand::raw_json_string name;
    if (const auto error = field.key().get(name)) return error;
    if (name.is_equal(key)) last = index;
    ++index;
  }
  if (last < 0) return simdjson::NO_SUCH_FIELD;
  if (const auto error = object.reset().error()) return error;
  index = 0;
  for (auto field : object) {
    if (const auto error = field.error()) return error;
    if (index++ == last) return field.value().get(value);
  }
  return simdjson::NO_SUCH_FIELD;  // unreachable: the first walk found it
}

}  // namespace megatron::data
