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

// The rank of each merge rule by the pair of token ids it joins. BPE asks for every adjacent
// pair of a new word, so this is a flat open-addressing table: with a node-based map, the
// modulo and pointer chase of each lookup were most of the cost of a word not yet cached.
class MergeRanks {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // `pairs[rank]` is the pair of that rank; a pair listed twice keeps its later rank.
  explicit MergeRanks(const std::vector<std::pair<int32_t, int32_t>>& pairs) {
    std::size_t size = 1024;
    while (size < 2 * pairs.size()) size *= 2;
    slots_.assign(size, Slot{});
    shift_ = 64 - std::countr_zero(size);
    for (std::size_t rank = 0; rank < pairs.size(); ++rank) {
      const uint64_t key = pack(pairs[rank].first, pairs[rank].second);
      std::size_t i = home(key);
      while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & (size - 1);
      slots_[i] = {.key = key, .rank = static_cast<uint32_t>(rank)};
    }
  }

  // The rank of merging `left` then `right`, or kNone.
  uint32_t find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = home(key);; i = (i + 1) & mask) {
      if (slots_[i].key == key) return slots_[i].rank;
      if (slots_[i].key == kEmpty) return kNone;
    }
  }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // ids are never negative
  struct Slot {
    uint64_t key = kEmpty;
    uint32_t rank = kNone;
  };

  static uint64_t pack(int32_t left, int32_t right) {
    return uint64_t{static_cast<uint32_t>(left)} << 32 | static_cast<uint32_t>(right);
  }
  // Fibonacci hashing: the multiply spreads both halves into the top bits we keep.
  std::size_t home(uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
  }

  std::vector<Slot> slots_;
  int shift_ = 0;
};

// A hash of a short word, inline: std::hash's out-of-line call cost as much as the rest of a
// cache lookup. Eight bytes at a time, then murmur3's finaliser.
uint64_t hash_word(std::string_view word) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ word.size();
  const char* p = word.data();
  std::size_t n = word.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t chunk = 0;
    std::memcpy(&chunk, p, 8);
    h = (h ^ chunk) * 0xFF51AFD7ED558CCDULL;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  for (std::size_t i = 0; i < n; ++i) tail |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  h = (h ^ tail) * 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  return h ^ (h >> 33);
}

// Remembers the BPE of recent words (most text repeats a few thousand words), in flat arrays
// so that a lookup allocates nothing. Bounded: when full it starts again empty.
class WordCache {
 public:
  static constexpr std::size_t kMaxWordBytes = 128;  // longer words are rare: not cached

  // The ids of `word`, or nullptr (and count 0) when it is not cached.
  const int32_t* find(std::string_view word, uint64_t hash, std::size_t& count) const {
    count = 0;
    if (slots_.empty()) return nullptr;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.key_length == 0) return nullptr;
      if (slot.hash == hash && slot.key_length == word.size() &&
          std::memcmp(keys_.data() + slot.key_offset, word.data(), word.size()) == 0) {
        count = slot.value_length;
        return values_.data() + slot.value_offset;
      }
    }
  }

  void insert(std::string_view word, uint64_t hash, const int32_t* ids, std::size_t count) {
    if (word.empty() || word.size() > kMaxWordBytes) return;
    if ((size_ + 1) * 2 > slots_.size()) {
      if (slots_.size() >= kMaxSlots) {
        clear();
      } else {
        grow();
      }
    }
    Slot slot{.hash = hash,
              .key_offset = static_cast<uint32_t>(keys_.size()),
              .value_offset = static_cast<uint32_t>(values_.size()),
              .key_length = static_cast<uint16_t>(word.size()),
              .value_length = static_cast<uint16_t>(count)};
    keys_.append(word);
    values_.insert(values_.end(), ids, ids + count);
    place(slot);
    ++size_;
  }

  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    values_.clear();
    size_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t value_offset = 0;
    uint16_t key_length = 0;  // 0 marks an empty slot: words are never empty
    uint16_t value_length = 0;
  };
  // 2^16 words at most (half the slots): about 1.5 MiB of slots plus the words, per thread.
  static constexpr std::size_t kMaxSlots = std::size_t{1} << 17;

  void place(const Slot& slot) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = slot.hash & mask;
    while (slots_[i].key_length != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
    for (const Slot& slot : old) {
      if (slot.key_length != 0) place(slot);
    }
  }

  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> values_;
  std::size_t size_ = 0;
};

// Working arrays for one word's BPE, reused from word to word.
struct BpeScratch {
  std::vector<int32_t> id;     // token at each byte position; -1 once merged into its left
  std::vector<int32_t> next;   // next live position (word size at the end)
  std::vector<int32_t> prev;   // previous live position (-1 at the start)
  std::vector<uint64_t> heap;  // rank << 32 | position of each candidate pair, min first
  std::vector<int32_t> batch;  // positions of the pairs merged in the current round
};

// What one thread keeps for the tokenizer it used last. encode() is const and called from
// several threads at once; per-thread state needs no locks. Keyed by a serial number rather
// than the address, which a later tokenizer may reuse.
struct ThreadState {
  uint64_t owner = 0;
  WordCache cache;
  BpeScratch scratch;
};

