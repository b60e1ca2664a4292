#include "eval/greedy_decode.hpp"

#include <algorithm>
#include <span>
#include <stdexcept>

#include "generate/decode_loop.hpp"
#include "tensor/host_io.hpp"

namespace megatron::eval {
namespace {

// The scored rows' logits over the whole vocabulary's first vocab_size columns, [n, vocab_size]:
// each tensor-parallel rank's shard (its columns below vocab_size, perhaps none) gathered in
// rank order, padded to a common width for the gather.
std::vector<float> whole_logits(tensor::Backend& backend, const model::HeadOutputs& outputs,
                                dist::Communicator* tp, int64_t n, int64_t vocab_size) {
  const int64_t width = outputs.logits.shape()[1];
  const std::vector<float> mine = tensor::to_floats(backend, outputs.logits);
  if (!tp || tp->size() == 1) return mine;
  const int ranks = tp->size();
  // Each rank's (width, first column), to learn the widest shard and where each lies.
  tensor::Tensor shape = tensor::from_floats(backend, std::vector<float>{float(width), float(outputs.vocab_first)}, {2});
  tensor::Tensor shapes = backend.empty({2 * int64_t(ranks)}, tensor::DType::F32);
  tp->all_gather(shape, shapes);
  const std::vector<float> geometry = tensor::to_floats(backend, shapes);
  int64_t widest = 0;
  for (int r = 0; r < ranks; ++r) widest = std::max<int64_t>(widest, int64_t(geometry[size_t(2 * r)]));
  std::vector<float> padded(size_t(n * widest), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(mine.begin() + i * width, width, padded.begin() + i * widest);
  }
  tensor::Tensor all = backend.empty({int64_t(ranks) * n * widest}, tensor::DType::F32);
  tp->all_gather(tensor::from_floats(backend, padded, {n * widest}), all);
  const std::vector<float> gathered = tensor::to_floats(backend, all);
  std::vector<float> out(size_t(n * vocab_size), 0.0f);
  for (int r = 0; r < ranks; ++r) {
    const int64_t w = int64_t(geometry[size_t(2 * r)]), first = int64_t(geometry[size_t(2 * r + 1)]);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < w && first + c < vocab_size; ++c) {
        out[size_t(i * vocab_size + first + c)] = gathered[size_t((r * n + i) * widest + c)];
      }
    }
  }
  return out;
}

// Every sequence of the batch, finished ones too (the batch's shape stays what it was): GPT's
// inputs are its tokens; T5's encoder reads its source and its decoder its tokens.
model::Batch batch_of(tensor::Backend& backend, std::span<const generate::Sequence> inputs,
                      const std::vector<std::vector<int32_t>>& sources, const DecodeOptions& o) {
  const int64_t count = int64_t(inputs.size());
  int64_t seq = 1;
  for (const auto& in : inputs) seq = std::max<int64_t>(seq, int64_t(in.tokens.size()));
  const int64_t rows = count * seq;
  std::vector<int32_t> tokens(static_cast<size_t>(rows), o.pad), positions(static_cast<size_t>(rows));
  for (int64_t k = 0; k < count; ++k) {
    const std::vector<int32_t>& in = inputs[size_t(k)].tokens;
    std::copy(in.begin(), in.end(), tokens.begin() + k * seq);
    for (int64_t t = 0; t < seq; ++t) positions[size_t(k * seq + t)] = int32_t(t);
  }
  const std::vector<int32_t> labels(size_t(rows), 0);
  const std::vector<float> mask(size_t(rows), 0.0f);
  if (!o.encoder_decoder) {
    return {.batch = count,
            .seq = seq,
            .tokens = tensor::from_ints(backend, tokens, {rows}),
            .labels = tensor::from_ints(backend, labels, {rows}),
            .loss_mask = tensor::from_floats(backend, mask, {rows}),
            .positions = tensor::from_ints(backend, positions, {rows})};
  }
  int64_t source_seq = 1;
  for (const auto& s : sources) source_seq = std::max<int64_t>(source_seq, int64_t(s.size()));
  const int64_t source_rows = count * source_seq;
  std::vector<int32_t> source(static_cast<size_t>(source_rows), o.pad),
      source_positions(static_cast<size_t>(source_rows));
  std::vector<int64_t> key_lengths;
  for (int64_t k = 0; k < count; ++k) {
    const auto& s = sources[size_t(k)];
    std::copy(s.begin(), s.end(), source.begin() + k * source_seq);
    for (int64_t t = 0; t < source_seq; ++t) source_positions[size_t(k * source_seq + t)] = int32_t(t);
    key_lengths.push_back(std::max<int64_t>(int64_t(s.size()), 1));
  }
  return {.batch = count,
          .seq = source_seq,
          .tokens = tensor::from_ints(backend, source, {source_rows}),
          .labels = tensor::from_ints(backend, labels, {rows}),
          .loss_mask = tensor::from_floats(backend, mask, {rows}),
          .positions = tensor::from_ints(backend, source_positions, {source_rows}),
          .key_lengths = key_lengths,
          .decoder_seq = seq,
          .decoder_tokens = tensor::from_ints(backend, tokens, {rows}),
          .decoder_positions = tensor::from_ints(backend, positions, {rows})};
}

