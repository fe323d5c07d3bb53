// Boots the bundled guest under KVM and checks it ticks at the requested rate and exits through
// debug-exit with success. Skips only when /dev/kvm cannot be opened.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "run_minivmm.h"

namespace minivmm::testing {
namespace {

struct BootCase {
  std::string timer;  // guest timer=...
  std::string pit;    // --pit
  std::string alarm;  // --alarm
  std::string poll;   // --poll
  int hz;
  int ticks;
  std::vector<std::string> extra = {};  // more minivmm options
};

std::string case_name(const ::testing::TestParamInfo<BootCase>& info) {
  std::string n = info.param.timer + "_pit" + info.param.pit + "_" + info.param.alarm + "_" +
                  info.param.poll + "_" + std::to_string(info.param.hz) + "hz";
  for (const std::string& e : info.param.extra) n += "_" + e;
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

class BootTest : public ::testing::TestWithParam<BootCase> {};

TEST_P(BootTest, GuestTicksAtRequestedRateAndExitsThroughDebugExit) {
  SKIP_WITHOUT_KVM();
  const BootCase& c = GetParam();
  const std::string cmdline = "timer=" + c.timer + " hz=" + std::to_string(c.hz) +
                              " ticks=" + std::to_string(c.ticks);
  std::vector<std::string> args{"run",    "--kernel", guest_image(), "--cmdline", cmdline,
                                "--pit",  c.pit,      "--alarm",     c.alarm,     "--poll",
                                c.poll};
  args.insert(args.end(), c.extra.begin(), c.extra.end());
  const RunResult r = run_minivmm(args);
  ASSERT_EQ(r.term_signal, 0) << r.err;
  ASSERT_EQ(r.exit_code, kGuestSuccess) << "stderr:\n" << r.err << "\nconsole:\n" << r.out;
  EXPECT_NE(r.out.find("minivmm-guest"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("done " + std::to_string(c.ticks)), std::string::npos) << r.out;
  ASSERT_TRUE(r.stats.has_value()) << r.err;
  const auto& s = *r.stats;

  // The guest counted `ticks` ticks at `hz`: that must have taken ticks/hz of guest time, plus a
  // boot that costs a few hundred emulated instructions (well under 100 ms). No host, however
  // busy, makes a guest finish sooner: ticks come at most on their grid.
  const double vm_s = s["time"]["vm_s"].get<double>();
  const double expected_s = static_cast<double>(c.ticks) / c.hz;
  EXPECT_GT(vm_s, expected_s - 0.01) << "guest finished faster than its ticks allow";
  // No device raises more edges than the grid of vm_clock holds: a double delivery (~2N) or a
  // replay fails this whatever the load, since both sides are counted in vm time.
  const auto grid = static_cast<std::uint64_t>(vm_s * c.hz) + 2;
  // No upper bound on the guest's time: a busy host delays the last ticks and the exit by as
  // long as it likes (CI saw 1.79 s for a 1 s guest with --alarm periodic beside two builds),
  // and the count below, which it cannot change, is the verdict. A rate bug (half speed) is the
  // devices' unit tests' to find, on a fake clock (i8254_pit_test.cc, mc146818_rtc_test.cc).

  if (c.pit == "user" && c.timer == "pit") {
    // minivmm's own PIT injected them: at least what the guest counted, and no more than the
    // grid of the whole run (the guest's exit takes as long as the host makes it, and ticks go
    // on meanwhile: counted in vm time, that is still the grid).
    const auto injected = s["guest"]["ticks_injected"].get<std::uint64_t>();
    // Less the edges the acknowledgement audit counted as merged: one it judged in doubt can
    // have been taken after all (its injection was still in KVM's irqfd worker when the count
    // was read), and then the report is short of what the guest saw. CI's ASan build saw two
    // such in one 250 Hz run, so the bound is what was sent, merged or not.
    const std::uint64_t doubt = s["devices"]["pit"].value("ticks_merged", 0u);
    EXPECT_GE(injected + doubt, static_cast<std::uint64_t>(c.ticks)) << s["devices"]["pit"].dump();
    EXPECT_LE(injected, grid + doubt) << "more ticks than the grid of " << vm_s << " s";
    EXPECT_EQ(s["guest"]["ticks_lost"].get<std::uint64_t>(), 0u);
    if (s["pit_tick"] == "vcpu") {
      // The vCPU thread took every expiry itself: one KVM_RUN interruption and one timer signal
      // per tick, and the loop thread ran none of the PIT's timers.
      const auto& vt = s["vcpu_timers"];
      EXPECT_GE(vt["timer_signals_taken"].get<std::uint64_t>(), injected);
      // The periodic fast path: a handful of arms, never one per tick, but for two per
      // catch-up (vcpu_catch_ups). This host runs its vCPU thread a whole period late on
      // 10-25% of ticks at 1000 Hz, even alone (593 arms for 1000 ticks seen: 226 clamped
      // passes, 280 retries), so the bound counts those episodes rather than a fraction of the
      // ticks. A loop that re-arms per tick exceeds it unless half its ticks were catch-ups
      // (ThreadTimersTest checks the fast path exactly).
      const auto arms = vt["alarm_arms"].get<std::uint64_t>();
      const auto catch_ups = vcpu_catch_ups(s);
      EXPECT_LE(arms, 2 * catch_ups + 10) << "periodic fast path is off: " << vt.dump();
      // No wakeup with nothing due on a quiet host. One was seen under TSan on a loaded one,
      // its cause not established (Linux 6.13+ drops a timer signal that a later timer_settime
      // made stale, so it is not that): allowed only beside catch-ups.
      EXPECT_LE(vt["false_wakeups"].get<std::uint64_t>(), catch_ups) << vt.dump();
      EXPECT_LT(s["loop"]["timers_run"].get<std::uint64_t>(), injected / 10);
      EXPECT_GE(s["vcpu_syscalls"]["rt_sigtimedwait"].get<std::uint64_t>(), injected);
    } else if (s["pit_tick"] == "kernel") {
      // The host kernel delivered the periodic ticks: the loop ran no PIT timer per tick, only
      // the train's refill every few dozen periods (the acknowledgement audit rides on it),
      // and the train counted what it signalled.
      const auto& pit = s["devices"]["pit"];
      const auto& kt = pit["kernel_train"];
      // The guest's ticks came from the train, less the edges that merged, plus the merged
      // and missed ones the PIT owed and sent itself (CI once saw 999 train edges): while a
      // train runs, the PIT sends nothing but what the audit found merged or the train missed
      // (probes included, each one owed again if it merged too), and, while it holds a stalled
      // train, the ticks of its own timer (issue 25: none on a quiet host).
      const auto missed = pit["ticks_missed"].get<std::uint64_t>();
      const auto fallback = pit["fallback_ticks"].get<std::uint64_t>();
      EXPECT_LE(pit["ticks_injected_by_pit"].get<std::uint64_t>(),
                pit["ticks_merged"].get<std::uint64_t>() + missed + fallback)
          << pit.dump();
      EXPECT_EQ(kt["failures"].get<std::uint64_t>(), 0u);
      EXPECT_EQ(pit["train_starts"].get<std::uint64_t>(), 1u);
      // Besides the refills, one retry per tick the audit found merged (a vCPU the host ran
      // late: none on a quiet host, a few percent with ctest -j2 on two CPUs) or the train
      // missed, per owed tick that found IRQ0 still busy, and the held train's timer ticks.
      // Counted apart, nothing else may run per tick.
      const auto timers_run = s["loop"]["timers_run"].get<std::uint64_t>();
      const auto retries = pit["ticks_merged"].get<std::uint64_t>() + missed + fallback +
                           pit["ticks_coalesced"].get<std::uint64_t>();
      EXPECT_LE(timers_run, kt["refills"].get<std::uint64_t>() + retries) << pit.dump();
      EXPECT_LT(timers_run - std::min(timers_run, retries), injected / 8) << pit.dump();
    } else {
      EXPECT_EQ(s["pit_tick"], "loop");
    }
  }
  if (c.timer == "rtc") {
    // Each periodic interrupt the guest counted was raised by minivmm's RTC.
    const auto irqs = s["devices"]["rtc"]["periodic_irqs"].get<std::uint64_t>();
    EXPECT_GE(irqs, static_cast<std::uint64_t>(c.ticks));
    EXPECT_LE(irqs, grid) << "more periodic interrupts than the grid of " << vm_s << " s";
  }
  EXPECT_EQ(s["exit"]["code"].get<int>(), kGuestSuccess);
}

INSTANTIATE_TEST_SUITE_P(
    Timers, BootTest,
    ::testing::Values(BootCase{"pit", "user", "timerfd", "epoll", 250, 250},
                      BootCase{"pit", "kvm", "timerfd", "epoll", 250, 250},
                      BootCase{"lapic", "user", "timerfd", "epoll", 250, 250},
                      BootCase{"lapic", "kvm", "timerfd", "epoll", 250, 250},
                      // The RTC's periodic interrupt runs at powers of two only.
                      BootCase{"rtc", "user", "timerfd", "epoll", 256, 256},
                      BootCase{"rtc", "user", "ppoll", "ppoll", 1024, 1024},
                      BootCase{"pit", "user", "timerfd", "epoll", 1000, 1000}),
    case_name);

INSTANTIATE_TEST_SUITE_P(
    AlarmBackends, BootTest,
    ::testing::Values(BootCase{"pit", "user", "dynticks", "epoll", 250, 250},
                      BootCase{"pit", "user", "ppoll", "ppoll", 250, 250},
                      BootCase{"pit", "user", "ppoll", "epoll", 250, 250},
                      BootCase{"pit", "user", "ppoll", "timerfd-epoll", 250, 250},
                      BootCase{"pit", "user", "ppoll", "auto", 250, 250},
                      BootCase{"pit", "user", "periodic", "epoll", 250, 250}),
    case_name);

// The PIT's ticks delivered by the vCPU thread (a timer signal interrupts KVM_RUN), with either
// way of raising IRQ0 from there, and by the host kernel (edges armed ahead on timerfds).
INSTANTIATE_TEST_SUITE_P(
    PitTick, BootTest,
    ::testing::Values(BootCase{"pit", "user", "ppoll", "epoll", 250, 250, {"--pit-tick", "vcpu"}},
                      BootCase{"pit", "user", "ppoll", "epoll", 1000, 1000,
                               {"--pit-tick", "vcpu", "--irq-inject", "ioctl"}},
                      BootCase{"pit", "user", "dynticks", "epoll", 250, 250,
                               {"--pit-tick", "vcpu", "--irq-inject", "irqfd"}},
                      BootCase{"pit", "user", "ppoll", "epoll", 250, 250, {"--pit-tick", "kernel"}},
                      BootCase{"pit", "user", "timerfd", "epoll", 1000, 1000,
                               {"--pit-tick", "kernel"}}),
    case_name);

// IRQ0 the way an APIC-based OS takes it: the guest masks both PICs and routes pin 0 of the
// I/O APIC, edge-triggered, to the boot CPU (guest `irq=ioapic`). The PIT's acknowledgement
// audit reads the guest's EOIs from KVM's irqfd resampler; for an edge-triggered I/O APIC pin
// KVM reports them only because the resampler registered an ack notifier on the GSI. More
// than kAcklessEdgesLimit (512) edges without one would make the PIT give the audit up.
class BootIoapicTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BootIoapicTest, PitTicksThroughTheIoapicAreCountedAndAcknowledged) {
  SKIP_WITHOUT_KVM();
  const RunResult r =
      run_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                   "timer=pit irq=ioapic hz=250 ticks=600", "--pit-tick", GetParam()});
  ASSERT_EQ(r.term_signal, 0) << r.err;
  ASSERT_EQ(r.exit_code, kGuestSuccess) << "stderr:\n" << r.err << "\nconsole:\n" << r.out;
  EXPECT_NE(r.out.find("done 600"), std::string::npos) << r.out;
  ASSERT_TRUE(r.stats.has_value()) << r.err;
  const auto& s = *r.stats;
  const auto& pit = s["devices"]["pit"];
  // As in the boot matrix: no faster than the grid, and no upper bound (a busy host's).
  EXPECT_GT(s["time"]["vm_s"].get<double>(), 600.0 / 250 - 0.01);
  EXPECT_EQ(s["guest"]["ticks_lost"].get<std::uint64_t>(), 0u);
  EXPECT_GT(pit["ack_audits"].get<std::uint64_t>(), 0u) << pit.dump();
  EXPECT_FALSE(pit["acks_abandoned"].get<bool>()) << "no EOI reported through the I/O APIC\n"
                                                  << pit.dump();
}

INSTANTIATE_TEST_SUITE_P(PitTick, BootIoapicTest, ::testing::Values("loop", "kernel"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// The guest's own failure paths judged by status and console alone (an exception ends with
// 255, irq=ioapic without the PIT is refused) are tests/testrun/boot.toml.

// A guest kernel's panic through pvpanic (port 0x505) ends the run at once with exit code 16,
// said in the report, instead of running on to a timeout (issue 22).
TEST(BootFailureTest, AGuestPanicThroughPvpanicEndsTheRunWithItsOwnCode) {
  SKIP_WITHOUT_KVM();
  const RunResult r = run_minivmm({"run", "--kernel", guest_image(), "--cmdline", "panic",
                                   "--duration", "30", "--no-console-input"});
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_EQ(r.exit_code, 16) << r.err;
  EXPECT_NE(r.out.find("minivmm-guest: panic"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nothing took the pvpanic write"), std::string::npos) << r.out;
  ASSERT_TRUE(r.stats.has_value()) << r.err;
  EXPECT_EQ((*r.stats)["exit"]["reason"], "guest panicked (pvpanic)");
  EXPECT_EQ((*r.stats)["devices"]["pvpanic"]["panics"], 1);
}

TEST(BootFailureTest, InstructionKvmCannotRunGivesACleanReport) {
  SKIP_WITHOUT_KVM();
  const RunResult r =
      run_minivmm({"run", "--kernel", guest_image(), "--cmdline", "unemulatable"}, false);
  EXPECT_EQ(r.term_signal, 0);
  if (r.exit_code == 255) {
    GTEST_SKIP() << "this host's KVM emulates int3; the guest reported it as an exception";
  }
  ASSERT_EQ(r.exit_code, 10) << r.err;
  EXPECT_NE(r.err.find("KVM internal error"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("emulation failure"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rip="), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cr0="), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("instruction bytes at"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": cc"), std::string::npos) << "int3 is opcode 0xcc\n" << r.err;
}

std::uint32_t guest_leaf1_ecx(const std::vector<std::string>& extra) {
  std::vector<std::string> args{"run", "--kernel", guest_image(), "--cmdline", "cpuid ticks=1"};
  args.insert(args.end(), extra.begin(), extra.end());
  const RunResult r = run_minivmm(args, false);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto pos = r.out.find("cpuid1.ecx=0x");
  EXPECT_NE(pos, std::string::npos) << r.out;
  if (pos == std::string::npos) return 0;
  return static_cast<std::uint32_t>(std::stoul(r.out.substr(pos + 13, 8), nullptr, 16));
}

TEST(BootCpuidTest, GuestSeesThePolicy) {
  SKIP_WITHOUT_KVM();
  constexpr std::uint32_t kCx16 = 1u << 13, kX2apic = 1u << 21, kHypervisor = 1u << 31;
  const std::uint32_t baseline = guest_leaf1_ecx({"--cpu", "baseline"});
  EXPECT_EQ(baseline & kCx16, 0u) << "baseline must hide CX16";
  EXPECT_NE(baseline & kHypervisor, 0u);
  // x2APIC is one of the few leaf-1 bits this host's KVM lets a VMM clear.
  const std::uint32_t masked = guest_leaf1_ecx({"--cpuid-mask", "x2apic"});
  EXPECT_EQ(masked & kX2apic, 0u);
  EXPECT_EQ(masked | kX2apic, baseline | kX2apic) << "only the masked bit changes";
}

TEST(BootDurationTest, IdleGuestRunsUntilDurationAndReportsCost) {
  SKIP_WITHOUT_KVM();
  const RunResult r = run_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                                   "timer=pit hz=250 ticks=0", "--duration", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(r.stats.has_value());
  const auto& s = *r.stats;
  const auto injected = s["guest"]["ticks_injected"].get<std::uint64_t>();
  const auto owed = s["devices"]["pit"]["ticks_owed"].get<std::uint64_t>();
  // 2 s of vm_clock at 250 Hz, counted against vm_clock itself: at most its grid, and at least
  // the grid less the guest's boot (it programs its PIT a moment after start; 0.1 s is a
  // hundred times what that takes) and what was owed but not yet sent at the end. The run
  // lasting longer than 2 s of wall time on a busy host changes neither side.
  const double vm_s = s["time"]["vm_s"].get<double>();
  EXPECT_LE(injected, static_cast<std::uint64_t>(vm_s * 250) + 2) << s["devices"]["pit"].dump();
  EXPECT_GE(static_cast<double>(injected + owed), (vm_s - 0.1) * 250)
      << s["devices"]["pit"].dump();
  EXPECT_EQ(s["guest"]["ticks_lost"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(s["loop"]["false_wakeups"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(s["loop_syscalls"]["timer_gettime"].get<std::uint64_t>(), 0u);
  // The console shows the guest's once-a-second line.
  EXPECT_NE(r.out.find("tick 250"), std::string::npos) << r.out;
}

// SIGINT, SIGTERM and SIGHUP end a running guest in order (exit 130 / 143 / 129, summary and
// stats written), whichever thread takes the PIT's expiry: the vCPU's timer signal must not get
// in the way.
class BootSignalTest : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(BootSignalTest, SignalEndsTheRunWithTheShellsStatus) {
  SKIP_WITHOUT_KVM();
  const auto [sig, pit_tick] = GetParam();
  Child child = start_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                               "timer=pit hz=250 ticks=0", "--duration", "60",
                               "--no-console-input", "--pit-tick", pit_tick});
  // A second of guest ticks ("tick 250"), so the handlers are in place and > 50 ticks exist.
  const bool running = wait_for_console(child, "tick 250");
  ASSERT_EQ(kill(child.pid, sig), 0);
  ASSERT_TRUE(running) << "the guest never printed its first second of ticks";
  const RunResult r = finish_minivmm(child, 20);
  EXPECT_EQ(r.term_signal, 0) << "killed instead of shutting down";
  EXPECT_EQ(r.exit_code, 128 + sig) << r.err;
  ASSERT_TRUE(r.stats.has_value()) << r.err;
  EXPECT_GT((*r.stats)["guest"]["ticks_injected"].get<std::uint64_t>(), 50u);
  const auto reason = (*r.stats)["exit"]["reason"].get<std::string>();
  const char* name = sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM";
  EXPECT_NE(reason.find(name), std::string::npos) << reason;
}

INSTANTIATE_TEST_SUITE_P(Signals, BootSignalTest,
                         ::testing::Combine(::testing::Values(SIGINT, SIGTERM, SIGHUP),
                                            ::testing::Values("loop", "vcpu", "kernel")));

// The kernel and initrd files are mapped while they are loaded and let go before the guest
// runs (issue 20: a 2 GiB padded kernel used to be kept in memory for the whole run).
TEST(BootImageFilesTest, NeitherTheKernelNorTheInitrdStaysMappedWhileTheGuestRuns) {
  SKIP_WITHOUT_KVM();
  char initrd[] = "/tmp/minivmm-initrd-XXXXXX";
  const int fd = mkstemp(initrd);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "initrd", 6), 6);
  close(fd);
  Child child = start_minivmm({"run", "--kernel", guest_image(), "--initrd", initrd,
                               "--cmdline", "timer=pit hz=250 ticks=0", "--duration", "20",
                               "--no-console-input"},
                              false);
  ASSERT_TRUE(wait_for_console(child, "minivmm-guest:"));
  std::ifstream maps("/proc/" + std::to_string(child.pid) + "/maps");
  const std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  ::kill(child.pid, SIGTERM);
  finish_minivmm(child);
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.find(guest_image()), std::string::npos) << "the kernel file is still mapped";
  EXPECT_EQ(text.find(initrd), std::string::npos) << "the initrd file is still mapped";
  unlink(initrd);
}

}  // namespace
}  // namespace minivmm::testing
