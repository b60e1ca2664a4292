// `megatron generate CHECKPOINT --prompt TEXT | --prompts FILE.jsonl [--max-tokens N]
// [--temperature T] [--top-k K] [--top-p P] [--seed S] [--stop STR]... [--nproc N]`: text
// from a checkpoint. One prompt streams its continuation to the terminal as it is produced; a
// file of prompts gives one jsonl line per prompt.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/generation_model.hpp"
#include "cli/limits.hpp"
#include "cli/sampling_flags.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/progress_line.hpp"
#include "data/jsonl_records.hpp"

namespace megatron::cli {
namespace {

struct GenerateArgs {
  ModelArgs model;
  std::string prompt;
  std::string prompts;
  std::string field = "prompt";
  std::string output;
  int64_t max_tokens = 64;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 0.0;
  bool greedy = false;
  uint64_t seed = 1234;
  std::vector<std::string> stop;
  bool ignore_eod = false;
  bool add_bos = false;
  bool logprobs = false;
  int64_t batch_size = 8;
};

// The end of `text` that is an unfinished UTF-8 character: held back until it is whole.
size_t unfinished_utf8(const std::string& text) {
  for (size_t back = 1; back <= std::min<size_t>(3, text.size()); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) != 0x80) {  // a lead byte (or ASCII): does its sequence fit?
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      return need > back ? back : 0;
    }
  }
  return 0;
}

generate::GenerateOptions options_of(const GenerateArgs& a, const data::Tokenizer& tokenizer) {
  check_sampling_flags(a.temperature, a.top_k, a.top_p);
  generate::GenerateOptions o;
  o.max_tokens = a.max_tokens;
  o.sampling = generate::sampling_for(a.temperature, a.greedy ? 1 : a.top_k, a.top_p);
  o.seed = a.seed;
  if (!a.ignore_eod) o.eod = tokenizer.special_tokens().eod;
  o.stop = a.stop;
  o.logprobs = a.logprobs;
  return o;
}

std::vector<std::string> read_prompts(const GenerateArgs& a) {
  if (a.prompt.empty() == a.prompts.empty() && !(a.add_bos && a.prompts.empty())) {
    throw UserError("give one of --prompt TEXT and --prompts FILE.jsonl");
  }
  if (a.prompts.empty()) return {a.prompt};
  std::vector<std::string> out;
  data::for_each_record(a.prompts, "the prompts file", [&](const nlohmann::json& record, int64_t line) {
    const nlohmann::json& value = data::field_of(record, a.field, a.prompts, line,
                                                 "name another with --field");
    out.push_back(data::string_of(value, a.field, a.prompts, line));
  });
  if (out.empty()) throw UserError(a.prompts + ": no prompts (one JSON object per line)");
  return out;
}

std::vector<std::vector<int32_t>> tokenize(const GenerateArgs& a, const std::vector<std::string>& texts,
                                           const data::Tokenizer& tokenizer, int64_t max_positions) {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> ids;
    if (a.add_bos) {
      const auto eod = tokenizer.special_tokens().eod;
      if (!eod) throw UserError("--add-bos: the tokenizer has no end-of-document token to start with");
      ids.push_back(*eod);
    }
    const std::vector<int32_t> text = tokenizer.encode(texts[i]);
    ids.insert(ids.end(), text.begin(), text.end());
    const std::string which = a.prompts.empty() ? "the prompt" : fmt::format("prompt {}", i + 1);
    if (ids.empty()) throw UserError(which + " is empty: give some text, or --add-bos to start from end-of-document");
    if (int64_t(ids.size()) >= max_positions) {
      throw UserError(fmt::format("{} has {} tokens; the model reads {} positions, so at most {} "
                                  "tokens of prompt fit",
                                  which, ids.size(), max_positions, max_positions - 1));
    }
    out.push_back(std::move(ids));
  }
  return out;
}

