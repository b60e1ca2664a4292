// A generation task's prompts and answers for fine-tuned checkpoints: a chat-tuned model sees a
// user turn of its template and answers up to its end of turn; other models see the text as is.
#include <gtest/gtest.h>

#include "eval/tuned_prompt.hpp"

namespace megatron::eval {
namespace {

std::optional<data::ChatTemplate> with(const recipe::FinetuneSection& ft) {
  recipe::CompiledRecipe c;
  c.recipe.finetune = ft;
  return tuned_chat_template(c);
}

std::optional<data::ChatTemplate> chat(recipe::ChatTemplate t) {
  return with({.train_data = "chat.jsonl", .format = recipe::FinetuneFormat::Chat, .chat_template = t});
}

TEST(TunedPrompt, AChatMlModelSeesAUserTurnAndTheAssistantsHeader) {
  EXPECT_EQ(tuned_prompt(chat(recipe::ChatTemplate::ChatMl), "2 + 2?"),
            "<|im_start|>user\n2 + 2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tuned_answer(chat(recipe::ChatTemplate::ChatMl), "Four.<|im_end|>\n<|im_start|>user"), "Four.");
}

TEST(TunedPrompt, APlainTemplateModelSeesUserAndAssistantLines) {
  EXPECT_EQ(tuned_prompt(chat(recipe::ChatTemplate::Plain), "2 + 2?"), "User: 2 + 2?\nAssistant: ");
  EXPECT_EQ(tuned_answer(chat(recipe::ChatTemplate::Plain), "Four.\nUser: and"), "Four.");
}

TEST(TunedPrompt, AQwen3ModelSeesItsGenerationPromptAndAnswersUpToItsEndOfTurn) {
  EXPECT_EQ(tuned_prompt(chat(recipe::ChatTemplate::Qwen3), "2 + 2?"),
            "<|im_start|>user\n2 + 2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tuned_answer(chat(recipe::ChatTemplate::DeepSeekR1), "Four.<｜end▁of▁sentence｜><｜User｜>"),
            "Four.");
}

TEST(TunedPrompt, OtherModelsSeeThePromptAndAnswerAsTheyAre) {
  const recipe::FinetuneSection sft{.train_data = "qa.jsonl", .format = recipe::FinetuneFormat::Sft};
  for (const recipe::FinetuneSection& ft : {recipe::FinetuneSection{}, sft}) {
    EXPECT_EQ(tuned_prompt(with(ft), "Q: 2 + 2?\nA:"), "Q: 2 + 2?\nA:");
    EXPECT_EQ(tuned_answer(with(ft), " Four.\nQ: next"), " Four.\nQ: next");
  }
}

}  // namespace
}  // namespace megatron::eval
