// Few-shot prompts for multiple choice, as lm-evaluation-harness builds them with its first_n
// sampler: the first N examples (the question itself left out when they come from the same
// file), each "context choice" followed by "\n\n", then the question.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/task_data.hpp"

namespace megatron::eval {

struct FewShot {
  int64_t shots = 0;
  std::vector<Choice> examples;  // where shots come from, in file order
  bool examples_are_the_task = false;  // then a question never shows itself (nor its duplicates)
};

// The context to score `question`'s choices after. Throws UserError when there are fewer than
// `shots` examples to take.
std::string fewshot_context(const FewShot& fewshot, const Choice& question);

}  // namespace megatron::eval
