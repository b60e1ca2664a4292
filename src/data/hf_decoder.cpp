#include "data/hf_decoder.hpp"

#include <array>
#include <unordered_map>

#include "data/byte_unicode.hpp"
#include "data/hf_pattern.hpp"
#include "data/hf_pre_tokenizer.hpp"
#include "data/unicode.hpp"

namespace megatron::data {

namespace {

class ByteLevelDecoder final : public HfDecoder {
 public:
  ByteLevelDecoder() {
    const auto alphabet = gpt2_byte_to_unicode();
    for (int b = 0; b < 256; ++b) byte_of_[alphabet[b]] = static_cast<unsigned char>(b);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      const std::size_t before = bytes.size();
      bool all = true;
      for (const unicode::CodePoint& c : unicode::decode(token)) {
        const auto it = byte_of_.find(c.value);
        if (it == byte_of_.end()) {
          all = false;
          break;
        }
        bytes.push_back(static_cast<char>(it->second));
      }
      if (!all) {
        bytes.resize(before);
        bytes += token;
      }
    }
    tokens.assign(1, unicode::utf8_lossy(bytes));
  }

 private:
  std::unordered_map<char32_t, unsigned char> byte_of_;
};

class MetaspaceDecoder final : public HfDecoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepends) : replacement_(std::move(replacement)), prepends_(prepends) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (std::size_t at = 0; at < t.size();) {
        if (t.compare(at, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && prepends_)) out.push_back(' ');
          at += replacement_.size();
        } else {
          out.push_back(t[at++]);
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool prepends_;
};

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  if (from.empty()) return text;
  std::string out;
  std::size_t at = 0;
  for (std::size_t found; (found = text.find(from, at)) != std::string::npos; at = found + from.size()) {
    out.append(text, at, found - at);
    out += to;
  }
  out.append(text, at);
  return out;
}

class WordPieceDecoder final : public HfDecoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.starts_with(prefix_)) {
          t.erase(0, prefix_.size());
        } else {
          t.insert(0, 1, ' ');
        }
      }
      if (cleanup_) t = cleanup(std::move(t));
    }
  }

  // tokenizers' wordpiece::cleanup, in its order.
  static std::string cleanup(std::string t) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kRules{{
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}};
    for (const auto& [from, to] : kRules) t = replace_all(std::move(t), from, to);
    return t;
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeDecoder final : public HfDecoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = replace_all(std::move(tokens[i]), suffix_, i + 1 == tokens.size() ? "" : " ");
    }
  }

 private:
  std::string suffix_;
};

class ByteFallbackDecoder final : public HfDecoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    const auto flush = [&] {
      if (bytes.empty()) return;
      if (unicode::is_valid_utf8(bytes)) {
        out.push_back(bytes);
      } else {
        for (std::size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
    };
    for (std::string& t : tokens) {
      int value = -1;
      if (t.size() == 6 && t.starts_with("<0x") && t.back() == '>') value = hex_byte(t[3], t[4]);
      if (value >= 0) {
        bytes.push_back(static_cast<char>(value));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char hi, char lo) {
    const int h = hex_digit(hi);
    const int l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder final : public HfDecoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder final : public HfDecoder {
 public:
  StripDecoder(char32_t content, std::size_t start, std::size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      const auto points = unicode::decode(t);
      std::size_t first = 0;
      while (first < start_ && first < points.size() && points[first].value == content_) ++first;
      std::size_t last = points.size();
      for (std::size_t i = 0; i < stop_ && last > first && points[last - 1].value == content_; ++i) --last;
      if (first >= last) {
        t.clear();
        continue;
      }
      const std::size_t b = points[first].offset;
      const std::size_t e = points[last - 1].offset + points[last - 1].length;
      t = t.substr(b, e - b);
    }
  }

 private:
  char32_t content_;
  std::size_t start_;
  std::size_t stop_;
};

class ReplaceDecoder final : public HfDecoder {
 public:
  ReplaceDecoder(std::unique_ptr<UnicodeRegex> regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = regex_->replace_all(t, content_);
  }

 private:
  std::unique_ptr<UnicodeRegex> regex_;
  std::string content_;
};

class SequenceDecoder final : public HfDecoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<HfDecoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& part : parts_) part->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<HfDecoder>> parts_;
};

}  // namespace

std::unique_ptr<HfDecoder> make_hf_decoder(const HfJsonNode& node) {
  node.check_nesting();
  const std::string type = node.type();
  if (type == "ByteLevel") {
    node.only({"add_prefix_space", "trim_offsets", "use_regex"});
    return std::make_unique<ByteLevelDecoder>();
  }
  if (type == "Metaspace") {
    node.only({"replacement", "prepend_scheme", "add_prefix_space", "split", "str_rep"});
    return std::make_unique<MetaspaceDecoder>(node.at("replacement").character(), hf_metaspace_prepends(node));
  }
  if (type == "WordPiece") {
    node.only({"prefix", "cleanup"});
    return std::make_unique<WordPieceDecoder>(node.string_or("prefix", "##"), node.boolean_or("cleanup", true));
  }
  if (type == "BPEDecoder") {
    node.only({"suffix"});
    return std::make_unique<BpeDecoder>(node.string_or("suffix", "</w>"));
  }
  if (type == "ByteFallback") {
    node.only({});
    return std::make_unique<ByteFallbackDecoder>();
  }
  if (type == "Fuse") {
    node.only({});
    return std::make_unique<FuseDecoder>();
  }
  if (type == "Strip") {
    node.only({"content", "start", "stop"});
    const char32_t content = unicode::decode(node.at("content").character())[0].value;
    return std::make_unique<StripDecoder>(content, node.at("start").integer(0, INT32_MAX),
                                          node.at("stop").integer(0, INT32_MAX));
  }
  if (type == "Replace") {
    node.only({"pattern", "content"});
    return std::make_unique<ReplaceDecoder>(make_hf_pattern(node.at("pattern")), node.string("content"));
  }
  if (type == "Sequence") {
    node.only({"decoders"});
    const HfJsonNode list = node.at("decoders");
    list.array();
    std::vector<std::unique_ptr<HfDecoder>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) parts.push_back(make_hf_decoder(list.at(i)));
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  node.at("type").fail("unknown decoder '" + type + "'; known: ByteLevel, Metaspace, WordPiece, BPEDecoder, "
                       "ByteFallback, Fuse, Strip, Replace, Sequence");
}

}  // namespace megatron::data
