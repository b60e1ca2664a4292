#include "generate/generate_job.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/output_file.hpp"
#include "core/progress_line.hpp"
#include "data/jsonl_records.hpp"

namespace megatron::generate {
namespace {

GenerateOptions options_of(const GenerateJob& job, const Engine& engine) {
  GenerateOptions o;
  o.max_tokens = job.max_tokens;
  o.sampling = job.sampling;
  o.seed = job.seed;
  if (!job.ignore_eod) {
    o.eod = engine.tokenizer.special_tokens().eod;
    o.end_tokens = engine.defaults.end_tokens;
  }
  o.stop = job.stop;
  o.logprobs = job.logprobs;
  return o;
}

std::vector<std::vector<int32_t>> tokenize(const GenerateJob& job,
                                           const std::vector<std::string>& texts,
                                           const data::Tokenizer& tokenizer,
                                           int64_t max_positions) {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> ids;
    if (job.add_bos) {
      const auto eod = tokenizer.special_tokens().eod;
      if (!eod)
        throw UserError("--add-bos: the tokenizer has no end-of-document token to start with");
      ids.push_back(*eod);
    }
    std::string prompt = texts[i];
    if (job.chat_template) {
      const std::vector<data::ChatMessage> turn = {{.role = data::ChatRole::User, .content = prompt}};
      prompt.clear();
      for (const data::SftSegment& s : data::render_chat(turn, *job.chat_template, true).segments) {
        prompt += s.text;
      }
    } else {
      const std::vector<int32_t> start = tokenizer.prompt_start();
      ids.insert(ids.end(), start.begin(), start.end());
    }
    const std::vector<int32_t> text = tokenizer.encode(prompt);
    ids.insert(ids.end(), text.begin(), text.end());
    const std::string which = job.prompts.empty() ? "the prompt" : fmt::format("prompt {}", i + 1);
    if (ids.empty())
      throw UserError(which +
                      " is empty: give some text, or --add-bos to start from end-of-document");
    if (int64_t(ids.size()) >= max_positions) {
      throw UserError(
          fmt::format("{} has {} tokens; the model reads {} positions, so at most {} "
                      "tokens of prompt fit",
                      which, ids.size(), max_positions, max_positions - 1));
    }
    out.push_back(std::move(ids));
  }
  return out;
}

// One prompt: its text, then the continuation as it grows.
void stream_one(const GenerateJob& job, const std::string& text,
                const std::vector<std::vector<int32_t>>& prompts, const Engine& engine,
                const GenerateOptions& options, bool rank0, GenerateStats& stats) {
  size_t printed = 0;
  if (rank0) std::cout << text << std::flush;
  const OnText stream = [&](size_t, const std::string& grown) {
    if (!rank0 || grown.size() < printed) return;
    const size_t ready = grown.size() - unfinished_utf8(grown);
    if (ready > printed) {
      std::cout << grown.substr(printed, ready - printed) << std::flush;
      printed = ready;
    }
  };
  const auto out = generate(engine, prompts, options, stream, &stats);
  if (!rank0) return;
  if (out[0].text.size() > printed) std::cout << out[0].text.substr(printed);
  std::cout << "\n" << std::flush;
  if (job.logprobs) {
    double sum = 0.0;
    for (size_t i = size_t(out[0].prompt_tokens) - 1; i < out[0].logprobs.size(); ++i)
      sum += out[0].logprobs[i];
    spdlog::info("log-probability of the continuation: {:.4f}", sum);
  }
}

// A file of prompts, a batch at a time: one jsonl line per prompt, into the user's output
// (core/output_file.hpp: a file is replaced when complete, so that a failed run leaves no half
// file under the real one; a FIFO or /dev/stdout is written through).
void answer_file(const GenerateJob& job, const std::vector<std::string>& texts,
                 const std::vector<std::vector<int32_t>>& prompts, const Engine& engine,
                 const GenerateOptions& options, bool rank0, GenerateStats& stats) {
  std::optional<OutputFile> file;
  if (rank0 && !job.output.empty()) file.emplace(job.output);
  std::ostream& out = file ? file->stream() : std::cout;
  const auto started = std::chrono::steady_clock::now();
  ProgressLine line;
  for (size_t first = 0; first < prompts.size(); first += size_t(job.batch_size)) {
    const size_t end = std::min(prompts.size(), first + size_t(job.batch_size));
    const std::vector<std::vector<int32_t>> batch(prompts.begin() + ptrdiff_t(first),
                                                  prompts.begin() + ptrdiff_t(end));
    GenerateOptions o = options;
    o.seed = options.seed + first;  // each batch its own draws, the same on a rerun
    const auto results = generate(engine, batch, o, {}, &stats);
    if (!rank0) continue;
    for (size_t i = 0; i < results.size(); ++i) {
      const Generated& g = results[i];
      nlohmann::json record{
          {"prompt", texts[first + i]},
          {"text", g.text},
          {"tokens", std::vector<int32_t>(g.tokens.begin() + g.prompt_tokens, g.tokens.end())},
          {"finish_reason", g.finish_reason}};
      if (job.logprobs) record["logprobs"] = g.logprobs;
      out << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    out.flush();
    line.count("generated", int64_t(end), int64_t(prompts.size()), "prompts",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  if (file) file->commit();
}

}  // namespace

size_t unfinished_utf8(std::string_view text) {
  for (size_t back = 1; back <= std::min<size_t>(3, text.size()); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) != 0x80) {  // a lead byte (or ASCII): does its sequence fit?
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      return need > back ? back : 0;
    }
  }
  return 0;
}

std::vector<std::string> read_prompts(const GenerateJob& job) {
  if (job.prompt.empty() == job.prompts.empty() && !(job.add_bos && job.prompts.empty())) {
    throw UserError("give one of --prompt TEXT and --prompts FILE.jsonl");
  }
  refuse_same_file("--output", job.output, "--prompts", job.prompts);
  std::vector<std::string> out;
  if (job.prompts.empty()) {
    out.push_back(job.prompt);
  } else {
    data::for_each_record(
        job.prompts, "the prompts file", [&](const nlohmann::json& record, int64_t line) {
          const nlohmann::json& value =
              data::field_of(record, job.field, job.prompts, line, "name another with --field");
          out.push_back(data::string_of(value, job.field, job.prompts, line));
        });
    if (out.empty()) throw UserError(job.prompts + ": no prompts (one JSON object per line)");
  }
  if (!job.output.empty() && std::filesystem::path(job.output).has_parent_path()) {
    prepare_output_dir("--output", std::filesystem::path(job.output).parent_path().string());
  }
  return out;
}

void generate_text(const GenerateJob& job, const std::vector<std::string>& texts,
                   const Engine& engine, bool rank0, const std::string& description) {
  const GenerateOptions options = options_of(job, engine);
  const std::vector<std::vector<int32_t>> prompts =
      tokenize(job, texts, engine.tokenizer, engine.max_positions);
  spdlog::info("megatron generate {}", description);
  spdlog::info("{} prompt{}, up to {} tokens each, {}, seed {}", prompts.size(),
               prompts.size() == 1 ? "" : "s", job.max_tokens,
               options.sampling.greedy()
                   ? std::string("greedy")
                   : fmt::format("temperature {}, top-k {}, top-p {}", options.sampling.temperature,
                                 options.sampling.top_k, options.sampling.top_p),
               job.seed);
  GenerateStats stats;
  if (job.prompts.empty()) {
    stream_one(job, texts[0], prompts, engine, options, rank0, stats);
  } else {
    answer_file(job, texts, prompts, engine, options, rank0, stats);
  }
  spdlog::info("KV cache: {} bytes on this rank for {} sequence{} of {} positions",
               stats.kv_cache_bytes, stats.kv_cache_sequences,
               stats.kv_cache_sequences == 1 ? "" : "s", stats.kv_cache_positions);
  spdlog::info(
      "prefill {} tokens in {:.2f} s ({:.0f} tokens/s); decode {} tokens in {} steps, "
      "{:.2f} s ({:.1f} tokens/s){}",
      stats.prefill_tokens, stats.prefill_s,
      double(stats.prefill_tokens) / std::max(stats.prefill_s, 1e-9), stats.decode_tokens,
      stats.decode_steps, stats.decode_s,
      double(stats.decode_tokens) / std::max(stats.decode_s, 1e-9),
      job.output.empty() ? "" : "; results in " + job.output);
}

}  // namespace megatron::generate
