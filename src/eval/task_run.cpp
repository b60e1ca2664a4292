#include "eval/task_run.hpp"

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "eval/classify.hpp"
#include "eval/generation_task.hpp"

namespace megatron::eval {

Windows windows_named(const std::string& name) {
  return name == "rolling" ? Windows::Rolling : name == "megatron" ? Windows::Megatron : Windows::Both;
}

TaskSpec task_spec(const recipe::EvalTask& e) {
  TaskSpec s{.task = e.task, .data = e.data};
  if (e.field) s.field = *e.field;
  if (e.context_field) s.choice_fields.context = *e.context_field;
  if (e.choices_field) s.choice_fields.choices = *e.choices_field;
  if (e.gold_field) s.choice_fields.gold = *e.gold_field;
  if (e.stride) s.stride = *e.stride;
  if (e.windows) s.windows = windows_named(*e.windows);
  if (e.num_fewshot) s.num_fewshot = *e.num_fewshot;
  if (e.fewshot_data) s.fewshot_data = *e.fewshot_data;
  if (e.prompt_field) s.prompt_field = *e.prompt_field;
  if (e.answer_field) s.answer_field = *e.answer_field;
  if (e.metrics) s.metrics = metrics_named(*e.metrics);
  if (e.max_tokens) s.max_tokens = *e.max_tokens;
  return s;
}

std::vector<std::string> metrics_named(const std::string& names) {
  static const std::vector<std::string> known = {"exact_match", "f1", "bleu", "chrf"};
  std::vector<std::string> out;
  std::string::size_type begin = 0;
  while (begin <= names.size()) {
    const auto end = std::min(names.find(',', begin), names.size());
    const std::string name = names.substr(begin, end - begin);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw UserError("--metrics: '" + printable(name) + "' is not one of exact_match, f1, bleu, chrf "
                      "(a comma-separated list, e.g. bleu,chrf)");
    }
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    begin = end + 1;
  }
  return out;
}

int64_t TaskInput::samples() const {
  if (spec.task == "multiple-choice") return int64_t(questions.size());
  if (spec.task == "generation") return int64_t(generation.size());
  if (labelled) return int64_t(labelled->rows.size());
  return token_documents ? int64_t(token_documents->size()) : int64_t(documents.size());
}

TaskInput read_task_input(const TaskSpec& spec, const data::Tokenizer& tokenizer,
                          const recipe::FinetuneSection& ft) {
  if (spec.num_fewshot > 0 && spec.task != "multiple-choice") {
    throw UserError("--num-fewshot: few-shot prompts are for --task multiple-choice");
  }
  TaskInput in{.spec = spec, .fewshot = {.shots = spec.num_fewshot}};
  if (spec.task == "classification") {
    in.labelled = std::make_shared<const data::ClassificationSet>(
        ft.format == recipe::FinetuneFormat::Jsonl
            ? data::read_labelled_jsonl(spec.data,
                                        {.text = ft.text_field,
                                         .text_b = ft.text_b_field.value_or(""),
                                         .label = ft.label_field},
                                        ft.labels)
            : data::read_glue(spec.data, ft.format == recipe::FinetuneFormat::Mnli ? data::GlueTask::Mnli
                                                                                   : data::GlueTask::Qqp));
  } else if (spec.task == "generation") {
    in.generation = read_generation(spec.data, spec.prompt_field, spec.answer_field);
  } else if (spec.task == "multiple-choice") {
    in.questions = read_choices(spec.data, spec.choice_fields);
    if (spec.num_fewshot > 0) {
      std::error_code ec;
      in.fewshot.examples_are_the_task =
          spec.fewshot_data.empty() || std::filesystem::equivalent(spec.fewshot_data, spec.data, ec);
      in.fewshot.examples = in.fewshot.examples_are_the_task
                                ? in.questions
                                : read_choices(spec.fewshot_data, spec.choice_fields);
      // Too few examples is bad input too: refused before the model loads.
      if (!in.questions.empty()) (void)fewshot_context(in.fewshot, in.questions.front());
    }
  } else if (const auto prefix = spec.task == "perplexity" ? indexed_dataset_prefix(spec.data) : std::nullopt) {
    in.token_documents = read_token_documents(*prefix, tokenizer.vocab_size());
  } else {
    in.documents = read_documents(spec.data, spec.field);
  }
  return in;
}

TaskResult run_task(TaskInput in, const TaskSetup& setup) {
  TaskResult r;
  if (in.spec.task == "perplexity") {
    const PerplexityCorpus corpus = in.token_documents
                                        ? corpus_from_tokens(std::move(*in.token_documents), setup.tokenizer)
                                        : corpus_from_text(in.documents, setup.tokenizer);
    r = perplexity_task(corpus, setup, in.spec.stride, in.spec.windows);
  } else if (in.spec.task == "classification") {
    r = classification_metrics(*in.labelled, setup.classify(*in.labelled));
  } else if (in.spec.task == "generation") {
    r = generation_task(in.generation, in.spec.metrics, in.spec.max_tokens, setup);
  } else if (in.spec.task == "cloze") {
    r = cloze_task(in.documents, setup);
  } else {
    r = multiple_choice_task(in.questions, setup, in.fewshot);
  }
  r.data = in.spec.data;
  r.num_fewshot = in.spec.num_fewshot;
  return r;
}

}  // namespace megatron::eval
