// The seccomp sandbox under KVM (docs/reliability.md, "Seccomp sandbox"): every mode still runs
// with the filters on, each kind of thread is really filtered, and a forbidden syscall ends the
// run with the one-line report and exit code 14.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "run_minivmm.h"

namespace minivmm::testing {
namespace {

constexpr int kSeccompViolation = 14;  // vmm/exit_code.h
// More than the guest's 64 scratch sectors, quick to sum.
constexpr std::uint64_t kSeccompDiskBytes = 128 << 10;

std::string test_guest(const std::string& name) {
  return std::string(MINIVMM_TEST_GUEST_DIR) + "/minivmm-test-" + name + ".elf";
}

// A zero-filled disk for blk=check; removed by the caller.
std::string make_seccomp_disk() {
  char path[] = "/tmp/minivmm-seccomp-disk-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(kSeccompDiskBytes)), 0);
  ::close(fd);
  return path;
}

std::uint64_t filters(const nlohmann::json& stats, const char* kind) {
  return stats["seccomp"]["threads"][kind]["filters"].get<std::uint64_t>();
}

// One run of the matrix. Either the guest ends it through debug-exit after `ticks` ticks (the
// stop comes from a vCPU thread), or --duration does (from the loop's timer).
struct SandboxCase {
  std::string name;
  std::vector<std::string> args;  // after run --kernel K
  std::string kernel = "";        // "" the bundled bzImage guest, else a multiboot test guest
  bool by_duration = false;       // ends by --duration 1 (exit 0) instead of debug-exit
  std::string expect_out = "";    // console text that proves the guest ran (and ticked)
  std::uint64_t vcpus = 1;
  // Add a virtio-blk disk served by this engine (--drive FILE,aio=...): "io_uring" (no thread
  // of its own: the loop submits) or "threads" (a worker thread); "" none.
  std::string drive_aio = "";
  std::string mode = "on";        // the default unless --seccomp says otherwise
};

// ctest shows the case by name, not as 176 bytes.
void PrintTo(const SandboxCase& c, std::ostream* os) { *os << c.name; }

std::string sandbox_case_name(const ::testing::TestParamInfo<SandboxCase>& info) {
  return info.param.name;
}

class BootSeccompTest : public ::testing::TestWithParam<SandboxCase> {};

// Every value of --pit, --pit-tick, --alarm, --poll, --console and --seccomp appears at least
// once, with --drive, --cpus 2, both kinds of kernel (bzImage and multiboot) and both ways a
// run ends; the control socket and the signals run with the filter on in pause_test.cc and
// boot_test.cc (the default is on).
TEST_P(BootSeccompTest, RunsAndTicksUnderItsFilters) {
  SKIP_WITHOUT_KVM();
  const SandboxCase& c = GetParam();
  const bool drive = !c.drive_aio.empty();
  const std::string disk = drive ? make_seccomp_disk() : "";
  std::vector<std::string> args{"run", "--kernel",
                                c.kernel.empty() ? guest_image() : test_guest(c.kernel)};
  args.insert(args.end(), c.args.begin(), c.args.end());
  if (c.by_duration) {
    args.insert(args.end(), {"--duration", "1"});
  } else {
    args.insert(args.end(), {"--duration", "60"});  // a hang still ends
  }
  if (drive) args.insert(args.end(), {"--drive", disk + ",aio=" + c.drive_aio});
  const RunResult r = run_minivmm(args);
  if (drive) ::unlink(disk.c_str());

  ASSERT_EQ(r.term_signal, 0) << r.err;
  EXPECT_EQ(r.err.find("seccomp: the"), std::string::npos) << r.err;
  ASSERT_EQ(r.exit_code, c.by_duration ? 0 : kGuestSuccess)
      << "stderr:\n" << r.err << "\nconsole:\n" << r.out;
  EXPECT_NE(r.out.find(c.expect_out), std::string::npos) << r.out;
  ASSERT_TRUE(r.stats.has_value()) << r.err;
  const auto& s = *r.stats;
  if (c.by_duration && s["pit"] == "user") {
    // The PIT's tick path runs under the filters (a forbidden call ends the run, and the stderr
    // check above). Not a rate: one second at 250 Hz gave 69 ticks under ASan on a loaded CI
    // host, since the guest programs the PIT only after its boot; the rate is the devices' unit
    // tests' and the boot matrix's.
    EXPECT_GT(s["guest"]["ticks_injected"].get<std::uint64_t>(), 10u);
    EXPECT_EQ(s["guest"]["ticks_lost"].get<std::uint64_t>(), 0u);
  }
  ASSERT_EQ(s["seccomp"]["mode"], c.mode);
  // Filters are counted as they load: off loads none, on and log one per thread.
  const std::uint64_t one = c.mode == "off" ? 0 : 1;
  EXPECT_EQ(filters(s, "loop"), one);
  EXPECT_EQ(filters(s, "vcpu"), one * c.vcpus);
  EXPECT_EQ(filters(s, "signals"), one);
  EXPECT_EQ(filters(s, "blk"), c.drive_aio == "threads" ? one : 0);
  if (drive) {
    const std::string engine = c.drive_aio == "threads" ? "worker" : c.drive_aio;
    EXPECT_EQ(s["devices"]["virtio_blk0"]["engine"], engine);
  }
}

const std::string kShortRun = "timer=pit hz=250 ticks=100";  // 0.4 s of guest time, then exit
const std::string kIdle = "timer=pit hz=250 ticks=0";     // ticks until --duration

INSTANTIATE_TEST_SUITE_P(
    Modes, BootSeccompTest,
    ::testing::Values(
        // The defaults: user PIT, loop ticks, ppoll alarm, epoll.
        SandboxCase{"Defaults", {"--cmdline", kIdle}, "", true, "minivmm-guest"},
        SandboxCase{"PitKvmTimerfdPpoll",
                    {"--cmdline", kShortRun, "--pit", "kvm", "--alarm", "timerfd", "--poll", "ppoll"},
                    "", false, "done 100"},
        SandboxCase{"PitTickVcpuDynticksTimerfdEpoll",
                    {"--cmdline", kShortRun, "--pit-tick", "vcpu", "--alarm", "dynticks", "--poll",
                     "timerfd-epoll"},
                    "", false, "done 100"},
        SandboxCase{"PitTickKernelPeriodicAuto",
                    {"--cmdline", kIdle, "--pit-tick", "kernel", "--alarm", "periodic", "--poll",
                     "auto"},
                    "", true, "minivmm-guest"},
        SandboxCase{"PitTickLoopIrqIoctlLapic",
                    {"--cmdline", "timer=lapic hz=250 ticks=100", "--pit-tick", "loop",
                     "--irq-inject", "ioctl"},
                    "", false, "done 100"},
        SandboxCase{"VirtioConsoleAndDriveIoUring",
                    {"--cmdline", "console=virtio blk=check ticks=1", "--console", "virtio"},
                    "", false, "blk: scratch ok", 1, "io_uring"},
        SandboxCase{"DriveWorkerThread", {"--cmdline", "blk=check ticks=1"}, "", false,
                    "blk: scratch ok", 1, "threads"},
        SandboxCase{"MultibootTwoCpus", {"--cpus", "2", "--cmdline", "cpus=2", "--testdev"}, "smp", false,
                    "smp: 1 of 1 APs checked in", 2},
        SandboxCase{"Log", {"--cmdline", kShortRun, "--seccomp", "log"}, "", false, "done 100", 1,
                    "", "log"},
        SandboxCase{"Off", {"--cmdline", kShortRun, "--seccomp", "off", "--pit-tick", "kernel"}, "",
                    false, "done 100", 1, "", "off"}),
    sandbox_case_name);

// --seccomp-selftest=KIND: that thread calls socket(2), in no list, once its filter is in
// place. The run must end at once with exit code 14 and one line naming the thread kind and
// the syscall: it proves that kind of thread is filtered and that the report works from it.
class BootSeccompSelftest : public ::testing::TestWithParam<std::string> {};

TEST_P(BootSeccompSelftest, ForbiddenSyscallEndsTheRunWithTheReport) {
  SKIP_WITHOUT_KVM();
  const std::string& kind = GetParam();
  // A drive on a worker thread, so the blk worker exists (for every kind); aio=threads, since
  // io_uring needs none.
  const std::string disk = make_seccomp_disk();
  const RunResult r =
      run_minivmm({"run", "--kernel", guest_image(), "--cmdline", kIdle, "--duration", "20",
                   "--drive", disk + ",aio=threads", "--seccomp-selftest", kind},
                  false);
  ::unlink(disk.c_str());
  ASSERT_EQ(r.term_signal, 0) << "killed instead of reporting\n" << r.err;
  EXPECT_EQ(r.exit_code, kSeccompViolation) << r.err;
  const std::string line =
      "minivmm: seccomp: the " + kind + " thread made forbidden syscall 41 (socket); ";
  const auto at = r.err.find(line);
  ASSERT_NE(at, std::string::npos) << r.err;
  // One line: the report ends with its own newline, and nothing is printed after it.
  const auto eol = r.err.find('\n', at);
  ASSERT_NE(eol, std::string::npos);
  EXPECT_EQ(eol + 1, r.err.size()) << r.err;
}

// The same hook with the filter off: the run goes on to its --duration. So the exit code 14
// above came from the filter, not from the hook.
TEST_P(BootSeccompSelftest, WithTheFilterOffTheSameSyscallIsAllowed) {
  SKIP_WITHOUT_KVM();
  const std::string& kind = GetParam();
  const std::string disk = make_seccomp_disk();
  const RunResult r =
      run_minivmm({"run", "--kernel", guest_image(), "--cmdline", kIdle, "--duration", "0.5",
                   "--drive", disk + ",aio=threads", "--seccomp-selftest", kind, "--seccomp",
                   "off"});
  ::unlink(disk.c_str());
  ASSERT_EQ(r.term_signal, 0) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("seccomp: the"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(ThreadKinds, BootSeccompSelftest,
                         ::testing::Values("loop", "vcpu", "signals", "blk"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace minivmm::testing
