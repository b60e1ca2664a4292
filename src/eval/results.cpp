#include "eval/results.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace megatron::eval {

nlohmann::json results_json(const std::vector<TaskResult>& results, const RunInfo& info) {
  nlohmann::ordered_json out;
  nlohmann::ordered_json tasks, n_samples, higher, versions, n_shot, configs, generations;
  for (const TaskResult& r : results) {
    nlohmann::ordered_json t{{"alias", r.task}};
    for (const Metric& m : r.metrics) {
      t[m.name + ",none"] = m.value;
      if (m.std_error) {
        t[m.name + "_stderr,none"] = *m.std_error;
      } else {
        t[m.name + "_stderr,none"] = "N/A";
      }
      higher[r.task][m.name] = m.higher_is_better;
    }
    tasks[r.task] = t;
    n_samples[r.task] = {{"original", r.samples}, {"effective", r.samples}};
    versions[r.task] = 1.0;
    n_shot[r.task] = r.num_fewshot;
    configs[r.task] = {{"task", r.task}, {"dataset_path", r.data}, {"num_fewshot", r.num_fewshot}};
    if (!r.generations.empty()) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const Generated& g : r.generations) {
        list.push_back({{"prompt", g.prompt}, {"prediction", g.prediction}, {"references", g.references}});
      }
      generations[r.task] = list;
    }
  }
  out["results"] = tasks;
  out["configs"] = configs;
  out["versions"] = versions;
  out["n-shot"] = n_shot;
  out["higher_is_better"] = higher;
  out["n-samples"] = n_samples;
  // Generation tasks: every output beside its references, so that any scorer can recompute.
  if (!generations.empty()) out["generations"] = generations;
  out["config"] = {{"model", "megatron"},
                   {"model_args", "checkpoint=" + info.checkpoint},
                   {"batch_size", info.batch_size},
                   {"max_length", info.max_length}};
  out["model_name"] = info.checkpoint;
  out["megatron_version"] = info.version;
  out["date"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return out;
}

std::string results_table(const std::vector<TaskResult>& results) {
  size_t width = 16;
  for (const TaskResult& r : results) width = std::max(width, r.task.size());
  std::string out = fmt::format("|{:<{}}|{:>8}|{:<22}|{:>14}|{:>10}|\n", "task", width, "samples",
                                "metric", "value", "stderr");
  out += fmt::format("|{:-<{}}|{:->8}|{:-<22}|{:->14}|{:->10}|\n", "", width, "", "", "", "");
  for (const TaskResult& r : results) {
    for (const Metric& m : r.metrics) {
      out += fmt::format("|{:<{}}|{:>8}|{:<22}|{:>14.6g}|{:>10}|\n", r.task, width, r.samples, m.name,
                         m.value, m.std_error ? fmt::format("{:.4f}", *m.std_error) : "N/A");
    }
  }
  return out;
}

std::string samples_jsonl(const TaskResult& r) {
  std::string out;
  for (size_t d = 0; d < r.generations.size(); ++d) {
    const Generated& g = r.generations[d];
    nlohmann::ordered_json line{{"doc_id", d}, {"task", r.task}, {"prompt", g.prompt},
                                {"filtered_resps", {g.prediction}}, {"target", g.references}};
    out += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  for (size_t d = 0; d < r.scores.size(); ++d) {
    nlohmann::ordered_json line{{"doc_id", d}, {"task", r.task}};
    nlohmann::ordered_json resps = nlohmann::ordered_json::array();
    for (const Score& s : r.scores[d]) {
      if (r.task == "perplexity") {
        resps.push_back(s.logprob);
      } else {
        resps.push_back({s.logprob, s.greedy});
      }
    }
    line["filtered_resps"] = resps;
    out += line.dump() + "\n";
  }
  return out;
}

}  // namespace megatron::eval
