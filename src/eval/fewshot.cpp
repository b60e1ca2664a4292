#include "eval/fewshot.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace megatron::eval {
namespace {

bool same(const Choice& a, const Choice& b) {
  return a.context == b.context && a.choices == b.choices && a.gold == b.gold;
}

}  // namespace

std::string fewshot_context(const FewShot& f, const Choice& question) {
  if (f.shots == 0) return question.context;
  // lm-evaluation-harness drops the question from its own split wherever it is (compared by
  // value, so its duplicates too), then takes the first N.
  std::string prompt;
  int64_t used = 0;
  for (size_t i = 0; i < f.examples.size() && used < f.shots; ++i) {
    const Choice& e = f.examples[i];
    if (f.examples_are_the_task && same(e, question)) continue;
    prompt += e.context + " " + e.choices[size_t(e.gold)] + "\n\n";
    ++used;
  }
  if (used < f.shots) {
    throw UserError(fmt::format("--num-fewshot {} needs {} examples{}, but the few-shot file has only "
                                "{}: lower --num-fewshot or give a larger --fewshot-data",
                                f.shots, f.shots, f.examples_are_the_task ? " besides each question" : "",
                                used));
  }
  return prompt + question.context;
}

}  // namespace megatron::eval