// The whole model over every position of the batch each step (no key/value cache), on any
// layout: the last stage's tensor-parallel ranks hold the vocabulary's shards, and the replica's
// reporting rank alone chooses, the others learning its tokens in agree.
class FullForwardStep final : public generate::Stepper {
 public:
  FullForwardStep(const ForwardFn& forward, tensor::Backend& backend, const DecodeOptions& o,
                  const ScoreGroups& groups, std::vector<std::vector<int32_t>> sources)
      : forward_(forward),
        backend_(backend),
        o_(o),
        groups_(groups),
        sources_(std::move(sources)) {}

  generate::StepScores step(std::span<const generate::Sequence> seqs,
                            std::span<const size_t> live) override {
    const model::Batch batch = batch_of(backend_, seqs, sources_, o_);
    const int64_t seq = o_.encoder_decoder ? batch.decoder_seq : batch.seq;
    std::vector<int32_t> rows;
    for (const size_t k : live) {
      rows.push_back(int32_t(int64_t(k) * seq + int64_t(seqs[k].tokens.size()) - 1));
    }
    const int64_t n = int64_t(rows.size());
    model::HeadOutputs outputs{
        .want_logits = true,
        .score_rows = tensor::from_ints(backend_, rows, {n}),
        .score_labels = tensor::from_ints(backend_, std::vector<int32_t>(size_t(n), 0), {n}),
        .score_vocab = o_.vocab_size};
    generate::StepScores out;
    if (!forward_(batch, outputs)) return out;
    if (o_.sampling.greedy()) {
      // The argmax needs each shard's maximum only, not the whole vocabulary.
      const std::vector<float> maxima = argmax_over_shards(backend_, outputs, groups_.tp);
      if (!groups_.reports) return out;
      for (int64_t i = 0; i < n; ++i) out.chosen.push_back(int32_t(maxima[size_t(2 * i + 1)]));
    } else {
      std::vector<float> logits = whole_logits(backend_, outputs, groups_.tp, n, o_.vocab_size);
      if (groups_.reports) out.logits = std::move(logits);
    }
    return out;
  }

  // Only the replica's reporting rank holds nonzero ids (below 2^24, exact in f32): the sum over
  // the replica's ranks is its choice.
  void agree(std::span<int32_t> tokens) override {
    if (!groups_.replica) return;
    const std::vector<float> mine(tokens.begin(), tokens.end());
    tensor::Tensor t = tensor::from_floats(backend_, mine, {int64_t(mine.size())});
    groups_.replica->all_reduce(t);
    const std::vector<float> sum = tensor::to_floats(backend_, t);
    std::transform(sum.begin(), sum.end(), tokens.begin(), [](float v) { return int32_t(v); });
  }

 private:
  const ForwardFn& forward_;
  tensor::Backend& backend_;
  const DecodeOptions& o_;
  const ScoreGroups& groups_;
  std::vector<std::vector<int32_t>> sources_;  // T5: the encoder's tokens
};

