// The recipe key eval.tasks: a list of downstream tasks (task, data and the flags of
// `megatron eval`), parsed and checked entry by entry with each value's file position.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "recipe/schema.hpp"

namespace megatron::recipe {

// The schema entry of eval.tasks (parse, render, documentation).
FieldSpec eval_tasks_field();

// The tasks that take an eval.tasks key (and `megatron eval`'s flag of that name), e.g.
// "choices_field" -> {"multiple-choice"}; empty for a key every task takes or no key at all.
std::vector<std::string> tasks_taking(std::string_view key);

}  // namespace megatron::recipe
