#include "data/gpt2_bpe.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/bpe_merge.hpp"
#include "data/gpt2_pretokenize.hpp"
#include "data/byte_unicode.hpp"
#include "data/unicode.hpp"

namespace megatron::data {

namespace {

std::string read_file(const std::string& path, const char* what) {
  // A directory opens as a stream that reads nothing; say so rather than load it as empty.
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw UserError("GPT-2 " + std::string(what) + " file '" + path + "' is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open GPT-2 " + std::string(what) + " file '" + path + "'");
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw UserError("cannot read GPT-2 " + std::string(what) + " file '" + path + "'");
  return std::move(contents).str();
}


class Gpt2Bpe final : public Tokenizer {
 public:
  Gpt2Bpe(const std::string& vocab_path, const std::string& merges_path);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  std::string token_text(int32_t id) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(token_text_.size()); }
  const SpecialTokens& special_tokens() const override { return special_; }

 private:
  void load_vocab(const std::string& path, std::unordered_map<std::string, int32_t>& ids);
  void load_merges(const std::string& path, const std::string& vocab_path,
                   const std::unordered_map<std::string, int32_t>& ids);
  void check_id(int32_t id) const;
  // Appends the BPE of `word` (two bytes or more) to `out`.
  void bpe(std::string_view word, BpeScratch& s, std::vector<int32_t>& out) const;

  std::vector<std::string> token_text_;    // by id, as vocab.json spells it
  std::string token_bytes_;                // every token's raw bytes, by id...
  std::vector<uint32_t> token_offset_;     // ...token id's bytes start at [id], end at [id+1]
  std::array<int32_t, 256> byte_token_{};  // the one-byte token of each byte
  std::vector<BpeMerge> merges_;              // by rank
  std::unique_ptr<MergeRanks> ranks_;
  SpecialTokens special_;
  uint64_t serial_ = next_bpe_serial();
};

Gpt2Bpe::Gpt2Bpe(const std::string& vocab_path, const std::string& merges_path) {
  std::unordered_map<std::string, int32_t> ids;
  load_vocab(vocab_path, ids);
  load_merges(merges_path, vocab_path, ids);
  if (const auto it = ids.find("<|endoftext|>"); it != ids.end()) special_.eod = it->second;
}

void Gpt2Bpe::load_vocab(const std::string& path, std::unordered_map<std::string, int32_t>& ids) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_file(path, "vocabulary"));
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError("GPT-2 vocabulary file '" + path + "' is not valid JSON: " +
                    printable(e.what(), 160));
  }
  if (!json.is_object() || json.empty()) {
    throw UserError("GPT-2 vocabulary file '" + path +
                    "' must be a JSON object mapping each token to its id");
  }
  const auto count = static_cast<int64_t>(json.size());
  token_text_.resize(json.size());
  std::vector<bool> seen(json.size(), false);
  for (const auto& [token, value] : json.items()) {
    // Ids index arrays: requiring exactly 0..V-1 keeps a typo from allocating gigabytes.
    const int64_t id = value.is_number_integer() ? value.get<int64_t>() : -1;
    if (id < 0 || id >= count) {
      throw UserError("GPT-2 vocabulary file '" + path + "': token '" + printable(token) +
                      "' has id " + printable(value.dump()) + "; ids must be integers 0.." +
                      std::to_string(count - 1));
    }
    if (seen[id]) {
      throw UserError("GPT-2 vocabulary file '" + path + "': id " + std::to_string(id) +
                      " is given to two tokens, '" + printable(token_text_[id]) + "' and '" +
                      printable(token) + "'");
    }
    seen[id] = true;
    token_text_[id] = token;
    ids.emplace(token, static_cast<int32_t>(id));
  }

  const std::array<char32_t, 256> to_unicode = gpt2_byte_to_unicode();
  std::unordered_map<char32_t, unsigned char> to_byte;
  for (int b = 0; b < 256; ++b) to_byte[to_unicode[b]] = static_cast<unsigned char>(b);
  for (int b = 0; b < 256; ++b) {
    std::string spelling;
    unicode::append_utf8(spelling, to_unicode[b]);
    const auto it = ids.find(spelling);
    if (it == ids.end()) {
      throw UserError("GPT-2 vocabulary file '" + path + "' lacks the token '" + spelling +
                      "' for byte " + std::to_string(b) + "; byte-level BPE needs all 256");
    }
    byte_token_[b] = it->second;
  }

  token_offset_.reserve(token_text_.size() + 1);
  for (const std::string& text : token_text_) {
    token_offset_.push_back(static_cast<uint32_t>(token_bytes_.size()));
    for (const unicode::CodePoint& c : unicode::decode(text)) {
      const auto it = to_byte.find(c.value);
      // A token outside the byte alphabet (an added special token) stands for its own UTF-8.
      if (it != to_byte.end()) {
        token_bytes_.push_back(static_cast<char>(it->second));
      } else {
        token_bytes_.append(text, c.offset, c.length);
      }
    }
  }
  token_offset_.push_back(static_cast<uint32_t>(token_bytes_.size()));
}

