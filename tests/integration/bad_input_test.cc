// Bad command lines and kernel images: a one-line error and a documented non-zero exit, never a
// crash. These need no KVM (every check of user input happens before /dev/kvm is opened).
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <string>

#include "run_minivmm.h"

namespace minivmm::testing {
namespace {

std::string write_temp(const std::string& contents) {
  char path[] = "/tmp/minivmm-badimage-XXXXXX";
  const int fd = mkstemp(path);
  close(fd);
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(BadInputTest, MissingKernelIsAOneLineError) {
  const RunResult r = run_minivmm({"run", "--kernel", "/nonexistent/bzImage"}, false);
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_EQ(r.exit_code, kBadKernel);
  EXPECT_NE(r.err.find("/nonexistent/bzImage"), std::string::npos) << r.err;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
}

TEST(BadInputTest, UnreadableKernelIsAnError) {
  const RunResult r = run_minivmm({"run", "--kernel", "/tmp"}, false);
  EXPECT_EQ(r.exit_code, kBadKernel);
  EXPECT_EQ(line_count(r.err), 1) << r.err;
}

TEST(BadInputTest, FileThatIsNotABzImageIsRejected) {
  const std::string path = write_temp(std::string(8192, 'x'));
  const RunResult r = run_minivmm({"run", "--kernel", path}, false);
  unlink(path.c_str());
  EXPECT_EQ(r.term_signal, 0);
  // The image is checked before /dev/kvm is opened: the same error with or without KVM.
  EXPECT_EQ(r.exit_code, kBadKernel) << r.err;
  EXPECT_NE(r.err.find("bad kernel image"), std::string::npos) << r.err;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
}

TEST(BadInputTest, EmptyKernelIsRejected) {
  const std::string path = write_temp("");
  const RunResult r = run_minivmm({"run", "--kernel", path}, false);
  unlink(path.c_str());
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_EQ(r.exit_code, kBadKernel) << r.err;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
}

TEST(BadInputTest, NonsenseMemoryIsAUsageError) {
  for (const char* bad : {"lots", "-5M", "12Q", "", "99999999999999999999999"}) {
    const RunResult r = run_minivmm({"run", "--kernel", guest_image(), "--memory", bad}, false);
    EXPECT_EQ(r.exit_code, kUsage) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("memory"), std::string::npos) << r.err;
  }
}

TEST(BadInputTest, MemoryTooLargeOrTooSmallIsAUsageError) {
  for (const char* bad : {"0", "4G", "100"}) {
    const RunResult r = run_minivmm({"run", "--kernel", guest_image(), "--memory", bad}, false);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_EQ(r.term_signal, 0);
    EXPECT_EQ(line_count(r.err), 1) << bad << ": " << r.err;
  }
}

TEST(BadInputTest, UnknownAlarmPollAndPitValuesAreUsageErrors) {
  for (auto args : std::vector<std::vector<std::string>>{
           {"--alarm", "nonsense"}, {"--poll", "select"}, {"--pit", "hpet"},
           {"--duration", "-1"}, {"--min-delta-ns", "0"}, {"--timer-slack", "0"},
           {"--periodic-hz", "0"}, {"--lost-ticks", "maybe"}, {"--pit-tick", "io"},
           {"--pit-tick", "thread"}, {"--irq-inject", "msi"}, {"--cpu-affinity", "loop=4096"},
           {"--cpu-affinity", "vcpu=0,vcpu=0"}, {"--cpu-affinity", ""}}) {
    std::vector<std::string> full{"run", "--kernel", guest_image()};
    full.insert(full.end(), args.begin(), args.end());
    const RunResult r = run_minivmm(full, false);
    EXPECT_EQ(r.exit_code, kUsage) << args[0] << " " << args[1] << ": " << r.err;
    EXPECT_NE(r.err.find(args[0]), std::string::npos) << r.err;
  }
}

TEST(BadInputTest, PitTickWithKvmsPitIsAUsageError) {
  const RunResult r = run_minivmm(
      {"run", "--kernel", guest_image(), "--pit", "kvm", "--pit-tick", "kernel"}, false);
  EXPECT_EQ(r.exit_code, kUsage) << r.err;
  EXPECT_NE(r.err.find("--pit-tick"), std::string::npos) << r.err;
}

TEST(BadInputTest, NoSubcommandOrUnknownOptionIsAUsageError) {
  EXPECT_EQ(run_minivmm({}, false).exit_code, kUsage);
  EXPECT_EQ(run_minivmm({"run", "--kernel", guest_image(), "--frobnicate"}, false).exit_code,
            kUsage);
  EXPECT_EQ(run_minivmm({"run"}, false).exit_code, kUsage);
}

TEST(BadInputTest, HelpAndVersionSucceed) {
  const RunResult help = run_minivmm({"run", "--help"}, false);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--kernel"), std::string::npos);
  const RunResult version = run_minivmm({"--version"}, false);
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("minivmm"), std::string::npos);
}

}  // namespace
}  // namespace minivmm::testing

namespace minivmm::testing {
namespace {

TEST(BadInputTest, CpusOutsideOneToSixteenIsAOneLineUsageError) {
  for (const char* bad : {"0", "17", "1000", "-1", "two", ""}) {
    const RunResult r = run_minivmm({"run", "--kernel", guest_image(), "--cpus", bad}, false);
    EXPECT_EQ(r.term_signal, 0);
    EXPECT_EQ(r.exit_code, kUsage) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("--cpus"), std::string::npos) << r.err;
    EXPECT_EQ(line_count(r.err), 1) << bad << ": " << r.err;
  }
}

// Bad multiboot images are caught by loading into scratch RAM before /dev/kvm is opened, so
// they give exit 4 on every host, with or without KVM.
TEST(BadInputTest, BadMultibootImageFailsBeforeKvm) {
  // A multiboot header whose checksum is wrong, at offset 0 of an otherwise empty file.
  std::string image(4096, '\0');
  const unsigned char header[12] = {0x02, 0xb0, 0xad, 0x1b, 0, 0, 0, 0, 1, 2, 3, 4};
  image.replace(0, sizeof header, reinterpret_cast<const char*>(header), sizeof header);
  const std::string path = write_temp(image);
  const RunResult r = run_minivmm({"run", "--kernel", path}, false);
  unlink(path.c_str());
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_EQ(r.exit_code, kBadKernel) << r.err;
  EXPECT_NE(r.err.find("multiboot"), std::string::npos) << r.err;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
}

}  // namespace
}  // namespace minivmm::testing
