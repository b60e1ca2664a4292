#include "data/preprocess.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/indexed_dataset.hpp"
#include "data/json_last_field.hpp"
#include "data/line_reader.hpp"
#include "data/sentence_splitter.hpp"
#include "data/worker_limit.hpp"

namespace megatron::data {
namespace {

// A run of input lines, the unit of work handed to a tokenizing worker.
struct Batch {
  int64_t sequence = 0;
  int64_t first_line = 0;
  std::vector<std::string> lines;
  uint64_t bytes_read_after = 0;  // input consumed once this batch was read (for progress)
};

struct Document {
  // Per JSON key: all token ids, and the lengths of its sentences (one unless pre-split).
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<int32_t>> sentence_lengths;
  std::string error;  // non-empty when the line was bad
  bool blank = false;  // an empty or all-whitespace line: not a document, not an error
};

struct Tokenized {
  int64_t first_line = 0;
  std::vector<Document> documents;
  uint64_t bytes_read_after = 0;
};

// The keys a line has, escaped and capped: they come from the corpus and go into an error line.
std::string describe_keys(simdjson::ondemand::object& object) {
  std::string keys;
  for (auto field : object) {
    std::string_view key;
    if (field.unescaped_key().get(key)) break;
    keys += (keys.empty() ? "" : ", ") + std::string(key);
    if (keys.size() > 200) break;
  }
  return keys.empty() ? "none" : printable(keys, 120);
}

// Tokenizes one JSON line; fills `doc.error` instead of throwing so that the writer can
// report the first bad line in input order.
void tokenize_line(const std::string& line, const PreprocessOptions& options,
                   const Tokenizer& tokenizer, simdjson::ondemand::parser& parser, Document& doc) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) {
    doc.blank = true;
    return;
  }
  doc.ids.assign(options.json_keys.size(), {});
  doc.sentence_lengths.assign(options.json_keys.size(), {});
  simdjson::padded_string padded(line);
  simdjson::ondemand::document json;
  simdjson::ondemand::object object;
  if (parser.iterate(padded).get(json) || json.get_object().get(object)) {
    doc.error = "not a JSON object";
    return;
  }
  const auto eod = tokenizer.special_tokens().eod;
  for (std::size_t k = 0; k < options.json_keys.size(); ++k) {
    const std::string& key = options.json_keys[k];
    simdjson::ondemand::value value;
    const auto status = find_last_field(object, key, value);
    if (status == simdjson::NO_SUCH_FIELD) {
      object.reset();
      doc.error = "no key '" + key + "' (keys: " + describe_keys(object) + ")";
      return;
    }
    if (status) {
      doc.error = std::string("not valid JSON: ") + simdjson::error_message(status);
      return;
    }
    // A document is a list of sentences: the whole text, the text split into sentences
    // (--split-sentences), or a JSON list of strings already split (Megatron's convention).
    std::vector<std::string> owned;
    std::vector<std::string_view> sentences;
    std::string_view text;
    simdjson::ondemand::array array;
    if (!value.get_string().get(text)) {
      if (options.split_sentences)
        sentences = split_sentences(text, options.keep_newlines);
      else
        sentences.push_back(text);
    } else if (!value.get_array().get(array)) {
      for (auto item : array) {
        std::string_view s;
        if (item.get_string().get(s)) {
          doc.error = "key '" + key + "' holds a list with a non-string item";
          return;
        }
        owned.emplace_back(s);
      }
      sentences.assign(owned.begin(), owned.end());
    } else {
      doc.error = "key '" + key + "' is not a string";
      return;
    }
    auto& ids = doc.ids[k];
    for (const auto& sentence_text : sentences) {
      const auto sentence = tokenizer.encode(sentence_text);
      if (sentence.empty()) continue;
      ids.insert(ids.end(), sentence.begin(), sentence.end());
      doc.sentence_lengths[k].push_back(static_cast<int32_t>(sentence.size()));
    }
    if (!ids.empty() && options.append_eod && eod) {
      ids.push_back(*eod);
      ++doc.sentence_lengths[k].back();
    }
  }
}

// Reader -> workers -> writer, with at most `capacity` batches in flight so memory stays
// bounded whatever the input size.
class Pipeline {
 public:
  Pipeline(const PreprocessOptions& options, const Tokenizer& tokenizer)
      : options_(options), tokenizer_(tokenizer), reader_(options.input),
        capacity_(2 * static_cast<std::size_t>(options.workers) + 2) {}

  template <class Consume>
  void run(Consume&& consume) {
    std::vector<std::thread> threads;
    try {
      threads.emplace_back([this] { guarded([this] { read_all(); }); });
      for (int w = 0; w < options_.workers; ++w)
        threads.emplace_back([this] { guarded([this] { work(); }); });
    } catch (const std::system_error& e) {
      // Out of threads: stop those started, so the writers' destructors can clean up.
      abort(std::make_exception_ptr(RuntimeFailure(fmt::format(
          "cannot start {} preprocess workers ({}); use fewer --workers", options_.workers,
          e.what()))));
    }
    try {
      for (int64_t next = 0;; ++next) {
        std::optional<Tokenized> batch = take_result(next);
        if (!batch) break;
        consume(*batch);
        std::lock_guard lock(mutex_);
        --in_flight_;
        space_.notify_all();
      }
    } catch (...) {
      abort(std::current_exception());
    }
    for (auto& t : threads) t.join();
    if (error_) std::rethrow_exception(error_);
  }

  uint64_t input_size() const { return reader_.file_size(); }

