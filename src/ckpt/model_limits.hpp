// Sane limits on the sizes a model read from a file declares (a Hugging Face config.json, a
// checkpoint's model fields), checked before anything is sized or allocated from them.
#pragma once

#include <cstdint>
#include <string_view>

#include "model/model_config.hpp"

namespace megatron::ckpt {

// Far above any real model (the largest have ~128 layers, hidden 25,600, vocabularies of ~10^6
// and contexts of ~10^7), low enough that every product of them fits int64.
inline constexpr int64_t kMaxLayers = 10'000;
inline constexpr int64_t kMaxHidden = int64_t(1) << 20;
inline constexpr int64_t kMaxHeads = int64_t(1) << 16;
inline constexpr int64_t kMaxHeadDim = int64_t(1) << 16;
inline constexpr int64_t kMaxFfn = int64_t(1) << 22;
inline constexpr int64_t kMaxVocab = int64_t(1) << 24;
inline constexpr int64_t kMaxPositions = int64_t(1) << 24;
inline constexpr int64_t kMaxParameters = int64_t(1) << 42;  // 4.4 x 10^12

// `value` when it is in [1, max]; else a UserError "<where>: <key> = <value> is out of range ...".
int64_t check_size(int64_t value, int64_t max, std::string_view where, std::string_view key);

// The parameter count of `c` (its sizes already checked one by one), overflow-checked; a
// UserError naming `where` when it passes kMaxParameters.
int64_t checked_parameter_count(const model::ModelConfig& c, std::string_view where);

}  // namespace megatron::ckpt
