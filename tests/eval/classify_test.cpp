// A classifier's metrics from its answers: accuracy with its standard error, macro F1 as
// sklearn's f1_score(average="macro"), and class 1's F1 for two classes (sklearn's binary).
#include "eval/classify.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace megatron::eval {
namespace {

double metric(const TaskResult& r, const std::string& name) {
  for (const Metric& m : r.metrics) {
    if (m.name == name) return m.value;
  }
  ADD_FAILURE() << name;
  return NAN;
}

TEST(ClassificationMetrics, AccuracyAndF1AreSklearnsOnAWorkedExample) {
  data::ClassificationSet set{.labels = {"neg", "pos"}};
  for (int32_t gold : {1, 1, 1, 0, 0, 0}) set.rows.push_back({.text_a = "x", .label = gold});
  // Answers: pos gets tp 2, fn 1, fp 1; neg gets tp 2, fn 1, fp 1.
  const TaskResult r = classification_metrics(set, {1, 1, 0, 0, 0, 1});
  EXPECT_DOUBLE_EQ(metric(r, "acc"), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(metric(r, "f1_pos"), 2.0 * 2 / (2 * 2 + 1 + 1));
  EXPECT_DOUBLE_EQ(metric(r, "f1"), 2.0 / 3.0);
  // sd of four 1s and two 0s (n - 1 in the denominator) over sqrt(6).
  EXPECT_NEAR(r.metrics[0].std_error.value(), std::sqrt((4 * (1.0 / 9) + 2 * (4.0 / 9)) / 5) / std::sqrt(6.0), 1e-12);
}

TEST(ClassificationMetrics, AClassNeverPredictedNorPresentCountsZeroInTheMacroF1) {
  data::ClassificationSet set{.labels = {"a", "b", "c"}};
  for (int32_t gold : {0, 1}) set.rows.push_back({.text_a = "x", .label = gold});
  const TaskResult r = classification_metrics(set, {0, 1});
  EXPECT_DOUBLE_EQ(metric(r, "acc"), 1.0);
  EXPECT_DOUBLE_EQ(metric(r, "f1"), 2.0 / 3.0);  // sklearn's zero_division=0 for class c
}

}  // namespace
}  // namespace megatron::eval
