// The snapshot file (vmm/snapshot/snapshot_file.h): what is written reads back the same, guest
// pages the guest never wrote are holes, and every way a file can be wrong is one SnapshotError
// that names it.
#include "vmm/snapshot/snapshot_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "vmm/snapshot/crc32c.h"

namespace minivmm::vmm {
namespace {

std::vector<SnapshotSection> sample_sections() {
  return {{"config", {1, 2, 3}}, {"vcpu0", std::vector<std::uint8_t>(5000, 0x42)},
          {"dev:pit", {}}};
}

std::string error_of(std::span<const std::uint8_t> bytes, std::uint64_t file_size) {
  try {
    parse_snapshot_metadata(bytes, file_size);
  } catch (const SnapshotError& e) {
    return e.what();
  }
  return "";
}

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  const char* text = "123456789";
  EXPECT_EQ(crc32c(std::span(reinterpret_cast<const std::uint8_t*>(text), 9)), 0xE3069283u);
  EXPECT_EQ(crc32c({}), 0u);
}

TEST(SnapshotFileTest, MetadataRoundTrips) {
  const auto bytes = encode_snapshot_metadata(sample_sections(), 1 << 20);
  const auto m = parse_snapshot_metadata(bytes, 8192 + (1 << 20));
  ASSERT_EQ(m.sections.size(), 3u);
  EXPECT_EQ(m.section("vcpu0").data, std::vector<std::uint8_t>(5000, 0x42));
  EXPECT_TRUE(m.section("dev:pit").data.empty());
  EXPECT_EQ(m.memory_offset, 8192u);
  EXPECT_EQ(m.memory_bytes, 1u << 20);
  EXPECT_EQ(m.find("dev:uart"), nullptr);
  EXPECT_THROW(m.section("dev:uart"), SnapshotError);
}

TEST(SnapshotFileTest, EveryDefectIsNamed) {
  const auto good = encode_snapshot_metadata(sample_sections(), 1 << 20);
  const std::uint64_t size = 8192 + (1 << 20);
  auto with = [&](std::size_t at, std::uint8_t v) {
    auto b = good;
    b[at] = v;
    return b;
  };
  EXPECT_NE(error_of(with(0, 'X'), size).find("wrong magic"), std::string::npos);
  EXPECT_NE(error_of(with(8, 2), size).find("format version 2"), std::string::npos);
  EXPECT_NE(error_of(with(20, 1), size).find("header's checksum"), std::string::npos);
  EXPECT_NE(error_of(std::span(good).first(30), size).find("shorter than a snapshot's header"),
            std::string::npos);
  EXPECT_NE(error_of(std::span(good).first(100), size).find("sections end early"),
            std::string::npos);
  EXPECT_NE(error_of(good, size - 4096).find("cut short"), std::string::npos);
  EXPECT_NE(error_of(good, size + 1).find("the file is"), std::string::npos);
  // A flipped byte inside vcpu0's data.
  const std::size_t in_vcpu0 = kSnapshotHeaderBytes + 2 + 6 + 8 + 3 + 2 + 5 + 8 + 100;
  EXPECT_NE(error_of(with(in_vcpu0, 0), size).find("'vcpu0': checksum mismatch"),
            std::string::npos);
  EXPECT_EQ(error_of(good, size), "");
}

TEST(SnapshotFileTest, DuplicateAndBadNamesAreRefused) {
  EXPECT_NE(error_of(encode_snapshot_metadata({{"a", {}}, {"a", {}}}, 4096), 8192)
                .find("twice"),
            std::string::npos);
  auto bytes = encode_snapshot_metadata({{"ab", {}}}, 4096);
  bytes[kSnapshotHeaderBytes + 2] = ' ';
  EXPECT_NE(error_of(bytes, 8192).find("bad name"), std::string::npos);
  EXPECT_THROW(encode_snapshot_metadata({{"", {}}}, 4096), SnapshotError);
}

class SnapshotWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/snapshot_write_test." + std::to_string(::getpid());
    ram_ = static_cast<std::byte*>(::mmap(nullptr, kRam, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(ram_, MAP_FAILED);
  }
  void TearDown() override {
    ::munmap(ram_, kRam);
    ::unlink(path_.c_str());
  }
  static constexpr std::size_t kRam = 1 << 20;
  std::string path_;
  std::byte* ram_ = nullptr;
};

TEST_F(SnapshotWriteTest, WritesOnlyTheGuestsPagesAndReadsBack) {
  std::memset(ram_ + 4096 * 3, 0x11, 4096);
  std::memset(ram_ + 4096 * 4, 0x22, 10);
  std::memset(ram_ + 4096 * 9, 0, 4096);  // touched, but zero: a hole all the same
  const devices::GuestMemory ram(std::span(ram_, kRam));
  const auto st = write_snapshot_file(path_, sample_sections(), ram, true);
  EXPECT_EQ(st.memory_written, 2u * 4096);
  EXPECT_EQ(st.file_bytes, 8192u + kRam);

  const SnapshotFile f = SnapshotFile::open(path_);
  ASSERT_EQ(f.meta.sections.size(), 3u);
  void* back = ::mmap(nullptr, kRam, PROT_READ, MAP_PRIVATE, f.fd.get(),
                      static_cast<off_t>(f.meta.memory_offset));
  ASSERT_NE(back, MAP_FAILED);
  EXPECT_EQ(std::memcmp(back, ram_, kRam), 0);
  ::munmap(back, kRam);
  struct stat sb {};
  ASSERT_EQ(::stat(path_.c_str(), &sb), 0);
  EXPECT_LT(static_cast<std::uint64_t>(sb.st_blocks) * 512, kRam / 2) << "holes were written";
}

TEST_F(SnapshotWriteTest, ANewSnapshotIsANewFileNotAnOverwrite) {
  const devices::GuestMemory ram(std::span(ram_, kRam));
  std::memset(ram_, 0x33, 4096);
  write_snapshot_file(path_, sample_sections(), ram, true);
  // A clone maps the first snapshot...
  const SnapshotFile first = SnapshotFile::open(path_);
  void* mapped = ::mmap(nullptr, kRam, PROT_READ, MAP_PRIVATE, first.fd.get(),
                        static_cast<off_t>(first.meta.memory_offset));
  ASSERT_NE(mapped, MAP_FAILED);
  // ...and a second one is written to the same name.
  std::memset(ram_, 0x44, 4096);
  write_snapshot_file(path_, sample_sections(), ram, true);
  EXPECT_EQ(static_cast<const unsigned char*>(mapped)[0], 0x33) << "the clone's pages changed";
  ::munmap(mapped, kRam);
  const SnapshotFile second = SnapshotFile::open(path_);
  EXPECT_NE(second.fd.get(), -1);
}

TEST_F(SnapshotWriteTest, AnUnwritableFolderIsAnErrorAndLeavesNothing) {
  const devices::GuestMemory ram(std::span(ram_, kRam));
  try {
    write_snapshot_file("/nonexistent-folder/x.snap", sample_sections(), ram, true);
    FAIL() << "no error";
  } catch (const SnapshotError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create"), std::string::npos) << e.what();
  }
}

TEST_F(SnapshotWriteTest, OpenNamesTheFileAndTheProblem) {
  try {
    SnapshotFile::open(path_ + ".missing");
    FAIL();
  } catch (const SnapshotError& e) {
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "MVMMSNAP", 8), 8);
  ::close(fd);
  try {
    SnapshotFile::open(path_);
    FAIL();
  } catch (const SnapshotError& e) {
    EXPECT_NE(std::string(e.what()).find(path_), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("shorter than a snapshot's header"), std::string::npos);
  }
}

}  // namespace
}  // namespace minivmm::vmm
