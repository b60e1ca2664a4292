// The rooms of src/ depend downward only (docs/architecture.md): read every source file's
// includes and check each against the rooms, or the single headers, its room may use.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace megatron {
namespace {

namespace fs = std::filesystem;

struct Uses {
  std::set<std::string> rooms;    // any header of these rooms
  std::set<std::string> headers;  // and these single headers of other rooms
};

// Below the jobs (train, eval, generate) no room includes recipe/ or plan/; recipe/ names the
// lower rooms' kinds without depending on their code; plan/ reads the few value types it plans
// with. kernels/ is leaf code: tensors and the ops' plain parameter structs, no Backend.
const std::map<std::string, Uses>& allowed() {
  static const std::map<std::string, Uses> rules = {
      {"core", {}},
      {"kernels", {.headers = {"tensor/tensor.hpp", "tensor/op_params.hpp", "tensor/random.hpp",
                               "tensor/half.hpp", "tensor/dtype.hpp",
                               // the host's f64 rotary frequencies, shared so both backends agree
                               "tensor/rotary_frequencies.hpp"}}},
      {"tensor", {.rooms = {"core", "kernels"}}},
      {"dist", {.rooms = {"core", "tensor"}}},
      {"parallel", {.rooms = {"core", "dist", "tensor"}}},
      {"optim", {.rooms = {"core", "tensor"}}},
      {"model", {.rooms = {"core", "dist", "parallel", "tensor"}}},
      {"data", {.rooms = {"core"}}},
      {"recipe", {.rooms = {"core"},
                  .headers = {"data/tokenizer_kind.hpp", "model/kinds.hpp", "optim/kinds.hpp"}}},
      {"plan", {.rooms = {"core", "recipe"},
                .headers = {"model/block_spec.hpp", "model/kinds.hpp", "model/model_config.hpp",
                            "parallel/layout.hpp", "tensor/attention_spec.hpp",
                            "tensor/dtype.hpp"}}},
      {"ckpt", {.rooms = {"core", "dist", "model", "recipe", "tensor"}}},
      {"train", {.rooms = {"ckpt", "core", "data", "dist", "model", "optim", "parallel", "plan",
                           "recipe", "tensor"}}},
      {"generate", {.rooms = {"core", "data", "dist", "model", "parallel", "plan", "tensor"}}},
      {"eval", {.rooms = {"ckpt", "core", "data", "dist", "generate", "model", "parallel", "plan",
                          "recipe", "tensor", "train"}}},
      {"launch", {.rooms = {"ckpt", "core", "dist", "plan", "recipe"}}},
      {"cli", {.rooms = {"ckpt", "core", "data", "dist", "eval", "generate", "launch", "model",
                         "optim", "parallel", "plan", "recipe", "tensor", "train"}}},
  };
  return rules;
}

// Every `#include "room/file"` of the files in `dir` that names another room, as "file: header".
std::vector<std::string> foreign_includes(const fs::path& dir, const std::string& room) {
  static const std::regex include(R"re(#include "([a-z_]+)/([^"]+)")re");
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (auto it = std::sregex_iterator(s.begin(), s.end(), include); it != std::sregex_iterator(); ++it) {
      const std::string other = (*it)[1];
      if (other == room) continue;
      const std::string header = other + "/" + std::string((*it)[2]);
      const Uses& uses = allowed().at(room);
      if (uses.rooms.count(other) || uses.headers.count(header)) continue;
      out.push_back(entry.path().filename().string() + ": " + header);
    }
  }
  return out;
}

TEST(Layering, EveryRoomOfSrcHasARule) {
  const fs::path src = fs::path(MEGATRON_SOURCE_DIR) / "src";
  for (const auto& entry : fs::directory_iterator(src)) {
    if (entry.is_directory()) EXPECT_TRUE(allowed().count(entry.path().filename().string())) << entry.path();
  }
}

TEST(Layering, EveryRoomIncludesOnlyWhatItsRuleAllows) {
  const fs::path root(MEGATRON_SOURCE_DIR);
  for (const auto& [room, uses] : allowed()) {
    const fs::path dir = room == "kernels" ? root / "kernels" : root / "src" / room;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    EXPECT_THAT(foreign_includes(dir, room), ::testing::IsEmpty()) << "room " << room;
  }
}

// The planner has one entry point (plan::make_plan); its assembly without suggestions is plan/'s.
TEST(Layering, OnlyThePlannerAssemblesAPlanWithoutItsEntryPoint) {
  const fs::path root(MEGATRON_SOURCE_DIR);
  std::vector<std::string> outside;
  for (const char* top : {"src", "bin", "tests"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file() || entry.path().parent_path() == root / "src" / "plan") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      if (text.str().find("#include \"plan/build.hpp\"") != std::string::npos)
        outside.push_back(fs::relative(entry.path(), root).string());
    }
  }
  EXPECT_THAT(outside, ::testing::IsEmpty());
}

}  // namespace
}  // namespace megatron
