// Small jsonl files read record by record (task files, labelled text): each non-blank line one
// JSON object, and its fields checked with errors naming the file, line and field.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace megatron::data {

// Calls `each(object, line number)` for every non-blank line; UserError for a line that is not
// a JSON object, or a file that cannot be read (`what` names it: "the task file").
void for_each_record(const std::string& path, const std::string& what,
                     const std::function<void(const nlohmann::json&, int64_t)>& each);

// The field, or UserError "path:line: no field "f"" (`hint` says how to name another).
const nlohmann::json& field_of(const nlohmann::json& record, const std::string& field,
                               const std::string& path, int64_t line, const std::string& hint);

// The value as a string, or UserError naming the field and the type found.
std::string string_of(const nlohmann::json& value, const std::string& field, const std::string& path,
                      int64_t line);

}  // namespace megatron::data
