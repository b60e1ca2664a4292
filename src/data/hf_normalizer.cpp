#include "data/hf_normalizer.hpp"

#include <vector>

#include "data/byte_unicode.hpp"
#include "data/hf_pattern.hpp"
#include "data/unicode_regex.hpp"
#include "data/unicode.hpp"

namespace megatron::data {

namespace {

// Rewrites each code point through `fn(c, out)`.
template <typename Fn>
void map_chars(std::string& text, Fn fn) {
  std::string out;
  out.reserve(text.size());
  for (const unicode::CodePoint& c : unicode::decode(text)) fn(c.value, out);
  text = std::move(out);
}

// Rust's char::to_lowercase, per character: the simple mapping, except U+0130, the one
// character whose unconditional lowercase is two (i and a combining dot).
void append_lower(char32_t c, std::string& out) {
  if (c == 0x130) {
    out += "i\xCC\x87";
    return;
  }
  unicode::append_utf8(out, unicode::to_lower(c));
}

// The CJK blocks BertNormalizer pads with spaces (tokenizers' list, which differs from
// BERT's original in one block).
bool is_bert_chinese(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

class UnicodeFormNormalizer final : public HfNormalizer {
 public:
  explicit UnicodeFormNormalizer(unicode::NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = unicode::normalize(text, form_); }

 private:
  unicode::NormalForm form_;
};

class LowercaseNormalizer final : public HfNormalizer {
 public:
  void normalize(std::string& text) const override {
    map_chars(text, [](char32_t c, std::string& out) { append_lower(c, out); });
  }
};

class StripNormalizer final : public HfNormalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    const auto points = unicode::decode(text);
    std::size_t first = 0;
    std::size_t last = points.size();
    if (left_) {
      while (first < last && unicode::is_whitespace(points[first].value)) ++first;
    }
    if (right_) {
      while (last > first && unicode::is_whitespace(points[last - 1].value)) --last;
    }
    if (first == last) {
      text.clear();
      return;
    }
    const std::size_t begin = points[first].offset;
    const std::size_t end = points[last - 1].offset + points[last - 1].length;
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_;
  bool right_;
};

class StripAccents final : public HfNormalizer {
 public:
  void normalize(std::string& text) const override {
    map_chars(text, [](char32_t c, std::string& out) {
      if (!unicode::is_mark(c)) unicode::append_utf8(out, c);
    });
  }
};

// Replaces every match of a pattern (a literal string or a regex) with `content`.
class ReplaceNormalizer final : public HfNormalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<UnicodeRegex> regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    text = regex_->replace_all(text, content_);
  }

 private:
  std::unique_ptr<UnicodeRegex> regex_;
  std::string content_;
};

class PrependNormalizer final : public HfNormalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class BertNormalizerImpl final : public HfNormalizer {
 public:
  BertNormalizerImpl(bool clean_text, bool chinese, bool strip_accents, bool lowercase)
      : clean_text_(clean_text), chinese_(chinese), strip_accents_(strip_accents), lowercase_(lowercase) {}

  void normalize(std::string& text) const override {
    if (clean_text_) {
      map_chars(text, [](char32_t c, std::string& out) {
        const bool tab_or_newline = c == '\t' || c == '\n' || c == '\r';
        if (c == 0 || c == 0xFFFD || (!tab_or_newline && unicode::is_other(c))) return;
        if (tab_or_newline || unicode::is_whitespace(c)) {
          out.push_back(' ');
        } else {
          unicode::append_utf8(out, c);
        }
      });
    }
    if (chinese_) {
      map_chars(text, [](char32_t c, std::string& out) {
        if (is_bert_chinese(c)) out.push_back(' ');
        unicode::append_utf8(out, c);
        if (is_bert_chinese(c)) out.push_back(' ');
      });
    }
    if (strip_accents_) {
      text = unicode::nfd(text);
      map_chars(text, [](char32_t c, std::string& out) {
        if (!unicode::is_mark_nonspacing(c)) unicode::append_utf8(out, c);
      });
    }
    if (lowercase_) map_chars(text, [](char32_t c, std::string& out) { append_lower(c, out); });
  }

 private:
  bool clean_text_;
  bool chinese_;
  bool strip_accents_;
  bool lowercase_;
};

// Spells every byte in GPT-2's byte alphabet.
class ByteLevelNormalizer final : public HfNormalizer {
 public:
  void normalize(std::string& text) const override { text = gpt2_spell_bytes(text); }
};

class NormalizerSequence final : public HfNormalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<HfNormalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& part : parts_) part->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<HfNormalizer>> parts_;
};

}  // namespace

std::unique_ptr<HfNormalizer> make_hf_normalizer(const HfJsonNode& node) {
  node.check_nesting();
  const std::string type = node.type();
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    node.only({});
    const auto form = type == "NFC"    ? unicode::NormalForm::Nfc
                      : type == "NFD"  ? unicode::NormalForm::Nfd
                      : type == "NFKC" ? unicode::NormalForm::Nfkc
                                       : unicode::NormalForm::Nfkd;
    return std::make_unique<UnicodeFormNormalizer>(form);
  }
  if (type == "Lowercase") {
    node.only({});
    return std::make_unique<LowercaseNormalizer>();
  }
  if (type == "Strip") {
    node.only({"strip_left", "strip_right"});
    return std::make_unique<StripNormalizer>(node.boolean_or("strip_left", true), node.boolean_or("strip_right", true));
  }
  if (type == "StripAccents") {
    node.only({});
    return std::make_unique<StripAccents>();
  }
  if (type == "Replace") {
    node.only({"pattern", "content"});
    return std::make_unique<ReplaceNormalizer>(make_hf_pattern(node.at("pattern")), node.string("content"));
  }
  if (type == "Prepend") {
    node.only({"prepend"});
    return std::make_unique<PrependNormalizer>(node.string("prepend"));
  }
  if (type == "BertNormalizer") {
    node.only({"clean_text", "handle_chinese_chars", "strip_accents", "lowercase"});
    const bool lowercase = node.boolean_or("lowercase", true);
    return std::make_unique<BertNormalizerImpl>(node.boolean_or("clean_text", true),
                                            node.boolean_or("handle_chinese_chars", true),
                                            node.boolean_or("strip_accents", lowercase), lowercase);
  }
  if (type == "ByteLevel") {
    node.only({});
    return std::make_unique<ByteLevelNormalizer>();
  }
  if (type == "Sequence") {
    node.only({"normalizers"});
    const HfJsonNode list = node.at("normalizers");
    list.array();
    std::vector<std::unique_ptr<HfNormalizer>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) parts.push_back(make_hf_normalizer(list.at(i)));
    return std::make_unique<NormalizerSequence>(std::move(parts));
  }
  if (type == "Precompiled" || type == "Nmt") {
    node.at("type").fail("'" + type + "' (a SentencePiece conversion's normalizer) is not supported yet; "
                         "use the model's tokenizer.model with --tokenizer sentencepiece");
  }
  node.at("type").fail("unknown normalizer '" + type + "'; known: NFC, NFD, NFKC, NFKD, LowercaseNormalizer, "
                       "StripNormalizer, StripAccents, ReplaceNormalizer, PrependNormalizer, BertNormalizer, ByteLevel, NormalizerSequence");
}

}  // namespace megatron::data
