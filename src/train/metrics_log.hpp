// The run's record: one human line per log interval on stdout (Megatron's fields), one JSON
// object per logged iteration in <run dir>/metrics.jsonl, and with logging.tensorboard_dir
// TensorBoard event files with Megatron's tags.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "train/tfevents.hpp"

namespace megatron::train {

struct IterationMetrics {
  int64_t iteration = 0;
  int64_t train_iters = 0;
  int64_t consumed_samples = 0;
  int64_t consumed_tokens = 0;
  int64_t global_batch = 0;
  double lm_loss = 0.0;  // mean over the iterations since the last log line
  std::optional<double> sop_loss;  // models with a binary head (BERT), likewise
  double lr = 0.0;
  double grad_norm = 0.0;
  double loss_scale = 1.0;
  int64_t skipped_iterations = 0;  // total so far (f16 overflows)
  int64_t nan_iterations = 0;      // in this interval: a NaN or infinite loss (Megatron's field)
  double ms_per_iteration = 0.0;
  double tokens_per_s = 0.0;
  // Model FLOPs (Megatron's count, no recompute) per second per rank, and that over the
  // peak of cluster.hardware: Megatron's "TFLOP/s/GPU" and the MFU it implies.
  double tflops_per_rank = 0.0;
  double mfu = 0.0;
  int64_t tensor_bytes_peak = 0;  // backend allocator
  int64_t rss_peak_bytes = 0;     // whole process
  std::optional<double> val_loss;
  std::optional<double> val_ppl;
  std::optional<double> val_sop_loss;
  std::optional<double> val_accuracy;  // a classifier's
  // Classification fine-tuning: sop_loss is the classifier's loss and there is no lm loss.
  bool classifier = false;
};

class MetricsLog {
 public:
  // Appends to <run_dir>/metrics.jsonl (created if missing); with `tensorboard_dir`, also
  // writes an event file there, starting with `recipe` (the resolved recipe) as text.
  explicit MetricsLog(const std::filesystem::path& run_dir,
                      const std::optional<std::filesystem::path>& tensorboard_dir = {},
                      const std::string& recipe = {});
  void log(const IterationMetrics& m);
  // lm: the validation's mean token loss; sop: its sentence-order loss, for a binary head, or
  // with `accuracy` a classifier's loss (and then no lm loss).
  void validation(int64_t iteration, int64_t consumed_samples, double lm, std::optional<double> sop,
                  std::optional<double> accuracy = {});

 private:
  // A scalar at the iteration and its "vs samples" twin at the consumed samples, as Megatron.
  void board(const std::string& tag, double value, int64_t iteration, int64_t samples);
  std::ofstream jsonl_;
  std::optional<EventFile> events_;
};

int64_t peak_rss_bytes();
// exp(loss), capped at exp(20) so a diverged model still prints a number.
double perplexity(double loss);

}  // namespace megatron::train
