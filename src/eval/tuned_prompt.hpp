// What a generation task gives a fine-tuned model and takes from it: a chat-tuned model sees each
// prompt as a user turn of its template, and its answer ends at the template's end of turn.
#pragma once

#include <string>

#include "recipe/compile.hpp"

namespace megatron::eval {

// A checkpoint tuned with finetune.format: chat gets the prompt as a user turn followed by the
// assistant's header (exactly the text training put before an assistant turn); others as is.
std::string tuned_prompt(const recipe::CompiledRecipe& compiled, const std::string& prompt);

// A chat-tuned model's output up to its template's end-of-turn marker (chatml, qwen: <|im_end|>,
// plain: the newline); others' output whole.
std::string tuned_answer(const recipe::CompiledRecipe& compiled, const std::string& output);

}  // namespace megatron::eval
