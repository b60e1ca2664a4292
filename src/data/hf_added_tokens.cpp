#include "data/hf_added_tokens.hpp"

#include <algorithm>

#include "data/unicode.hpp"

namespace megatron::data {

namespace {

// The character that starts at byte `at` (U+FFFD for a byte that starts none) and its length.
std::pair<char32_t, std::size_t> code_point_at(std::string_view text, std::size_t at) {
  const unicode::CodePoint c = unicode::decode(text.substr(at, std::min<std::size_t>(4, text.size() - at)))[0];
  return {c.value, c.length};
}

// Where the character that ends just before byte `at` starts.
std::size_t previous_code_point(std::string_view text, std::size_t at) {
  std::size_t k = at - 1;
  while (k > 0 && at - k < 4 && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
  return k;
}

// Where the whitespace run that ends at byte `end` begins: walked back one character at a time,
// so that the cost is the run's, not the text's.
std::size_t trailing_space_start(std::string_view text, std::size_t end) {
  while (end > 0) {
    const std::size_t k = previous_code_point(text, end);
    if (!unicode::is_whitespace(code_point_at(text, k).first)) break;
    end = k;
  }
  return end;
}

// Where the whitespace run that starts at byte `begin` ends.
std::size_t leading_space_end(std::string_view text, std::size_t begin) {
  while (begin < text.size()) {
    const auto [c, length] = code_point_at(text, begin);
    if (!unicode::is_whitespace(c)) break;
    begin += length;
  }
  return begin;
}

}  // namespace

void HfAddedTokenMatcher::add(const std::string& spelling, const HfAddedToken& token) {
  if (spelling.empty()) return;
  int32_t node = 0;
  for (const char c : spelling) {
    const uint64_t edge = uint64_t(node) << 8 | static_cast<unsigned char>(c);
    const auto [it, added] = edges_.try_emplace(edge, static_cast<int32_t>(token_at_.size()));
    if (added) token_at_.push_back(-1);
    node = it->second;
  }
  if (token_at_[node] >= 0) {
    tokens_[token_at_[node]] = token;
    return;
  }
  token_at_[node] = static_cast<int32_t>(tokens_.size());
  tokens_.push_back(token);
}

std::pair<int32_t, std::size_t> HfAddedTokenMatcher::longest_at(std::string_view text, std::size_t at) const {
  std::pair<int32_t, std::size_t> best{-1, 0};
  int32_t node = 0;
  for (std::size_t i = at; i < text.size(); ++i) {
    const auto it = edges_.find(uint64_t(node) << 8 | static_cast<unsigned char>(text[i]));
    if (it == edges_.end()) break;
    node = it->second;
    if (token_at_[node] >= 0) best = {token_at_[node], i + 1 - at};
  }
  return best;
}

std::vector<HfSegment> HfAddedTokenMatcher::split(std::string_view text) const {
  if (text.empty()) return {{{0, 0}, -1}};
  std::vector<HfSegment> out;
  std::size_t start_offset = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    // The leftmost match, and the longest there.
    std::pair<int32_t, std::size_t> match{-1, 0};
    std::size_t at = pos;
    for (; at < text.size(); ++at) {
      match = longest_at(text, at);
      if (match.first >= 0) break;
    }
    if (match.first < 0) break;
    std::size_t start = at;
    std::size_t stop = at + match.second;
    pos = stop;  // the automaton goes on after the match, whether or not it is kept
    const HfAddedToken& token = tokens_[match.first];
    if (token.single_word) {
      const bool space_before = start == 0 || !unicode::is_word(code_point_at(text, previous_code_point(text, start)).first);
      const bool space_after = stop == text.size() || !unicode::is_word(code_point_at(text, stop).first);
      if (!space_before || !space_after) continue;
    }
    if (start < start_offset) continue;  // inside the spaces an rstrip token took
    if (token.lstrip) start = std::max(trailing_space_start(text, start), start_offset);
    if (token.rstrip) stop = leading_space_end(text, stop);
    if (start_offset < start) out.push_back({{start_offset, start}, -1});
    out.push_back({{start, stop}, token.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({{start_offset, text.size()}, -1});
  return out;
}

}  // namespace megatron::data
