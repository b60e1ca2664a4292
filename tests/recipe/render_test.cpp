// `recipe show` and `recipe schema`: the resolved recipe as YAML, the schema for editors and docs.
#include <fstream>
#include <sstream>

#include "recipe/recipe_test_util.hpp"
#include "recipe/render.hpp"
#include "recipe/schema.hpp"

namespace megatron::recipe {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(RecipeTest, ShowMarksValuesThatDifferFromTheDefaultWithWhereTheyWereSet) {
  const std::string yaml = render_yaml(compile_text(kMinimalRecipe, {"training.lr=3e-4"}));
  EXPECT_THAT(yaml, HasSubstr("  hidden_size: 128  # " + file() + ":3:16\n"));
  EXPECT_THAT(yaml, HasSubstr("  lr: 0.0003  # override 'training.lr=3e-4'\n"));
  EXPECT_THAT(yaml, HasSubstr("  tensor: 1\n"));  // the default, unmarked
  EXPECT_THAT(yaml, HasSubstr("  ffn_hidden_size: null\n"));
  EXPECT_THAT(yaml, HasSubstr("#   ffn hidden size: 512  (4 x hidden 128)\n"));
}

TEST_F(RecipeTest, ShownYamlCompilesBackToTheSameRecipe) {
  const auto original = compile_text(kMinimalRecipe, {"data.prefixes=[a, 'b c']",
                                                       "training.lr=3e-4", "precision.dtype=bf16",
                                                       "checkpoint.save='out: dir'"});
  const auto again = compile_text(render_yaml(original), {}, "shown.yaml");
  for (const auto& field : fields())
    EXPECT_EQ(field.render(again.recipe), field.render(original.recipe)) << field.path;
}

TEST(Schema, EveryFieldHasDocumentationAndAKnownSection) {
  const auto names = section_names();
  for (const auto& f : fields()) {
    EXPECT_FALSE(f.doc.empty()) << f.path;
    EXPECT_NE(std::find(names.begin(), names.end(), f.section), names.end()) << f.path;
    EXPECT_FALSE(f.required && f.optional) << f.path;
  }
}

TEST(Schema, JsonSchemaForbidsUnknownKeysAndListsRequiredOnes) {
  const auto schema = schema_as_json_schema();
  EXPECT_EQ(schema["additionalProperties"], false);
  const auto& model = schema["properties"]["model"];
  EXPECT_EQ(model["additionalProperties"], false);
  EXPECT_EQ(model["properties"]["hidden_size"]["type"], "integer");
  EXPECT_EQ(model["properties"]["hidden_size"]["minimum"], 1);
  EXPECT_EQ(model["properties"]["normalization"]["enum"],
            nlohmann::json::array({"layernorm", "rmsnorm"}));
  EXPECT_EQ(model["properties"]["hidden_dropout"]["default"], 0.1);
  EXPECT_NE(std::find(model["required"].begin(), model["required"].end(), "hidden_size"),
            model["required"].end());
}

TEST(Schema, DocsRecipeReferenceIsTheGeneratedMarkdown) {
  std::ifstream in(std::string(MEGATRON_SOURCE_DIR) + "/docs/recipes.md");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), schema_as_markdown())
      << "docs/recipes.md is stale: run `megatron recipe schema --markdown > docs/recipes.md`";
}

}  // namespace
}  // namespace megatron::recipe
