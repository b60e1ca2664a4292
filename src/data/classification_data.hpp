// Labelled text for classification fine-tuning, read and checked where it enters: jsonl (a text
// field, an optional second text for pairs, a label) and Megatron's GLUE TSV layouts (MNLI,
// QQP); and the BERT input Megatron's tasks/ build from a pair: [CLS] A [SEP] B [SEP].
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/sample.hpp"
#include "data/tokenizer.hpp"

namespace megatron::data {

struct LabelledText {
  std::string text_a;
  std::string text_b;  // empty: a single text
  int32_t label = 0;   // an index into ClassificationSet::labels
};

struct ClassificationSet {
  std::vector<LabelledText> rows;
  std::vector<std::string> labels;  // class names in id order
  int64_t skipped = 0;              // rows Megatron's reader skips (QQP's malformed lines)
};

struct LabelledFields {
  std::string text = "text";
  std::string text_b;  // empty: none
  std::string label = "label";
};

// jsonl rows; a label is a class name (a string) or an id (an integer below labels.size()).
// `labels`: the class names in id order; empty: the file's distinct string labels, sorted. A
// label outside them, a missing field or an empty file is a UserError naming file, line, field.
ClassificationSet read_labelled_jsonl(const std::string& path, const LabelledFields& fields,
                                      const std::vector<std::string>& labels = {});

enum class GlueTask { Mnli, Qqp };

// Megatron's tasks/glue readers: MNLI (text_a column 8, text_b 9, label the last; labels
// contradiction, entailment, neutral; a 10-column header marks a test file, every label
// contradiction) and QQP (6 columns: text_a 3, text_b 4, label 5 as 0 or 1; 3 columns: a test
// file, label 0; malformed rows skipped and counted). The header row is skipped; texts pass
// through clean_text.
ClassificationSet read_glue(const std::string& path, GlueTask task);

// Megatron's clean_text: newlines become spaces, runs of whitespace one space, and " . " becomes
// ". " (three passes).
std::string clean_text(std::string text);

// [CLS] A [SEP] (B [SEP]) in seq_length tokens, as Megatron's tasks/data_utils: token types 0 up
// to the first [SEP], 1 after; at seq_length or more the ids are cut to seq_length - 1 and end
// in [SEP]; ids padded with [PAD], types with 0. The label rides in sentence_order; no token is
// scored by the LM head (loss_mask 0).
Sample bert_classification_sample(const LabelledText& row, const Tokenizer& tokenizer, int64_t seq_length);

// GPT's input: the text's tokens (a pair joined by a newline) cut to seq_length, padded with the
// end-of-document token; valid_length marks the last real token, which the classifier reads.
Sample gpt_classification_sample(const LabelledText& row, const Tokenizer& tokenizer, int64_t seq_length);

// The rows as `size` samples, epoch after epoch: each epoch a permutation of the rows drawn from
// (seed, epoch) when `shuffle`, else the rows in order. sample(i) is a pure function of i.
class ClassificationSource : public SampleSource {
 public:
  ClassificationSource(std::shared_ptr<const ClassificationSet> set,
                       std::shared_ptr<const Tokenizer> tokenizer, int64_t seq_length, bool bert,
                       uint64_t seed, int64_t size, bool shuffle);
  int64_t size() const override { return size_; }
  Sample sample(int64_t i) const override;

 private:
  std::shared_ptr<const ClassificationSet> set_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  int64_t seq_length_ = 0;
  bool bert_ = true;
  int64_t size_ = 0;
  std::vector<std::vector<int32_t>> order_;  // per epoch; empty without shuffling
};

}  // namespace megatron::data
