#include "data/hf_unigram_model.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "core/error.hpp"

#include "core/printable.hpp"
#include "data/unicode.hpp"

namespace megatron::data {

namespace {

// tokenizers' penalty below the lowest score for a character no piece covers.
constexpr double kUnknownPenalty = 10.0;

class UnigramModel final : public HfModel {
 public:
  explicit UnigramModel(const HfJsonNode& node) {
    node.only({"unk_id", "vocab", "byte_fallback"});
    const HfJsonNode vocab = node.at("vocab");
    vocab.array();
    expect_entries(vocab.size());
    scores_.reserve(vocab.size());
    for (std::size_t i = 0; i < vocab.size(); ++i) {
      const HfJsonNode entry = vocab.at(i);
      if (!entry.json().is_array() || entry.size() != 2) entry.fail("must be a [piece, score] pair");
      const std::string piece = entry.at(std::size_t{0}).string();
      const double score = entry.at(std::size_t{1}).number();
      // tokenizers maps a repeated piece to its later id; the trie has the piece once.
      if (ids_.contains(piece)) entry.fail("the piece '" + printable(piece, 60) + "' is listed twice");
      add_token(piece, static_cast<int64_t>(i), entry);
      scores_.push_back(score);
      min_score_ = std::min(min_score_, score);
      insert(piece, static_cast<int32_t>(i));
    }
    if (const auto unk = node.find("unk_id")) {
      unk_ = static_cast<int32_t>(unk->integer(0, static_cast<int64_t>(vocab.size()) - 1));
    }
    byte_fallback_ = node.boolean_or("byte_fallback", false);
    byte_ids_ = byte_fallback_ids();
  }

  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override {
    if (piece.empty()) return;
    const double unk_score = min_score_ - kUnknownPenalty;
    struct Best {
      int32_t id = -1;
      double score = 0;
      std::size_t start = 0;
      bool set = false;
    };
    std::vector<Best> best(piece.size() + 1);
    best[0].set = true;
    std::size_t start = 0;
    while (start < piece.size()) {
      const double here = best[start].score;
      const std::size_t char_len = utf8_length(piece, start);
      bool single = false;
      // Pieces starting here, shortest first (the trie's order).
      std::size_t node = 0;
      for (std::size_t end = start; end < piece.size(); ++end) {
        const auto it = children_.find(edge(node, static_cast<unsigned char>(piece[end])));
        if (it == children_.end()) break;
        node = it->second;
        const int32_t id = piece_at_[node];
        if (id < 0) continue;
        Best& target = best[end + 1];
        const double candidate = here + scores_[id];
        if (!target.set || candidate > target.score) target = {id, candidate, start, true};
        if (end + 1 - start == char_len) single = true;
      }
      if (!single) {
        if (!unk_) throw_missing_unk(piece);
        Best& target = best[start + char_len];
        const double candidate = here + unk_score;
        if (!target.set || candidate > target.score) target = {*unk_, candidate, start, true};
      }
      start += char_len;
    }
    // Back from the end; runs of unknowns become one token.
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    std::vector<int32_t> ids;
    for (std::size_t end = piece.size(); end > 0;) {
      const Best& b = best[end];
      if (b.id == unk_ && !ids.empty() && ids.back() == unk_) {
        spans.back().first = b.start;
      } else {
        spans.push_back({b.start, end});
        ids.push_back(b.id);
      }
      end = b.start;
    }
    for (std::size_t k = ids.size(); k-- > 0;) {
      const std::string_view text = piece.substr(spans[k].first, spans[k].second - spans[k].first);
      if (ids[k] != unk_) {
        out.push_back(ids[k]);
        continue;
      }
      // A fused unknown that is itself a piece (tokenizers looks the text up again).
      if (const auto id = id_of(text)) {
        out.push_back(*id);
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (const char c : text) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
        if (all) {
          for (const char c : text) out.push_back(byte_ids_[static_cast<unsigned char>(c)]);
          continue;
        }
      }
      out.push_back(*unk_);
    }
  }

 private:
  static uint64_t edge(std::size_t node, unsigned char byte) { return uint64_t{node} << 8 | byte; }
  static std::size_t utf8_length(std::string_view s, std::size_t at) {
    const auto lead = static_cast<unsigned char>(s[at]);
    const std::size_t n = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 1;
    return std::min(n, s.size() - at);
  }
  [[noreturn]] static void throw_missing_unk(std::string_view piece);

  void insert(const std::string& piece, int32_t id) {
    if (piece_at_.empty()) piece_at_.push_back(-1);
    std::size_t node = 0;
    for (const char c : piece) {
      const auto [it, added] = children_.try_emplace(edge(node, static_cast<unsigned char>(c)), piece_at_.size());
      if (added) piece_at_.push_back(-1);
      node = it->second;
    }
    if (node != 0) piece_at_[node] = id;
  }

  std::vector<double> scores_;
  double min_score_ = std::numeric_limits<double>::infinity();
  std::optional<int32_t> unk_;
  bool byte_fallback_ = false;
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, std::size_t> children_;  // (node, byte) -> node
  std::vector<int32_t> piece_at_;                        // piece ending at each node, or -1
};

void UnigramModel::throw_missing_unk(std::string_view piece) {
  throw UserError("the Unigram tokenizer cannot cover '" + printable(piece, 60) + "' and has no unk_id");
}

}  // namespace

std::unique_ptr<HfModel> make_hf_unigram_model(const HfJsonNode& node) {
  return std::make_unique<UnigramModel>(node);
}

}  // namespace megatron::data