// Every replica's outputs on every rank: each prompt's row [length, token + 1, ...] comes from
// its replica's reporting rank alone, so the sum over the world is that row.
void share_outputs(tensor::Backend& backend, dist::Communicator& world, std::vector<std::vector<int32_t>>& out,
                   const std::vector<bool>& mine, bool reports, int64_t max_tokens) {
  const int64_t width = max_tokens + 1;
  std::vector<float> rows(out.size() * size_t(width), 0.0f);
  for (size_t i = 0; i < out.size(); ++i) {
    if (!mine[i] || !reports) continue;
    rows[i * size_t(width)] = float(out[i].size());
    for (size_t t = 0; t < out[i].size(); ++t) rows[i * size_t(width) + 1 + t] = float(out[i][t]);
  }
  tensor::Tensor t = tensor::from_floats(backend, rows, {int64_t(rows.size())});
  world.all_reduce(t);
  rows = tensor::to_floats(backend, t);
  for (size_t i = 0; i < out.size(); ++i) {
    const auto length = size_t(rows[i * size_t(width)]);
    out[i].resize(length);
    for (size_t k = 0; k < length; ++k) out[i][k] = int32_t(rows[i * size_t(width) + 1 + k]);
  }
}

}  // namespace

std::vector<std::vector<int32_t>> greedy_decode(const ForwardFn& forward, tensor::Backend& backend,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                const DecodeOptions& o, const ScoreProgress& progress,
                                                const ScoreGroups& groups) {
  if (o.max_tokens < 1 || o.batch_size < 1 || o.vocab_size < 1) {
    throw std::invalid_argument("greedy_decode: max_tokens, batch_size and vocab_size must be positive");
  }
  if (o.encoder_decoder ? (o.max_length < o.max_tokens || o.encoder_length < 1)
                        : o.max_length <= o.max_tokens) {
    throw std::invalid_argument("greedy_decode: max_length leaves no room for max_tokens");
  }
  std::vector<std::vector<int32_t>> out(prompts.size());
  std::vector<bool> mine(prompts.size(), false);
  const int replicas = groups.dp ? groups.dp->size() : 1;
  const int replica = groups.dp ? groups.dp->rank() : 0;
  size_t batch_index = 0;
  for (size_t first = 0; first < prompts.size(); first += size_t(o.batch_size), ++batch_index) {
    const size_t count = std::min(prompts.size() - first, size_t(o.batch_size));
    if (int(batch_index % size_t(replicas)) != replica) continue;
    std::vector<generate::Sequence> seqs;
    std::vector<std::vector<int32_t>> sources;
    for (size_t k = 0; k < count; ++k) {
      const std::vector<int32_t>& p = prompts[first + k];
      std::vector<int32_t> given;
      if (o.encoder_decoder) {
        sources.emplace_back(
            p.begin(),
            p.begin() + std::min<std::ptrdiff_t>(std::ptrdiff_t(p.size()), o.encoder_length));
        given = {o.bos};
      } else {
        if (p.empty()) throw std::invalid_argument("greedy_decode: an empty prompt");
        const size_t keep = std::min(p.size(), size_t(o.max_length - o.max_tokens));
        given.assign(p.end() - std::ptrdiff_t(keep), p.end());
      }
      const auto n = int64_t(given.size());
      seqs.push_back({.tokens = std::move(given), .prompt = n, .position = n});
    }
    // T5's decoder holds [BOS] and max_tokens - 1 outputs before its last step.
    FullForwardStep stepper(forward, backend, o, groups, std::move(sources));
    generate::decode(stepper, seqs,
                     {.max_tokens = o.max_tokens,
                      .sampling = o.sampling,
                      .seed = o.seed + uint64_t(first),  // prompt i draws from seed + i
                      .rng_per_sequence = true,
                      .end_tokens = o.stop_tokens});
    for (size_t k = 0; k < count; ++k) {
      out[first + k].assign(seqs[k].tokens.begin() + seqs[k].prompt, seqs[k].tokens.end());
      mine[first + k] = true;
    }
    if (progress) progress(int64_t(first + count), int64_t(prompts.size()));
  }
  if (replicas > 1) share_outputs(backend, *groups.world, out, mine, groups.reports, o.max_tokens);
  return out;
}

}  // namespace megatron::eval
