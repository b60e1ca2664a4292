#include "data/gpt_sample.hpp"

#include <stdexcept>

namespace megatron::data {

Sample make_gpt_sample(std::span<const int32_t> window, const GptSampleOptions& options) {
  if (window.size() < 2) throw std::invalid_argument("make_gpt_sample: window shorter than 2");
  const std::size_t s = window.size() - 1;
  Sample out;
  out.tokens.assign(window.begin(), window.end() - 1);
  out.labels.assign(window.begin() + 1, window.end());
  out.loss_mask.assign(s, 1.0f);
  out.position_ids.resize(s);
  if (options.reset_attention_mask) out.document_starts.push_back(0);

  int32_t position = 0;
  for (std::size_t i = 0; i < s; ++i) {
    out.position_ids[i] = position++;
    if (out.tokens[i] != options.eod_token) continue;
    // The EOD itself still belongs to the document it ends; what follows starts a new one.
    if (options.eod_mask_loss) out.loss_mask[i] = 0.0f;
    if (options.reset_position_ids) position = 0;
    if (options.reset_attention_mask && i + 1 < s)
      out.document_starts.push_back(static_cast<int32_t>(i + 1));
  }
  return out;
}

}  // namespace megatron::data