void Gpt2Bpe::load_merges(const std::string& path, const std::string& vocab_path,
                          const std::unordered_map<std::string, int32_t>& ids) {
  const std::string contents = read_file(path, "merges");
  const std::string_view text = contents;
  auto find = [&](std::string_view token, std::size_t line) {
    const auto it = ids.find(std::string(token));
    if (it == ids.end()) {
      throw UserError("GPT-2 merges file '" + path + "' line " + std::to_string(line) + ": '" +
                      printable(token) + "' is not in the vocabulary '" + vocab_path + "'");
    }
    return it->second;
  };
  std::size_t line_number = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.starts_with("#version")) continue;
    const std::size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      throw UserError("GPT-2 merges file '" + path + "' line " + std::to_string(line_number) +
                      ": expected two tokens separated by one space, found '" + printable(line) +
                      "'");
    }
    const std::string_view left = line.substr(0, space);
    const std::string_view right = line.substr(space + 1);
    const BpeMerge merge{.left = find(left, line_number),
                      .right = find(right, line_number),
                      .result = find(std::string(left) + std::string(right), line_number)};
    merges_.push_back(merge);
  }
  std::vector<std::pair<int32_t, int32_t>> pairs;
  pairs.reserve(merges_.size());
  for (const BpeMerge& merge : merges_) pairs.emplace_back(merge.left, merge.right);
  // A repeated pair takes its later rank, as encoder.py's dict and Hugging Face do.
  ranks_ = std::make_unique<MergeRanks>(pairs);
}

std::vector<int32_t> Gpt2Bpe::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 4 + 16);  // English averages over four bytes a token
  BpeThreadState& state = bpe_thread_state(serial_);
  Gpt2PreTokenizer pre(text);
  std::string_view word;
  while (pre.next(word)) {
    if (word.size() == 1) {
      out.push_back(byte_token_[static_cast<unsigned char>(word[0])]);
      continue;
    }
    const uint64_t hash = hash_word(word);
    std::size_t count = 0;
    if (const int32_t* ids = state.cache.find(word, hash, count)) {
      if (count == 1) {
        out.push_back(ids[0]);  // most words are one token
      } else {
        out.insert(out.end(), ids, ids + count);
      }
      continue;
    }
    const std::size_t before = out.size();
    bpe(word, state.scratch, out);
    state.cache.insert(word, hash, out.data() + before, out.size() - before);
  }
  return out;
}

void Gpt2Bpe::bpe(std::string_view word, BpeScratch& s, std::vector<int32_t>& out) const {
  s.initial.resize(word.size());
  for (std::size_t i = 0; i < word.size(); ++i) s.initial[i] = byte_token_[static_cast<unsigned char>(word[i])];
  bpe_merge(s.initial, *ranks_, merges_, s, out);
}

void Gpt2Bpe::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw UserError("token id " + std::to_string(id) + " is outside the GPT-2 vocabulary of " +
                    std::to_string(vocab_size()) + " tokens");
  }
}

std::string Gpt2Bpe::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) {
    check_id(id);
    out.append(token_bytes_, token_offset_[id], token_offset_[id + 1] - token_offset_[id]);
  }
  return out;
}

std::string Gpt2Bpe::token_text(int32_t id) const {
  check_id(id);
  return token_text_[id];
}

}  // namespace

std::unique_ptr<Tokenizer> load_gpt2_bpe(const std::string& vocab_json,
                                         const std::string& merges_txt) {
  return std::make_unique<Gpt2Bpe>(vocab_json, merges_txt);
}

}  // namespace megatron::data
