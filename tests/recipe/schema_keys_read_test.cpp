// Every recipe key acts: a key the schema accepts must be read somewhere in src/ besides the
// schema itself. A static check: it finds member accesses (`.key`, `->key`) in the sources with
// comments and string literals removed, so a key named only in messages or flag tables counts as
// dead. It cannot tell two keys of the same name apart; a dead key sharing its name with a live
// one slips through, a key nobody reads does not.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <cctype>
#include <set>
#include <sstream>
#include <string>

#include "recipe/render.hpp"

namespace megatron::recipe {
namespace {

namespace fs = std::filesystem;

// The source without comments, string and character literals (raw strings included).
std::string code_only(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
    } else if (text.compare(i, 2, "/*") == 0) {
      const std::size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 2;
    } else if (text.compare(i, 3, "R\"(") == 0) {
      const std::size_t end = text.find(")\"", i + 3);
      i = end == std::string::npos ? text.size() : end + 2;
      out += "\"\"";
    } else if (text[i] == '"' || text[i] == '\'') {
      const char quote = text[i++];
      while (i < text.size() && text[i] != quote) i += text[i] == '\\' ? 2 : 1;
      ++i;
      out += "\"\"";
    } else {
      out += text[i++];
    }
  }
  return out;
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A member access `.key` or `->key` not followed by more of an identifier. (std::regex recurses
// per character and overflows the stack on megabytes of source, so this is done by hand.)
bool reads_member(const std::string& code, const std::string& key) {
  for (std::size_t at = code.find(key); at != std::string::npos; at = code.find(key, at + 1)) {
    const std::size_t end = at + key.size();
    if (end < code.size() && is_identifier_char(code[end])) continue;
    if (at >= 1 && code[at - 1] == '.') return true;
    if (at >= 2 && code.compare(at - 2, 2, "->") == 0) return true;
  }
  return false;
}

std::string all_sources_but_the_schema() {
  std::string all;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(MEGATRON_SOURCE_DIR) / "src")) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh") continue;
    // The schema names every key by definition; the recipe struct declares them.
    const std::string name = entry.path().filename().string();
    if (name == "schema.cpp" || name == "recipe.hpp") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    all += code_only(text.str());
    all += '\n';
  }
  return all;
}

TEST(SchemaKeys, AMemberAccessIsAReadAndAPrefixOrBareNameIsNot) {
  EXPECT_TRUE(reads_member("x = r.model.seed;", "seed"));
  EXPECT_TRUE(reads_member("x = m->seed + 1;", "seed"));
  EXPECT_FALSE(reads_member("x = r.seed_offset; seed = 1;", "seed"));
}

TEST(SchemaKeys, TheCodeOnlyFilterDropsCommentsAndStrings) {
  EXPECT_EQ(code_only("a.x; // b.y\nc(\"d.z\", 'e') /* f.w */ R\"(g.v)\" h"),
            "a.x; \nc(\"\", \"\")  \"\" h");
}

TEST(SchemaKeys, EveryKeyIsReadOutsideTheSchema) {
  const std::string code = all_sources_but_the_schema();
  const nlohmann::json schema = schema_as_json_schema();
  int keys = 0;
  for (const auto& [section, body] : schema["properties"].items()) {
    if (!body.contains("properties")) continue;
    for (const auto& [key, unused] : body["properties"].items()) {
      ++keys;
      const std::string path = section + "." + key;
      EXPECT_TRUE(reads_member(code, key)) << path << " is read nowhere in src/";
    }
  }
  EXPECT_GT(keys, 100);  // the schema was walked
}

}  // namespace
}  // namespace megatron::recipe
