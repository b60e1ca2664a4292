#include "data/chat_template.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "core/error.hpp"
#include "core/fnv1a.hpp"
#include "core/printable.hpp"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;

struct Named {
  ChatTemplate kind;
  std::string_view name;
};
constexpr std::array<Named, 7> kNames{{{ChatTemplate::ChatMl, "chatml"},
                                       {ChatTemplate::Plain, "plain"},
                                       {ChatTemplate::Qwen25, "qwen2.5"},
                                       {ChatTemplate::Qwen3, "qwen3"},
                                       {ChatTemplate::DeepSeekR1, "deepseek-r1"},
                                       {ChatTemplate::MistralV1, "mistral-v1"},
                                       {ChatTemplate::MistralV3, "mistral-v3"}}};

// The released templates, by the FNV-1a hash of their Jinja source (trailing whitespace left
// out, as files differ in their final newline): Qwen2.5's (every Qwen2.5 instruct model), Qwen3's,
// and DeepSeek-R1's (tests/data/hf_tokenizers holds each), and Mistral's v1 and v3 as
// mistral-common 1.13.1 generates them (tests/data/chat_templates holds them).
struct Known {
  uint64_t hash;
  ChatTemplate kind;
};
constexpr std::array<Known, 5> kKnown{{{0xe642ce246d7f2e3dULL, ChatTemplate::Qwen25},
                                       {0x2bfdb7aa9754484eULL, ChatTemplate::Qwen3},
                                       {0x4526f885d718fa95ULL, ChatTemplate::DeepSeekR1},
                                       {0xf696b3be9c734484ULL, ChatTemplate::MistralV1},
                                       {0xa75f0f6368b303a9ULL, ChatTemplate::MistralV3}}};

// Appends a segment, merged into the last one when both have the same flag.
void append(SftExample& example, std::string text, bool scored) {
  if (text.empty()) return;
  if (!example.segments.empty() && example.segments.back().scored == scored) {
    example.segments.back().text += text;
  } else {
    example.segments.push_back({.text = std::move(text), .scored = scored});
  }
}

const char* role_name(ChatRole role) {
  switch (role) {
    case ChatRole::System: return "system";
    case ChatRole::User: return "user";
    case ChatRole::Assistant: return "assistant";
  }
  return "user";
}

const char* plain_prefix(ChatRole role) {
  switch (role) {
    case ChatRole::System: return "System: ";
    case ChatRole::User: return "User: ";
    case ChatRole::Assistant: return "Assistant: ";
  }
  return "User: ";
}

// Python's str.lstrip / rstrip / strip of newlines only, as the templates call them.
std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// The "<|im_start|>{role}\n{content}<|im_end|>\n" turns of the ChatML family; an assistant's
// `said` (what it writes after its header) and the end of its turn are scored.
void chatml_turn(SftExample& out, ChatRole role, std::string_view said) {
  append(out, fmt::format("<|im_start|>{}\n", role_name(role)), false);
  const bool scored = role == ChatRole::Assistant;
  append(out, std::string(said) + "<|im_end|>", scored);
  append(out, "\n", false);
}

// Qwen3's split of an assistant turn into its answer and its reasoning: after the last
// "</think>" (leading newlines dropped), and between the last "<think>" and the first "</think>".
struct Reasoned {
  std::string_view content;
  std::string_view reasoning;
};
Reasoned split_reasoning(std::string_view content) {
  const size_t last = content.rfind("</think>");
  if (last == std::string_view::npos) return {content, {}};
  std::string_view before = rstrip_newlines(content.substr(0, content.find("</think>")));
  const size_t open = before.rfind("<think>");
  if (open != std::string_view::npos) before = before.substr(open + 7);
  return {lstrip_newlines(content.substr(last + 8)), lstrip_newlines(before)};
}

void render_qwen3(SftExample& out, std::span<const ChatMessage> messages) {
  const size_t n = messages.size();
  if (n > 0 && messages[0].role == ChatRole::System) {
    append(out, "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n", false);
  }
  // The last user turn that is not a tool's response.
  size_t last_query = n - 1;
  for (size_t i = n; i-- > 0;) {
    const std::string& c = messages[i].content;
    const bool tool_response = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
    if (messages[i].role == ChatRole::User && !tool_response) {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != ChatRole::Assistant) {
      if (m.role == ChatRole::User || i > 0) chatml_turn(out, m.role, m.content);
      continue;
    }
    const Reasoned r = split_reasoning(m.content);
    // After the last user turn, the last turn and any turn with reasoning keep a think block.
    if (i > last_query && (i + 1 == n || !r.reasoning.empty())) {
      chatml_turn(out, m.role, fmt::format("<think>\n{}\n</think>\n\n{}",
                                           rstrip_newlines(lstrip_newlines(r.reasoning)),
                                           lstrip_newlines(r.content)));
    } else {
      chatml_turn(out, m.role, r.content);
    }
  }
}

