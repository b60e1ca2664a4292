// The recipe key eval.tasks: a list of downstream tasks (task, data and the flags of
// `megatron eval`), parsed and checked entry by entry with each value's file position.
#pragma once

#include "recipe/schema.hpp"

namespace megatron::recipe {

// The schema entry of eval.tasks (parse, render, documentation).
FieldSpec eval_tasks_field();

}  // namespace megatron::recipe
