#include "eval/task_data.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/indexed_dataset.hpp"
#include "data/jsonl_records.hpp"
#include "data/token_ids.hpp"

namespace megatron::eval {
namespace {

bool is_jsonl(const std::string& path) {
  return path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
}

std::ifstream open(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot read the task file", path));
  return in;
}

void for_each_line(const std::string& path,
                   const std::function<void(const nlohmann::json&, int64_t)>& each) {
  data::for_each_record(path, "the task file", each);
}

const nlohmann::json& field_of(const nlohmann::json& j, const std::string& field,
                               const std::string& path, int64_t line) {
  return data::field_of(j, field, path, line, "name another with the task's field options");
}

std::string text_of(const nlohmann::json& v, const std::string& field, const std::string& path,
                    int64_t line) {
  return data::string_of(v, field, path, line);
}

}  // namespace

std::vector<std::string> read_documents(const std::string& path, const std::string& field) {
  std::vector<std::string> docs;
  if (!is_jsonl(path)) {
    std::ifstream in = open(path);
    std::stringstream text;
    text << in.rdbuf();
    docs.push_back(text.str());
    return docs;
  }
  for_each_line(path, [&](const nlohmann::json& j, int64_t line) {
    docs.push_back(text_of(field_of(j, field, path, line), field, path, line));
  });
  if (docs.empty()) throw UserError(fmt::format("{}: no documents", path));
  return docs;
}

std::vector<Choice> read_choices(const std::string& path, const ChoiceFields& f) {
  std::vector<Choice> out;
  for_each_line(path, [&](const nlohmann::json& j, int64_t line) {
    Choice c{.context = text_of(field_of(j, f.context, path, line), f.context, path, line)};
    const nlohmann::json& choices = field_of(j, f.choices, path, line);
    if (!choices.is_array() || choices.empty()) {
      throw UserError(fmt::format("{}:{}: field \"{}\" must be a non-empty list of strings", path,
                                  line, printable(f.choices)));
    }
    for (const auto& v : choices) c.choices.push_back(text_of(v, f.choices, path, line));
    const nlohmann::json& gold = field_of(j, f.gold, path, line);
    if (gold.is_number_integer()) {
      c.gold = gold.get<int64_t>();
    } else if (gold.is_string()) {
      const auto it = std::find(c.choices.begin(), c.choices.end(), gold.get<std::string>());
      c.gold = it == c.choices.end() ? -1 : int64_t(it - c.choices.begin());
    } else {
      c.gold = -1;
    }
    if (c.gold < 0 || c.gold >= int64_t(c.choices.size())) {
      throw UserError(fmt::format("{}:{}: field \"{}\" = {} is not one of the {} choices (an index "
                                  "from 0, or a choice's text)",
                                  path, line, printable(f.gold), printable(gold.dump()),
                                  c.choices.size()));
    }
    out.push_back(std::move(c));
  });
  if (out.empty()) throw UserError(fmt::format("{}: no questions", path));
  return out;
}

std::vector<GenerationExample> read_generation(const std::string& path, const std::string& prompt_field,
                                               const std::string& answer_field) {
  std::vector<GenerationExample> out;
  for_each_line(path, [&](const nlohmann::json& j, int64_t line) {
    GenerationExample e{.prompt = text_of(field_of(j, prompt_field, path, line), prompt_field, path, line)};
    const nlohmann::json& answer = field_of(j, answer_field, path, line);
    if (answer.is_array()) {
      for (const auto& v : answer) e.references.push_back(text_of(v, answer_field, path, line));
    } else {
      e.references.push_back(text_of(answer, answer_field, path, line));
    }
    if (e.references.empty()) {
      throw UserError(fmt::format("{}:{}: field \"{}\" must be a string or a non-empty list of strings",
                                  path, line, printable(answer_field)));
    }
    out.push_back(std::move(e));
  });
  if (out.empty()) throw UserError(fmt::format("{}: no prompts", path));
  return out;
}

std::optional<std::string> indexed_dataset_prefix(const std::string& path) {
  std::string prefix = path;
  for (const char* ext : {".bin", ".idx"}) {
    if (prefix.ends_with(ext)) prefix.resize(prefix.size() - 4);
  }
  std::error_code ec;
  if (std::filesystem::is_regular_file(prefix + ".bin", ec) &&
      std::filesystem::is_regular_file(prefix + ".idx", ec)) {
    return prefix;
  }
  return std::nullopt;
}

std::vector<std::vector<int32_t>> read_token_documents(const std::string& prefix, int64_t vocab_size) {
  const data::IndexedDataset dataset(prefix);
  data::check_token_ids(dataset, vocab_size);
  const auto bounds = dataset.document_indices();
  std::vector<std::vector<int32_t>> out;
  for (int64_t d = 0; d < dataset.documents(); ++d) {
    std::vector<int32_t> doc;
    for (int64_t i = bounds[size_t(d)]; i < bounds[size_t(d) + 1]; ++i) {
      const std::vector<int32_t> part = dataset.tokens(i);
      doc.insert(doc.end(), part.begin(), part.end());
    }
    if (!doc.empty()) out.push_back(std::move(doc));
  }
  return out;
}

}  // namespace megatron::eval
