#include "eval/tuned_prompt.hpp"

#include <vector>

#include "data/sft_data.hpp"

namespace megatron::eval {
namespace {

bool chat_tuned(const recipe::FinetuneSection& ft) {
  return ft.train_data && ft.format == recipe::FinetuneFormat::Chat;
}

}  // namespace

std::string tuned_prompt(const recipe::FinetuneSection& ft, const std::string& prompt) {
  if (!chat_tuned(ft)) return prompt;
  // The unscored text before the first scored stretch of a transcript whose assistant turn is
  // empty: the user turn and the assistant's header, rendered as in training.
  const std::vector<data::ChatMessage> turns = {{.role = data::ChatRole::User, .content = prompt},
                                                {.role = data::ChatRole::Assistant, .content = ""}};
  const data::SftExample rendered = data::render_chat(
      turns, ft.chat_template == recipe::ChatTemplate::ChatMl ? data::ChatTemplate::ChatMl
                                                              : data::ChatTemplate::Plain);
  std::string out;
  for (const data::SftSegment& segment : rendered.segments) {
    if (segment.scored) break;
    out += segment.text;
  }
  return out;
}

std::string tuned_answer(const recipe::FinetuneSection& ft, const std::string& output) {
  if (!chat_tuned(ft)) return output;
  const char* marker = ft.chat_template == recipe::ChatTemplate::ChatMl ? "<|im_end|>" : "\n";
  return output.substr(0, output.find(marker));
}

}  // namespace megatron::eval
