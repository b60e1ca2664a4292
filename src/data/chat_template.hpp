// Chat templates: how a transcript of system, user and assistant turns becomes the text a chat
// model reads, rendered natively as transformers' apply_chat_template renders the families' own
// Jinja templates, with the stretches a fine-tuning run learns marked; and a Hugging Face
// tokenizer directory's template recognised as one of them.
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::data {

// A stretch of an example's text, and whether the model is trained to produce it.
struct SftSegment {
  std::string text;
  bool scored = false;
};

// A prompt/response pair is {prompt, unscored}, {response, scored}; a chat is its template's
// rendering (render_chat).
struct SftExample {
  std::vector<SftSegment> segments;
};

enum class ChatRole { System, User, Assistant };

struct ChatMessage {
  ChatRole role = ChatRole::User;
  std::string content;
};

// The templates (their names as recipes and flags spell them). The loss covers what the model
// says in each assistant turn, and how it ends the turn; never the role header:
//   chatml:      "<|im_start|>{role}\n{content}<|im_end|>\n"; scored "{content}<|im_end|>".
//   plain:       "System: {content}\n", "User: ...", "Assistant: ..."; scored "{content}\n".
//   qwen2.5:     Qwen2.5's: chatml, with "You are Qwen, created by Alibaba Cloud. You are a
//                helpful assistant." as the system turn when the transcript has none.
//   qwen3:       Qwen3's: chatml without a default system turn; reasoning ("<think>...</think>")
//                kept only in the assistant turns after the last user turn, and the last of
//                those always written with its (possibly empty) think block.
//   deepseek-r1: DeepSeek-R1's (and V3's): "<｜begin▁of▁sentence｜>", the system turns joined by
//                blank lines, then "<｜User｜>{content}" and "<｜Assistant｜>{content}
//                <｜end▁of▁sentence｜>" (reasoning dropped); the generation prompt opens
//                "<｜Assistant｜><think>\n".
//   mistral-v1:  Mistral's for its v1 SentencePiece tokenizer (Mistral 7B Instruct v0.1,
//                Mixtral 8x7B Instruct), as mistral-common generates it: "<s>", then
//                " [INST] {user} [/INST]" and " {assistant}</s>"; the system turns, joined by blank
//                lines, open the first user turn; turns of one role in a row are joined by blank
//                lines; no generation prompt. Scored " {assistant}</s>" (SentencePiece spells the
//                space into the answer's first piece).
//   mistral-v3:  the same for its v3 tokenizer (Mistral 7B Instruct v0.3): "[INST] {user}[/INST]",
//                the system turns opening the last user turn.
enum class ChatTemplate { ChatMl, Plain, Qwen25, Qwen3, DeepSeekR1, MistralV1, MistralV3 };

std::string_view chat_template_name(ChatTemplate t);
std::optional<ChatTemplate> chat_template_named(std::string_view name);
// "chatml, plain, qwen2.5, qwen3, deepseek-r1, mistral-v1, mistral-v3".
std::string chat_template_names();

// The transcript rendered by the template, adjacent segments of the same flag merged (so the
// text between two scored stretches is encoded as one piece); with add_generation_prompt, the
// header of an assistant turn to be written follows, unscored.
SftExample render_chat(std::span<const ChatMessage> messages, ChatTemplate chat_template,
                       bool add_generation_prompt = false);

// What ends an assistant turn in the template's text: a generated answer is cut there.
std::string_view chat_turn_end(ChatTemplate t);

// The template whose Jinja source this is (the families' released templates, exactly), or
// nullopt.
std::optional<ChatTemplate> recognise_chat_template(std::string_view jinja);

// A Hugging Face tokenizer's template: chat_template.jinja beside it (transformers 5 saves it
// there), else tokenizer_config.json's chat_template (a string, or the entry named "default"
// of a list). `tokenizer` is tokenizer.json or its directory. nullopt when there is none;
// UserError for a file that cannot be read or holds the key in another shape.
std::optional<std::string> read_hf_chat_template(const std::filesystem::path& tokenizer);

// A template by name, or "auto": the tokenizer's own, recognised (UserError naming the
// directory when it has none, or one that is none of the known templates, with their names).
ChatTemplate chat_template_for(std::string_view name, const std::filesystem::path& tokenizer);

}  // namespace megatron::data
