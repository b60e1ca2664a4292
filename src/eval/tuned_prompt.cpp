#include "eval/tuned_prompt.hpp"

#include <vector>

#include "data/chat_template.hpp"
#include "recipe/enum_names.hpp"
#include "train/train_data.hpp"

namespace megatron::eval {
namespace {

bool chat_tuned(const recipe::FinetuneSection& ft) {
  return ft.train_data && ft.format == recipe::FinetuneFormat::Chat;
}

// The template training used: finetune.chat_template, `auto` read from the recipe's tokenizer
// (its path relative to the recipe, as training read it).
data::ChatTemplate template_of(const recipe::CompiledRecipe& compiled) {
  const auto& model = compiled.recipe.data.tokenizer_model;
  return data::chat_template_for(recipe::name_of(compiled.recipe.finetune.chat_template),
                                 model ? train::relative_to(compiled, *model) : std::string());
}

}  // namespace

std::string tuned_prompt(const recipe::CompiledRecipe& compiled, const std::string& prompt) {
  if (!chat_tuned(compiled.recipe.finetune)) return prompt;
  // The unscored text before the first scored stretch of a transcript whose assistant turn is
  // empty: the user turn and the assistant's header, rendered as in training.
  const std::vector<data::ChatMessage> turns = {{.role = data::ChatRole::User, .content = prompt},
                                                {.role = data::ChatRole::Assistant, .content = ""}};
  const data::SftExample rendered = data::render_chat(turns, template_of(compiled));
  std::string out;
  for (const data::SftSegment& segment : rendered.segments) {
    if (segment.scored) break;
    out += segment.text;
  }
  return out;
}

std::string tuned_answer(const recipe::CompiledRecipe& compiled, const std::string& output) {
  if (!chat_tuned(compiled.recipe.finetune)) return output;
  return output.substr(0, output.find(data::chat_turn_end(template_of(compiled))));
}

}  // namespace megatron::eval
