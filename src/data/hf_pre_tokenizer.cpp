#include "data/hf_pre_tokenizer.hpp"

#include <algorithm>
#include <functional>
#include <utility>

#include "data/byte_unicode.hpp"
#include "data/gpt2_pretokenize.hpp"
#include "data/hf_pattern.hpp"
#include "data/unicode_regex.hpp"
#include "data/unicode.hpp"

namespace megatron::data {

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const HfJsonNode& node) {
  const std::string name = node.string();
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  node.fail("unknown split behavior '" + name +
            "'; known: Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

// A stretch of a piece and whether the pattern matched it.
struct Part {
  TextSpan span;
  bool match;
};

// tokenizers' Pattern for regexes: the matches and the gaps between them, covering the text.
std::vector<Part> regex_parts(const UnicodeRegex& regex, std::string_view text, bool invert) {
  std::vector<Part> parts;
  if (text.empty()) return {{{0, 0}, invert}};
  std::size_t previous = 0;
  for (const TextSpan& m : regex.find_all(text)) {
    if (previous != m.begin) parts.push_back({{previous, m.begin}, invert});
    parts.push_back({m, !invert});
    previous = m.end;
  }
  if (previous != text.size()) parts.push_back({{previous, text.size()}, invert});
  return parts;
}

// tokenizers' Pattern for character predicates: each matching character is a match of its own.
std::vector<Part> char_parts(std::string_view text, const std::function<bool(char32_t)>& is_match) {
  std::vector<Part> parts;
  if (text.empty()) return {{{0, 0}, false}};
  std::size_t last = 0;
  for (const unicode::CodePoint& c : unicode::decode(text)) {
    if (!is_match(c.value)) continue;
    if (last < c.offset) parts.push_back({{last, c.offset}, false});
    parts.push_back({{c.offset, c.offset + c.length}, true});
    last = c.offset + c.length;
  }
  if (last < text.size()) parts.push_back({{last, text.size()}, false});
  return parts;
}

// NormalizedString::split: the parts combined as the behaviour says, removed ones dropped.
std::vector<TextSpan> apply_behavior(const std::vector<Part>& parts, Behavior behavior) {
  std::vector<std::pair<TextSpan, bool>> kept;  // span, removed
  switch (behavior) {
    case Behavior::Isolated:
      for (const Part& p : parts) kept.push_back({p.span, false});
      break;
    case Behavior::Removed:
      for (const Part& p : parts) kept.push_back({p.span, p.match});
      break;
    case Behavior::Contiguous: {
      bool previous = false;
      for (const Part& p : parts) {
        if (p.match == previous && !kept.empty()) {
          kept.back().first.end = p.span.end;
        } else {
          kept.push_back({p.span, false});
        }
        previous = p.match;
      }
      break;
    }
    case Behavior::MergedWithPrevious: {
      bool previous = false;
      for (const Part& p : parts) {
        if (p.match && !previous && !kept.empty()) {
          kept.back().first.end = p.span.end;
        } else {
          kept.push_back({p.span, false});
        }
        previous = p.match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool previous = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->match && !previous && !kept.empty()) {
          kept.back().first.begin = it->span.begin;
        } else {
          kept.push_back({it->span, false});
        }
        previous = it->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  std::vector<TextSpan> out;
  for (const auto& [span, removed] : kept) {
    if (!removed && span.end > span.begin) out.push_back(span);
  }
  return out;
}

// Replaces each piece with the spans `split(piece)` yields.
template <typename SplitFn>
void split_pieces(std::vector<HfPiece>& pieces, SplitFn split) {
  std::vector<HfPiece> out;
  out.reserve(pieces.size());
  for (HfPiece& piece : pieces) {
    for (const TextSpan& span : split(piece)) {
      out.push_back({piece.text.substr(span.begin, span.end - span.begin), piece.at_start && span.begin == 0});
    }
  }
  pieces = std::move(out);
}

bool is_punctuation(char32_t c) {
  const bool ascii = c < 0x80 && ((c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
                                  (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E));
  return ascii || unicode::is_punctuation(c);
}

class PredicateSplit final : public HfPreTokenizer {
 public:
  PredicateSplit(std::function<bool(char32_t)> is_match, Behavior behavior)
      : is_match_(std::move(is_match)), behavior_(behavior) {}
  void pre_tokenize(std::vector<HfPiece>& pieces) const override {
    split_pieces(pieces, [&](const HfPiece& p) { return apply_behavior(char_parts(p.text, is_match_), behavior_); });
  }

 private:
  std::function<bool(char32_t)> is_match_;
  Behavior behavior_;
};

class RegexSplit final : public HfPreTokenizer {
 public:
  RegexSplit(std::unique_ptr<UnicodeRegex> regex, Behavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<HfPiece>& pieces) const override {
    split_pieces(pieces, [&](const HfPiece& p) {
      return apply_behavior(regex_parts(*regex_, p.text, invert_), behavior_);
    });
  }

 private:
  std::unique_ptr<UnicodeRegex> regex_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public HfPreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
  void pre_tokenize(std::vector<HfPiece>& pieces) const override {
    std::vector<HfPiece> out;
    out.reserve(pieces.size());
    for (HfPiece& piece : pieces) {
      if (add_prefix_space_ && (piece.text.empty() || piece.text[0] != ' ')) piece.text.insert(0, 1, ' ');
      if (!use_regex_) {
        if (!piece.text.empty()) out.push_back({gpt2_spell_bytes(piece.text), piece.at_start});
        continue;
      }
      Gpt2PreTokenizer words(piece.text);
      std::string_view word;
      bool first = true;
      while (words.next(word)) {
        out.push_back({gpt2_spell_bytes(word), piece.at_start && first});
        first = false;
      }
    }
    pieces = std::move(out);
  }

 private:
  bool add_prefix_space_;
  bool use_regex_;
};

class MetaspacePreTokenizer final : public HfPreTokenizer {
 public:
  enum class Prepend { Always, Never, First };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {
    const auto c = unicode::decode(replacement_);
    replacement_char_ = c.empty() ? U' ' : c[0].value;
  }
  void pre_tokenize(std::vector<HfPiece>& pieces) const override {
    split_pieces(pieces, [&](HfPiece& p) {
      std::string replaced;
      replaced.reserve(p.text.size());
      for (const char ch : p.text) {
        if (ch == ' ') {
          replaced += replacement_;
        } else {
          replaced.push_back(ch);
        }
      }
      const bool starts = replaced.starts_with(replacement_);
      if ((prepend_ == Prepend::Always && !starts) || (prepend_ == Prepend::First && !starts && p.at_start)) {
        replaced.insert(0, replacement_);
      }
      p.text = std::move(replaced);
      if (!split_) return std::vector<TextSpan>{{0, p.text.size()}};
      const char32_t r = replacement_char_;
      return apply_behavior(char_parts(p.text, [r](char32_t c) { return c == r; }), Behavior::MergedWithNext);
    });
  }

 private:
  std::string replacement_;
  char32_t replacement_char_;
  Prepend prepend_;
  bool split_;
};

class PreTokenizerSequence final : public HfPreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<HfPreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<HfPiece>& pieces) const override {
    for (const auto& part : parts_) part->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<HfPreTokenizer>> parts_;
};

class BothPreTokenizers final : public HfPreTokenizer {
 public:
  BothPreTokenizers(std::unique_ptr<HfPreTokenizer> first, std::unique_ptr<HfPreTokenizer> second)
      : first_(std::move(first)), second_(std::move(second)) {}
  void pre_tokenize(std::vector<HfPiece>& pieces) const override {
    first_->pre_tokenize(pieces);
    second_->pre_tokenize(pieces);
  }

 private:
  std::unique_ptr<HfPreTokenizer> first_;
  std::unique_ptr<HfPreTokenizer> second_;
};

MetaspacePreTokenizer::Prepend parse_prepend(const HfJsonNode& node) {
  const std::optional<HfJsonNode> scheme = node.find("prepend_scheme");
  const std::optional<HfJsonNode> legacy = node.find("add_prefix_space");
  MetaspacePreTokenizer::Prepend prepend = MetaspacePreTokenizer::Prepend::Always;
  if (scheme) {
    const std::string name = scheme->string();
    if (name == "always") {
      prepend = MetaspacePreTokenizer::Prepend::Always;
    } else if (name == "never") {
      prepend = MetaspacePreTokenizer::Prepend::Never;
    } else if (name == "first") {
      prepend = MetaspacePreTokenizer::Prepend::First;
    } else {
      scheme->fail("unknown prepend_scheme '" + name + "'; known: always, never, first");
    }
  }
  if (legacy && !legacy->boolean()) {
    if (scheme && prepend != MetaspacePreTokenizer::Prepend::Never) legacy->fail("false contradicts prepend_scheme");
    prepend = MetaspacePreTokenizer::Prepend::Never;
  }
  return prepend;
}

}  // namespace

// Shared with the MetaspacePreTokenizer decoder: whether a prepend scheme strips the first space.
bool hf_metaspace_prepends(const HfJsonNode& node) { return parse_prepend(node) != MetaspacePreTokenizer::Prepend::Never; }

std::unique_ptr<HfPreTokenizer> make_hf_pre_tokenizer(const HfJsonNode& node) {
  node.check_nesting();
  const std::string type = node.type();
  if (type == "ByteLevel") {
    node.only({"add_prefix_space", "trim_offsets", "use_regex"});
    return std::make_unique<ByteLevelPreTokenizer>(node.boolean_or("add_prefix_space", true), node.boolean_or("use_regex", true));
  }
  if (type == "Split") {
    node.only({"pattern", "behavior", "invert"});
    return std::make_unique<RegexSplit>(make_hf_pattern(node.at("pattern")), parse_behavior(node.at("behavior")),
                                        node.boolean_or("invert", false));
  }
  if (type == "Metaspace") {
    node.only({"replacement", "prepend_scheme", "add_prefix_space", "split", "str_rep"});
    return std::make_unique<MetaspacePreTokenizer>(node.at("replacement").character(), parse_prepend(node),
                                       node.boolean_or("split", true));
  }
  if (type == "Whitespace") {
    node.only({});
    return std::make_unique<RegexSplit>(std::make_unique<UnicodeRegex>(
        // Rust regex's \w (the one `tokenizers` uses here): Alphabetic, marks, decimal digits,
        // connector punctuation and the two joiners, which PCRE2's \w leaves out.
        R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\s]+)",
        node.where()),
                                        Behavior::Removed, true);
  }
  if (type == "WhitespaceSplit") {
    node.only({});
    return std::make_unique<PredicateSplit>(unicode::is_whitespace, Behavior::Removed);
  }
  if (type == "BertPreTokenizer") {
    node.only({});
    return std::make_unique<BothPreTokenizers>(std::make_unique<PredicateSplit>(unicode::is_whitespace, Behavior::Removed),
                                  std::make_unique<PredicateSplit>(is_punctuation, Behavior::Isolated));
  }
  if (type == "Punctuation") {
    node.only({"behavior"});
    const auto behavior = node.find("behavior");
    return std::make_unique<PredicateSplit>(is_punctuation, behavior ? parse_behavior(*behavior) : Behavior::Isolated);
  }
  if (type == "Digits") {
    node.only({"individual_digits"});
    return std::make_unique<PredicateSplit>(
        unicode::is_number, node.boolean_or("individual_digits", false) ? Behavior::Isolated : Behavior::Contiguous);
  }
  if (type == "CharDelimiterSplit") {
    node.only({"delimiter"});
    const char32_t delimiter = unicode::decode(node.at("delimiter").character())[0].value;
    return std::make_unique<PredicateSplit>([delimiter](char32_t c) { return c == delimiter; }, Behavior::Removed);
  }
  if (type == "Sequence") {
    node.only({"pretokenizers"});
    const HfJsonNode list = node.at("pretokenizers");
    list.array();
    std::vector<std::unique_ptr<HfPreTokenizer>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) parts.push_back(make_hf_pre_tokenizer(list.at(i)));
    return std::make_unique<PreTokenizerSequence>(std::move(parts));
  }
  node.at("type").fail("unknown pre-tokenizer '" + type + "'; known: ByteLevelPreTokenizer, Split, MetaspacePreTokenizer, Whitespace, "
                       "WhitespaceSplit, BertPreTokenizer, Punctuation, Digits, CharDelimiterSplit, PreTokenizerSequence");
}

}  // namespace megatron::data
