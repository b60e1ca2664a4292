// What a generation task gives a fine-tuned model and takes from it: a chat-tuned model sees each
// prompt as a user turn of its template, and its answer ends at the template's end of turn.
#pragma once

#include <optional>
#include <string>

#include "data/chat_template.hpp"
#include "recipe/compile.hpp"

namespace megatron::eval {

// The template a checkpoint tuned with finetune.format: chat was trained with (`auto` read from
// its tokenizer once, here); nullopt for every other checkpoint. UserError as chat_template_for.
std::optional<data::ChatTemplate> tuned_chat_template(const recipe::CompiledRecipe& compiled);

// A chat-tuned model gets the prompt as a user turn followed by the assistant's header (exactly
// the text training put before an assistant turn); others as is.
std::string tuned_prompt(const std::optional<data::ChatTemplate>& chat, const std::string& prompt);

// A chat-tuned model's output up to its template's end-of-turn marker (chatml, qwen: <|im_end|>,
// plain: the newline); others' output whole.
std::string tuned_answer(const std::optional<data::ChatTemplate>& chat, const std::string& output);

}  // namespace megatron::eval
