#include "data/sft_data.hpp"

#include <fmt/format.h>

#include <random>
#include <stdexcept>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/epoch_order.hpp"
#include "data/jsonl_records.hpp"

namespace megatron::data {
namespace {

std::vector<ChatMessage> messages_of(const nlohmann::json& record, const std::string& field,
                                     const std::string& path, int64_t line) {
  const nlohmann::json& value =
      field_of(record, field, path, line, "name another with the messages field option");
  if (!value.is_array()) {
    throw UserError(fmt::format("{}:{}: field \"{}\" is {}, not an array of messages", path, line,
                                printable(field), value.type_name()));
  }
  if (value.empty()) {
    throw UserError(
        fmt::format("{}:{}: field \"{}\" is an empty array", path, line, printable(field)));
  }
  std::vector<ChatMessage> out;
  bool assistant = false;
  for (size_t k = 0; k < value.size(); ++k) {
    const nlohmann::json& m = value[k];
    const std::string at = fmt::format("{}[{}]", field, k);
    if (!m.is_object()) {
      throw UserError(
          fmt::format("{}:{}: field \"{}\" is {}, not an object with a role and a content", path,
                      line, printable(at), m.type_name()));
    }
    for (const char* key : {"role", "content"}) {
      if (!m.contains(key)) {
        throw UserError(
            fmt::format("{}:{}: no field \"{}.{}\" (each message holds a role and a content)", path,
                        line, printable(at), key));
      }
    }
    const std::string role = string_of(m.at("role"), at + ".role", path, line);
    ChatMessage message{.content = string_of(m.at("content"), at + ".content", path, line)};
    if (role == "system") {
      message.role = ChatRole::System;
    } else if (role == "user") {
      message.role = ChatRole::User;
    } else if (role == "assistant") {
      message.role = ChatRole::Assistant;
      assistant = true;
    } else {
      throw UserError(
          fmt::format("{}:{}: field \"{}.role\" = \"{}\" is not system, user or assistant", path,
                      line, printable(at), printable(role)));
    }
    out.push_back(std::move(message));
  }
  if (!assistant) {
    throw UserError(fmt::format("{}:{}: field \"{}\" has no assistant turn: nothing to learn from",
                                path, line, printable(field)));
  }
  return out;
}

// The epoch's order: shuffled as every fine-tuning source shuffles, or as given.
std::vector<int32_t> order_of(int64_t n, uint64_t seed, int64_t epoch, bool shuffle) {
  if (shuffle) return epoch_order(n, seed, epoch);
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = int32_t(i);
  return order;
}

}  // namespace

std::vector<SftExample> read_prompt_response_jsonl(const std::string& path, const SftFields& f) {
  std::vector<SftExample> out;
  const std::string hint = "name another with the prompt and response field options";
  for_each_record(path, "the fine-tuning file", [&](const nlohmann::json& j, int64_t line) {
    std::string prompt = string_of(field_of(j, f.prompt, path, line, hint), f.prompt, path, line);
    std::string response =
        string_of(field_of(j, f.response, path, line, hint), f.response, path, line);
    // Both segments kept even when empty, so every example reads {prompt, response}.
    out.push_back({.segments = {{.text = std::move(prompt), .scored = false},
                                {.text = std::move(response), .scored = true}}});
  });
  if (out.empty()) throw UserError(fmt::format("{}: no examples", path));
  return out;
}

std::vector<SftExample> read_chat_jsonl(const std::string& path, const SftFields& fields,
                                        ChatTemplate chat_template) {
  std::vector<SftExample> out;
  for_each_record(path, "the chat file", [&](const nlohmann::json& j, int64_t line) {
    out.push_back(render_chat(messages_of(j, fields.messages, path, line), chat_template));
  });
  if (out.empty()) throw UserError(fmt::format("{}: no examples", path));
  return out;
}

TokenizedExample tokenize_example(const SftExample& example, const Tokenizer& tokenizer,
                                  int32_t eod) {
  TokenizedExample out;
  for (const SftSegment& segment : example.segments) {
    const std::vector<int32_t> ids = tokenizer.encode(segment.text);
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    out.scored.insert(out.scored.end(), ids.size(), segment.scored);
  }
  out.tokens.push_back(eod);
  out.scored.push_back(true);
  return out;
}

SftStats cut_examples(std::vector<TokenizedExample>& examples, int64_t seq_length) {
  if (seq_length < 1) {
    throw UserError(
        fmt::format("fine-tuning sequence length {} (data.seq_length) is below 1", seq_length));
  }
  SftStats stats{.examples = int64_t(examples.size())};
  const size_t window = size_t(seq_length) + 1;
  for (TokenizedExample& e : examples) {
    if (e.tokens.size() != e.scored.size()) {
      throw std::invalid_argument(
          "cut_examples: an example's tokens and scored flags differ in length");
    }
    if (e.tokens.size() > window) {
      e.tokens.resize(window);
      e.scored.resize(window);
      ++stats.cut;
    }
    int64_t scored = 0;
    for (size_t t = 1; t < e.scored.size(); ++t) scored += e.scored[t] ? 1 : 0;
    stats.tokens += int64_t(e.tokens.size());
    stats.scored_tokens += scored;
    if (scored == 0) ++stats.unscored;
  }
  return stats;
}

SftSource::SftSource(std::vector<TokenizedExample> examples, int64_t seq_length, bool pack,
                     uint64_t seed, int64_t size, bool shuffle, int32_t eod)
    : examples_(std::move(examples)), seq_length_(seq_length), pack_(pack), size_(size), eod_(eod) {
  if (examples_.empty()) throw UserError("fine-tuning data has no examples");
  if (examples_.size() > size_t(INT32_MAX))
    throw UserError("fine-tuning data has over 2^31 examples");
  if (size_ < 0) throw std::invalid_argument("SftSource: negative size");
  stats_ = cut_examples(examples_, seq_length_);
  const int64_t n = int64_t(examples_.size());
  const size_t window = size_t(seq_length_) + 1;
  offsets_.push_back(0);
  // Packs one epoch's order: appends its samples (offsets_ holds the start of the first
  // already) and returns how many.
  const auto pack_epoch = [&](const std::vector<int32_t>& order) {
    int64_t samples = 0;
    size_t used = 0;  // positions of the open sample taken
    for (const int32_t e : order) {
      const size_t length = examples_[size_t(e)].tokens.size();
      if (samples == 0 || !pack_ || used + length > window) {
        if (samples > 0) offsets_.push_back(int64_t(members_.size()));  // close the open sample
        ++samples;
        used = 0;
      }
      members_.push_back(e);
      used += length;
    }
    offsets_.push_back(int64_t(members_.size()));
    return samples;
  };
  int64_t made = 0;
  for (int64_t epoch = 0; epoch == 0 || made < size_; ++epoch) {
    const int64_t samples = pack_epoch(order_of(n, seed, epoch, shuffle));
    if (epoch == 0) samples_per_epoch_ = samples;
    made += samples;
  }
  // Keep `size` samples (the first epoch is always made, for samples_per_epoch).
  if (made > size_) {
    offsets_.resize(size_t(size_) + 1);
    members_.resize(size_t(offsets_.back()));
  }
}

std::span<const int32_t> SftSource::examples_of(int64_t i) const {
  if (i < 0 || i >= size_)
    throw std::out_of_range(fmt::format("SftSource: sample {} of {}", i, size_));
  return std::span<const int32_t>(members_).subspan(
      size_t(offsets_[size_t(i)]), size_t(offsets_[size_t(i) + 1] - offsets_[size_t(i)]));
}

Sample SftSource::sample(int64_t i) const {
  const std::span<const int32_t> members = examples_of(i);
  const size_t s = size_t(seq_length_);
  // The window, each position's flag, and which segment it belongs to (an index into members;
  // members.size() for the padding).
  std::vector<int32_t> window;
  std::vector<bool> scored;
  std::vector<size_t> segment;
  window.reserve(s + 1);
  for (size_t k = 0; k < members.size(); ++k) {
    const TokenizedExample& e = examples_[size_t(members[k])];
    window.insert(window.end(), e.tokens.begin(), e.tokens.end());
    scored.insert(scored.end(), e.scored.begin(), e.scored.end());
    segment.insert(segment.end(), e.tokens.size(), k);
  }
  if (window.size() > s + 1)
    throw std::logic_error("SftSource: a sample's examples outgrew its window");
  segment.resize(s + 1, members.size());
  scored.resize(s + 1, false);
  window.resize(s + 1, eod_);

  Sample out;
  out.tokens.assign(window.begin(), window.end() - 1);
  out.labels.assign(window.begin() + 1, window.end());
  out.loss_mask.assign(s, 0.0f);
  out.position_ids.resize(s);
  int32_t position = 0;
  for (size_t t = 0; t < s; ++t) {
    const bool starts = t == 0 || segment[t] != segment[t - 1];
    if (starts) {
      position = 0;
      if (pack_) out.document_starts.push_back(int32_t(t));
    }
    out.position_ids[t] = position++;
    if (scored[t + 1] && segment[t + 1] == segment[t]) out.loss_mask[t] = 1.0f;
  }
  return out;
}

}  // namespace megatron::data
