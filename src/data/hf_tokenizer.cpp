#include "data/hf_tokenizer.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/hf_added_tokens.hpp"
#include "data/hf_decoder.hpp"
#include "data/hf_json_node.hpp"
#include "data/hf_model.hpp"
#include "data/hf_normalizer.hpp"
#include "data/hf_post_processor.hpp"
#include "data/hf_pre_tokenizer.hpp"
#include "data/unicode.hpp"

namespace megatron::data {

namespace fs = std::filesystem;

namespace {

// The largest real tokenizer.json files are tens of megabytes.
constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{1} << 30;

std::string read_text(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw UserError("cannot read '" + path.string() + "': " + ec.message());
  if (size > kMaxFileBytes) {
    throw UserError("'" + path.string() + "' is " + std::to_string(size) + " bytes; a tokenizer.json is at most 1 GiB");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open '" + path.string() + "'");
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw UserError("cannot read '" + path.string() + "'");
  return std::move(contents).str();
}

nlohmann::json parse_json(const fs::path& path) {
  try {
    return nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) {
    throw UserError("'" + path.string() + "' is not valid JSON: " + printable(e.what(), 160));
  }
}

// A special token as tokenizer_config.json names it: a string or {"content": ...}.
std::optional<std::string> config_token(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

class HfPipeline final : public HfTokenizer {
 public:
  HfPipeline(const fs::path& file, const nlohmann::json& root, const nlohmann::json* config);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::vector<int32_t> encode_with_special_tokens(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override { return decode(ids, false); }
  std::string decode_skipping_special(std::span<const int32_t> ids) const override { return decode(ids, true); }
  std::string token_text(int32_t id) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  const SpecialTokens& special_tokens() const override { return special_; }
  std::optional<int32_t> id_of(std::string_view token) const override;
  std::vector<int32_t> prompt_start() const override { return wrap_.before; }

 private:
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;
  void read_added_tokens(const HfJsonNode& list);
  void assign_roles(const nlohmann::json* config);
  // The token of `id` (added tokens first), or nullptr.
  const std::string* token_of(int32_t id) const;
  void encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& out) const;

  std::string file_;
  std::unique_ptr<HfNormalizer> normalizer_;
  std::unique_ptr<HfPreTokenizer> pre_tokenizer_;
  std::unique_ptr<HfModel> model_;
  std::unique_ptr<HfDecoder> decoder_;
  HfSpecialWrap wrap_;
  HfAddedTokenMatcher raw_tokens_;         // normalized: false
  HfAddedTokenMatcher normalized_tokens_;  // normalized: true
  std::unordered_map<int32_t, HfAddedToken> added_;
  // What decoding spells each added token with: normalized tokens by their normalized form, as
  // tokenizers' simple_id_to_token does.
  std::unordered_map<int32_t, std::string> added_spelling_;
  std::unordered_set<std::string> special_contents_;
  HfTokenIds added_ids_;
  int64_t vocab_size_ = 0;
  SpecialTokens special_;
};

HfPipeline::HfPipeline(const fs::path& file, const nlohmann::json& root, const nlohmann::json* config)
    : file_(file.string()) {
  const HfJsonNode top(root, "", file_);
  top.object();
  model_ = make_hf_model(top.at("model"));
  if (const auto n = top.find("normalizer")) normalizer_ = make_hf_normalizer(*n);
  if (const auto p = top.find("pre_tokenizer")) pre_tokenizer_ = make_hf_pre_tokenizer(*p);
  if (const auto d = top.find("decoder")) decoder_ = make_hf_decoder(*d);
  if (const auto p = top.find("post_processor")) wrap_ = read_hf_post_processor(*p);
  // truncation and padding are left out, as transformers turns them off for every call that
  // does not ask for them.
  vocab_size_ = model_->id_bound();
  if (const auto list = top.find("added_tokens")) read_added_tokens(*list);
  for (const int32_t id : wrap_.before) {
    if (!token_of(id)) top.at("post_processor").fail("adds id " + std::to_string(id) + ", which no token has");
  }
  for (const int32_t id : wrap_.after) {
    if (!token_of(id)) top.at("post_processor").fail("adds id " + std::to_string(id) + ", which no token has");
  }
  assign_roles(config);
}

void HfPipeline::read_added_tokens(const HfJsonNode& list) {
  list.array();
  if (list.size() > static_cast<std::size_t>(kHfMaxVocabulary)) list.fail("holds more than 2^24 tokens");
  // tokenizers' add_tokens: a token the vocabulary has keeps its id; the others are numbered
  // from the vocabulary's size on, whatever ids the file gives them.
  int32_t next_id = static_cast<int32_t>(model_->entries());
  int mismatches = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const HfJsonNode entry = list.at(i);
    entry.only({"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    HfAddedToken token{.content = entry.string("content"),
                       .id = 0,
                       .special = entry.boolean_or("special", false),
                       .lstrip = entry.boolean_or("lstrip", false),
                       .rstrip = entry.boolean_or("rstrip", false),
                       .single_word = entry.boolean_or("single_word", false),
                       .normalized = entry.boolean_or("normalized", !entry.boolean_or("special", false))};
    const auto file_id = entry.at("id").integer(0, kHfMaxVocabulary - 1);
    if (token.content.empty()) continue;
    if (const auto known = id_of(token.content)) {
      token.id = *known;
    } else {
      if (next_id >= kHfMaxVocabulary) entry.fail("is past the largest vocabulary megatron reads (2^24)");
      token.id = next_id++;
    }
    if (token.id != file_id && mismatches++ < 3) {
      spdlog::warn("{}: added token '{}' is given id {} but gets {}, as in Hugging Face tokenizers", file_,
                   printable(token.content, 40), file_id, token.id);
    }
    added_ids_[token.content] = token.id;
    added_[token.id] = token;
    vocab_size_ = std::max<int64_t>(vocab_size_, int64_t{token.id} + 1);
  }
  for (const auto& [id, token] : added_) {
    if (token.special) special_contents_.insert(token.content);
    if (!token.normalized) {
      raw_tokens_.add(token.content, token);
      added_spelling_[id] = token.content;
      continue;
    }
    std::string spelling = token.content;
    if (normalizer_) normalizer_->normalize(spelling);
    normalized_tokens_.add(spelling, token);
    added_spelling_[id] = spelling;
  }
}

std::optional<int32_t> HfPipeline::id_of(std::string_view token) const {
  if (const auto it = added_ids_.find(token); it != added_ids_.end()) return it->second;
  return model_->id_of(token);
}

const std::string* HfPipeline::token_of(int32_t id) const {
  if (const auto it = added_spelling_.find(id); it != added_spelling_.end()) return &it->second;
  return model_->token_of(id);
}

void HfPipeline::assign_roles(const nlohmann::json* config) {
  const auto named = [&](const char* key) -> std::optional<int32_t> {
    if (!config) return std::nullopt;
    const auto token = config_token(*config, key);
    return token ? id_of(*token) : std::nullopt;
  };
  const auto first_of = [&](std::initializer_list<const char*> names) -> std::optional<int32_t> {
    for (const char* name : names) {
      if (const auto id = id_of(name)) return id;
    }
    return std::nullopt;
  };
  const auto bos = named("bos_token");
  const auto eos = named("eos_token");
  special_.eod = eos ? eos : first_of({"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"});
  special_.cls = named("cls_token");
  if (!special_.cls) special_.cls = bos ? bos : first_of({"[CLS]", "<s>", "<|begin_of_text|>", "<bos>"});
  special_.sep = named("sep_token");
  if (!special_.sep) special_.sep = config && eos ? eos : first_of({"[SEP]", "</s>", "<|end_of_text|>", "<eos>"});
  special_.mask = named("mask_token");
  if (!special_.mask) special_.mask = first_of({"[MASK]", "<mask>"});
  special_.pad = named("pad_token");
  if (!special_.pad) special_.pad = first_of({"[PAD]", "<pad>"});
  special_.unk = named("unk_token");
  if (!special_.unk) special_.unk = first_of({"[UNK]", "<unk>"});
}

void HfPipeline::encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  std::string normalized(text);
  if (normalizer_) normalizer_->normalize(normalized);
  for (const HfSegment& seg : normalized_tokens_.split(normalized)) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
      continue;
    }
    if (seg.span.end == seg.span.begin) continue;
    std::vector<HfPiece> pieces{{normalized.substr(seg.span.begin, seg.span.end - seg.span.begin),
                                 at_start && seg.span.begin == 0}};
    if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
    for (const HfPiece& piece : pieces) model_->tokenize(piece.text, out);
  }
}

std::vector<int32_t> HfPipeline::encode(std::string_view text) const {
  // Text reaches `tokenizers` as a Rust string, which is valid UTF-8; here bytes that are not
  // become U+FFFD, as Python's errors="replace" would make them.
  std::string valid;
  if (!unicode::is_valid_utf8(text)) {
    valid = unicode::utf8_lossy(text);
    text = valid;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  for (const HfSegment& seg : raw_tokens_.split(text)) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
    } else if (seg.span.end > seg.span.begin) {
      encode_segment(text.substr(seg.span.begin, seg.span.end - seg.span.begin), seg.span.begin == 0, out);
    }
  }
  return out;
}