std::atomic<uint64_t> next_serial{1};

class Gpt2Bpe final : public Tokenizer {
 public:
  Gpt2Bpe(const std::string& vocab_path, const std::string& merges_path);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  std::string token_text(int32_t id) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(token_text_.size()); }
  const SpecialTokens& special_tokens() const override { return special_; }

 private:
  struct Merge {
    int32_t left;
    int32_t right;
    int32_t result;
  };

  void load_vocab(const std::string& path, std::unordered_map<std::string, int32_t>& ids);
  void load_merges(const std::string& path, const std::string& vocab_path,
                   const std::unordered_map<std::string, int32_t>& ids);
  void check_id(int32_t id) const;
  // Appends the BPE of `word` (two bytes or more) to `out`.
  void bpe(std::string_view word, BpeScratch& s, std::vector<int32_t>& out) const;
  ThreadState& thread_state() const;

  std::vector<std::string> token_text_;    // by id, as vocab.json spells it
  std::string token_bytes_;                // every token's raw bytes, by id...
  std::vector<uint32_t> token_offset_;     // ...token id's bytes start at [id], end at [id+1]
  std::array<int32_t, 256> byte_token_{};  // the one-byte token of each byte
  std::vector<Merge> merges_;              // by rank
  std::unique_ptr<MergeRanks> ranks_;
  SpecialTokens special_;
  uint64_t serial_ = next_serial.fetch_add(1);
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
    const Merge merge{.left = find(left, line_number),
                      .right = find(right, line_number),
                      .result = find(std::string(left) + std::string(right), line_number)};
    merges_.push_back(merge);
  }
  std::vector<std::pair<int32_t, int32_t>> pairs;
  pairs.reserve(merges_.size());
  for (const Merge& merge : merges_) pairs.emplace_back(merge.left, merge.right);
  // A repeated pair takes its later rank, as encoder.py's dict and Hugging Face do.
  ranks_ = std::make_unique<MergeRanks>(pairs);
}

ThreadState& Gpt2Bpe::thread_state() const {
  thread_local ThreadState state;
  if (state.owner != serial_) {
    state.cache.clear();
    state.owner = serial_;
  }
  return state;
}

std::vector<int32_t> Gpt2Bpe::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 4 + 16);  // English averages over four bytes a token
  ThreadState& state = thread_state();
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

// encoder.py's loop: find the best-ranked adjacent pair, merge every occurrence of it left to
// right, repeat. A heap of (rank, position) finds the best pair in O(log n) rather than a scan
// of the word, which matters for long runs (a paragraph of CJK is one pre-token). Each round
// pops every candidate of the best rank before merging, so pairs the round creates wait for
// the next round exactly as in encoder.py. Stale candidates (a side already merged) are
// skipped when popped: a position's token only ever grows, so a pair that still reads
// (left, right) is still real.
void Gpt2Bpe::bpe(std::string_view word, BpeScratch& s, std::vector<int32_t>& out) const {
  const auto n = static_cast<int32_t>(word.size());
  s.id.resize(n);
  s.next.resize(n);
  s.prev.resize(n);
  s.heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    s.id[i] = byte_token_[static_cast<unsigned char>(word[i])];
    s.next[i] = i + 1;
    s.prev[i] = i - 1;
  }
  auto push_pair = [&](int32_t pos) {
    const int32_t right = s.next[pos];
    if (right >= n) return;
    const uint32_t rank = ranks_->find(s.id[pos], s.id[right]);
    if (rank == MergeRanks::kNone) return;
    s.heap.push_back(uint64_t{rank} << 32 | static_cast<uint32_t>(pos));
    std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  while (!s.heap.empty()) {
    const auto rank = static_cast<uint32_t>(s.heap.front() >> 32);
    const Merge& merge = merges_[rank];
    s.batch.clear();
    // Equal ranks pop in position order: the round merges left to right.
    while (!s.heap.empty() && static_cast<uint32_t>(s.heap.front() >> 32) == rank) {
      std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
      const auto pos = static_cast<int32_t>(s.heap.back() & 0xFFFFFFFFu);
      s.heap.pop_back();
      const int32_t right = s.next[pos];
      if (s.id[pos] != merge.left || right >= n || s.id[right] != merge.right) continue;
      s.id[pos] = merge.result;
      s.id[right] = -1;
      s.next[pos] = s.next[right];
      if (s.next[right] < n) s.prev[s.next[right]] = pos;
      s.batch.push_back(pos);
    }
    int32_t previous_merged = -1;
    for (const int32_t pos : s.batch) {
      // The pair on the left of two neighbouring merges was already pushed as the right pair
      // of the first.
      if (s.prev[pos] >= 0 && s.prev[pos] != previous_merged) push_pair(s.prev[pos]);
      push_pair(pos);
      previous_merged = pos;
    }
  }
  for (int32_t i = 0; i < n; i = s.next[i]) out.push_back(s.id[i]);
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
