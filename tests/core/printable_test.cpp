#include <gtest/gtest.h>

#include <string>

#include "core/printable.hpp"

namespace megatron {
namespace {

TEST(Printable, ControlAndHighBytesAreEscaped) {
  EXPECT_EQ(printable(std::string("a\0b\n\xff", 5)), "a\\x00b\\n\\xff");
}

TEST(Printable, ValidUtf8IsKeptAndABackslashIsDoubled) {
  EXPECT_EQ(printable("\xc4\xa0the \\ caf\xc3\xa9"), "\xc4\xa0the \\\\ caf\xc3\xa9");
}

TEST(Printable, LongTextIsCutWithAnEllipsis) {
  EXPECT_EQ(printable(std::string(100, 'x'), 10), std::string(10, 'x') + "...");
  EXPECT_EQ(printable("short", 10), "short");
}

TEST(OneLine, ControlCharactersAndEscapeSequencesAreEscaped) {
  EXPECT_EQ(one_line("key 'a\x1b[31mb\x07' line\nnext"), "key 'a\\x1b[31mb\\x07' line\\nnext");
}

TEST(OneLine, ValidUtf8IsKeptAndInvalidBytesAreEscaped) {
  EXPECT_EQ(one_line("caf\xc3\xa9 \xe6\x97\xa5"), "caf\xc3\xa9 \xe6\x97\xa5");
  EXPECT_EQ(one_line("bad \xff\xc3 end"), "bad \\xff\\xc3 end");
  EXPECT_EQ(one_line("overlong \xc0\xaf surrogate \xed\xa0\x80"),
            "overlong \\xc0\\xaf surrogate \\xed\\xa0\\x80");
}

TEST(OneLine, AHugeMessageIsCut) {
  EXPECT_EQ(one_line(std::string(10000, 'x'), 100), std::string(100, 'x') + "...");
}

}  // namespace
}  // namespace megatron
