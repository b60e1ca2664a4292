// A compiled Unicode regular expression (PCRE2, UTF and Unicode properties on) with the match
// iteration of Hugging Face `tokenizers`, for tokenizer.json's Split and Replace patterns.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::data {

struct TextSpan {
  std::size_t begin;
  std::size_t end;
};

class UnicodeRegex {
 public:
  // Throws UserError with `where` and PCRE2's message when the pattern does not compile.
  UnicodeRegex(std::string_view pattern, const std::string& where);
  ~UnicodeRegex();
  UnicodeRegex(const UnicodeRegex&) = delete;
  UnicodeRegex& operator=(const UnicodeRegex&) = delete;

  // Every match in `text` (valid UTF-8), left to right; thread-safe. An empty match right where
  // the previous match ended is skipped and the search moves one character on, as the find_iter
  // of the onig crate that `tokenizers` uses.
  std::vector<TextSpan> find_all(std::string_view text) const;
  // `text` with every match of find_all replaced by `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `literal` escaped so that it matches itself.
std::string regex_escape(std::string_view literal);

}  // namespace megatron::data
