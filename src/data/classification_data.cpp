#include "data/classification_data.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <random>
#include <set>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/epoch_order.hpp"
#include "data/jsonl_records.hpp"

namespace megatron::data {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == '\t') {
      out.push_back(line.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

void require_text(const std::string& text, const std::string& path, int64_t line, int column) {
  if (text.empty()) throw UserError(fmt::format("{}:{}: column {} holds no text", path, line, column + 1));
}

// The ids padded to seq_length with `pad`, no token scored (only the label is), positions
// 0..seq_length-1; valid_length is where the padding starts.
Sample padded_sample(std::vector<int32_t> ids, int64_t seq_length, int32_t pad, int32_t label) {
  Sample s;
  s.valid_length = int32_t(ids.size());
  ids.resize(size_t(seq_length), pad);
  s.tokens = std::move(ids);
  s.labels.assign(size_t(seq_length), 0);
  s.loss_mask.assign(size_t(seq_length), 0.0f);
  s.position_ids.resize(size_t(seq_length));
  for (int64_t i = 0; i < seq_length; ++i) s.position_ids[size_t(i)] = int32_t(i);
  s.sentence_order = label;
  return s;
}

}  // namespace

std::string clean_text(std::string text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const char d = c == '\n' ? ' ' : c;
    if (is_space(d)) {
      if (out.empty() || out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(d);
    }
  }
  for (int pass = 0; pass < 3; ++pass) {
    std::string next;
    next.reserve(out.size());
    for (size_t i = 0; i < out.size();) {
      if (out.compare(i, 3, " . ") == 0) {
        next += ". ";
        i += 3;
      } else {
        next += out[i++];
      }
    }
    out = std::move(next);
  }
  return out;
}

ClassificationSet read_labelled_jsonl(const std::string& path, const LabelledFields& f,
                                      const std::vector<std::string>& labels) {
  struct Raw {
    LabelledText row;
    std::optional<std::string> label;  // by name; none when given as an id
    int64_t line = 0;
  };
  std::vector<Raw> raw;
  const std::string hint = "name another with the label and text field options";
  for_each_record(path, "the labelled file", [&](const nlohmann::json& j, int64_t line) {
    Raw r{.line = line};
    r.row.text_a = string_of(field_of(j, f.text, path, line, hint), f.text, path, line);
    if (!f.text_b.empty()) r.row.text_b = string_of(field_of(j, f.text_b, path, line, hint), f.text_b, path, line);
    const nlohmann::json& label = field_of(j, f.label, path, line, hint);
    if (label.is_string()) {
      r.label = label.get<std::string>();
    } else if (label.is_number_integer() && !labels.empty() && label.get<int64_t>() >= 0 &&
               label.get<int64_t>() < int64_t(labels.size())) {
      r.row.label = int32_t(label.get<int64_t>());
    } else {
      throw UserError(fmt::format("{}:{}: field \"{}\" = {} is not a class: give a class name{}", path, line,
                                  printable(f.label), printable(label.dump()),
                                  labels.empty() ? "" : fmt::format(" or an id below {}", labels.size())));
    }
    raw.push_back(std::move(r));
  });
  if (raw.empty()) throw UserError(fmt::format("{}: no labelled rows", path));
  ClassificationSet set{.labels = labels};
  if (set.labels.empty()) {
    std::set<std::string> names;
    for (const Raw& r : raw) names.insert(*r.label);  // ids need named classes: refused above
    set.labels.assign(names.begin(), names.end());
  }
  for (Raw& r : raw) {
    if (r.label) {
      const auto it = std::find(set.labels.begin(), set.labels.end(), *r.label);
      if (it == set.labels.end()) {
        throw UserError(fmt::format("{}:{}: field \"{}\" = \"{}\" is not one of the classes {}", path, r.line,
                                    printable(f.label), printable(*r.label), fmt::join(set.labels, ", ")));
      }
      r.row.label = int32_t(it - set.labels.begin());
    }
    set.rows.push_back(std::move(r.row));
  }
  return set;
}

ClassificationSet read_glue(const std::string& path, GlueTask task) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot read the GLUE file", path));
  ClassificationSet set;
  set.labels = task == GlueTask::Mnli ? std::vector<std::string>{"contradiction", "entailment", "neutral"}
                                      : std::vector<std::string>{"0", "1"};
  bool test = false;
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<std::string> row = split_tabs(line);
    if (number == 1) {  // the header says whether labels follow
      test = row.size() == (task == GlueTask::Mnli ? 10u : 3u);
      continue;
    }
    if (line.empty()) continue;
    LabelledText t;
    if (task == GlueTask::Mnli) {
      if (row.size() < (test ? 10u : 11u)) {
        throw UserError(fmt::format("{}:{}: {} columns, but an MNLI row has {}", path, number, row.size(),
                                    test ? 10 : 11));
      }
      t.text_a = clean_text(strip(row[8]));
      t.text_b = clean_text(strip(row[9]));
      require_text(t.text_a, path, number, 8);
      require_text(t.text_b, path, number, 9);
      const std::string label = test ? "contradiction" : strip(row.back());
      const auto it = std::find(set.labels.begin(), set.labels.end(), label);
      if (it == set.labels.end()) {
        throw UserError(fmt::format("{}:{}: label \"{}\" is not contradiction, entailment or neutral", path,
                                    number, printable(label)));
      }
      t.label = int32_t(it - set.labels.begin());
    } else if (test) {
      if (row.size() != 3) {
        throw UserError(fmt::format("{}:{}: {} columns, but a QQP test row has 3", path, number, row.size()));
      }
      t.text_a = clean_text(strip(row[1]));
      t.text_b = clean_text(strip(row[2]));
      require_text(t.text_a, path, number, 1);
      require_text(t.text_b, path, number, 2);
    } else {
      if (row.size() != 6) {  // Megatron skips these (QQP's train set has some)
        ++set.skipped;
        continue;
      }
      t.text_a = clean_text(strip(row[3]));
      t.text_b = clean_text(strip(row[4]));
      require_text(t.text_a, path, number, 3);
      require_text(t.text_b, path, number, 4);
      const std::string label = strip(row[5]);
      if (label != "0" && label != "1") {
        throw UserError(fmt::format("{}:{}: label \"{}\" is not 0 or 1", path, number, printable(label)));
      }
      t.label = label == "1" ? 1 : 0;
    }
    set.rows.push_back(std::move(t));
  }
  if (set.rows.empty()) throw UserError(fmt::format("{}: no rows after the header", path));
  return set;
}

