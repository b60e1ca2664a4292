#include "eval/generation_task.hpp"

#include <algorithm>
#include <stdexcept>

#include "eval/text_metrics.hpp"

namespace megatron::eval {

TaskResult generation_task(const std::vector<GenerationExample>& examples,
                           const std::vector<std::string>& metrics, int64_t max_tokens,
                           const TaskSetup& setup) {
  if (!setup.generate) throw std::logic_error("generation_task: the setup cannot generate");
  std::vector<std::string> prompts;
  for (const GenerationExample& e : examples) prompts.push_back(e.prompt);
  const std::vector<std::string> outputs = setup.generate(prompts, max_tokens);
  if (outputs.size() != examples.size()) throw std::logic_error("generation_task: one output a prompt");

  TaskResult r{.task = "generation", .samples = int64_t(examples.size())};
  // sacreBLEU's layout: one stream per reference position. A sample with fewer references than
  // the most repeats its first in the later streams: BLEU's clipped counts and closest length
  // and chrF's best reference are the same with a repeat as without one (sacreBLEU's None).
  size_t streams = 0;
  for (const GenerationExample& e : examples) streams = std::max(streams, e.references.size());
  std::vector<std::vector<std::string>> references(streams, std::vector<std::string>(examples.size()));
  std::vector<double> em, f1;
  for (size_t i = 0; i < examples.size(); ++i) {
    const GenerationExample& e = examples[i];
    for (size_t k = 0; k < streams; ++k) {
      references[k][i] = e.references[k < e.references.size() ? k : 0];
    }
    em.push_back(exact_match(outputs[i], e.references));
    f1.push_back(token_f1(outputs[i], e.references));
    r.generations.push_back({.prompt = e.prompt, .prediction = outputs[i], .references = e.references});
  }
  for (const std::string& name : metrics) {
    if (name == "exact_match") r.metrics.push_back(mean_metric("exact_match", em));
    if (name == "f1") r.metrics.push_back(mean_metric("f1", f1));
    if (name == "bleu") r.metrics.push_back({.name = "bleu", .value = corpus_bleu(outputs, references).score});
    if (name == "chrf") r.metrics.push_back({.name = "chrf", .value = corpus_chrf(outputs, references).score});
  }
  return r;
}

}  // namespace megatron::eval
