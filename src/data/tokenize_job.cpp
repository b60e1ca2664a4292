#include "data/tokenize_job.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "data/line_reader.hpp"

namespace megatron::data {

void tokenize_jsonl(const TokenizeJob& job, const Tokenizer& tokenizer) {
  LineReader reader(job.input);
  std::ofstream file;
  if (!job.output.empty()) {
    file.open(job.output);
    if (!file) throw UserError("cannot write '" + job.output + "'");
  }
  std::ostream& out = job.output.empty() ? std::cout : file;
  std::string_view line;
  while (reader.next(line)) {
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    nlohmann::json in;
    try {
      in = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw UserError(fmt::format("{}:{}: not valid JSON", job.input, reader.line_number()));
    }
    if (!in.is_object() || !in.contains(job.key) || !in[job.key].is_string())
      throw UserError(
          fmt::format("{}:{}: no string under key '{}'", job.input, reader.line_number(), job.key));
    const auto ids = tokenizer.encode(in[job.key].get<std::string>());
    nlohmann::json row = {{"ids", ids}};
    if (job.show_tokens) {
      std::vector<std::string> tokens;
      for (auto id : ids) tokens.push_back(tokenizer.token_text(id));
      row["tokens"] = tokens;
    }
    // Replace, not throw: a token's text may be a fragment of a UTF-8 character.
    out << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}

}  // namespace megatron::data
