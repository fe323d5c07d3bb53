// virtio-mmio end to end: --drive and --console CLI errors (no KVM needed: they are checked
// before /dev/kvm is opened), and the bundled guest's virtio driver against real files under
// KVM (skipped where /dev/kvm cannot be opened).
#include <fcntl.h>
#include <sys/file.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "run_minivmm.h"

namespace minivmm::testing {
namespace {

constexpr std::uint64_t kDiskBytes = 64ull << 20;  // the size the issue asks to round-trip
// The read-only test needs the guest's write refused, not a long read: the guest checksums what
// it reads at about 3 us per word on this host's emulating KVM (24 s for 64 MiB).
constexpr std::uint64_t kSmallDiskBytes = 1ull << 20;
constexpr std::uint64_t kScratchSectors = 64;      // guest/layout.h BLK_SCRATCH_SECTORS

// A disk whose 64-bit word i is a fixed function of i, so corruption anywhere shows.
std::string make_disk(std::uint64_t bytes = kDiskBytes) {
  char path[] = "/tmp/minivmm-virtio-disk-XXXXXX";
  const int fd = ::mkstemp(path);
  std::vector<std::uint64_t> chunk(1 << 17);  // 1 MiB
  for (std::uint64_t off = 0; off < bytes; off += 8 * chunk.size()) {
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      const std::uint64_t w = off / 8 + i;
      chunk[i] = w * 0x2545f4914f6cdd1dull ^ (w >> 7);
    }
    EXPECT_EQ(::pwrite(fd, chunk.data(), 8 * chunk.size(), static_cast<off_t>(off)),
              static_cast<ssize_t>(8 * chunk.size()));
  }
  ::close(fd);
  return path;
}

std::vector<std::uint64_t> read_words(const std::string& path, std::uint64_t offset,
                                      std::uint64_t bytes) {
  std::vector<std::uint64_t> w(bytes / 8);
  const int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_EQ(::pread(fd, w.data(), bytes, static_cast<off_t>(offset)),
            static_cast<ssize_t>(bytes));
  ::close(fd);
  return w;
}

// guest/virtio.c fnv64_words over the whole file.
std::string guest_checksum(const std::string& path) {
  std::uint64_t c = 0xcbf29ce484222325ull;
  for (std::uint64_t off = 0; off < kDiskBytes; off += 1 << 20) {
    for (std::uint64_t w : read_words(path, off, 1 << 20)) c = (c ^ w) * 0x100000001b3ull;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(c));
  return buf;
}

TEST(BadInputVirtioTest, DriveThatDoesNotExistIsAnImageError) {
  const RunResult r =
      run_minivmm({"run", "--kernel", guest_image(), "--drive", "/nonexistent/disk.img"}, false);
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_EQ(r.exit_code, kBadKernel) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/disk.img"), std::string::npos) << r.err;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
}

TEST(BadInputVirtioTest, DriveThatIsADirectoryIsAnImageError) {
  const RunResult r = run_minivmm({"run", "--kernel", guest_image(), "--drive", "/tmp"}, false);
  EXPECT_EQ(r.exit_code, kBadKernel) << r.err;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
}

TEST(BadInputVirtioTest, DriveWithAnUnknownOptionIsAUsageError) {
  const RunResult r =
      run_minivmm({"run", "--kernel", guest_image(), "--drive", "x,bogus"}, false);
  EXPECT_EQ(r.exit_code, kUsage) << r.err;
  EXPECT_NE(r.err.find("bogus"), std::string::npos) << r.err;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
}

TEST(BadInputVirtioTest, UnknownConsoleIsAUsageError) {
  const RunResult r =
      run_minivmm({"run", "--kernel", guest_image(), "--console", "hdmi"}, false);
  EXPECT_EQ(r.exit_code, kUsage) << r.err;
  EXPECT_NE(r.err.find("--console"), std::string::npos) << r.err;
}

TEST(BootVirtioTest, DiskRoundTripsThroughTheGuest) {
  SKIP_WITHOUT_KVM();
  const std::string disk = make_disk();
  const std::string expected = guest_checksum(disk);
  const auto before = read_words(disk, 0, kDiskBytes - kScratchSectors * 512);
  const RunResult r = run_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                                   "blk=check ticks=1", "--drive", disk, "--duration", "120"},
                                  true, 150);
  const auto untouched = read_words(disk, 0, kDiskBytes - kScratchSectors * 512);
  const auto scratch =
      read_words(disk, kDiskBytes - kScratchSectors * 512, kScratchSectors * 512);
  ::unlink(disk.c_str());
  ASSERT_EQ(r.exit_code, kGuestSuccess) << "stderr:\n" << r.err << "\nconsole:\n" << r.out;
  EXPECT_NE(r.out.find("blk: sectors=" + std::to_string(kDiskBytes / 512) +
                       " checksum=" + expected + "\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("blk: scratch ok"), std::string::npos) << r.out;
  EXPECT_TRUE(before == untouched) << "the guest wrote outside its scratch range";
  for (std::size_t j = 0; j < scratch.size(); ++j) {
    ASSERT_EQ(scratch[j], j * 0x9e3779b97f4a7c15ull + 1) << "scratch word " << j;
  }
  ASSERT_TRUE(r.stats.has_value());
  const auto& blk = (*r.stats)["devices"]["virtio_blk0"];
  EXPECT_EQ(blk["requests"]["reads"].get<std::uint64_t>(), kDiskBytes / (1 << 20) + 1);
  EXPECT_EQ(blk["requests"]["writes"].get<std::uint64_t>(), 1u);
  EXPECT_GE(blk["interrupts"].get<std::uint64_t>(), 1u);
#if MINIVMM_HAVE_LIBURING
  // The default engine where liburing is built in: every request went through the ring, one
  // submit per notification (the guest waits for each request before the next).
  ASSERT_EQ(blk["engine"], "io_uring");
  EXPECT_EQ(blk["io_uring"]["requests"].get<std::uint64_t>(),
            blk["requests"]["reads"].get<std::uint64_t>() + 2);  // + the write and the flush
  EXPECT_EQ(blk["io_uring"]["submit_errors"].get<std::uint64_t>(), 0u);
#endif
}

// A VMM that ended leaves its disk free at once: the next one on it is not refused "in use"
// while the first one's io_uring, which holds the open file, is freed by the kernel after the
// exit (20 of 20 back-to-back runs were refused before Machine::release_drives). Checked with a
// lock of our own too, as another program would take it.
TEST(BootVirtioTest, AnEndedRunLeavesItsDriveFreeAtOnce) {
  SKIP_WITHOUT_KVM();
  const std::string disk = make_disk(kSmallDiskBytes);
  for (int round = 0; round < 5; ++round) {
    const RunResult r = run_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                                     "timer=pit hz=250 ticks=5 blk=twice", "--drive", disk,
                                     "--no-console-input"});
    ASSERT_EQ(r.exit_code, kGuestSuccess) << "round " << round << ":\n" << r.err;
    const int fd = ::open(disk.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0)
        << "round " << round << ": the ended VMM still holds its drive's lock";
    ::close(fd);
  }
  ::unlink(disk.c_str());
}