void render_deepseek(SftExample& out, std::span<const ChatMessage> messages) {
  std::string system;
  bool first = true;
  for (const ChatMessage& m : messages) {
    if (m.role != ChatRole::System) continue;
    if (!first) system += "\n\n";
    system += m.content;
    first = false;
  }
  append(out, "<｜begin▁of▁sentence｜>" + system, false);
  for (const ChatMessage& m : messages) {
    if (m.role == ChatRole::User) {
      append(out, "<｜User｜>" + m.content, false);
    } else if (m.role == ChatRole::Assistant) {
      std::string_view content = m.content;
      if (const size_t at = content.rfind("</think>"); at != std::string_view::npos) {
        content = content.substr(at + 8);
      }
      append(out, "<｜Assistant｜>", false);
      append(out, std::string(content) + "<｜end▁of▁sentence｜>", true);
    }
  }
}

// Mistral's: the system turns (joined by blank lines) apart, then the rest with turns of one role
// in a row joined by blank lines, which must start with a user turn and alternate.
void render_mistral(SftExample& out, std::span<const ChatMessage> messages, bool v3) {
  std::string system;
  bool any_system = false;
  std::vector<ChatMessage> turns;
  for (const ChatMessage& m : messages) {
    if (m.role == ChatRole::System) {
      system += (any_system ? "\n\n" : "") + m.content;
      any_system = true;
    } else if (!turns.empty() && turns.back().role == m.role) {
      turns.back().content += "\n\n" + m.content;
    } else {
      turns.push_back(m);
    }
  }
  if (!turns.empty() && turns.front().role != ChatRole::User) {
    throw UserError(fmt::format("chat template mistral-v{}: a conversation starts with a user turn "
                                "(after any system turns)",
                                v3 ? 3 : 1));
  }
  size_t last_user = 0;
  for (size_t i = 0; i < turns.size(); ++i) {
    if (turns[i].role == ChatRole::User) last_user = i;
  }
  append(out, "<s>", false);
  for (size_t i = 0; i < turns.size(); ++i) {
    const ChatMessage& m = turns[i];
    if (m.role == ChatRole::User) {
      const bool with_system = !system.empty() && i == (v3 ? last_user : 0);
      append(out,
             fmt::format("{}[INST] {}{}{}[/INST]", v3 ? "" : " ", with_system ? system + "\n\n" : "",
                         m.content, v3 ? "" : " "),
             false);
    } else {
      if (m.content.empty()) {
        throw UserError(fmt::format("chat template mistral-v{}: an assistant turn is empty", v3 ? 3 : 1));
      }
      append(out, " " + m.content + "</s>", true);
    }
  }
}

