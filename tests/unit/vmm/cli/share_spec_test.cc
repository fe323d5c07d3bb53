// --share HOSTDIR[,ro]: the tag by position, ro, and the one-line reasons for a folder that is
// missing or not a folder; a symlink to a folder is accepted (resolved when served).
#include "vmm/cli/share_spec.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace {

using minivmm::vmm::parse_share_spec;

TEST(ShareSpecTest, FolderAndTag) {
  std::string err;
  const auto s = parse_share_spec("/tmp", 0, err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->path, "/tmp");
  EXPECT_FALSE(s->read_only);
  EXPECT_EQ(s->tag, "share0");
  EXPECT_EQ(parse_share_spec("/tmp", 3, err)->tag, "share3");
}

TEST(ShareSpecTest, ReadOnly) {
  std::string err;
  const auto s = parse_share_spec("/tmp,ro", 1, err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->path, "/tmp");
  EXPECT_TRUE(s->read_only);
}

TEST(ShareSpecTest, RefusedWithOneLine) {
  std::string err;
  EXPECT_FALSE(parse_share_spec("", 0, err));
  EXPECT_FALSE(parse_share_spec(",ro", 0, err));
  EXPECT_FALSE(parse_share_spec("/nonexistent-minivmm-share", 0, err));
  EXPECT_NE(err.find("No such file"), std::string::npos) << err;
  char tmpl[] = "/tmp/minivmm-share-file-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ::close(fd);
  EXPECT_FALSE(parse_share_spec(tmpl, 0, err));
  EXPECT_NE(err.find("not a directory"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos);
  ::unlink(tmpl);
}

TEST(ShareSpecTest, ASymlinkToAFolderIsAccepted) {
  const std::string link = "/tmp/minivmm-share-link-" + std::to_string(::getpid());
  std::filesystem::create_directory_symlink("/tmp", link);
  std::string err;
  const auto s = parse_share_spec(link, 0, err);
  EXPECT_TRUE(s) << err;
  std::filesystem::remove(link);
}

}  // namespace