TEST(BootVirtioTest, ReadOnlyDriveRefusesTheGuestsWrite) {
  SKIP_WITHOUT_KVM();
  const std::string disk = make_disk(kSmallDiskBytes);
  const auto before = read_words(disk, 0, kSmallDiskBytes);
  const RunResult r = run_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                                   "blk=check ticks=1", "--drive", disk + ",ro", "--duration",
                                   "120"},
                                  true, 150);
  const auto after = read_words(disk, 0, kSmallDiskBytes);
  ::unlink(disk.c_str());
  ASSERT_EQ(r.exit_code, kGuestSuccess) << "stderr:\n" << r.err << "\nconsole:\n" << r.out;
  EXPECT_NE(r.out.find("blk: write status=1"), std::string::npos) << r.out;
  EXPECT_TRUE(before == after) << "a read-only drive changed";
  ASSERT_TRUE(r.stats.has_value());
  EXPECT_EQ(
      (*r.stats)["devices"]["virtio_blk0"]["requests"]["errors"]["read_only"].get<std::uint64_t>(),
      1u);
}

TEST(BootVirtioTest, ConsoleVirtioCarriesTheBanner) {
  SKIP_WITHOUT_KVM();
  const RunResult r = run_minivmm(
      {"run", "--kernel", guest_image(), "--cmdline", "console=virtio ticks=250", "--console",
       "virtio"});
  ASSERT_EQ(r.exit_code, kGuestSuccess) << "stderr:\n" << r.err << "\nconsole:\n" << r.out;
  EXPECT_NE(r.out.find("minivmm-guest: timer=pit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("done 250"), std::string::npos) << r.out;
  ASSERT_TRUE(r.stats.has_value());
  const auto& con = (*r.stats)["devices"]["virtio_console"];
  EXPECT_GT(con["data"]["tx_bytes"].get<std::uint64_t>(), 20u);
  // The UART saw none of it.
  EXPECT_EQ((*r.stats)["devices"]["uart"]["bytes_out"].get<std::uint64_t>(), 0u);
}

}  // namespace
}  // namespace minivmm::testing