std::string read_text(const fs::path& path, const char* what) {
  std::error_code ec;
  if (const auto size = fs::file_size(path, ec); !ec && size > (uintmax_t(1) << 24)) {
    throw UserError(fmt::format("{}: {} bytes is too large for {}", path.string(), size, what));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("cannot read {}", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string_view chat_template_name(ChatTemplate t) {
  for (const Named& n : kNames) {
    if (n.kind == t) return n.name;
  }
  return "chatml";
}

std::optional<ChatTemplate> chat_template_named(std::string_view name) {
  for (const Named& n : kNames) {
    if (n.name == name) return n.kind;
  }
  return std::nullopt;
}

std::string chat_template_names() {
  std::string out;
  for (const Named& n : kNames) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

SftExample render_chat(std::span<const ChatMessage> messages, ChatTemplate chat_template,
                       bool add_generation_prompt) {
  SftExample out;
  switch (chat_template) {
    case ChatTemplate::ChatMl:
      for (const ChatMessage& m : messages) chatml_turn(out, m.role, m.content);
      if (add_generation_prompt) append(out, "<|im_start|>assistant\n", false);
      break;
    case ChatTemplate::Plain:
      for (const ChatMessage& m : messages) {
        append(out, plain_prefix(m.role), false);
        append(out, m.content + "\n", m.role == ChatRole::Assistant);
      }
      if (add_generation_prompt) append(out, plain_prefix(ChatRole::Assistant), false);
      break;
    case ChatTemplate::Qwen25: {
      const bool own_system = !messages.empty() && messages[0].role == ChatRole::System;
      append(out,
             "<|im_start|>system\n" +
                 (own_system ? messages[0].content
                             : std::string("You are Qwen, created by Alibaba Cloud. You are a "
                                           "helpful assistant.")) +
                 "<|im_end|>\n",
             false);
      for (size_t i = own_system ? 1 : 0; i < messages.size(); ++i) {
        chatml_turn(out, messages[i].role, messages[i].content);
      }
      if (add_generation_prompt) append(out, "<|im_start|>assistant\n", false);
      break;
    }
    case ChatTemplate::Qwen3:
      render_qwen3(out, messages);
      if (add_generation_prompt) append(out, "<|im_start|>assistant\n", false);
      break;
    case ChatTemplate::DeepSeekR1:
      render_deepseek(out, messages);
      if (add_generation_prompt) append(out, "<｜Assistant｜><think>\n", false);
      break;
    case ChatTemplate::MistralV1:
    case ChatTemplate::MistralV3:
      // A user turn ends in [/INST], which is the generation prompt already.
      render_mistral(out, messages, chat_template == ChatTemplate::MistralV3);
      break;
  }
  return out;
}

std::string_view chat_turn_end(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::Plain: return "\n";
    case ChatTemplate::DeepSeekR1: return "<｜end▁of▁sentence｜>";
    case ChatTemplate::MistralV1:
    case ChatTemplate::MistralV3: return "</s>";
    default: return "<|im_end|>";
  }
}

std::optional<ChatTemplate> recognise_chat_template(std::string_view jinja) {
  while (!jinja.empty() && (jinja.back() == ' ' || jinja.back() == '\t' || jinja.back() == '\n' ||
                            jinja.back() == '\r')) {
    jinja.remove_suffix(1);
  }
  const uint64_t h = fnv1a64(jinja);
  for (const Known& k : kKnown) {
    if (k.hash == h) return k.kind;
  }
  return std::nullopt;
}

std::optional<std::string> read_hf_chat_template(const fs::path& tokenizer) {
  std::error_code ec;
  const fs::path dir = fs::is_directory(tokenizer, ec) ? tokenizer : tokenizer.parent_path();
  if (fs::exists(dir / "chat_template.jinja", ec)) {
    return read_text(dir / "chat_template.jinja", "a chat template");
  }
  const fs::path config = dir / "tokenizer_config.json";
  if (!fs::exists(config, ec)) return std::nullopt;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(config, "a tokenizer_config.json"));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: not valid JSON: {}", config.string(), printable(e.what(), 200)));
  }
  if (!j.is_object() || !j.contains("chat_template") || j["chat_template"].is_null()) return std::nullopt;
  const nlohmann::json& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const nlohmann::json& entry : t) {
      if (entry.is_object() && entry.value("name", nlohmann::json()) == "default" &&
          entry.contains("template") && entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
  }
  throw UserError(fmt::format("{}: chat_template must be a string, or a list holding one named "
                              "\"default\"",
                              config.string()));
}

ChatTemplate chat_template_for(std::string_view name, const fs::path& tokenizer) {
  if (name != "auto") {
    if (const auto t = chat_template_named(name)) return *t;
    throw UserError(fmt::format("chat template \"{}\" is not one of {} (or auto: the tokenizer's "
                                "own)",
                                printable(name), chat_template_names()));
  }
  const std::string where = tokenizer.empty() ? std::string("the recipe names no tokenizer file")
                                              : tokenizer.string();
  const std::optional<std::string> text = tokenizer.empty() ? std::nullopt
                                                            : read_hf_chat_template(tokenizer);
  if (!text) {
    throw UserError(fmt::format("chat template auto: {} has no chat_template (neither "
                                "chat_template.jinja nor tokenizer_config.json's); name one of {}",
                                where, chat_template_names()));
  }
  if (const auto t = recognise_chat_template(*text)) return *t;
  throw UserError(fmt::format("chat template auto: {}'s chat_template is none that megatron "
                              "renders ({}); name the one it follows, or convert the data with "
                              "transformers' apply_chat_template",
                              where, chat_template_names()));
}

}  // namespace megatron::data
