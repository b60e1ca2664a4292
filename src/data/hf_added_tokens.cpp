#include "data/hf_added_tokens.hpp"

#include <algorithm>

#include "data/unicode.hpp"

namespace megatron::data {

namespace {

// The last / first character of a text (U+0000 for none).
char32_t last_char(std::string_view text) {
  if (text.empty()) return 0;
  std::size_t at = text.size() - 1;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  return unicode::decode(text.substr(at))[0].value;
}

char32_t first_char(std::string_view text) {
  if (text.empty()) return 0;
  return unicode::decode(text.substr(0, std::min<std::size_t>(4, text.size())))[0].value;
}

// Where the whitespace run that ends `text` begins.
std::size_t trailing_space_start(std::string_view text) {
  const auto points = unicode::decode(text);
  std::size_t at = text.size();
  for (std::size_t i = points.size(); i-- > 0 && unicode::is_whitespace(points[i].value);) at = points[i].offset;
  return at;
}

// How long the whitespace run that starts `text` is.
std::size_t leading_space_length(std::string_view text) {
  std::size_t n = 0;
  for (const unicode::CodePoint& c : unicode::decode(text)) {
    if (!unicode::is_whitespace(c.value)) break;
    n = c.offset + c.length;
  }
  return n;
}

}  // namespace

void HfAddedTokenMatcher::add(std::string spelling, const HfAddedToken& token) {
  if (spelling.empty()) return;
  // The same spelling twice: the later token takes it.
  for (Entry& e : tokens_) {
    if (e.spelling == spelling) {
      e.token = token;
      return;
    }
  }
  tokens_.push_back({std::move(spelling), token});
  auto& list = by_first_byte_[static_cast<unsigned char>(tokens_.back().spelling[0])];
  list.push_back(tokens_.size() - 1);
  std::stable_sort(list.begin(), list.end(),
                   [&](std::size_t a, std::size_t b) { return tokens_[a].spelling.size() > tokens_[b].spelling.size(); });
}

std::vector<HfSegment> HfAddedTokenMatcher::split(std::string_view text) const {
  if (text.empty()) return {{{0, 0}, -1}};
  std::vector<HfSegment> out;
  std::size_t start_offset = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    // The leftmost match, and the longest there.
    const Entry* match = nullptr;
    std::size_t at = pos;
    for (; at < text.size() && !match; ++at) {
      for (const std::size_t k : by_first_byte_[static_cast<unsigned char>(text[at])]) {
        if (text.compare(at, tokens_[k].spelling.size(), tokens_[k].spelling) == 0) {
          match = &tokens_[k];
          break;
        }
      }
      if (match) break;
    }
    if (!match) break;
    std::size_t start = at;
    std::size_t stop = at + match->spelling.size();
    pos = stop;  // the automaton goes on after the match, whether or not it is kept
    const HfAddedToken& token = match->token;
    if (token.single_word) {
      const bool space_before = start == 0 || !unicode::is_word(last_char(text.substr(0, start)));
      const bool space_after = stop == text.size() || !unicode::is_word(first_char(text.substr(stop)));
      if (!space_before || !space_after) continue;
    }
    if (start < start_offset) continue;  // inside the spaces an rstrip token took
    if (token.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (token.rstrip) stop += leading_space_length(text.substr(stop));
    if (start_offset < start) out.push_back({{start_offset, start}, -1});
    out.push_back({{start, stop}, token.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({{start_offset, text.size()}, -1});
  return out;
}

}  // namespace megatron::data
