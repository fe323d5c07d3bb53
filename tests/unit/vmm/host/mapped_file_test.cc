// MappedFile (vmm/host/mapped_file.h): the checks come from fstat before any byte is read, and a
// file that shrinks under its mapping is caught by the guard instead of ending the process.
#include "vmm/host/mapped_file.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

const FileSizeLimit kLimit{1ull << 30, ExitCode::kUsage, "the test's bound"};

std::string temp_file(std::size_t bytes, char fill) {
  char path[] = "/tmp/minivmm-mapped-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  const std::string data(bytes, fill);
  EXPECT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ::close(fd);
  return path;
}

TEST(MappedFileTest, MapsTheBytesOfARegularFile) {
  const std::string path = temp_file(10000, 'k');
  const MappedFile f = MappedFile::open("--kernel", path, ExitCode::kBadKernel, kLimit);
  ASSERT_EQ(f.bytes().size(), 10000u);
  EXPECT_EQ(f.bytes()[9999], std::byte{'k'});
  ::unlink(path.c_str());
}

TEST(MappedFileTest, AnEmptyFileIsAnEmptySpan) {
  const std::string path = temp_file(0, 0);
  EXPECT_TRUE(MappedFile::open("--initrd", path, ExitCode::kBadKernel, kLimit).bytes().empty());
  ::unlink(path.c_str());
}

TEST(MappedFileTest, SizeIsJudgedBeforeAnyReadWithTheLimitsExitCode) {
  // A sparse file far over the bound: refused from fstat alone, in no time and no memory.
  char path[] = "/tmp/minivmm-mapped-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_EQ(::ftruncate(fd, (2ll << 30)), 0);
  ::close(fd);
  try {
    MappedFile::open("--initrd", path, ExitCode::kBadKernel, kLimit);
    ADD_FAILURE() << "accepted";
  } catch (const VmmError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("the test's bound"), std::string::npos) << e.what();
  }
  ::unlink(path);
}

TEST(MappedFileTest, WhatIsNotARegularFileIsRefusedWithTheFilesExitCode) {
  for (const char* path : {"/tmp", "/dev/null", "/nonexistent/kernel"}) {
    try {
      MappedFile::open("--kernel", path, ExitCode::kBadKernel, kLimit);
      ADD_FAILURE() << path << " accepted";
    } catch (const VmmError& e) {
      EXPECT_EQ(e.code(), ExitCode::kBadKernel) << path;
      EXPECT_NE(std::string(e.what()).find("--kernel"), std::string::npos) << e.what();
    }
  }
}

TEST(MappedFileTest, AFileThatShrinksWhileGuardedReadsAsZerosAndIsNamed) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::string path = temp_file(static_cast<std::size_t>(page) * 4, 'x');
  const MappedFile f = MappedFile::open("--kernel", path, ExitCode::kBadKernel, kLimit);
  ASSERT_EQ(::truncate(path.c_str(), page), 0);  // pages 1-3 vanish under the mapping
  unsigned sum = 0;
  const MappedFile* named = nullptr;
  {
    const TruncationGuard guard{&f};
    for (std::byte b : f.bytes()) sum += static_cast<unsigned>(b);  // SIGBUS without the guard
    named = guard.truncated();
  }
  EXPECT_EQ(named, &f);
  EXPECT_EQ(sum, static_cast<unsigned>('x') * static_cast<unsigned>(page));
  ::unlink(path.c_str());
}

TEST(MappedFileTest, AGuardOverAnIntactFileNamesNothing) {
  const std::string path = temp_file(5000, 'y');
  const MappedFile f = MappedFile::open("--kernel", path, ExitCode::kBadKernel, kLimit);
  const TruncationGuard guard{&f, nullptr};
  unsigned sum = 0;
  for (std::byte b : f.bytes()) sum += static_cast<unsigned>(b);
  EXPECT_EQ(sum, 5000u * 'y');
  EXPECT_EQ(guard.truncated(), nullptr);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace minivmm::vmm
