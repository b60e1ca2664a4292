#include "generate/text_stream.hpp"

#include <algorithm>
#include <string_view>

namespace megatron::generate {
namespace {

// The length of `text` without a trailing character that is not finished: an incomplete UTF-8
// sequence, or U+FFFD, which a decoder writes for one and may later replace.
size_t settled_length(std::string_view text) {
  size_t n = text.size();
  while (n >= 3 && text.substr(n - 3, 3) == "\xEF\xBF\xBD") n -= 3;
  // Look back at most three bytes for the lead byte of an unfinished sequence.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if (c < 0x80) break;      // ASCII: nothing unfinished
    if (c < 0xC0) continue;   // a continuation byte: keep looking for its lead
    const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (length > back) n -= back;
    break;
  }
  return n;
}

}  // namespace

bool cut_at_stop(std::string& text, const std::vector<std::string>& stops) {
  size_t cut = std::string::npos;
  for (const std::string& stop : stops) {
    if (!stop.empty()) cut = std::min(cut, text.find(stop));
  }
  if (cut == std::string::npos) return false;
  text.resize(cut);
  return true;
}

std::string TextStream::next(const std::string& text) {
  if (text.compare(0, sent_.size(), sent_) != 0) return {};  // changed under us: wait for the end
  size_t n = settled_length(text);
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    for (size_t k = std::min(stop.size() - (stop.empty() ? 0 : 1), n); k > hold; --k) {
      if (std::string_view(text).substr(n - k, k) == std::string_view(stop).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  n -= hold;
  if (n <= sent_.size()) return {};
  std::string part = text.substr(sent_.size(), n - sent_.size());
  sent_ += part;
  return part;
}

std::string TextStream::rest(const std::string& text) {
  if (text.size() <= sent_.size() || text.compare(0, sent_.size(), sent_) != 0) return {};
  std::string part = text.substr(sent_.size());
  sent_ = text;
  return part;
}

}  // namespace megatron::generate
