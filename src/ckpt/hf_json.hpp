// Reading the small JSON files of a Hugging Face directory (config.json, the shard index,
// generation_config.json): size-capped, parsed as Python's json reads them, errors as one line.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

namespace megatron::ckpt {

// Duplicate keys keep the last value, as Python's json (what transformers reads with) does.
// UserError for a missing file, one over 64 MiB, or invalid JSON.
nlohmann::json read_hf_json(const std::filesystem::path& path);

}  // namespace megatron::ckpt
