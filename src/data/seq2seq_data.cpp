#include "data/seq2seq_data.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <span>
#include <stdexcept>

#include "core/error.hpp"
#include "data/epoch_order.hpp"
#include "data/jsonl_records.hpp"

namespace megatron::data {
namespace {

void check_lengths(int64_t encoder_length, int64_t decoder_length) {
  if (encoder_length < 1 || encoder_length > (int64_t{1} << 30))
    throw UserError(fmt::format("seq2seq encoder length {} (data.seq_length) is outside 1..2^30",
                                encoder_length));
  if (decoder_length < 1 || decoder_length > (int64_t{1} << 30))
    throw UserError(fmt::format(
        "seq2seq decoder length {} (data.decoder_seq_length) is outside 1..2^30", decoder_length));
}

// The layout of seq2seq_sample from the pair's ids.
Sample layout(std::span<const int32_t> source, std::span<const int32_t> target,
              const Seq2SeqTokens& t, int64_t encoder_length, int64_t decoder_length) {
  const size_t s = size_t(encoder_length), sd = size_t(decoder_length);
  Sample out;
  out.tokens.assign(source.begin(),
                    source.begin() + std::ptrdiff_t(std::min(source.size(), s - 1)));
  out.tokens.push_back(t.eos);
  out.valid_length = int32_t(out.tokens.size());
  out.tokens.resize(s, t.pad);
  out.position_ids.resize(s);
  for (size_t i = 0; i < s; ++i) out.position_ids[i] = int32_t(i);

  out.decoder_tokens.push_back(t.bos);
  out.decoder_tokens.insert(out.decoder_tokens.end(), target.begin(), target.end());
  out.decoder_tokens.resize(sd, t.pad);
  out.labels.assign(target.begin(), target.end());
  out.labels.push_back(t.eos);
  const size_t scored = std::min(out.labels.size(), sd);
  out.labels.resize(sd, 0);
  out.loss_mask.assign(sd, 0.0f);
  for (size_t i = 0; i < scored; ++i) out.loss_mask[i] = 1.0f;
  return out;
}

}  // namespace

std::vector<Seq2SeqPair> read_seq2seq_jsonl(const std::string& path, const Seq2SeqFields& f) {
  std::vector<Seq2SeqPair> out;
  const std::string hint = "name another with the source and target field options";
  for_each_record(path, "the seq2seq file", [&](const nlohmann::json& j, int64_t line) {
    Seq2SeqPair pair;
    pair.source = string_of(field_of(j, f.source, path, line, hint), f.source, path, line);
    pair.target = string_of(field_of(j, f.target, path, line, hint), f.target, path, line);
    out.push_back(std::move(pair));
  });
  if (out.empty()) throw UserError(fmt::format("{}: no pairs", path));
  return out;
}

Sample seq2seq_sample(const Seq2SeqPair& pair, const Tokenizer& tokenizer,
                      const Seq2SeqTokens& tokens, int64_t encoder_length, int64_t decoder_length) {
  check_lengths(encoder_length, decoder_length);
  return layout(tokenizer.encode(pair.source), tokenizer.encode(pair.target), tokens,
                encoder_length, decoder_length);
}

Seq2SeqSource::Seq2SeqSource(const std::vector<Seq2SeqPair>& pairs, const Tokenizer& tokenizer,
                             Seq2SeqTokens tokens, int64_t encoder_length, int64_t decoder_length,
                             uint64_t seed, int64_t size, bool shuffle)
    : tokens_(tokens),
      encoder_length_(encoder_length),
      decoder_length_(decoder_length),
      size_(size) {
  check_lengths(encoder_length_, decoder_length_);
  if (pairs.empty()) throw UserError("seq2seq data has no pairs");
  if (pairs.size() > size_t(INT32_MAX)) throw UserError("seq2seq data has over 2^31 pairs");
  if (size_ < 0) throw std::invalid_argument("Seq2SeqSource: negative size");
  stats_.pairs = int64_t(pairs.size());
  for (const Seq2SeqPair& p : pairs) {
    sources_.push_back(tokenizer.encode(p.source));
    targets_.push_back(tokenizer.encode(p.target));
    if (int64_t(sources_.back().size()) + 1 > encoder_length_) ++stats_.cut_sources;
    if (int64_t(targets_.back().size()) + 1 > decoder_length_) ++stats_.cut_targets;
  }
  if (!shuffle) return;
  const int64_t n = int64_t(pairs.size());
  const int64_t epochs = (size_ + n - 1) / n;
  for (int64_t e = 0; e < epochs; ++e) order_.push_back(epoch_order(n, seed, e));
}

int64_t Seq2SeqSource::pair_of(int64_t i) const {
  if (i < 0 || i >= size_)
    throw std::out_of_range(fmt::format("Seq2SeqSource: sample {} of {}", i, size_));
  const int64_t n = int64_t(sources_.size());
  const int64_t epoch = i / n, at = i % n;
  return order_.empty() ? at : order_[size_t(epoch)][size_t(at)];
}

Sample Seq2SeqSource::sample(int64_t i) const {
  const size_t pair = size_t(pair_of(i));
  return layout(sources_[pair], targets_[pair], tokens_, encoder_length_, decoder_length_);
}

}  // namespace megatron::data
