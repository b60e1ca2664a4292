#include "recipe/documents.hpp"

#include <string>
#include <string_view>

namespace megatron::recipe {
namespace {

// A document marker: `---` or `...` at the start of a line, then the end of the line or a
// space or tab (YAML 1.2, c-forbidden). The spec forbids it inside any scalar, so a line scan
// finds every document boundary without parsing.
bool is_marker(std::string_view line, std::string_view marker) {
  return line.substr(0, 3) == marker &&
         (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
}

// Whether `text` holds anything but blanks and a comment.
bool has_content(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  return first != std::string_view::npos && text[first] != '#';
}

}  // namespace

// A line scan, not yaml-cpp's parser: asking yaml-cpp for the next document after a malformed
// one can loop for ever (found by fuzzing: tests/fuzz/crashes/overrides/).
std::optional<YAML::Mark> ignored_document(std::istream& in) {
  bool content = false;              // the current document has content so far
  std::optional<YAML::Mark> marker;  // where the current document's `---` or `...` stood
  int documents = 0;                 // documents with content seen before the current one
  std::string line;
  for (int number = 0; std::getline(in, line); ++number) {
    const bool start = is_marker(line, "---"), end = is_marker(line, "...");
    if (start || end) {
      if (content) ++documents;
      content = false;
      if (start) {
        marker = YAML::Mark();
        marker->line = number;
        marker->column = 0;
      }
      // Content may follow a `---` on its own line ("--- value").
      if (start && has_content(std::string_view(line).substr(3))) content = true;
    } else if (!content && has_content(line) && line[0] != '%') {
      content = true;  // a directive (%YAML) belongs before a document, not in one
    }
    if (content && documents > 0) return marker;
  }
  return std::nullopt;
}

}  // namespace megatron::recipe
