// Chat templates rendered natively exactly as transformers' apply_chat_template renders the real
// Jinja templates (tests/data/chat_templates/expected.jsonl, made by
// scripts/fixtures/make_chat_templates.py with transformers 5.25 from the templates in
// tests/data/hf_tokenizers); each template recognised from its source; what is scored in
// training; and a tokenizer directory's template found and refused as a user would see it.
#include "data/chat_template.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(MEGATRON_SOURCE_DIR) / "tests/data";

const std::map<std::string, ChatTemplate> kFixtureTemplate = {
    {"real_qwen2_5", ChatTemplate::Qwen25},
    {"real_qwen3", ChatTemplate::Qwen3},
    {"real_deepseek_r1", ChatTemplate::DeepSeekR1},
    {"mistral_v1", ChatTemplate::MistralV1},
    {"mistral_v3", ChatTemplate::MistralV3}};

std::vector<ChatMessage> messages_of(const nlohmann::json& j) {
  std::vector<ChatMessage> out;
  for (const auto& m : j) {
    const std::string role = m["role"];
    out.push_back({.role = role == "system" ? ChatRole::System
                           : role == "user" ? ChatRole::User
                                            : ChatRole::Assistant,
                   .content = m["content"]});
  }
  return out;
}

std::string text_of(const SftExample& e) {
  std::string out;
  for (const SftSegment& s : e.segments) out += s.text;
  return out;
}

// The real tokenizers' templates from their tokenizer_config.json; Mistral's as mistral-common
// generates them.
std::string template_source(const std::string& fixture) {
  if (fixture.starts_with("mistral_")) {
    std::ifstream in(kFixtures / "chat_templates" / (fixture + ".jinja"), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::ifstream in(kFixtures / "hf_tokenizers" / fixture / "tokenizer_config.json");
  return nlohmann::json::parse(in)["chat_template"];
}

TEST(ChatTemplate, RendersEveryConversationAsTransformersDoesWithTheRealTemplates) {
  std::ifstream in(kFixtures / "chat_templates" / "expected.jsonl");
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    const ChatTemplate t = kFixtureTemplate.at(j["template"]);
    const std::vector<ChatMessage> messages = messages_of(j["messages"]);
    EXPECT_EQ(text_of(render_chat(messages, t, j["add_generation_prompt"])), j["text"].get<std::string>())
        << j["template"] << ": " << j["messages"].dump();
    ++checked;
  }
  EXPECT_EQ(checked, 55);
}

TEST(ChatTemplate, EachReleasedTemplateIsRecognisedFromItsSource) {
  for (const auto& [fixture, kind] : kFixtureTemplate) {
    const std::string source = template_source(fixture);
    EXPECT_EQ(recognise_chat_template(source), kind) << fixture;
    EXPECT_EQ(recognise_chat_template(source + "\n"), kind) << fixture << " with a final newline";
    EXPECT_EQ(recognise_chat_template(source.substr(1)), std::nullopt) << fixture << " altered";
  }
}

TEST(ChatTemplate, TrainingScoresWhatTheAssistantSaysAndHowItEndsItsTurnOnly) {
  const std::vector<ChatMessage> messages = {{ChatRole::System, "Be brief."},
                                             {ChatRole::User, "2 + 2?"},
                                             {ChatRole::Assistant, "4"}};
  const auto scored = [](const SftExample& e) {
    std::vector<std::string> out;
    for (const SftSegment& s : e.segments) {
      if (s.scored) out.push_back(s.text);
    }
    return out;
  };
  EXPECT_EQ(scored(render_chat(messages, ChatTemplate::Qwen25)), std::vector<std::string>{"4<|im_end|>"});
  // Qwen3's last assistant turn carries its (empty) think block, which the model learns to write.
  EXPECT_EQ(scored(render_chat(messages, ChatTemplate::Qwen3)),
            std::vector<std::string>{"<think>\n\n</think>\n\n4<|im_end|>"});
  EXPECT_EQ(scored(render_chat(messages, ChatTemplate::DeepSeekR1)),
            std::vector<std::string>{"4<｜end▁of▁sentence｜>"});
  // Mistral's: the space before the answer too, as SentencePiece spells it into the first piece.
  EXPECT_EQ(scored(render_chat(messages, ChatTemplate::MistralV3)), std::vector<std::string>{" 4</s>"});
}

TEST(ChatTemplate, MistralsRefuseWhatItsTemplateRaisesOn) {
  for (const ChatTemplate t : {ChatTemplate::MistralV1, ChatTemplate::MistralV3}) {
    const std::vector<ChatMessage> assistant_first = {{ChatRole::System, "s"}, {ChatRole::Assistant, "4"}};
    EXPECT_THROW(render_chat(assistant_first, t), UserError);
    const std::vector<ChatMessage> empty_answer = {{ChatRole::User, "2 + 2?"}, {ChatRole::Assistant, ""}};
    EXPECT_THROW(render_chat(empty_answer, t), UserError);
  }
}

TEST(ChatTemplate, NamesRoundTripAndAnUnknownOneIsRefusedWithTheList) {
  for (const std::string name :
       {"chatml", "plain", "qwen2.5", "qwen3", "deepseek-r1", "mistral-v1", "mistral-v3"}) {
    EXPECT_EQ(chat_template_name(*chat_template_named(name)), name);
  }
  try {
    chat_template_for("llama2", "");
    FAIL() << "accepted";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "chat template \"llama2\" is not one of chatml, plain, qwen2.5, qwen3, "
                           "deepseek-r1, mistral-v1, mistral-v3 (or auto: the tokenizer's own)");
  }
}

