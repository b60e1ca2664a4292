#include "data/sentencepiece.hpp"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "core/error.hpp"

namespace megatron::data {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& model_file) {
    if (!std::filesystem::exists(model_file))
      throw UserError("tokenizer model '" + model_file + "' does not exist");
    const auto status = processor_.Load(model_file);
    if (!status.ok())
      throw UserError("'" + model_file + "' is not a SentencePiece model: " + status.ToString());
    auto id_of = [&](int id) -> std::optional<int32_t> {
      if (id < 0) return std::nullopt;
      return id;
    };
    special_.eod = id_of(processor_.eos_id());
    special_.pad = id_of(processor_.pad_id());
    special_.unk = id_of(processor_.unk_id());
    // Llama's convention: <s> plays BERT's [CLS] role and </s> its [SEP] role.
    special_.cls = id_of(processor_.bos_id());
    special_.sep = id_of(processor_.eos_id());
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    processor_.Encode(text, &ids).IgnoreError();
    return {ids.begin(), ids.end()};
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string text;
    processor_.Decode(std::vector<int>(ids.begin(), ids.end()), &text).IgnoreError();
    return text;
  }

  std::string token_text(int32_t id) const override { return processor_.IdToPiece(id); }
  int64_t vocab_size() const override { return processor_.GetPieceSize(); }
  const SpecialTokens& special_tokens() const override { return special_; }

 private:
  sentencepiece::SentencePieceProcessor processor_;
  SpecialTokens special_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_file) {
  return std::make_unique<SentencePieceTokenizer>(model_file);
}

}  // namespace megatron::data
