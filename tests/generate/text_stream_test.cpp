// TextStream: a growing text sent in parts that join into the finished text, never sending an
// unfinished character or the start of a stop string.
#include "generate/text_stream.hpp"

#include <gtest/gtest.h>

namespace megatron::generate {
namespace text_stream_test {

TEST(TextStream, SendsOnlyWhatIsNewAndTheRestAtTheEnd) {
  TextStream s({});
  EXPECT_EQ(s.next("Hel"), "Hel");
  EXPECT_EQ(s.next("Hello"), "lo");
  EXPECT_EQ(s.next("Hello"), "");
  EXPECT_EQ(s.rest("Hello there"), " there");
}

TEST(TextStream, HoldsBackAnEndingThatMayBecomeAStopString) {
  TextStream s({"\n\nUser:"});
  EXPECT_EQ(s.next("Fine.\n"), "Fine.");
  EXPECT_EQ(s.next("Fine.\n\nU"), "");
  // Not the stop string after all: the held text goes out with what follows.
  EXPECT_EQ(s.next("Fine.\n\nUp"), "\n\nUp");
  // Cut at the stop string, the finished text never sent its start.
  EXPECT_EQ(s.next("Fine.\n\nUp\n\nUse"), "");
  EXPECT_EQ(s.rest("Fine.\n\nUp"), "");
}

TEST(TextStream, HoldsBackAnUnfinishedUtf8Character) {
  TextStream s({});
  EXPECT_EQ(s.next("caf\xC3"), "caf");
  EXPECT_EQ(s.next("caf\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(s.next("caf\xC3\xA9 \xEF\xBF\xBD"), " ");  // a replacement character may yet change
  EXPECT_EQ(s.rest("caf\xC3\xA9 \xE2\x82\xAC"), "\xE2\x82\xAC");
}

}  // namespace text_stream_test
}  // namespace megatron::generate
