// Train/valid/test splits of one indexed dataset: the split string ("969,30,1") normalised to
// fractions and turned into [begin, end) ranges of documents, exactly as Megatron-Core does.
//
// A GPT "document" here is one sequence of the indexed dataset, as in Megatron-Core's
// GPTDataset (numel_low_level_dataset counts sequences); GPT preprocessing writes one sequence
// per document, so the two coincide unless the corpus was split into sentences.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace megatron::data {

enum class Split { Train = 0, Valid = 1, Test = 2 };
inline constexpr std::array<Split, 3> kSplits = {Split::Train, Split::Valid, Split::Test};

const char* split_name(Split split);  // "train", "valid", "test"

// Documents [begin, end) of one split.
struct DocumentRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const DocumentRange&) const = default;
};

// "969,30,1" -> {0.969, 0.030, 0.001}. One to three non-negative numbers separated by commas
// (missing ones are 0), not all zero; each is divided by their sum (Megatron's
// parse_and_normalize_split). Throws UserError quoting the string otherwise.
std::array<double, 3> parse_split(std::string_view split);

// Each split's documents out of `num_documents`, or nullopt for a split whose fraction is 0.
// The bounds are round(cumulative fraction x num_documents) with Python's round-half-to-even,
// so the ranges tile [0, num_documents) without gaps and match Megatron-Core index for index
// (blended_megatron_dataset_builder: convert_split_vector_to_split_matrix, then rounding).
// A split with a positive fraction can still be empty when the dataset is small.
std::array<std::optional<DocumentRange>, 3> split_document_ranges(std::string_view split,
                                                                  int64_t num_documents);

}  // namespace megatron::data
