// An evaluation's report: the table printed on stdout and the JSON file laid out like
// lm-evaluation-harness's results ("acc,none" keys and their "_stderr", n-samples, config), so
// the dashboards that read those read these.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/tasks.hpp"

namespace megatron::eval {

struct RunInfo {
  std::string checkpoint;  // what was evaluated (model_name)
  int64_t batch_size = 1;
  int64_t max_length = 0;
  std::string version;     // megatron's
};

nlohmann::json results_json(const std::vector<TaskResult>& results, const RunInfo& info);
std::string results_table(const std::vector<TaskResult>& results);
// One line a sample, as lm-evaluation-harness's --log_samples: doc_id, and filtered_resps
// ([log-likelihood, is_greedy] a request; a perplexity document's rolling log-likelihood alone).
std::string samples_jsonl(const TaskResult& result);

}  // namespace megatron::eval
