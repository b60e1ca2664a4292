// A generated text sent as it grows (the server's streamed answers): each step sends only what
// can no longer change, holding back an unfinished UTF-8 character and any ending that may yet
// become a stop string, which is cut from the text rather than sent.
#pragma once

#include <string>
#include <vector>

namespace megatron::generate {

// Cuts `text` before the first of `stops` it holds; whether it did.
bool cut_at_stop(std::string& text, const std::vector<std::string>& stops);

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // The part of `text` (the whole text so far) not sent yet that is safe to send now.
  std::string next(const std::string& text);
  // The rest of the finished text.
  std::string rest(const std::string& text);

 private:
  std::vector<std::string> stops_;
  std::string sent_;
};

}  // namespace megatron::generate
