#include "recipe/recipe_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <stdexcept>

#include "recipe/schema.hpp"

namespace megatron::recipe {
namespace {

bool plain_safe(const std::string& text) {
  if (text.empty()) return false;
  const char first = text.front();
  if (!(std::isalpha(static_cast<unsigned char>(first)) || first == '/' || first == '.' ||
        first == '_'))
    return false;
  for (const char c : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  // Words YAML reads as booleans or null.
  std::string lower;
  for (const char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "null", "y", "n", ".nan", ".inf"})
    if (lower == word) return false;
  return true;
}

}  // namespace

void RecipeText::set(const std::string& path, std::string value, std::string comment) {
  if (!find_field(path)) throw std::logic_error("RecipeText::set: no recipe key " + path);
  entries_[path] = Entry{std::move(value), std::move(comment)};
}

const RecipeText::Entry* RecipeText::find(const std::string& path) const {
  const auto it = entries_.find(path);
  return it == entries_.end() ? nullptr : &it->second;
}

std::string RecipeText::render(const std::vector<std::string>& header) const {
  std::string out;
  for (const auto& line : header) out += line.empty() ? "#\n" : "# " + line + "\n";
  for (const SectionSpec& section : sections()) {
    std::string body;
    for (const FieldSpec& field : fields()) {
      if (field.section != section.name) continue;
      const Entry* entry = find(field.path);
      if (!entry) continue;
      body += fmt::format("  {}: {}", field.key, entry->value);
      if (!entry->comment.empty()) body += "  # " + entry->comment;
      body += "\n";
    }
    if (!body.empty()) out += section.name + ":\n" + body;
  }
  return out;
}

std::string yaml_string(const std::string& text) {
  if (plain_safe(text)) return text;
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out + "\"";
}

std::string yaml_list(const std::vector<std::string>& values) {
  return "[" + fmt::format("{}", fmt::join(values, ", ")) + "]";
}

}  // namespace megatron::recipe
