// Generation-based evaluation: each prompt's greedy output against its references, scored by
// exact match and token F1 (SQuAD) per sample, or corpus BLEU and chrF (sacreBLEU's defaults).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/task_data.hpp"
#include "eval/tasks.hpp"

namespace megatron::eval {

// metrics: names from exact_match, f1, bleu, chrf (metrics_named). The result keeps every
// prompt, output and reference (TaskResult::generations) so that the scores can be recomputed.
TaskResult generation_task(const std::vector<GenerationExample>& examples,
                           const std::vector<std::string>& metrics, int64_t max_tokens,
                           const TaskSetup& setup);

}  // namespace megatron::eval