std::vector<int32_t> HfPipeline::encode_with_special_tokens(std::string_view text) const {
  std::vector<int32_t> out = wrap_.before;
  const std::vector<int32_t> body = encode(text);
  out.insert(out.end(), body.begin(), body.end());
  out.insert(out.end(), wrap_.after.begin(), wrap_.after.end());
  return out;
}

std::string HfPipeline::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::string* token = token_of(id);
    if (!token) {
      throw UserError("token id " + std::to_string(id) + " is not in the tokenizer '" + file_ + "' (" +
                      std::to_string(vocab_size_) + " ids)");
    }
    if (skip_special && special_contents_.contains(*token)) continue;
    tokens.push_back(*token);
  }
  if (!decoder_) {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i) joined.push_back(' ');
      joined += tokens[i];
    }
    return joined;
  }
  decoder_->decode_chain(tokens);
  std::string joined;
  for (const std::string& t : tokens) joined += t;
  return joined;
}

std::string HfPipeline::token_text(int32_t id) const {
  const std::string* token = token_of(id);
  if (!token) throw UserError("token id " + std::to_string(id) + " is not in the tokenizer '" + file_ + "'");
  return *token;
}

}  // namespace

std::unique_ptr<HfTokenizer> load_hf_tokenizer(const std::string& path) {
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(file, ec)) file /= "tokenizer.json";
  if (!fs::is_regular_file(file, ec)) {
    throw UserError("'" + file.string() + "' does not exist; a Hugging Face tokenizer is a tokenizer.json file or "
                    "the directory that holds one");
  }
  const nlohmann::json root = parse_json(file);
  std::optional<nlohmann::json> config;
  const fs::path config_file = file.parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(config_file, ec)) {
    config = parse_json(config_file);
    if (!config->is_object()) throw UserError("'" + config_file.string() + "' must be a JSON object");
  }
  return std::make_unique<HfPipeline>(file, root, config ? &*config : nullptr);
}

}  // namespace megatron::data
