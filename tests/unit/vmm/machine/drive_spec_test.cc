// --drive FILE[,ro][,aio=io_uring|threads]: what is accepted and the one-line reasons for what
// is not.
#include "vmm/machine/drive_spec.h"

#include <gtest/gtest.h>

namespace {

using minivmm::vmm::parse_drive_spec;

TEST(DriveSpecTest, FileAlone) {
  std::string err;
  const auto d = parse_drive_spec("/tmp/disk.img", err);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->path, "/tmp/disk.img");
  EXPECT_FALSE(d->read_only);
}

TEST(DriveSpecTest, ReadOnly) {
  std::string err;
  const auto d = parse_drive_spec("disk.img,ro", err);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->path, "disk.img");
  EXPECT_TRUE(d->read_only);
  EXPECT_EQ(d->aio, minivmm::vmm::DriveAio::kAuto);
}

TEST(DriveSpecTest, AioEngineInAnyOrder) {
  using minivmm::vmm::DriveAio;
  std::string err;
  auto d = parse_drive_spec("d.img,aio=threads,ro", err);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->aio, DriveAio::kThreads);
  EXPECT_TRUE(d->read_only);
  d = parse_drive_spec("d.img,aio=io_uring", err);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->aio, DriveAio::kIoUring);
  EXPECT_FALSE(parse_drive_spec("d.img,aio=native", err));
  EXPECT_EQ(err,
            "'d.img,aio=native': unknown option 'aio=native' (FILE[,ro][,aio=io_uring|threads])");
}

TEST(DriveSpecTest, UnknownOptionIsRefusedByName) {
  std::string err;
  EXPECT_FALSE(parse_drive_spec("x,bogus", err));
  EXPECT_EQ(err, "'x,bogus': unknown option 'bogus' (FILE[,ro][,aio=io_uring|threads])");
  EXPECT_FALSE(parse_drive_spec("x,ro,", err));
  EXPECT_FALSE(parse_drive_spec("x,", err));
}

TEST(DriveSpecTest, MissingFileNameIsRefused) {
  std::string err;
  EXPECT_FALSE(parse_drive_spec("", err));
  EXPECT_FALSE(parse_drive_spec(",ro", err));
  EXPECT_EQ(err, "',ro' has no file name (FILE[,ro][,aio=io_uring|threads])");
}

}  // namespace
