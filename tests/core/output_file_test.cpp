// The user's output paths: a regular file replaced whole or not at all, a symlink left a link
// with its target replaced, a FIFO or a device written through (never replaced), and an output
// that is one file with an input refused whatever its spelling.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/output_file.hpp"
#include "support/temp_dir.hpp"

namespace megatron {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OutputFile, ARegularFileIsReplacedWholeLeavingNoTemporary) {
  test_support::TempDir dir;
  const fs::path out = dir.write("out.json", "old");
  write_output_file(out.string(), "new");
  EXPECT_EQ(read(out), "new");
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
}

TEST(OutputFile, AnUncommittedOutputLeavesTheFileAsItWas) {
  test_support::TempDir dir;
  const fs::path out = dir.write("out.json", "old");
  {
    OutputFile file(out.string());
    file.stream() << "half";
  }
  EXPECT_EQ(read(out), "old");
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
}

TEST(OutputFile, ASymlinkStaysALinkAndItsTargetGetsTheText) {
  test_support::TempDir dir;
  const fs::path target = dir.write("real/out.json", "old");
  const fs::path link = dir.path() / "link.json";
  fs::create_symlink("real/out.json", link);  // relative, as users make them
  write_output_file(link.string(), "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(read(target), "new");
  EXPECT_FALSE(fs::exists(target.string() + ".tmp"));
  EXPECT_FALSE(fs::exists(link.string() + ".tmp"));
}

TEST(OutputFile, AFifoIsWrittenThroughAndStaysAFifo) {
  test_support::TempDir dir;
  const fs::path fifo = dir.path() / "results";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = read(fifo); });
  write_output_file(fifo.string(), "through");
  reader.join();
  EXPECT_EQ(received, "through");
  EXPECT_EQ(fs::symlink_status(fifo).type(), fs::file_type::fifo);
}

TEST(OutputFile, ADeviceAndADescriptorAreWrittenThroughNotReplaced) {
  EXPECT_TRUE(OutputFile("/dev/null").through());
  write_output_file("/dev/null", "gone");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // /dev/stdout leads to /proc/self/fd/1: a descriptor, whatever it is open on.
  EXPECT_TRUE(OutputFile("/dev/stdout").through());
  test_support::TempDir dir;
  const fs::path link = dir.path() / "null";
  fs::create_symlink("/dev/null", link);
  write_output_file(link.string(), "gone");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
}

TEST(OutputFile, AnUnwritablePathIsARuntimeFailureNamingIt) {
  try {
    OutputFile file("/proc/no-such-dir/out.json");
    FAIL() << "opened";
  } catch (const RuntimeFailure& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write /proc/no-such-dir/out.json");
  }
}

TEST(RefuseSameFile, AnOutputThatIsTheInputUnderAnySpellingIsRefusedNamingBothFlags) {
  test_support::TempDir dir;
  const fs::path data = dir.write("data.jsonl", "{}\n");
  fs::create_directories(dir.path() / "sub");
  const fs::path link = dir.path() / "link.jsonl";
  fs::create_symlink(data, link);
  for (const fs::path& out : {data, dir.path() / "sub" / ".." / "data.jsonl", link}) {
    try {
      refuse_same_file("--json", out.string(), "--data", data.string());
      ADD_FAILURE() << out << " accepted";
    } catch (const UserError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--json " + out.string()), std::string::npos) << m;
      EXPECT_NE(m.find("--data " + data.string()), std::string::npos) << m;
    }
  }
  EXPECT_EQ(read(data), "{}\n");
}

TEST(RefuseSameFile, AnotherFileADeviceOrNothingToCompareIsAccepted) {
  test_support::TempDir dir;
  const fs::path data = dir.write("data.jsonl", "{}\n");
  EXPECT_NO_THROW(refuse_same_file("--json", (dir.path() / "out.json").string(), "--data", data.string()));
  EXPECT_NO_THROW(refuse_same_file("--json", "/dev/null", "--data", "/dev/null"));
  EXPECT_NO_THROW(refuse_same_file("--json", "", "--data", data.string()));
}

TEST(RefuseSameFile, TwoOutputsNotYetWrittenAreComparedByPath) {
  test_support::TempDir dir;
  const fs::path out = dir.path() / "out.json";
  EXPECT_THROW(refuse_same_file("--json", out.string(), "--log-samples",
                                (dir.path() / "." / "out.json").string()),
               UserError);
}

}  // namespace
}  // namespace megatron
