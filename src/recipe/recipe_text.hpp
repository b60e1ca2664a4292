// A recipe written key by key as YAML text, for tools that make recipes (from-megatron):
// values already in YAML form, each with an optional comment, printed in schema order.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace megatron::recipe {

class RecipeText {
 public:
  struct Entry {
    std::string value;    // YAML flow text: "768", "[a, b]", "\"path with: colon\""
    std::string comment;  // after the value, "" for none
  };

  // Throws std::logic_error for a path the schema does not know: a bug in the caller.
  void set(const std::string& path, std::string value, std::string comment = "");
  const Entry* find(const std::string& path) const;
  bool has(const std::string& path) const { return find(path) != nullptr; }

  // `header` lines become comments at the top; sections and keys follow the schema's order.
  std::string render(const std::vector<std::string>& header) const;

 private:
  std::map<std::string, Entry> entries_;
};

// A string as a YAML scalar that reads back as the same string: plain when that is safe,
// double-quoted otherwise.
std::string yaml_string(const std::string& text);

// "[a, b]" of already-formatted YAML values.
std::string yaml_list(const std::vector<std::string>& values);

}  // namespace megatron::recipe
