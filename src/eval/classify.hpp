// Scoring a fine-tuned classifier: its answer for every labelled row (batches taken in turn by
// the data-parallel replicas, every rank learning every answer), and the task's accuracy and
// F1 from those answers.
#pragma once

#include <cstdint>
#include <vector>

#include "data/classification_data.hpp"
#include "eval/scorer.hpp"
#include "eval/tasks.hpp"
#include "train/train_data.hpp"

namespace megatron::eval {

// The class the model gives each sample of `rows` (a source of rows.size() samples, in order).
std::vector<int32_t> classify(const ForwardFn& forward, tensor::Backend& backend,
                              const data::SampleSource& rows, const train::BatchSpec& spec,
                              int64_t batch_size, int64_t classes, const ScoreGroups& groups,
                              const ScoreProgress& progress = {});

// acc (with its standard error), f1 (the mean over classes of each class's F1, as
// sklearn's f1_score(average="macro")) and, for two classes, f1 of class 1 (sklearn's binary
// default).
TaskResult classification_metrics(const data::ClassificationSet& set, const std::vector<int32_t>& predicted);

}  // namespace megatron::eval
