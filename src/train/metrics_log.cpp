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

MetricsLog::MetricsLog(const std::filesystem::path& run_dir)
    : jsonl_(run_dir / "metrics.jsonl", std::ios::app) {
  if (!jsonl_) throw RuntimeFailure("cannot write " + (run_dir / "metrics.jsonl").string());
}

void MetricsLog::log(const IterationMetrics& m) {
  std::string line = fmt::format(
      " iteration {:>7}/{:>7} | consumed samples: {:>10} | elapsed time per iteration (ms): "
      "{:.1f} | tokens/s: {:.0f} | TFLOP/s per rank: {:.3g} (MFU {:.1f}%) | learning rate: {:.6E} | global batch size: {:>5} | lm loss: "
      "{:.6E}{} | loss scale: {:.1f} | grad norm: {:.3f} | skipped iterations: {:>3} | mem: "
      "{:.0f} MiB (tensors {:.0f} MiB)",
      m.iteration, m.train_iters, m.consumed_samples, m.ms_per_iteration, m.tokens_per_s, m.tflops_per_rank,
      100.0 * m.mfu, m.lr,
      m.global_batch, m.lm_loss,
      m.sop_loss ? fmt::format(" | sop loss: {:.6E}", *m.sop_loss) : std::string(), m.loss_scale, m.grad_norm, m.skipped_iterations,
      double(m.rss_peak_bytes) / 1048576.0, double(m.tensor_bytes_peak) / 1048576.0);
  std::cout << line << std::endl;
  nlohmann::json j{{"iteration", m.iteration},
                   {"consumed_samples", m.consumed_samples},
                   {"consumed_tokens", m.consumed_tokens},
                   {"global_batch_size", m.global_batch},
                   {"lm_loss", m.lm_loss},
                   {"lr", m.lr},
                   {"grad_norm", m.grad_norm},
                   {"loss_scale", m.loss_scale},
                   {"skipped_iterations", m.skipped_iterations},
                   {"ms_per_iteration", m.ms_per_iteration},
                   {"tokens_per_s", m.tokens_per_s},
                   {"tflops_per_rank", m.tflops_per_rank},
                   {"mfu", m.mfu},
                   {"tensor_bytes_peak", m.tensor_bytes_peak},
                   {"rss_peak_bytes", m.rss_peak_bytes}};
  if (m.sop_loss) j["sop_loss"] = *m.sop_loss;
  if (m.val_loss) {
    j["val_loss"] = *m.val_loss;
    j["val_ppl"] = *m.val_ppl;
  }
  if (m.val_sop_loss) j["val_sop_loss"] = *m.val_sop_loss;
  jsonl_ << j.dump() << "\n";
  jsonl_.flush();
}

void MetricsLog::validation(int64_t iteration, double lm, std::optional<double> sop) {
  std::cout << fmt::format(" validation loss at iteration {} | lm loss value: {:.6E} | lm loss "
                           "PPL: {:.6E}{}",
                           iteration, lm, perplexity(lm),
                           sop ? fmt::format(" | sop loss value: {:.6E}", *sop) : std::string())
            << std::endl;
}

}  // namespace megatron::train
