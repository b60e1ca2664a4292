// A JSON object's field as Python's json.loads (and so Megatron's preprocessing) sees it: of
// duplicate keys the last wins, where simdjson's find_field_unordered returns the first.
#pragma once

#include <simdjson.h>

#include <string_view>

namespace megatron::data {

// The value of the last field named `key` (its raw spelling, as simdjson's find_field matches)
// in `object`, or NO_SUCH_FIELD, or the parse error met on the way. Walks the object's keys twice (values are skipped, not
// parsed) from its start wherever `object` stood, and leaves it on the field found.
simdjson::error_code find_last_field(simdjson::ondemand::object& object, std::string_view key,
                                     simdjson::ondemand::value& value);

}  // namespace megatron::data
