#include "eval/tasks.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.hpp"
#include "eval/requests.hpp"

namespace megatron::eval {
namespace {

bool is_space(char c) { return std::string_view(" \t\n\r\v\f").find(c) != std::string_view::npos; }

// np.argmax: the first of the largest.
size_t argmax(const std::vector<double>& v) {
  return size_t(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

// The mean of 0/1 values and its standard error (sample standard deviation / sqrt(n)), as
// lm-evaluation-harness's mean_stderr.
Metric mean_metric(const std::string& name, const std::vector<double>& values) {
  const double n = double(values.size());
  double mean = 0.0;
  for (double v : values) mean += v;
  mean /= std::max(n, 1.0);
  double ss = 0.0;
  for (double v : values) ss += (v - mean) * (v - mean);
  const double sd = n > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
  return {.name = name, .value = mean, .std_error = n > 0 ? sd / std::sqrt(n) : 0.0};
}

int64_t code_points(const std::string& text) {
  int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

int64_t whitespace_split_pieces(const std::string& text) {
  int64_t runs = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (is_space(text[i]) && (i == 0 || !is_space(text[i - 1]))) ++runs;
  }
  return runs + 1;
}

int64_t space_split_pieces_of_stripped(const std::string& text) {
  size_t b = 0, e = text.size();
  while (b < e && is_space(text[b])) ++b;
  while (e > b && is_space(text[e - 1])) --e;
  return int64_t(std::count(text.begin() + std::ptrdiff_t(b), text.begin() + std::ptrdiff_t(e), ' ')) + 1;
}

PerplexityCorpus corpus_from_text(const std::vector<std::string>& documents,
                                  const data::Tokenizer& tokenizer) {
  PerplexityCorpus c;
  for (size_t d = 0; d < documents.size(); ++d) {
    c.documents.push_back(tokenizer.encode(documents[d]));
    c.texts.push_back(documents[d]);
    c.stream_text += (d == 0 ? "" : "\n") + documents[d];
  }
  c.stream = tokenizer.encode(c.stream_text);
  return c;
}

PerplexityCorpus corpus_from_tokens(std::vector<std::vector<int32_t>> documents,
                                    const data::Tokenizer& tokenizer) {
  PerplexityCorpus c;
  const std::optional<int32_t> eod = tokenizer.special_tokens().eod;
  for (std::vector<int32_t>& doc : documents) {
    c.stream.insert(c.stream.end(), doc.begin(), doc.end());
    if (eod && !doc.empty() && doc.back() == *eod) doc.pop_back();
    if (doc.empty()) continue;
    c.texts.push_back(tokenizer.decode(doc));
    c.stream_text += (c.documents.empty() ? "" : "\n") + c.texts.back();
    c.documents.push_back(std::move(doc));
  }
  return c;
}

TaskResult perplexity_task(const PerplexityCorpus& c, const TaskSetup& s, int64_t stride,
                           Windows which) {
  const bool rolling = which != Windows::Megatron, megatron = which != Windows::Rolling;
  // lm-evaluation-harness: each document on its own, rolling windows.
  std::vector<Request> requests;
  std::vector<size_t> doc_of;
  for (size_t d = 0; rolling && d < c.documents.size(); ++d) {
    for (Request& r : rolling_windows(c.documents[d], s.prefix_token, s.max_length)) {
      requests.push_back(std::move(r));
      doc_of.push_back(d);
    }
  }
  // Megatron: the corpus as one stream, overlapping windows.
  const std::vector<Request> windows =
      megatron ? overlapping_windows(c.stream, s.max_length, stride > 0 ? stride : s.max_length)
               : std::vector<Request>{};
  std::vector<Request> all = requests;
  all.insert(all.end(), windows.begin(), windows.end());
  if (all.empty()) throw UserError("the perplexity corpus holds no tokens to score");
  const std::vector<Score> scores = s.score(all, false);

  double ll = 0.0, words = 0.0, bytes = 0.0;
  for (size_t i = 0; i < requests.size(); ++i) ll += scores[i].logprob;
  for (const std::string& doc : c.texts) {
    words += double(whitespace_split_pieces(doc));
    bytes += double(doc.size());
  }
  double window_loss = 0.0;
  for (size_t i = requests.size(); i < scores.size(); ++i) window_loss -= scores[i].logprob;
  const double targets = double(std::max<int64_t>(int64_t(c.stream.size()) - 1, 1));
  const double val_loss = window_loss / targets;
  const double original = double(space_split_pieces_of_stripped(c.stream_text));
  const double token_ratio = targets / std::max(original - 1.0, 1.0);
  TaskResult r{.task = "perplexity", .samples = int64_t(c.documents.size())};
  if (rolling) {
    r.scores.assign(c.documents.size(), {Score{.greedy = false}});
    for (size_t i = 0; i < requests.size(); ++i) {
      r.scores[doc_of[i]][0].logprob += scores[i].logprob;
      r.scores[doc_of[i]][0].tokens += scores[i].tokens;
    }
    r.metrics = {
        {.name = "word_perplexity", .value = std::exp(-ll / words), .higher_is_better = false},
        {.name = "byte_perplexity", .value = std::exp(-ll / bytes), .higher_is_better = false},
        {.name = "bits_per_byte", .value = -ll / bytes / std::numbers::ln2, .higher_is_better = false}};
  }
  if (megatron) {
    r.metrics.insert(
        r.metrics.end(),
        {{.name = "megatron_lm_loss", .value = val_loss, .higher_is_better = false},
         {.name = "megatron_ppl", .value = std::exp(std::min(20.0, val_loss)), .higher_is_better = false},
         {.name = "megatron_adjusted_ppl", .value = std::exp(std::min(20.0, val_loss * token_ratio)),
          .higher_is_better = false},
         {.name = "megatron_token_ratio", .value = token_ratio, .higher_is_better = false}});
  }
  return r;
}

TaskResult cloze_task(const std::vector<std::string>& documents, const TaskSetup& s) {
  std::vector<Request> requests;
  for (const std::string& text : documents) {
    // lm-evaluation-harness's lambada: the last space-separated word after the others.
    const size_t cut = text.rfind(' ');
    if (cut == std::string::npos) {
      throw UserError("a cloze text needs at least two words: \"" + text.substr(0, 60) + "\"");
    }
    requests.push_back(encode_pair(s.tokenizer, text.substr(0, cut), text.substr(cut), s.prefix_token));
    // Megatron's non-strict LAMBADA: the text's last token after all the others.
    std::vector<int32_t> tokens = s.tokenizer.encode(text);
    if (tokens.size() < 2) throw UserError("a cloze text needs two tokens: \"" + text + "\"");
    const int32_t last = tokens.back();
    tokens.pop_back();
    requests.push_back({.context = std::move(tokens), .continuation = {last}});
  }
  const std::vector<Score> scores = s.score(requests, true);
  std::vector<double> strict, last_token;
  double ll = 0.0;
  for (size_t d = 0; d < documents.size(); ++d) {
    const Score& word = scores[2 * d];
    ll += word.logprob;
    strict.push_back(word.greedy ? 1.0 : 0.0);
    last_token.push_back(scores[2 * d + 1].greedy ? 1.0 : 0.0);
  }
  TaskResult r{.task = "cloze", .samples = int64_t(documents.size())};
  for (size_t d = 0; d < documents.size(); ++d) r.scores.push_back({scores[2 * d]});
  r.metrics = {{.name = "perplexity", .value = std::exp(-ll / double(documents.size())),
                .higher_is_better = false},
               mean_metric("acc", strict), mean_metric("acc_last_token", last_token)};
  return r;
}

TaskResult multiple_choice_task(const std::vector<Choice>& questions, const TaskSetup& s,
                                const FewShot& fewshot) {
  std::vector<Request> requests;
  for (const Choice& q : questions) {
    const std::string context = fewshot_context(fewshot, q);
    for (const std::string& choice : q.choices) {
      requests.push_back(encode_pair(s.tokenizer, context, " " + choice, s.prefix_token));
      if (requests.back().continuation.empty()) {
        throw UserError("a choice encodes to no tokens: \"" + choice + "\"");
      }
    }
  }
  const std::vector<Score> scores = s.score(requests, true);
  std::vector<double> acc, acc_norm, acc_bytes;
  std::vector<std::vector<Score>> per_question;
  size_t next = 0;
  for (const Choice& q : questions) {
    std::vector<double> ll, by_chars, by_bytes;
    per_question.emplace_back(scores.begin() + std::ptrdiff_t(next),
                              scores.begin() + std::ptrdiff_t(next + q.choices.size()));
    for (const std::string& choice : q.choices) {
      const double l = scores[next++].logprob;
      ll.push_back(l);
      by_chars.push_back(l / double(std::max<int64_t>(code_points(choice), 1)));
      by_bytes.push_back(l / double(std::max<size_t>(choice.size(), 1)));
    }
    acc.push_back(int64_t(argmax(ll)) == q.gold ? 1.0 : 0.0);
    acc_norm.push_back(int64_t(argmax(by_chars)) == q.gold ? 1.0 : 0.0);
    acc_bytes.push_back(int64_t(argmax(by_bytes)) == q.gold ? 1.0 : 0.0);
  }
  TaskResult r{.task = "multiple_choice", .samples = int64_t(questions.size()),
               .scores = std::move(per_question)};
  r.metrics = {mean_metric("acc", acc), mean_metric("acc_norm", acc_norm),
               mean_metric("acc_bytes", acc_bytes)};
  return r;
}

}  // namespace megatron::eval