void run_generate(const GenerateArgs& a) {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> prompts;
  generate::GenerateOptions options;
  std::vector<std::filesystem::path> created;
  std::unique_ptr<GenerationModel> model;
  model = std::make_unique<GenerationModel>(a.model, [&] {
    // Checked on the launching process, before a job starts. The tokenizer is the model's.
    texts = read_prompts(a);
    if (!a.output.empty() && std::filesystem::path(a.output).has_parent_path()) {
      prepare_output_dir("--output", std::filesystem::path(a.output).parent_path().string());
    }
  });
  const generate::Engine engine = model->engine();
  options = options_of(a, model->tokenizer());
  prompts = tokenize(a, texts, model->tokenizer(), engine.max_positions);
  spdlog::info("megatron generate {}", model->description());
  spdlog::info("{} prompt{}, up to {} tokens each, {}, seed {}", prompts.size(),
               prompts.size() == 1 ? "" : "s", a.max_tokens,
               options.sampling.greedy()
                   ? std::string("greedy")
                   : fmt::format("temperature {}, top-k {}, top-p {}", options.sampling.temperature,
                                 options.sampling.top_k, options.sampling.top_p),
               a.seed);
  const bool rank0 = model->rank0();
  generate::GenerateStats stats;
  const auto started = std::chrono::steady_clock::now();

  if (a.prompts.empty()) {
    // One prompt: its text, then the continuation as it grows.
    size_t printed = 0;
    if (rank0) std::cout << texts[0] << std::flush;
    const generate::OnText stream = [&](size_t, const std::string& text) {
      if (!rank0 || text.size() < printed) return;
      const size_t ready = text.size() - unfinished_utf8(text);
      if (ready > printed) {
        std::cout << text.substr(printed, ready - printed) << std::flush;
        printed = ready;
      }
    };
    const auto out = generate::generate(engine, prompts, options, stream, &stats);
    if (rank0) {
      if (out[0].text.size() > printed) std::cout << out[0].text.substr(printed);
      std::cout << "\n" << std::flush;
      if (a.logprobs) {
        double sum = 0.0;
        for (size_t i = size_t(out[0].prompt_tokens) - 1; i < out[0].logprobs.size(); ++i) sum += out[0].logprobs[i];
        spdlog::info("log-probability of the continuation: {:.4f}", sum);
      }
    }
  } else {
    std::ofstream file;
    if (rank0 && !a.output.empty()) {
      file.open(a.output + ".tmp");
      if (!file) throw RuntimeFailure("cannot write " + a.output);
    }
    std::ostream& out = a.output.empty() ? std::cout : file;
    ProgressLine line;
    for (size_t first = 0; first < prompts.size(); first += size_t(a.batch_size)) {
      const size_t end = std::min(prompts.size(), first + size_t(a.batch_size));
      const std::vector<std::vector<int32_t>> batch(prompts.begin() + ptrdiff_t(first),
                                                    prompts.begin() + ptrdiff_t(end));
      generate::GenerateOptions o = options;
      o.seed = options.seed + first;  // each batch its own draws, the same on a rerun
      const auto results = generate::generate(engine, batch, o, {}, &stats);
      if (!rank0) continue;
      for (size_t i = 0; i < results.size(); ++i) {
        const generate::Generated& g = results[i];
        nlohmann::json record{{"prompt", texts[first + i]},
                              {"text", g.text},
                              {"tokens", std::vector<int32_t>(g.tokens.begin() + g.prompt_tokens, g.tokens.end())},
                              {"finish_reason", g.finish_reason}};
        if (a.logprobs) record["logprobs"] = g.logprobs;
        out << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      }
      out.flush();
      line.count("generated", int64_t(end), int64_t(prompts.size()), "prompts",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    if (rank0 && !a.output.empty()) {
      file.close();
      std::error_code ec;
      if (!file || (std::filesystem::rename(a.output + ".tmp", a.output, ec), ec)) {
        std::filesystem::remove(a.output + ".tmp", ec);
        throw RuntimeFailure("cannot write " + a.output);
      }
    }
  }
  spdlog::info("KV cache: {} bytes on this rank for {} sequence{} of {} positions",
               stats.kv_cache_bytes, stats.kv_cache_sequences, stats.kv_cache_sequences == 1 ? "" : "s",
               stats.kv_cache_positions);
  spdlog::info("prefill {} tokens in {:.2f} s ({:.0f} tokens/s); decode {} tokens in {} steps, "
               "{:.2f} s ({:.1f} tokens/s){}",
               stats.prefill_tokens, stats.prefill_s,
               double(stats.prefill_tokens) / std::max(stats.prefill_s, 1e-9), stats.decode_tokens,
               stats.decode_steps, stats.decode_s,
               double(stats.decode_tokens) / std::max(stats.decode_s, 1e-9),
               a.output.empty() ? "" : "; results in " + a.output);
}

}  // namespace

void add_generate_command(CLI::App& app, Actions& actions) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a checkpoint");
  args->model.add_to(cmd);
  cmd->add_option("--prompt", args->prompt, "The text to continue (streamed to the terminal)");
  cmd->add_option("--prompts", args->prompts, "A jsonl file of prompts, one object per line");
  cmd->add_option("--field", args->field, "--prompts: the field holding each prompt (default prompt)");
  cmd->add_option("--output", args->output, "--prompts: write the jsonl results here (default stdout)");
  cmd->add_option("--max-tokens,--tokens-to-generate", args->max_tokens,
                  "Tokens to generate per prompt at most (default 64)")
      ->check(whole_number(int64_t{1} << 20));
  cmd->add_option("--temperature", args->temperature, "Divides the logits before sampling (default 1; 0: greedy)");
  cmd->add_option("--top-k", args->top_k, "Sample from the k most likely tokens (0: all; 1: greedy)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  cmd->add_option("--top-p", args->top_p, "Sample from the smallest set of tokens with this much probability (0: off)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--greedy", args->greedy, "Always the most likely token (as --top-k 1)");
  cmd->add_option("--seed", args->seed, "Seeds the sampling: the same seed, the same text (default 1234)")
      ->check(whole_number_from_zero());
  cmd->add_option("--stop", args->stop, "Stop a sequence when its text contains this (repeatable)");
  cmd->add_flag("--ignore-eod", args->ignore_eod, "Keep generating past the end-of-document token");
  cmd->add_flag("--add-bos", args->add_bos, "Start each prompt with the end-of-document token (Megatron's add_BOS)");
  cmd->add_flag("--logprobs", args->logprobs, "Report log-probabilities (jsonl; the continuation's sum for --prompt)");
  cmd->add_option("--batch-size", args->batch_size, "--prompts: prompts generated together (default 8)")
      ->check(whole_number(1024));
  actions.emplace_back(cmd, [args] { run_generate(*args); });
}

}  // namespace megatron::cli
