// Exact parameter counts, in total and on one tensor-parallel rank of each stage, following
// Megatron's GPTModel, BertModel and T5Model (formulas: docs/plan.md, "Parameters").
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/checked.hpp"
#include "plan/plan.hpp"
#include "plan/shape.hpp"

namespace megatron::plan {

// What an overflow of a count names (make_plan adds where in the recipe to look).
inline constexpr std::string_view kParameterCount =
    "the parameter count (from model.hidden_size, ffn_hidden_size, vocab_size, num_layers and "
    "the head sizes)";

// A count in the whole model and on one TP rank (column-parallel weights and their biases are
// split by t; row-parallel biases, norms and position embeddings are replicated). Sums are
// checked: a model too large to count in 64 bits is a UserError, not a wrapped number.
struct Count {
  int64_t total = 0;
  int64_t per_rank = 0;
  Count& operator+=(const Count& o) {
    total = checked_add(total, o.total, kParameterCount);
    per_rank = checked_add(per_rank, o.per_rank, kParameterCount);
    return *this;
  }
};

Count layer_parameters(const ModelShape& x, LayerKind kind);
Count embedding_parameters(const ModelShape& x);   // word + learned position + token types
Count final_norm_parameters(const ModelShape& x);  // one final norm
Count output_parameters(const ModelShape& x);      // output side past the final norm(s)

// Fills stage.parameters_per_rank and returns the model totals.
Parameters count_parameters(const ModelShape& x, std::vector<Stage>& stages);

}  // namespace megatron::plan
