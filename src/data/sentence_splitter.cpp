#include "data/sentence_splitter.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace megatron::data {
namespace {

// Abbreviations that Punkt's English model knows well enough not to end a sentence after.
constexpr std::array<std::string_view, 44> kAbbreviations{
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "inc", "ltd",
    "co", "corp", "no", "gen", "col", "capt", "lt", "rev", "hon", "messrs", "mt", "jan", "feb",
    "mar", "apr", "aug", "sept", "sep", "oct", "nov", "dec", "fig", "al", "approx", "dept",
    "est", "govt", "u.s", "a.m", "p.m"};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_closer(char c) { return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}'; }

std::string lower_word_before(std::string_view text, std::size_t period) {
  std::size_t start = period;
  while (start > 0 && !is_space(text[start - 1]) && text[start - 1] != '(' && text[start - 1] != '"')
    --start;
  std::string word(text.substr(start, period - start));
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

bool starts_lowercase(std::string_view text, std::size_t at) {
  while (at < text.size() && (is_space(text[at]) || text[at] == '"' || text[at] == '\'' || text[at] == '('))
    ++at;
  return at < text.size() && std::islower(static_cast<unsigned char>(text[at]));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<std::string_view> split_sentences(std::string_view text, bool keep_newlines) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  auto emit = [&](std::size_t end) {
    const auto s = trim(text.substr(start, end - start));
    if (!s.empty()) out.push_back(s);
    start = end;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (keep_newlines && c == '\n') {
      emit(i + 1);
      continue;
    }
    if (c != '.' && c != '!' && c != '?') continue;
    std::size_t end = i + 1;
    while (end < text.size() && (text[end] == '.' || text[end] == '!' || text[end] == '?')) ++end;
    while (end < text.size() && is_closer(text[end])) ++end;
    if (end < text.size() && !is_space(text[end])) {
      i = end - 1;
      continue;
    }
    if (c == '.' && end == i + 1) {
      const std::string word = lower_word_before(text, i);
      const bool abbreviation =
          std::find(kAbbreviations.begin(), kAbbreviations.end(), word) != kAbbreviations.end();
      const bool initial = word.size() == 1 && std::isalpha(static_cast<unsigned char>(word[0]));
      if (abbreviation || initial) {
        i = end - 1;
        continue;
      }
    }
    if (starts_lowercase(text, end)) {
      i = end - 1;
      continue;
    }
    emit(end);
    i = end - 1;
  }
  emit(text.size());
  return out;
}

}  // namespace megatron::data
