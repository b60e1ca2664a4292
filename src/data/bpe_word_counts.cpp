#include "data/bpe_word_counts.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "core/error.hpp"
#include "data/gpt2_pretokenize.hpp"
#include "data/json_last_field.hpp"
#include "data/line_reader.hpp"
#include "data/worker_limit.hpp"

namespace megatron::data {
namespace {

// Lets a std::string-keyed map be searched with a string_view: most words are already counted,
// and building a std::string for each lookup would cost an allocation per word.
struct WordHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view word) const {
    return std::hash<std::string_view>{}(word);
  }
};
using WordMap = std::unordered_map<std::string, int64_t, WordHash, std::equal_to<>>;

void add_words(std::string_view text, WordMap& counts) {
  Gpt2PreTokenizer pre(text);
  std::string_view word;
  while (pre.next(word)) {
    if (const auto it = counts.find(word); it != counts.end()) {
      ++it->second;
    } else {
      counts.emplace(word, 1);
    }
  }
}

std::vector<WordCount> sorted(WordMap&& counts) {
  std::vector<WordCount> words;
  words.reserve(counts.size());
  while (!counts.empty()) {
    auto node = counts.extract(counts.begin());  // moves the word out instead of copying it
    words.push_back({.word = std::move(node.key()), .count = node.mapped()});
  }
  std::sort(words.begin(), words.end(),
            [](const WordCount& a, const WordCount& b) { return a.word < b.word; });
  return words;
}

// A run of lines of one input file, the unit of work handed to a worker.
struct Batch {
  std::size_t file = 0;
  int64_t first_line = 0;  // 1-based line number of lines[0]
  std::vector<std::string> lines;
};

// Where a bad line is and what is wrong with it; errors compare by position in the input.
struct LineError {
  std::size_t file = 0;
  int64_t line = 0;
  std::string problem;
  bool operator<(const LineError& o) const {
    return std::tie(file, line) < std::tie(o.file, o.line);
  }
};

// What one worker has counted. Counts are sums, so adding the workers' maps in any order gives
// the same totals: the result cannot depend on which worker got which batch.
struct Tally {
  WordMap counts;
  int64_t documents = 0;
  std::optional<LineError> error;  // the first bad line this worker met
};

// Counts the words of each line of `batch`; stops at the first bad line and records it.
void count_batch(const Batch& batch, const std::string& key, simdjson::ondemand::parser& parser,
                 Tally& tally) {
  for (std::size_t i = 0; i < batch.lines.size(); ++i) {
    const std::string& line = batch.lines[i];
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto fail = [&](std::string problem) {
      tally.error = LineError{.file = batch.file,
                              .line = batch.first_line + static_cast<int64_t>(i),
                              .problem = std::move(problem)};
    };
    simdjson::padded_string padded(line);
    simdjson::ondemand::document json;
    simdjson::ondemand::object object;
    if (parser.iterate(padded).get(json) || json.get_object().get(object)) {
      return fail("not a JSON object");
    }
    simdjson::ondemand::value value;
    const auto status = find_last_field(object, key, value);
    if (status == simdjson::NO_SUCH_FIELD) return fail("no key '" + key + "'");
    if (status) return fail(std::string("not valid JSON: ") + simdjson::error_message(status));
    std::string_view text;
    if (const auto s = value.get_string().get(text); s == simdjson::INCORRECT_TYPE) {
      return fail("key '" + key + "' is not a string");
    } else if (s) {
      return fail(std::string("not valid JSON: ") + simdjson::error_message(s));
    }
    add_words(text, tally.counts);
    ++tally.documents;
  }
}

// Reader (the calling thread) -> workers, with a bounded queue so that memory stays bounded
// whatever the input size. On a bad line the reader stops; workers finish the batch they hold,
// so every batch before the first bad one is counted and the error reported is the first.
class Counter {
 public:
  explicit Counter(const WordCountOptions& options) : options_(options) {
    // Opening every input first makes a missing file an error before any work.
    for (const std::string& path : options.inputs) {
      readers_.push_back(std::make_unique<LineReader>(path));
      input_size_ += readers_.back()->file_size();
    }
    tallies_.resize(static_cast<std::size_t>(options.workers));
  }