Sample bert_classification_sample(const LabelledText& row, const Tokenizer& tokenizer, int64_t seq_length) {
  const SpecialTokens& special = tokenizer.special_tokens();
  if (!special.cls || !special.sep || !special.pad) {
    throw UserError("classification samples need a tokenizer with [CLS], [SEP] and [PAD] (a BERT "
                    "WordPiece vocab.txt)");
  }
  if (seq_length < 2) throw UserError("a classification sample needs a sequence length of 2 or more");
  std::vector<int32_t> ids = {*special.cls}, types = {0};
  const std::vector<int32_t> a = tokenizer.encode(row.text_a);
  ids.insert(ids.end(), a.begin(), a.end());
  types.insert(types.end(), a.size(), 0);
  ids.push_back(*special.sep);
  types.push_back(0);
  const bool pair = !row.text_b.empty();
  if (pair) {
    const std::vector<int32_t> b = tokenizer.encode(row.text_b);
    ids.insert(ids.end(), b.begin(), b.end());
    types.insert(types.end(), b.size(), 1);
  }
  const bool trimmed = int64_t(ids.size()) >= seq_length;
  if (trimmed) {
    ids.resize(size_t(seq_length - 1));
    types.resize(size_t(seq_length - 1));
  }
  if (pair || trimmed) {
    ids.push_back(*special.sep);
    types.push_back(pair ? 1 : 0);
  }
  Sample s = padded_sample(std::move(ids), seq_length, *special.pad, row.label);
  // Megatron pads the types with [PAD]'s id, 0 in BERT's vocabularies; 0 here whatever the
  // vocabulary, since a type indexes the two-row token-type embedding (and padding is masked).
  types.resize(size_t(seq_length), 0);
  s.token_types = std::move(types);
  return s;
}

Sample gpt_classification_sample(const LabelledText& row, const Tokenizer& tokenizer, int64_t seq_length) {
  const int32_t eod = tokenizer.special_tokens().eod.value_or(0);
  std::vector<int32_t> ids = tokenizer.encode(row.text_b.empty() ? row.text_a : row.text_a + "\n" + row.text_b);
  if (ids.empty()) ids.push_back(eod);  // an empty text: the classifier reads the end token
  if (int64_t(ids.size()) > seq_length) ids.resize(size_t(seq_length));
  return padded_sample(std::move(ids), seq_length, eod, row.label);
}

ClassificationSource::ClassificationSource(std::shared_ptr<const ClassificationSet> set,
                                           std::shared_ptr<const Tokenizer> tokenizer,
                                           int64_t seq_length, bool bert, uint64_t seed,
                                           int64_t size, bool shuffle)
    : set_(std::move(set)), tokenizer_(std::move(tokenizer)), seq_length_(seq_length), bert_(bert),
      size_(size) {
  const int64_t n = int64_t(set_->rows.size());
  if (n == 0) throw UserError("classification data has no rows");
  if (!shuffle) return;
  const int64_t epochs = (size_ + n - 1) / n;
  for (int64_t e = 0; e < epochs; ++e) order_.push_back(epoch_order(n, seed, e));
}

Sample ClassificationSource::sample(int64_t i) const {
  const int64_t n = int64_t(set_->rows.size());
  const int64_t epoch = i / n, at = i % n;
  const int64_t row = order_.empty() ? at : order_[size_t(epoch) % order_.size()][size_t(at)];
  const LabelledText& text = set_->rows[size_t(row)];
  return bert_ ? bert_classification_sample(text, *tokenizer_, seq_length_)
               : gpt_classification_sample(text, *tokenizer_, seq_length_);
}

}  // namespace megatron::data
