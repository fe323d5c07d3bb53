// BlockFile's lock (issue 20): one writer or any number of readers per file, across this
// VMM's own drives and other processes.
#include "devices/host/block_file.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <optional>
#include <string>

namespace minivmm::devices {
namespace {

class BlockFileLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/minivmm-blockfile-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 4096), 0);
    ::close(fd);
    path_ = tmpl;
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  // The error of a second open, or "" when it is allowed.
  std::string second_open(bool read_only) {
    try {
      BlockFile::open(path_, read_only);
      return "";
    } catch (const BlockFileError& e) {
      return e.what();
    }
  }

  std::string path_;
};

TEST_F(BlockFileLockTest, TwoReadWriteDrivesOfOneFileAreRefused) {
  const BlockFile first = BlockFile::open(path_, false);
  const std::string why = second_open(false);
  EXPECT_NE(why.find("in use"), std::string::npos) << why;
}

TEST_F(BlockFileLockTest, AReaderAndAWriterExcludeEachOther) {
  {
    const BlockFile writer = BlockFile::open(path_, false);
    EXPECT_NE(second_open(true).find("in use"), std::string::npos);
  }
  const BlockFile reader = BlockFile::open(path_, true);
  EXPECT_NE(second_open(false).find("in use"), std::string::npos);
}

TEST_F(BlockFileLockTest, ReadersShareAndTheLockGoesWithTheFile) {
  {
    const BlockFile a = BlockFile::open(path_, true);
    EXPECT_EQ(second_open(true), "");
  }
  // Both closed: a writer may have it now.
  EXPECT_EQ(second_open(false), "");
}

}  // namespace
}  // namespace minivmm::devices
