// eval.tasks: a list of downstream tasks, each a mapping of the `megatron eval` flags; data paths
// are resolved against the recipe's directory; every mistake names the entry, key and position.
#include "recipe/recipe_test_util.hpp"

#include "recipe/render.hpp"

namespace megatron::recipe {
namespace {

using ::testing::HasSubstr;

const std::string kTasks = std::string(kMinimalRecipe) +
                           "eval:\n"
                           "  tasks:\n"
                           "    - task: perplexity\n"
                           "      data: data/wiki.jsonl\n"
                           "      windows: rolling\n"
                           "    - {task: multiple-choice, data: /abs/mc.jsonl, num_fewshot: 5, gold_field: label}\n"
                           "    - {task: generation, data: \"/abs/a,b.jsonl\", metrics: \"bleu,chrf\", max_tokens: 9}\n";

TEST_F(RecipeTest, EvalTasksAreReadWithDataPathsAgainstTheRecipesDirectory) {
  const CompiledRecipe c = compile_text(kTasks);
  ASSERT_EQ(c.recipe.eval.tasks.size(), 3u);
  const EvalTask& ppl = c.recipe.eval.tasks[0];
  EXPECT_EQ(ppl.task, "perplexity");
  EXPECT_EQ(ppl.data, (dir_.path() / "data/wiki.jsonl").lexically_normal().string());
  EXPECT_EQ(ppl.windows, "rolling");
  const EvalTask& mc = c.recipe.eval.tasks[1];
  EXPECT_EQ(mc.data, "/abs/mc.jsonl");
  EXPECT_EQ(mc.num_fewshot, 5);
  EXPECT_EQ(mc.gold_field, "label");
  EXPECT_FALSE(mc.stride.has_value());
  const EvalTask& generation = c.recipe.eval.tasks[2];
  EXPECT_EQ(generation.metrics, "bleu,chrf");
  EXPECT_EQ(generation.max_tokens, 9);
}

TEST_F(RecipeTest, EvalTasksRenderAsYamlThatReadsBackTheSame) {
  const CompiledRecipe c = compile_text(kTasks);
  const CompiledRecipe again = compile_text(render_yaml(c), {}, "again.yaml");
  EXPECT_EQ(again.recipe.eval.tasks, c.recipe.eval.tasks);
}

TEST_F(RecipeTest, EvalTaskMistakesNameTheEntryTheKeyAndItsPosition) {
  const std::string head = std::string(kMinimalRecipe) + "eval:\n  tasks:\n";
  EXPECT_EQ(error_of(head + "    - task: clozee\n      data: x\n"),
            file() + ":14:13: eval.tasks[0].task: 'clozee' is not one of perplexity, cloze, "
                     "multiple-choice, classification, generation (did you mean cloze?)");
  EXPECT_EQ(error_of(head + "    - task: cloze\n"), file() + ":14:7: eval.tasks[0]: no data: (the task's file)");
  EXPECT_EQ(error_of(head + "    - {task: generation, data: x, metrics: \"bleu,chfr\"}\n"),
            file() + ":14:44: eval.tasks[0].metrics: 'chfr' is not one of exact_match, f1, bleu, chrf (a "
                     "comma-separated list, e.g. bleu,chrf) (did you mean chrf?)");
  EXPECT_EQ(error_of(head + "    - task: cloze\n      data: x\n      num_fewshot: 3\n"),
            file() + ":16:7: eval.tasks[0].num_fewshot: only multiple-choice takes it, this entry is cloze");
  EXPECT_EQ(error_of(head + "    - task: perplexity\n      data: x\n      strid: 3\n"),
            file() + ":16:7: eval.tasks[0]: unknown key 'strid' (did you mean stride?)");
  EXPECT_THAT(error_of(head + "    - task: perplexity\n      data: x\n      stride: 0\n"),
              HasSubstr(":16:15: eval.tasks[0].stride: 0 is out of range: it must be >= 1"));
  EXPECT_THAT(error_of(head + "    - perplexity\n"),
              HasSubstr(":14:7: eval.tasks[0]: expected a task (a mapping with task: and data:), got 'perplexity'"));
  EXPECT_THAT(error_of(kMinimalRecipe, {"eval.tasks=perplexity"}),
              HasSubstr("eval.tasks: expected a list of tasks, got 'perplexity'"));
}

}  // namespace
}  // namespace megatron::recipe