TEST(ChatTemplate, AutoReadsTheTokenizersTemplateFromEitherFileTransformersWrites) {
  test_support::TempDir dir;
  // transformers 4: tokenizer_config.json's chat_template.
  std::ofstream(dir.path() / "tokenizer_config.json")
      << nlohmann::json{{"chat_template", template_source("real_qwen3")}}.dump();
  EXPECT_EQ(chat_template_for("auto", dir.path() / "tokenizer.json"), ChatTemplate::Qwen3);
  // transformers 5: chat_template.jinja beside it, which wins.
  std::ofstream(dir.path() / "chat_template.jinja") << template_source("real_deepseek_r1");
  EXPECT_EQ(chat_template_for("auto", dir.path()), ChatTemplate::DeepSeekR1);
  // A named list: the default entry.
  fs::remove(dir.path() / "chat_template.jinja");
  std::ofstream(dir.path() / "tokenizer_config.json")
      << nlohmann::json{{"chat_template",
                         {{{"name", "tool_use"}, {"template", "x"}},
                          {{"name", "default"}, {"template", template_source("real_qwen2_5")}}}}}
             .dump();
  EXPECT_EQ(chat_template_for("auto", dir.path()), ChatTemplate::Qwen25);
}

TEST(ChatTemplate, AutoWithoutARecognisedTemplateIsOneLineNamingTheTokenizer) {
  test_support::TempDir dir;
  const auto refusal = [&] {
    try {
      chat_template_for("auto", dir.path());
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_THAT(refusal(), ::testing::HasSubstr("has no chat_template"));
  std::ofstream(dir.path() / "chat_template.jinja") << "{{ messages[0]['content'] }}";
  EXPECT_THAT(refusal(), ::testing::HasSubstr("is none that megatron renders (chatml, plain, qwen2.5, "
                                              "qwen3, deepseek-r1, mistral-v1, mistral-v3)"));
  std::ofstream(dir.path() / "tokenizer_config.json") << R"({"chat_template": 3})";
  fs::remove(dir.path() / "chat_template.jinja");
  EXPECT_THAT(refusal(), ::testing::HasSubstr("chat_template must be a string"));
}

}  // namespace
}  // namespace megatron::data
