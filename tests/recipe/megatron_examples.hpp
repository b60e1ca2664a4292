// The flags of Megatron-LM's own example scripts (github.com/NVIDIA/Megatron-LM at d98e8a64dd),
// as test data for `megatron recipe from-megatron`: each list is the script's flags, in order.
#pragma once

#include <string>
#include <vector>

namespace megatron::recipe::megatron_examples {

// examples/gpt3/train_gpt3_175b_distributed.sh; $DATA_PATH and the other arguments filled in.
inline const std::vector<std::string> kGpt3_175b{
    "--num-layers", "96", "--hidden-size", "12288", "--num-attention-heads", "96",
    "--seq-length", "2048", "--max-position-embeddings", "2048", "--attention-backend", "auto",
    "--micro-batch-size", "1", "--global-batch-size", "1536",
    "--step-batch-size-schedule", "0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536",
    "--train-iters", "500000", "--weight-decay", "0.1", "--adam-beta1", "0.9", "--adam-beta2",
    "0.95", "--init-method-std", "0.006", "--clip-grad", "1.0", "--fp16", "--lr", "6.0e-5",
    "--lr-decay-style", "cosine", "--min-lr", "6.0e-6", "--lr-warmup-fraction", ".001",
    "--lr-decay-iters", "430000",
    "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "16",
    "--data-path", "data/gpt_text_document", "--vocab-file", "data/gpt2-vocab.json",
    "--merge-file", "data/gpt2-merges.txt", "--split", "949,50,1",
    "--log-interval", "100", "--save-interval", "10000", "--eval-interval", "1000", "--save",
    "ckpt", "--load", "ckpt", "--eval-iters", "10", "--tensorboard-dir", "tb"};

// examples/bert/train_bert_340m_distributed.sh (its --weight-decay and --clip-grad appear twice
// there, and its pipeline of 16 does not divide the 24 layers: Megatron-LM refuses it too).
inline const std::vector<std::string> kBert340m{
    "--num-layers", "24", "--hidden-size", "1024", "--num-attention-heads", "16",
    "--seq-length", "512", "--max-position-embeddings", "512", "--attention-backend", "auto",
    "--micro-batch-size", "4", "--global-batch-size", "32", "--train-iters", "1000000",
    "--weight-decay", "1e-2", "--clip-grad", "1.0", "--fp16", "--lr", "0.0001",
    "--lr-decay-iters", "990000", "--lr-decay-style", "linear", "--min-lr", "1.0e-5",
    "--weight-decay", "1e-2", "--lr-warmup-fraction", ".01", "--clip-grad", "1.0",
    "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "16",
    "--data-path", "data/bert_text_sentence", "--vocab-file", "data/bert-vocab.txt",
    "--split", "949,50,1",
    "--log-interval", "100", "--save-interval", "10000", "--eval-interval", "1000", "--save",
    "ckpt", "--load", "ckpt", "--eval-iters", "10", "--tensorboard-dir", "tb"};

// examples/t5/train_t5_220m_distributed.sh: T5_ARGS, DATA_ARGS, OUTPUT_ARGS and the rest.
inline const std::vector<std::string> kT5_220m{
    "--encoder-num-layers", "12", "--decoder-num-layers", "12", "--hidden-size", "768",
    "--num-attention-heads", "12", "--kv-channels", "64", "--ffn-hidden-size", "3072",
    "--encoder-seq-length", "512", "--decoder-seq-length", "128",
    "--max-position-embeddings", "512", "--micro-batch-size", "64", "--global-batch-size", "512",
    "--lr", "0.0001", "--train-iters", "1000000", "--lr-decay-iters", "1000000",
    "--lr-decay-style", "linear", "--min-lr", "0.00001", "--weight-decay", "1e-2",
    "--lr-warmup-fraction", ".01", "--clip-grad", "1.0", "--bf16", "--vocab-extra-ids", "100",
    "--init-method-std", "0.015", "--transformer-impl", "transformer_engine",
    "--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "1",
    "--attention-backend", "auto",
    "--data-path", "data/t5_text_document", "--vocab-file", "data/bert-large-cased-vocab.txt",
    "--tokenizer-type", "BertWordPieceCase", "--split", "99982,9,9",
    "--log-interval", "100", "--tensorboard-dir", "tb", "--save-interval", "500",
    "--eval-interval", "1000", "--eval-iters", "10",
    "--distributed-backend", "nccl", "--save", "ckpt", "--load", "ckpt"};

// The launcher words the example scripts put before the script (DISTRIBUTED_ARGS).
inline const std::vector<std::string> kTorchrun8Gpus{
    "torchrun", "--nproc_per_node", "8", "--nnodes", "1", "--master_addr", "localhost",
    "--master_port", "29500"};

inline std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace megatron::recipe::megatron_examples
