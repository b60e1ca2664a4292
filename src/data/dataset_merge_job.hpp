// `megatron data merge` as a call: indexed datasets concatenated, in order, into one (as
// Megatron-LM's merge_datasets), published only once it is complete.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace megatron::data {

struct DatasetMergeJob {
  std::string output;               // prefix written
  std::vector<std::string> inputs;  // prefixes read, at least one; the first sets the token type
  bool force = false;               // replace an existing output
};

// Writes the merged dataset and one summary line to `out`. UserError when the output exists
// and not `force`, or an input cannot be opened.
void merge_datasets(const DatasetMergeJob& job, std::ostream& out);

}  // namespace megatron::data
