#include "recipe/enum_names.hpp"

namespace megatron::recipe {

template <>
const std::vector<EnumName<Arch>>& enum_names() {
  static const std::vector<EnumName<Arch>> names{
      {Arch::Gpt, "gpt"}, {Arch::Bert, "bert"}, {Arch::T5, "t5"}};
  return names;
}

template <>
const std::vector<EnumName<PositionEmbedding>>& enum_names() {
  static const std::vector<EnumName<PositionEmbedding>> names{
      {PositionEmbedding::Learned, "learned"},
      {PositionEmbedding::Rotary, "rope"},
      {PositionEmbedding::Relative, "relative"},
      {PositionEmbedding::Learned, "learned_absolute", false},
      {PositionEmbedding::Rotary, "rotary", false}};
  return names;
}

template <>
const std::vector<EnumName<RopeScaling>>& enum_names() {
  static const std::vector<EnumName<RopeScaling>> names{
      {RopeScaling::None, "none"}, {RopeScaling::Linear, "linear"}, {RopeScaling::Llama3, "llama3"},
      {RopeScaling::Yarn, "yarn"}};
  return names;
}

template <>
const std::vector<EnumName<Norm>>& enum_names() {
  static const std::vector<EnumName<Norm>> names{
      {Norm::LayerNorm, "layernorm"}, {Norm::RmsNorm, "rmsnorm"}};
  return names;
}

template <>
const std::vector<EnumName<Activation>>& enum_names() {
  static const std::vector<EnumName<Activation>> names{
      {Activation::Gelu, "gelu"}, {Activation::GeluTanh, "gelu_tanh"},
      {Activation::Swiglu, "swiglu"}, {Activation::Geglu, "geglu"}};
  return names;
}

template <>
const std::vector<EnumName<Schedule>>& enum_names() {
  static const std::vector<EnumName<Schedule>> names{
      {Schedule::OneFOneB, "1f1b"},
      {Schedule::Interleaved, "interleaved"},
      {Schedule::AllForwardAllBackward, "all-forward-all-backward"},
      {Schedule::AllForwardAllBackward, "gpipe", false}};
  return names;
}

template <>
const std::vector<EnumName<DType>>& enum_names() {
  static const std::vector<EnumName<DType>> names{
      {DType::F32, "f32"}, {DType::Bf16, "bf16"}, {DType::F16, "f16"},
      {DType::F32, "fp32", false}, {DType::F16, "fp16", false}, {DType::F32, "float32", false},
      {DType::Bf16, "bfloat16", false}, {DType::F16, "float16", false}};
  return names;
}

template <>
const std::vector<EnumName<Optimizer>>& enum_names() {
  static const std::vector<EnumName<Optimizer>> names{
      {Optimizer::AdamW, "adamw"}, {Optimizer::Sgd, "sgd"},
      // Megatron's "adam" is AdamW: weight decay is decoupled from the moments.
      {Optimizer::AdamW, "adam", false}};
  return names;
}

template <>
const std::vector<EnumName<LrDecay>>& enum_names() {
  static const std::vector<EnumName<LrDecay>> names{
      {LrDecay::Constant, "constant"}, {LrDecay::Linear, "linear"},
      {LrDecay::Cosine, "cosine"}, {LrDecay::InverseSquareRoot, "inverse-square-root"},
      {LrDecay::Wsd, "wsd"}, {LrDecay::InverseSquareRoot, "inverse_square_root", false},
      {LrDecay::InverseSquareRoot, "inverse-sqrt", false}};
  return names;
}

template <>
const std::vector<EnumName<WsdDecay>>& enum_names() {
  static const std::vector<EnumName<WsdDecay>> names{
      {WsdDecay::Linear, "linear"}, {WsdDecay::Cosine, "cosine"},
      {WsdDecay::Exponential, "exponential"}, {WsdDecay::MinusSqrt, "minus_sqrt"}};
  return names;
}

template <>
const std::vector<EnumName<Recompute>>& enum_names() {
  static const std::vector<EnumName<Recompute>> names{
      {Recompute::None, "none"}, {Recompute::Selective, "selective"}, {Recompute::Full, "full"}};
  return names;
}

template <>
const std::vector<EnumName<DeviceKind>>& enum_names() {
  static const std::vector<EnumName<DeviceKind>> names{
      {DeviceKind::Auto, "auto"}, {DeviceKind::Cpu, "cpu"}, {DeviceKind::Cuda, "cuda"},
      {DeviceKind::Cuda, "gpu", false}};
  return names;
}

template <>
const std::vector<EnumName<LogLevel>>& enum_names() {
  // spdlog's level names, so the recipe's level can be handed to the logger as it is.
  static const std::vector<EnumName<LogLevel>> names{
      {LogLevel::Trace, "trace"}, {LogLevel::Debug, "debug"}, {LogLevel::Info, "info"},
      {LogLevel::Warn, "warn"}, {LogLevel::Error, "error"}, {LogLevel::Warn, "warning", false}};
  return names;
}

template <>
const std::vector<EnumName<Tokenizer>>& enum_names() {
  static const std::vector<EnumName<Tokenizer>> names{
      {Tokenizer::Gpt2Bpe, "gpt2-bpe"},
      {Tokenizer::BertWordPieceLowerCase, "bert-wordpiece-lowercase"},
      {Tokenizer::BertWordPieceCased, "bert-wordpiece-cased"},
      {Tokenizer::SentencePiece, "sentencepiece"},
      {Tokenizer::HuggingFace, "huggingface"},
      {Tokenizer::Null, "null-tokenizer"},
      {Tokenizer::Gpt2Bpe, "GPT2BPETokenizer", false},
      {Tokenizer::BertWordPieceLowerCase, "BertWordPieceLowerCase", false},
      {Tokenizer::BertWordPieceCased, "BertWordPieceCase", false},
      {Tokenizer::SentencePiece, "SentencePieceTokenizer", false},
      {Tokenizer::HuggingFace, "HuggingFaceTokenizer", false},
      {Tokenizer::Null, "NullTokenizer", false}};
  return names;
}

template <>
const std::vector<EnumName<FinetuneFormat>>& enum_names() {
  static const std::vector<EnumName<FinetuneFormat>> names{
      {FinetuneFormat::Jsonl, "jsonl"}, {FinetuneFormat::Mnli, "mnli"}, {FinetuneFormat::Qqp, "qqp"},
      {FinetuneFormat::Sft, "sft"},     {FinetuneFormat::Chat, "chat"}, {FinetuneFormat::Seq2Seq, "seq2seq"}};
  return names;
}

template <>
const std::vector<EnumName<ChatTemplate>>& enum_names() {
  static const std::vector<EnumName<ChatTemplate>> names{
      {ChatTemplate::ChatMl, "chatml"},         {ChatTemplate::Plain, "plain"},
      {ChatTemplate::Qwen25, "qwen2.5"},        {ChatTemplate::Qwen3, "qwen3"},
      {ChatTemplate::DeepSeekR1, "deepseek-r1"}, {ChatTemplate::MistralV1, "mistral-v1"},
      {ChatTemplate::MistralV3, "mistral-v3"},   {ChatTemplate::Auto, "auto"}};
  return names;
}

}  // namespace megatron::recipe
