#include "data/hf_tokenizer_export.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace megatron::data {
namespace {

using ojson = nlohmann::ordered_json;

ojson added_token(int32_t id, const std::string& content) {
  return {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},  {"normalized", false}, {"special", true}};
}

ojson sequence(const char* id, int type_id) {
  return {{"Sequence", {{"id", id}, {"type_id", type_id}}}};
}

ojson special(const char* id, int type_id) {
  return {{"SpecialToken", {{"id", id}, {"type_id", type_id}}}};
}

// The token strings by id, as the loaded tokenizer spells them (which has checked that each is
// given once). Appended to the ordered map's vector: its operator[] searches every key first, which
// for 50,000 tokens is over a billion comparisons.
ojson vocab_of(const Tokenizer& t) {
  ojson vocab = ojson::object();
  auto& entries = vocab.get_ref<ojson::object_t&>();
  entries.reserve(size_t(t.vocab_size()));
  for (int64_t id = 0; id < t.vocab_size(); ++id) {
    entries.ojson::object_t::Container::emplace_back(t.token_text(int32_t(id)), id);
  }
  return vocab;
}

// merges.txt's pairs in rank order, read as load_gpt2_bpe reads them (which has checked the file).
ojson merges_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read GPT-2 merges file '" + path + "'");
  ojson merges = ojson::array();
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    merges.push_back(ojson::array({line.substr(0, space), line.substr(space + 1)}));
  }
  if (in.bad()) throw UserError("cannot read GPT-2 merges file '" + path + "'");
  return merges;
}

ojson header() {
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
}

}  // namespace

ojson gpt2_tokenizer_json(const Tokenizer& tokenizer, const std::string& merges_txt) {
  ojson j = header();
  ojson added = ojson::array();
  if (const auto eod = tokenizer.special_tokens().eod) {
    added.push_back(added_token(*eod, tokenizer.token_text(*eod)));
  }
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                        {"use_regex", true}};
  // GPT-2 adds nothing around a text.
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", ojson::array({sequence("A", 0)})},
                         {"pair", ojson::array({sequence("A", 0), sequence("B", 1)})},
                         {"special_tokens", ojson::object()}};
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
                  {"use_regex", true}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab_of(tokenizer)},
                {"merges", merges_of(merges_txt)}};
  return j;
}

ojson wordpiece_tokenizer_json(const Tokenizer& tokenizer, bool lower_case) {
  const SpecialTokens& s = tokenizer.special_tokens();
  ojson j = header();
  // transformers' order: by id.
  std::vector<std::pair<int32_t, std::string>> specials;
  for (const auto& [id, name] : {std::pair{s.pad, "[PAD]"}, {s.unk, "[UNK]"}, {s.cls, "[CLS]"},
                                 {s.sep, "[SEP]"}, {s.mask, "[MASK]"}}) {
    if (id) specials.emplace_back(*id, name);
  }
  std::sort(specials.begin(), specials.end());
  ojson added = ojson::array();
  for (const auto& [id, name] : specials) added.push_back(added_token(id, name));
  j["added_tokens"] = added;
  // strip_accents null: accents go with lowercasing, as BERT's own tokenizer strips them.
  j["normalizer"] = {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
                     {"strip_accents", nullptr}, {"lowercase", lower_case}};
  j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  if (s.cls && s.sep) {
    j["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", ojson::array({special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0)})},
        {"pair", ojson::array({special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0),
                               sequence("B", 1), special("[SEP]", 1)})},
        {"special_tokens",
         {{"[CLS]", {{"id", "[CLS]"}, {"ids", {*s.cls}}, {"tokens", {"[CLS]"}}}},
          {"[SEP]", {{"id", "[SEP]"}, {"ids", {*s.sep}}, {"tokens", {"[SEP]"}}}}}}};
  } else {
    j["post_processor"] = nullptr;
  }
  j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
  j["model"] = {{"type", "WordPiece"},
                {"unk_token", s.unk ? nlohmann::ordered_json(tokenizer.token_text(*s.unk)) : nullptr},
                {"continuing_subword_prefix", "##"},
                {"max_input_chars_per_word", 100},
                {"vocab", vocab_of(tokenizer)}};
  return j;
}

}  // namespace megatron::data
