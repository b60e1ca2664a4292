#include "data/preprocess_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <iostream>

#include "core/progress_line.hpp"

namespace megatron::data {
namespace {

std::string duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

// A corpus's progress is bytes, with a rate in three units.
std::string progress_text(const PreprocessProgress& p) {
  const double rate = p.seconds > 0 ? p.input_bytes / p.seconds : 0;
  const double fraction = p.input_size ? double(p.input_bytes) / double(p.input_size) : 0;
  const double eta = rate > 0 ? (double(p.input_size) - double(p.input_bytes)) / rate : 0;
  return fmt::format(
      "preprocess: {:5.1f}% {} documents, {:.0f} docs/s, {:.1f} MB/s, {:.2f}M tokens/s, ETA {}",
      100 * fraction, p.documents, p.documents / std::max(p.seconds, 1e-9), rate / 1e6,
      p.tokens / std::max(p.seconds, 1e-9) / 1e6, duration(eta));
}

}  // namespace

void run_preprocess(const PreprocessJob& job, const Tokenizer& tokenizer) {
  ProgressLine line(/*first_at_once=*/true);
  std::function<void(const PreprocessProgress&)> progress;
  if (!job.quiet)
    progress = [&line](const PreprocessProgress& p) { line(progress_text(p), p.seconds); };
  const PreprocessSummary s = preprocess(job.options, tokenizer, progress);
  if (!job.quiet) line.end_line();
  const int workers = job.options.workers;
  std::cout << fmt::format(
      "preprocessed {} documents ({} skipped), {} tokens, {:.1f} MB in {:.2f} s: {:.1f} MB/s, "
      "{:.2f}M tokens/s with {} worker{}\n",
      s.documents, s.skipped, s.tokens, s.input_size / 1e6, s.seconds,
      s.input_size / 1e6 / std::max(s.seconds, 1e-9), s.tokens / 1e6 / std::max(s.seconds, 1e-9),
      workers, workers == 1 ? "" : "s");
  for (const auto& out : s.outputs) std::cout << "wrote " << out << ".bin and " << out << ".idx\n";
}

}  // namespace megatron::data
