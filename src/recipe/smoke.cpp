#include "recipe/smoke.hpp"

#include <algorithm>

namespace megatron::recipe {

std::vector<std::string> smoke_overrides(const Recipe& r) {
  constexpr int64_t kHeads = 4;
  std::vector<std::string> out = {
      "model.num_layers=2", "model.hidden_size=64", "model.num_attention_heads=4",
      "model.kv_channels=null",
      // One rank: the layout is the hardware's business, and the engine's layouts have their
      // own equivalence tests.
      "parallel.tensor=1", "parallel.pipeline=1", "parallel.context=1", "parallel.data=null",
      "parallel.virtual_pipeline=1", "parallel.schedule=null", "parallel.layers_per_stage=[]",
      "parallel.sequence_parallel=false", "cluster.nodes=1", "cluster.gpus_per_node=1",
      "cluster.hardware=cpu", "cluster.device=cpu",
      "data.seq_length=64",
      "training.micro_batch_size=2", "training.global_batch_size=4", "training.rampup_batch_size=[]",
      "training.train_iters=3", "training.lr_warmup_iters=1", "training.lr_decay_iters=null",
      "training.lr_wsd_decay_iters=null", "training.exit_duration_minutes=null",
      "checkpoint.save=null", "checkpoint.load=null", "checkpoint.interval=null",
      "logging.interval=1", "logging.tensorboard_dir=null", "eval.interval=2", "eval.iters=1",
      "eval.tasks=[]"};
  if (r.model.num_query_groups) {
    // Keep grouped attention grouped: as many query heads per group as fit in 4 heads.
    const int64_t per_group = std::max<int64_t>(1, r.model.num_attention_heads / *r.model.num_query_groups);
    out.push_back("model.num_query_groups=" + std::to_string(std::max<int64_t>(1, kHeads / per_group)));
  }
  if (r.model.ffn_hidden_size) out.push_back("model.ffn_hidden_size=256");
  if (r.model.max_position_embeddings) out.push_back("model.max_position_embeddings=64");
  if (r.model.decoder_num_layers) out.push_back("model.decoder_num_layers=2");
  if (r.data.decoder_seq_length) out.push_back("data.decoder_seq_length=32");
  if (r.training.recompute_num_layers) out.push_back("training.recompute_num_layers=1");
  // The pretrained weights are the recipe's model's, not the shrunk one's: the smoke run
  // fine-tunes from random weights instead (run --smoke says so).
  if (r.finetune.pretrained) out.push_back("finetune.pretrained=null");
  if (!r.finetune.train_data) {
    out.push_back("data.prefixes=[]");
    out.push_back("data.weights=[]");
    out.push_back("data.mock=true");
  }
  return out;
}

}  // namespace megatron::recipe
