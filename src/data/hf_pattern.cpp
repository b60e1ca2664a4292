#include "data/hf_pattern.hpp"

namespace megatron::data {

std::unique_ptr<UnicodeRegex> make_hf_pattern(const HfJsonNode& pattern) {
  pattern.object();
  if (pattern.json().size() != 1) pattern.fail("must have exactly one of String or Regex");
  if (const auto literal = pattern.find("String")) {
    return std::make_unique<UnicodeRegex>(regex_escape(literal->string()), literal->where());
  }
  if (const auto regex = pattern.find("Regex")) {
    return std::make_unique<UnicodeRegex>(regex->string(), regex->where());
  }
  pattern.fail("must have exactly one of String or Regex");
}

}  // namespace megatron::data
