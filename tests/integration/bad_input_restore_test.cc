// `minivmm run --restore` given a bad snapshot or a command line that contradicts one: one line
// naming the problem and exit 4 (the file) or 2 (the command line), never a crash, and nothing
// of the guest run. These need no KVM: the file and the configuration are judged before
// /dev/kvm is opened. (A snapshot's vCPU records, its CPU model and its device sections are
// judged after, by the machine: tests/integration/snapshot_test.cc.)
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "run_minivmm.h"
#include "test_snapshot.h"
#include "vmm/machine/snapshot_config.h"
#include "vmm/snapshot/snapshot_file.h"

namespace minivmm::testing {
namespace {

constexpr std::uint64_t kRam = kTestSnapshotRam;

class BadInputRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/tmp/minivmm-bad-restore-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override { unlink(path_.c_str()); }

  // A snapshot file as minivmm writes one, of a 64 MiB one-vCPU guest, with `sections` as its
  // sections and memory of `ram` bytes (sparse).
  void write(const std::vector<vmm::SnapshotSection>& sections, std::uint64_t ram = kRam) {
    ASSERT_TRUE(write_test_snapshot(path_, sections, ram)) << path_;
  }
  static std::vector<vmm::SnapshotSection> good_sections() { return test_snapshot_sections(); }
  void patch(std::size_t at, std::uint8_t v) {
    std::fstream f(path_, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(v));
  }
  RunResult restore(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"run", "--restore", path_, "--no-console-input"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_minivmm(args, false);
  }
  static void expect_one_line(const RunResult& r, int code, const std::string& words) {
    EXPECT_EQ(r.term_signal, 0);
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
    EXPECT_EQ(line_count(r.err), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << "the guest ran: " << r.out;
  }

  std::string path_;
};

TEST_F(BadInputRestoreTest, MissingFile) {
  expect_one_line(restore(), kBadKernel, "No such file");
}

TEST_F(BadInputRestoreTest, NotARegularFile) {
  expect_one_line(run_minivmm({"run", "--restore", "/tmp", "--no-console-input"}, false),
                  kBadKernel, "is not a regular file");
  // A FIFO without a writer: refused at once, not waited on.
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
  expect_one_line(restore(), kBadKernel, "is not a regular file");
}

TEST_F(BadInputRestoreTest, EmptyAndTruncatedFiles) {
  { std::ofstream(path_, std::ios::trunc); }
  expect_one_line(restore(), kBadKernel, "shorter than a snapshot's header");
  write(good_sections());
  ASSERT_EQ(truncate(path_.c_str(), 4096 + 1000), 0);
  expect_one_line(restore(), kBadKernel, "cut short");
}

TEST_F(BadInputRestoreTest, WrongMagicAndVersion) {
  write(good_sections());
  patch(0, 'X');
  expect_one_line(restore(), kBadKernel, "not a minivmm snapshot");
  write(good_sections());
  patch(8, 7);
  expect_one_line(restore(), kBadKernel, "format version 7");
}

TEST_F(BadInputRestoreTest, ChecksumMismatch) {
  write(good_sections());
  // The last byte of the config record (its NIC count), under the section's checksum.
  const auto meta = vmm::encode_snapshot_metadata(good_sections(), kRam);
  const std::size_t config_end = vmm::kSnapshotHeaderBytes + 2 + 6 + 8 +
                                 good_sections()[0].data.size() - 1;
  ASSERT_LT(config_end, meta.size());
  patch(config_end, 0x55);
  expect_one_line(restore(), kBadKernel, "'config': checksum mismatch");
}

TEST_F(BadInputRestoreTest, MemoryOfTheWrongSize) {
  write(good_sections(), 32ull << 20);  // the configuration says 64 MiB
  expect_one_line(restore(), kBadKernel, "the memory section has 33554432");
}

TEST_F(BadInputRestoreTest, NoConfigurationOrABadOne) {
  write({{"vm_clock", std::vector<std::uint8_t>(8)}});
  expect_one_line(restore(), kBadKernel, "no section 'config'");
  auto s = good_sections();
  s[0].data[9] = 99;  // 99 vCPUs (after the layout version and the RAM size)
  write(s);
  expect_one_line(restore(), kBadKernel, "99 vCPUs");
}

// Issue 31: what a snapshot's configuration record says is the file's business: exit 4, one
// line, naming the file and the section, whatever bytes a name in it holds.
TEST_F(BadInputRestoreTest, AConfigurationRecordErrorNamesTheFileAndTheSectionOnOneLine) {
  vmm::Config c;
  c.cpuid_mask = {"x2apic\nminivmm: error: forged second line"};
  write(test_snapshot_sections(c));
  const RunResult r = restore();
  expect_one_line(r, kBadKernel, "--restore: " + path_ + ": config state: an unknown CPUID feature");
  EXPECT_TRUE(has(r.err, "x2apic\\x0aminivmm")) << "the newline is shown, not obeyed: " << r.err;
  auto s = good_sections();
  s[0].data[9] = 17;  // 17 vCPUs (after the layout version and the RAM size)
  write(s);
  expect_one_line(restore(), kBadKernel, "--restore: " + path_ + ": config state: 17 vCPUs");
}

// Issue 31: a drive path is stored resolved. One stored relative (an older minivmm) would open
// whatever file of that name sits in the restoring process's folder: refused, unless the drive
// is given again.
TEST_F(BadInputRestoreTest, ARelativeDrivePathInTheSnapshotIsRefusedUnlessGivenAgain) {
  const std::string disk = path_ + ".img";
  { std::ofstream(disk, std::ios::binary) << std::string(4096, 'd'); }
  vmm::Config c;
  vmm::DriveSpec d;
  d.path = "disk.img";
  c.drives.push_back(d);
  write(test_snapshot_sections(c, {4096}));
  expect_one_line(restore(), kBadKernel,
                  "drive 0's path 'disk.img' is relative; give that drive with --restore-drive 0=PATH");
  const RunResult given = restore({"--restore-drive", "0=" + disk, "--duration", "0.01"});
  EXPECT_FALSE(has(given.err, "is relative")) << given.err;
  EXPECT_NE(given.exit_code, kUsage) << given.err;
  ::unlink(disk.c_str());
}

TEST_F(BadInputRestoreTest, AContradictingOptionIsAUsageError) {
  write(good_sections());
  expect_one_line(restore({"--cpus", "2"}), kUsage, "--cpus");
  expect_one_line(restore({"--memory", "128M"}), kUsage, "--memory");
  expect_one_line(restore({"--pit-tick", "loop"}), kUsage, "--pit-tick kernel");
  expect_one_line(restore({"--drive", "/tmp/x.img"}), kUsage, "--restore-drive");
  expect_one_line(restore({"--restore-drive", "0=/tmp/x.img"}), kUsage, "has 0 drives");
  expect_one_line(restore({"--restore-drive", "zero"}), kUsage, "is not N=PATH");
  // Saying what the snapshot says is fine: the next error is KVM's or none.
  const RunResult same = restore({"--cpus", "1", "--memory", "64M", "--duration", "0.01"});
  EXPECT_NE(same.exit_code, kUsage) << same.err;
}

TEST_F(BadInputRestoreTest, BootOptionsAndRestoreDriveAloneAreUsageErrors) {
  write(good_sections());
  expect_one_line(restore({"--kernel", "/tmp/k"}), kUsage, "a restored guest is not booted");
  expect_one_line(restore({"--cmdline", "x"}), kUsage, "a restored guest is not booted");
  const RunResult r = run_minivmm({"run", "--restore-drive", "0=/tmp/x"}, false);
  EXPECT_EQ(r.exit_code, kUsage) << r.err;
  const RunResult none = run_minivmm({"run"}, false);
  EXPECT_EQ(none.exit_code, kUsage) << none.err;
  EXPECT_NE(none.err.find("--kernel is required"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace minivmm::testing