 private:
  template <class F>
  void guarded(F&& f) {
    try {
      f();
    } catch (...) {
      abort(std::current_exception());
    }
  }

  void abort(std::exception_ptr e) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = e;
    aborted_ = true;
    space_.notify_all();
    work_ready_.notify_all();
    result_ready_.notify_all();
  }

  void read_all() {
    std::string_view line;
    bool more = true;
    while (more) {
      Batch batch;
      batch.first_line = reader_.line_number() + 1;
      int64_t bytes = 0;
      while (bytes < options_.batch_bytes && (more = reader_.next(line))) {
        batch.lines.emplace_back(line);
        bytes += static_cast<int64_t>(line.size()) + 1;
      }
      batch.bytes_read_after = reader_.bytes_read();
      if (batch.lines.empty()) break;
      std::unique_lock lock(mutex_);
      space_.wait(lock, [&] { return aborted_ || in_flight_ < capacity_; });
      if (aborted_) return;
      ++in_flight_;
      batch.sequence = submitted_++;
      work_.push_back(std::move(batch));
      work_ready_.notify_one();
    }
    std::lock_guard lock(mutex_);
    reading_done_ = true;
    work_ready_.notify_all();
    result_ready_.notify_all();
  }

  void work() {
    simdjson::ondemand::parser parser;
    while (true) {
      Batch batch;
      {
        std::unique_lock lock(mutex_);
        work_ready_.wait(lock, [&] { return aborted_ || !work_.empty() || reading_done_; });
        if (aborted_ || (work_.empty() && reading_done_)) return;
        batch = std::move(work_.front());
        work_.pop_front();
      }
      Tokenized out;
      out.first_line = batch.first_line;
      out.bytes_read_after = batch.bytes_read_after;
      out.documents.resize(batch.lines.size());
      for (std::size_t i = 0; i < batch.lines.size(); ++i)
        tokenize_line(batch.lines[i], options_, tokenizer_, parser, out.documents[i]);
      std::lock_guard lock(mutex_);
      results_.emplace(batch.sequence, std::move(out));
      result_ready_.notify_all();
    }
  }

  std::optional<Tokenized> take_result(int64_t sequence) {
    std::unique_lock lock(mutex_);
    result_ready_.wait(lock, [&] {
      return aborted_ || results_.contains(sequence) || (reading_done_ && sequence >= submitted_);
    });
    if (aborted_) return std::nullopt;
    auto it = results_.find(sequence);
    if (it == results_.end()) return std::nullopt;
    Tokenized out = std::move(it->second);
    results_.erase(it);
    return out;
  }

  const PreprocessOptions& options_;
  const Tokenizer& tokenizer_;
  LineReader reader_;
  const std::size_t capacity_;

  std::mutex mutex_;
  std::condition_variable space_, work_ready_, result_ready_;
  std::deque<Batch> work_;
  std::map<int64_t, Tokenized> results_;
  std::size_t in_flight_ = 0;
  int64_t submitted_ = 0;
  bool reading_done_ = false;
  bool aborted_ = false;
  std::exception_ptr error_;
};

}  // namespace

PreprocessSummary preprocess(const PreprocessOptions& options, const Tokenizer& tokenizer,
                             const std::function<void(const PreprocessProgress&)>& progress) {
  check_workers(options.workers);
  if (options.json_keys.empty()) throw UserError("--json-keys needs at least one key");
  if (options.append_eod && !tokenizer.special_tokens().eod)
    throw UserError("--append-eod: this tokenizer has no end-of-document token");

  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Pipeline pipeline(options, tokenizer);  // opens the input first: a missing file writes nothing

  PreprocessSummary summary;
  summary.input_size = pipeline.input_size();
  const TokenType type = optimal_token_type(tokenizer.vocab_size());
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  for (const auto& key : options.json_keys) {
    summary.outputs.push_back(options.output_prefix + "_" + key +
                              (options.split_sentences ? "_sentence" : "_document"));
    writers.push_back(std::make_unique<IndexedDatasetWriter>(summary.outputs.back(), type));
  }

  double last_report = 0;
  pipeline.run([&](const Tokenized& batch) {
    for (std::size_t i = 0; i < batch.documents.size(); ++i) {
      const Document& doc = batch.documents[i];
      if (doc.blank) continue;
      if (!doc.error.empty()) {
        if (!options.skip_bad_lines)
          throw UserError(fmt::format("{}:{}: {}; fix the line or pass --skip-bad-lines",
                                      options.input, batch.first_line + static_cast<int64_t>(i),
                                      doc.error));
        ++summary.skipped;
        continue;
      }
      for (std::size_t k = 0; k < writers.size(); ++k) {
        std::size_t at = 0;
        for (const int32_t length : doc.sentence_lengths[k]) {
          writers[k]->add_sequence(std::span(doc.ids[k]).subspan(at, static_cast<std::size_t>(length)));
          at += static_cast<std::size_t>(length);
        }
        writers[k]->end_document();
        summary.tokens += static_cast<int64_t>(doc.ids[k].size());
      }
      ++summary.documents;
    }
    summary.input_bytes = batch.bytes_read_after;
    summary.seconds = elapsed();
    if (progress && summary.seconds - last_report >= 0.5) {
      last_report = summary.seconds;
      progress(summary);
    }
  });
  for (auto& w : writers) w->finish();
  summary.input_bytes = summary.input_size;
  summary.seconds = elapsed();
  return summary;
}

}  // namespace megatron::data
