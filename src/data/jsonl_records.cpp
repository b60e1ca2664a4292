#include "data/jsonl_records.hpp"

#include <fmt/format.h>

#include <fstream>

#include "core/error.hpp"
#include "core/printable.hpp"

namespace megatron::data {

void for_each_record(const std::string& path, const std::string& what,
                     const std::function<void(const nlohmann::json&, int64_t)>& each) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot read {}", path, what));
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw UserError(fmt::format("{}:{}: not JSON ({}); each line holds one JSON object", path,
                                  number, printable(e.what())));
    }
    if (!j.is_object()) throw UserError(fmt::format("{}:{}: not a JSON object", path, number));
    each(j, number);
  }
}

const nlohmann::json& field_of(const nlohmann::json& j, const std::string& field,
                               const std::string& path, int64_t line, const std::string& hint) {
  if (!j.contains(field)) {
    throw UserError(fmt::format("{}:{}: no field \"{}\" ({})", path, line, printable(field), hint));
  }
  return j.at(field);
}

std::string string_of(const nlohmann::json& v, const std::string& field, const std::string& path,
                      int64_t line) {
  if (!v.is_string()) {
    throw UserError(fmt::format("{}:{}: field \"{}\" is {}, not a string", path, line,
                                printable(field), v.type_name()));
  }
  return v.get<std::string>();
}

}  // namespace megatron::data
