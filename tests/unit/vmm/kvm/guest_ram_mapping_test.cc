// GuestRamMapping::drop_written_pages, the reset's memory half: on a private mapping of a real
// file, the pages written (and only those, but the kept range) read the file's bytes again
// afterwards, by the PAGEMAP_SCAN ioctl and by the pagemap read alike.
#include "vmm/kvm/guest_ram_mapping.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

namespace minivmm::vmm {
namespace {

constexpr std::uint64_t kRamPage = 4096;

class FileRam {
 public:
  explicit FileRam(std::uint64_t pages) : bytes_(pages * kRamPage) {
    char tmpl[] = "/tmp/minivmm-ram-XXXXXX";
    fd_ = ::mkstemp(tmpl);
    ::unlink(tmpl);
    // Each page holds its own number, so a page that came back from the file says which.
    std::vector<std::uint8_t> page(kRamPage);
    for (std::uint64_t p = 0; p < pages; ++p) {
      for (std::uint64_t i = 0; i < kRamPage; ++i) page[i] = static_cast<std::uint8_t>(p * 7 + i);
      EXPECT_EQ(::pwrite(fd_, page.data(), kRamPage, static_cast<off_t>(p * kRamPage)),
                static_cast<ssize_t>(kRamPage));
    }
  }
  ~FileRam() { ::close(fd_); }
  int fd() const { return fd_; }
  std::uint64_t bytes() const { return bytes_; }
  static std::uint8_t file_byte(std::uint64_t page, std::uint64_t i) {
    return static_cast<std::uint8_t>(page * 7 + i);
  }

 private:
  int fd_ = -1;
  std::uint64_t bytes_;
};

std::uint8_t* ram_at(const GuestRamMapping& m, std::uint64_t gpa) {
  return reinterpret_cast<std::uint8_t*>(m.memory().bytes().data()) + gpa;
}

class DropWrittenPages : public ::testing::TestWithParam<GuestRamMapping::Scan> {};

TEST_P(DropWrittenPages, BringsBackTheFilesBytesButTheKeptRange) {
  constexpr std::uint64_t kPages = 2048;  // 8 MiB: more than one pagemap read, several PMDs
  FileRam file(kPages);
  GuestRamMapping ram(file.fd(), 0, file.bytes());
  // Read every 3rd page (file pages, not written), write a scattered set and a run.
  std::uint64_t sum = 0;
  for (std::uint64_t p = 0; p < kPages; p += 3) sum += *ram_at(ram, p * kRamPage);
  EXPECT_GT(sum, 0u);
  std::vector<std::uint64_t> written = {0, 1, 5, 511, 512, 513, 1000, 2047};
  for (std::uint64_t p = 1200; p < 1300; ++p) written.push_back(p);  // a run of 100
  for (const std::uint64_t p : written) *ram_at(ram, p * kRamPage + 17) ^= 0xff;
  // Keep [1000*4K + 100, 1000*4K + 200): page 1000 is kept whole, nothing else.
  const std::uint64_t keep_begin = 1000 * kRamPage + 100, keep_end = 1000 * kRamPage + 200;

  GuestRamMapping::DropStats st;
  try {
    st = ram.drop_written_pages(keep_begin, keep_end, GetParam());
  } catch (const std::system_error& e) {
    if (GetParam() == GuestRamMapping::Scan::kIoctl && e.code().value() == ENOTTY) {
      GTEST_SKIP() << "this host has no PAGEMAP_SCAN (Linux 6.7+)";
    }
    throw;
  }
  EXPECT_EQ(st.scan_ioctl, GetParam() == GuestRamMapping::Scan::kIoctl);
  EXPECT_EQ(st.pages_dropped, written.size() - 1);
  EXPECT_EQ(st.pages_scanned, kPages);
  // 0-1, 5, 511-513, 1200-1299, 2047: five runs (the kept page 1000 is not one).
  EXPECT_EQ(st.ranges, 5u);
  for (const std::uint64_t p : written) {
    const std::uint8_t want = FileRam::file_byte(p, 17);
    if (p == 1000) {
      EXPECT_EQ(*ram_at(ram, p * kRamPage + 17), static_cast<std::uint8_t>(want ^ 0xff)) << "kept page";
    } else {
      EXPECT_EQ(*ram_at(ram, p * kRamPage + 17), want) << "page " << p;
    }
  }
  // A second drop finds only the kept page written.
  const auto again = ram.drop_written_pages(keep_begin, keep_end, GetParam());
  EXPECT_EQ(again.pages_dropped, 0u);
}

TEST_P(DropWrittenPages, NoKeptRangeDropsEveryWrittenPage) {
  FileRam file(64);
  GuestRamMapping ram(file.fd(), 0, file.bytes());
  for (std::uint64_t p = 0; p < 64; p += 2) *ram_at(ram, p * kRamPage) = 0xee;
  GuestRamMapping::DropStats st;
  try {
    st = ram.drop_written_pages(0, 0, GetParam());
  } catch (const std::system_error& e) {
    if (e.code().value() == ENOTTY) GTEST_SKIP() << "this host has no PAGEMAP_SCAN";
    throw;
  }
  EXPECT_EQ(st.pages_dropped, 32u);
  EXPECT_EQ(st.ranges, 32u);
  for (std::uint64_t p = 0; p < 64; ++p) EXPECT_EQ(*ram_at(ram, p * kRamPage), FileRam::file_byte(p, 0));
}

INSTANTIATE_TEST_SUITE_P(Scans, DropWrittenPages,
                         ::testing::Values(GuestRamMapping::Scan::kIoctl,
                                           GuestRamMapping::Scan::kRead),
                         [](const auto& scan) {
                           return scan.param == GuestRamMapping::Scan::kIoctl ? "Ioctl" : "Read";
                         });

}  // namespace
}  // namespace minivmm::vmm
