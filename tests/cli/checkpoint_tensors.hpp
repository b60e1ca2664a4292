// What the run tests read back from checkpoints: every model tensor, raw, by name (for
// bitwise comparisons across conversions).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "ckpt/checkpoint_reader.hpp"
#include "cli/run_command.hpp"

namespace megatron::cli {

// Every tensor of a checkpoint's model, raw, by name.
inline std::map<std::string, std::vector<std::byte>> model_tensors(const std::filesystem::path& dir) {
  ckpt::CheckpointReader reader(dir);
  std::map<std::string, std::vector<std::byte>> out;
  for (const ckpt::TensorInfo& t : reader.tensors()) {
    if (t.kind != ckpt::kModel) continue;
    const ckpt::Box whole{0, t.shape[0], 0, t.shape.size() > 1 ? t.shape[1] : 1};
    std::vector<std::byte> bytes(size_t(whole.numel()) * tensor::size_of(t.dtype));
    reader.read_raw(t, {whole}, bytes);
    out[t.name] = std::move(bytes);
  }
  return out;
}

// The 2-iteration checkpoint in `saved` exported with `convert --to hf` (its config.json names
// `architecture`) and imported back with --tp 2 into `back`: every tensor returns bitwise but the
// vocabulary's padding rows (rows past `real` of `padded`, in the tensors `vocab`), which stay
// behind in Hugging Face.
inline void expect_hugging_face_round_trip(const std::filesystem::path& saved,
                                           const std::filesystem::path& hf,
                                           const std::filesystem::path& back,
                                           const std::string& architecture,
                                           const std::set<std::string>& vocab, size_t real,
                                           size_t padded) {
  const CommandResult to = run_megatron("convert --to hf --load " + saved.string() + " --save " +
                                        (hf / "model").string());
  ASSERT_EQ(to.exit_code, 0) << to.err;
  EXPECT_NE(slurp(hf / "model" / "config.json").find(architecture), std::string::npos);
  const CommandResult from = run_megatron("convert --quiet --from hf --load " + (hf / "model").string() +
                                          " --save " + back.string() + " --tp 2");
  ASSERT_EQ(from.exit_code, 0) << from.err;
  const auto original = model_tensors(saved / "iter_0000002");
  const auto imported = model_tensors(back / "iter_0000000");
  ASSERT_EQ(imported.size(), original.size());
  for (const auto& [name, bytes] : imported) {
    const size_t kept = vocab.count(name) ? bytes.size() / padded * real : bytes.size();
    ASSERT_EQ(bytes.size(), original.at(name).size()) << name;
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.begin() + std::ptrdiff_t(kept), original.at(name).begin()))
        << name;
  }
}

}  // namespace megatron::cli
