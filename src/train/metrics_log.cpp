#include "train/metrics_log.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/error.hpp"

namespace megatron::train {

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return int64_t(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

double perplexity(double loss) { return std::exp(std::min(loss, 20.0)); }

MetricsLog::MetricsLog(const std::filesystem::path& run_dir,
                       const std::optional<std::filesystem::path>& tensorboard_dir,
                       const std::string& recipe)
    : jsonl_(run_dir / "metrics.jsonl", std::ios::app) {
  if (!jsonl_) throw RuntimeFailure("cannot write " + (run_dir / "metrics.jsonl").string());
  if (tensorboard_dir) {
    events_.emplace(*tensorboard_dir);
    if (!recipe.empty()) events_->text("recipe", recipe, 0);
  }
}

void MetricsLog::board(const std::string& tag, double value, int64_t iteration, int64_t samples) {
  if (!events_) return;
  events_->scalar(tag, value, iteration);
  events_->scalar(tag + " vs samples", value, samples);
}

void MetricsLog::log(const IterationMetrics& m) {
  // A classifier's loss stands where the language model's would.
  const std::string losses =
      m.classifier ? fmt::format("classification loss: {:.6E}", m.sop_loss.value_or(0.0))
                   : fmt::format("lm loss: {:.6E}{}", m.lm_loss,
                                 m.sop_loss ? fmt::format(" | sop loss: {:.6E}", *m.sop_loss) : std::string());
  std::string line = fmt::format(
      " iteration {:>7}/{:>7} | consumed samples: {:>10} | elapsed time per iteration (ms): "
      "{:.1f} | tokens/s: {:.0f} | TFLOP/s per rank: {:.3g} (MFU {:.1f}%) | learning rate: {:.6E} | "
      "global batch size: {:>5} | {} | loss scale: {:.1f} | grad norm: {:.3f} | skipped iterations: "
      "{:>3} | number of nan iterations: {:>3} | mem: {:.0f} MiB (tensors {:.0f} MiB)",
      m.iteration, m.train_iters, m.consumed_samples, m.ms_per_iteration, m.tokens_per_s,
      m.tflops_per_rank, 100.0 * m.mfu, m.lr, m.global_batch, losses, m.loss_scale, m.grad_norm,
      m.skipped_iterations, m.nan_iterations, double(m.rss_peak_bytes) / 1048576.0,
      double(m.tensor_bytes_peak) / 1048576.0);
  std::cout << line << std::endl;
  nlohmann::json j{{"iteration", m.iteration},
                   {"consumed_samples", m.consumed_samples},
                   {"consumed_tokens", m.consumed_tokens},
                   {"global_batch_size", m.global_batch},
                   {"lr", m.lr},
                   {"grad_norm", m.grad_norm},
                   {"loss_scale", m.loss_scale},
                   {"skipped_iterations", m.skipped_iterations},
                   {"nan_iterations", m.nan_iterations},
                   {"ms_per_iteration", m.ms_per_iteration},
                   {"tokens_per_s", m.tokens_per_s},
                   {"tflops_per_rank", m.tflops_per_rank},
                   {"mfu", m.mfu},
                   {"tensor_bytes_peak", m.tensor_bytes_peak},
                   {"rss_peak_bytes", m.rss_peak_bytes}};
  if (m.classifier) {
    j["classification_loss"] = m.sop_loss.value_or(0.0);
    board("classification loss", m.sop_loss.value_or(0.0), m.iteration, m.consumed_samples);
  } else {
    j["lm_loss"] = m.lm_loss;
    board("lm loss", m.lm_loss, m.iteration, m.consumed_samples);
    if (m.sop_loss) j["sop_loss"] = *m.sop_loss;
    if (m.sop_loss) board("sop loss", *m.sop_loss, m.iteration, m.consumed_samples);
  }
  board("learning-rate", m.lr, m.iteration, m.consumed_samples);
  board("batch-size", double(m.global_batch), m.iteration, m.consumed_samples);
  board("loss-scale", m.loss_scale, m.iteration, m.consumed_samples);
  board("grad-norm", m.grad_norm, m.iteration, m.consumed_samples);
  if (events_) {
    events_->scalar("iteration-time", m.ms_per_iteration / 1000.0, m.iteration);
    events_->scalar("throughput", m.tflops_per_rank, m.iteration);
    events_->scalar("tokens-per-second", m.tokens_per_s, m.iteration);
    events_->scalar("mem-max-allocated-bytes", double(m.tensor_bytes_peak), m.iteration);
    events_->scalar("skipped-iterations", double(m.skipped_iterations), m.iteration);
  }
  if (m.val_accuracy) {
    j["val_loss"] = m.val_sop_loss.value_or(0.0);
    j["val_accuracy"] = *m.val_accuracy;
  } else {
    if (m.val_loss) {
      j["val_loss"] = *m.val_loss;
      j["val_ppl"] = *m.val_ppl;
    }
    if (m.val_sop_loss) j["val_sop_loss"] = *m.val_sop_loss;
  }
  jsonl_ << j.dump() << "\n";
  jsonl_.flush();
}

void MetricsLog::validation(int64_t iteration, int64_t consumed_samples, double lm,
                            std::optional<double> sop, std::optional<double> accuracy) {
  if (accuracy) {
    board("classification loss validation", sop.value_or(0.0), iteration, consumed_samples);
    board("accuracy validation", *accuracy, iteration, consumed_samples);
    std::cout << fmt::format(" validation at iteration {} | classification loss value: {:.6E} | "
                             "accuracy: {:.4f}",
                             iteration, sop.value_or(0.0), *accuracy)
              << std::endl;
    return;
  }
  board("lm loss validation", lm, iteration, consumed_samples);
  board("lm loss validation ppl", perplexity(lm), iteration, consumed_samples);
  if (sop) board("sop loss validation", *sop, iteration, consumed_samples);
  std::cout << fmt::format(" validation loss at iteration {} | lm loss value: {:.6E} | lm loss "
                           "PPL: {:.6E}{}",
                           iteration, lm, perplexity(lm),
                           sop ? fmt::format(" | sop loss value: {:.6E}", *sop) : std::string())
            << std::endl;
}

}  // namespace megatron::train
