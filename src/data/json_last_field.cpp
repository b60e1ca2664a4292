#include "data/json_last_field.hpp"

#include <cstdint>

namespace megatron::data {

simdjson::error_code find_last_field(simdjson::ondemand::object& object, std::string_view key,
                                     simdjson::ondemand::value& value) {
  // Another key's lookup may have left the object anywhere.
  if (const auto error = object.reset().error()) return error;
  int64_t last = -1, index = 0;
  for (auto field : object) {
    std::string_view name;
    if (const auto error = field.unescaped_key().get(name)) return error;
    if (name == key) last = index;
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
