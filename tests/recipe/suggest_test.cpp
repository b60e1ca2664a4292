// "Did you mean" suggestions: close misspellings are found, unrelated words are not.
#include <gtest/gtest.h>

#include "recipe/suggest.hpp"

namespace megatron::recipe {
namespace {

TEST(Suggest, EditDistanceCountsTranspositionsAsOneEdit) {
  EXPECT_EQ(edit_distance("hidden_size", "hidden_size"), 0u);
  EXPECT_EQ(edit_distance("hiden_size", "hidden_size"), 1u);
  EXPECT_EQ(edit_distance("hidedn_size", "hidden_size"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(Suggest, ClosestFindsTheNearestPlausibleName) {
  const std::vector<std::string> keys{"hidden_size", "num_layers", "num_attention_heads"};
  EXPECT_EQ(closest("hiden_size", keys), "hidden_size");
  EXPECT_EQ(closest("num_layer", keys), "num_layers");
  EXPECT_EQ(closest("attention_heads", keys), "num_attention_heads");
}

TEST(Suggest, NothingIsSuggestedForAnUnrelatedWord) {
  EXPECT_EQ(closest("banana", {"hidden_size", "num_layers"}), std::nullopt);
  EXPECT_EQ(did_you_mean("banana", {"hidden_size"}), "");
}

}  // namespace
}  // namespace megatron::recipe
