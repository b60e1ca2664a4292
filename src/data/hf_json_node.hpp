// A view of one value inside tokenizer.json that knows where it is ("pre_tokenizer.
// pretokenizers[1].pattern"), so every complaint about the file names the file and the key.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace megatron::data {

class HfJsonNode {
 public:
  HfJsonNode(const nlohmann::json& value, std::string path, const std::string& file, int depth = 0)
      : value_(&value), path_(std::move(path)), file_(&file), depth_(depth) {}

  const nlohmann::json& json() const { return *value_; }
  const std::string& path() const { return path_; }
  // Refuses components nested past a depth no real file reaches (Sequences of Sequences ...), so
  // that a hostile file cannot exhaust the stack of the recursive readers.
  void check_nesting() const;
  // "FILE: PATH" for messages.
  std::string where() const;
  [[noreturn]] void fail(const std::string& message) const;

  bool is_null() const { return value_->is_null(); }
  // A member that must be there (null counts as missing).
  HfJsonNode at(std::string_view key) const;
  // A member that may be absent or null.
  std::optional<HfJsonNode> find(std::string_view key) const;
  HfJsonNode at(std::size_t index) const;
  std::size_t size() const { return value_->size(); }

  // This value as a given type, or a message naming what was expected.
  const nlohmann::json& object() const;
  const nlohmann::json& array() const;
  std::string string() const;
  bool boolean() const;
  int64_t integer(int64_t min, int64_t max) const;
  double number() const;
  // One Unicode character (Metaspace's replacement, Strip's content).
  std::string character() const;

  std::string string(std::string_view key) const { return at(key).string(); }
  std::string string_or(std::string_view key, std::string fallback) const;
  bool boolean_or(std::string_view key, bool fallback) const;
  // The component type ("type" member).
  std::string type() const { return string("type"); }
  // Refuses members other than `known` (and "type"): a setting this reader does not know might
  // change the ids, and a tokenizer that is silently different is worse than none.
  void only(std::initializer_list<std::string_view> known) const;

 private:
  const nlohmann::json* value_;
  std::string path_;
  const std::string* file_;
  int depth_ = 0;
};

}  // namespace megatron::data