  WordCountSummary run(const std::function<void(const WordCountProgress&)>& progress) {
    const auto start = std::chrono::steady_clock::now();
    auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::vector<std::thread> threads;
    try {
      for (std::size_t w = 0; w < tallies_.size(); ++w) threads.emplace_back([this, w] { work(w); });
    } catch (const std::system_error& e) {
      // Out of threads: end those started rather than let their destructors terminate.
      stop();
      for (auto& t : threads) t.join();
      throw RuntimeFailure(fmt::format("cannot start {} workers ({}); use fewer --workers",
                                       tallies_.size(), e.what()));
    }
    double last_report = 0;
    std::exception_ptr reading_error;  // a corrupt compressed input, or a throwing callback
    try {
      read([&] {
        if (!progress || seconds() - last_report < 0.5) return;
        last_report = seconds();
        progress({.documents = documents_done(),
                  .input_bytes = bytes_read(),
                  .input_size = input_size_,
                  .seconds = last_report});
      });
    } catch (...) {
      reading_error = std::current_exception();
      stop();
    }
    for (auto& t : threads) t.join();
    if (reading_error) std::rethrow_exception(reading_error);

    std::optional<LineError> first;
    for (const Tally& t : tallies_) {
      if (t.error && (!first || *t.error < *first)) first = t.error;
    }
    if (first) {
      throw UserError(
          fmt::format("{}:{}: {}", options_.inputs[first->file], first->line, first->problem));
    }
    WordCountSummary summary;
    WordMap all = std::move(tallies_[0].counts);
    summary.documents = tallies_[0].documents;
    for (std::size_t w = 1; w < tallies_.size(); ++w) {
      for (auto& [word, count] : tallies_[w].counts) all[word] += count;
      tallies_[w].counts = {};
      summary.documents += tallies_[w].documents;
    }
    summary.words = sorted(std::move(all));
    for (const WordCount& w : summary.words) summary.total_words += w.count;
    summary.input_bytes = summary.input_size = input_size_;
    summary.seconds = seconds();
    return summary;
  }

 private:
  template <class Report>
  void read(Report&& report) {
    for (std::size_t f = 0; f < readers_.size(); ++f) {
      LineReader& reader = *readers_[f];
      std::string_view line;
      bool more = true;
      while (more) {
        Batch batch{.file = f, .first_line = reader.line_number() + 1};
        int64_t bytes = 0;
        while (bytes < options_.batch_bytes && (more = reader.next(line))) {
          batch.lines.emplace_back(line);
          bytes += static_cast<int64_t>(line.size()) + 1;
        }
        bytes_before_ = reader.bytes_read();
        if (!batch.lines.empty() && !submit(std::move(batch))) return finish();
        report();
      }
      bytes_done_ += reader.file_size();
      bytes_before_ = 0;
    }
    finish();
  }

  // Queues a batch once there is room; false when a worker met a bad line.
  bool submit(Batch&& batch) {
    std::unique_lock lock(mutex_);
    space_.wait(lock, [&] { return stopped_ || work_.size() < 2 * tallies_.size(); });
    if (stopped_) return false;
    work_.push_back(std::move(batch));
    work_ready_.notify_one();
    return true;
  }

  void finish() {
    std::lock_guard lock(mutex_);
    reading_done_ = true;
    work_ready_.notify_all();
  }

  void work(std::size_t w) {
    simdjson::ondemand::parser parser;
    Tally& tally = tallies_[w];
    while (true) {
      Batch batch;
      {
        std::unique_lock lock(mutex_);
        work_ready_.wait(lock, [&] { return stopped_ || !work_.empty() || reading_done_; });
        if (stopped_ || work_.empty()) return;
        batch = std::move(work_.front());
        work_.pop_front();
        space_.notify_one();
      }
      const int64_t before = tally.documents;
      count_batch(batch, options_.json_key, parser, tally);
      std::lock_guard lock(mutex_);
      documents_ += tally.documents - before;
      if (tally.error) {
        // Batches still queued come after this one: they cannot hold the first bad line.
        stop_locked();
        return;
      }
    }
  }

  void stop() {
    std::lock_guard lock(mutex_);
    stop_locked();
  }
  void stop_locked() {
    stopped_ = true;
    space_.notify_all();
    work_ready_.notify_all();
  }

  int64_t documents_done() {
    std::lock_guard lock(mutex_);
    return documents_;
  }
  uint64_t bytes_read() const { return bytes_done_ + bytes_before_; }

  const WordCountOptions& options_;
  std::vector<std::unique_ptr<LineReader>> readers_;
  uint64_t input_size_ = 0;
  std::vector<Tally> tallies_;  // one per worker

  std::mutex mutex_;
  std::condition_variable space_, work_ready_;
  std::deque<Batch> work_;
  bool reading_done_ = false;
  bool stopped_ = false;  // a worker met a bad line
  int64_t documents_ = 0;
  // Read and written by the reading thread only.
  uint64_t bytes_done_ = 0;    // sizes of the inputs read to the end
  uint64_t bytes_before_ = 0;  // bytes read of the current input
};

}  // namespace

WordCountSummary count_words(const WordCountOptions& options,
                             const std::function<void(const WordCountProgress&)>& progress) {
  if (options.inputs.empty()) throw UserError("no input: pass --input at least once");
  check_workers(options.workers);
  if (options.json_key.empty()) throw UserError("--json-key must not be empty");
  Counter counter(options);
  return counter.run(progress);
}

std::vector<WordCount> count_words_in_text(std::string_view text) {
  WordMap counts;
  add_words(text, counts);
  return sorted(std::move(counts));
}

}  // namespace megatron::data
