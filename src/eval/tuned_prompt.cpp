#include "eval/tuned_prompt.hpp"

#include <vector>

#include "recipe/enum_names.hpp"
#include "train/train_data.hpp"

namespace megatron::eval {

std::optional<data::ChatTemplate> tuned_chat_template(const recipe::CompiledRecipe& compiled) {
  const recipe::FinetuneSection& ft = compiled.recipe.finetune;
  if (!ft.train_data || ft.format != recipe::FinetuneFormat::Chat) return std::nullopt;
  // The tokenizer path relative to the recipe, as training read it.
  const auto& model = compiled.recipe.data.tokenizer_model;
  return data::chat_template_for(recipe::name_of(ft.chat_template),
                                 model ? train::relative_to(compiled, *model) : std::string());
}

std::string tuned_prompt(const std::optional<data::ChatTemplate>& chat, const std::string& prompt) {
  if (!chat) return prompt;
  // The unscored text before the first scored stretch of a transcript whose assistant turn is
  // empty: the user turn and the assistant's header, rendered as in training.
  const std::vector<data::ChatMessage> turns = {{.role = data::ChatRole::User, .content = prompt},
                                                {.role = data::ChatRole::Assistant, .content = ""}};
  std::string out;
  for (const data::SftSegment& segment : data::render_chat(turns, *chat).segments) {
    if (segment.scored) break;
    out += segment.text;
  }
  return out;
}

std::string tuned_answer(const std::optional<data::ChatTemplate>& chat, const std::string& output) {
  if (!chat) return output;
  return output.substr(0, output.find(data::chat_turn_end(*chat)));
}

}  // namespace megatron::eval
