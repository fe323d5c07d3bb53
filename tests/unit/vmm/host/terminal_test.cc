// The terminal on every exit path: raw mode on a real pseudo-terminal (openpty), given back on
// restore, taken again on reapply (SIGCONT), given back for good by the destructor, and given
// back when the process dies of a signal (crash_signals.h): a crash, or any signal whose default
// action ends a process, sent, or raised under each thread kind's seccomp filter. The process
// must still die as that signal.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "devices/host/console_input.h"
#include "devices/pc/uart_16550.h"
#include "loop/event_loop.h"
#include "tests/support/deadly_signals.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/vector_sink.h"
#include "timers/dynticks.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "timers/posix_timer_alarm.h"
#include "timers/thread_timers.h"
#include "vmm/host/crash_signals.h"
#include "vmm/exit_code.h"
#include "vmm/sandbox/seccomp_allow_lists.h"
#include "vmm/sandbox/seccomp_sandbox.h"
#include "vmm/host/stop_signals.h"
#include "vmm/vcpu/vcpu.h"

namespace minivmm::vmm {
namespace {

bool cooked(int fd) {
  termios t{};
  EXPECT_EQ(tcgetattr(fd, &t), 0);
  return (t.c_lflag & ICANON) != 0 && (t.c_lflag & ECHO) != 0;
}

class TerminalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(openpty(&master_, &slave_, nullptr, nullptr, nullptr), 0);
    ASSERT_TRUE(cooked(slave_));
  }
  void TearDown() override {
    input_.reset();
    close(master_);
    close(slave_);
  }
  void start() {
    devices::ConsoleInputOptions o;
    o.fd = slave_;
    o.interactive = true;
    input_ = std::make_unique<devices::ConsoleInput>(loop_, uart_, nullptr, o);
  }

  int master_ = -1;
  int slave_ = -1;
  timers::MonotonicClock mono_;
  timers::PollTimeoutAlarm alarm_;
  timers::Dynticks dynticks_{alarm_, mono_, {}};
  loop::EventLoop loop_{loop::make_poller(loop::PollerKind::kPpoll), dynticks_};
  minivmm::testing::FakeIrqLine irq_;
  minivmm::testing::VectorSink sink_;
  devices::Uart16550 uart_{irq_, sink_};
  std::unique_ptr<devices::ConsoleInput> input_;
};

TEST_F(TerminalTest, RawWhileRunningGivenBackOnStopTakenAgainOnContinueRestoredAtTheEnd) {
  start();
  EXPECT_TRUE(input_->raw_mode());
  EXPECT_FALSE(cooked(slave_));
  devices::ConsoleInput::restore_terminal();  // SIGTSTP
  EXPECT_TRUE(cooked(slave_));
  devices::ConsoleInput::reapply_raw_mode();  // SIGCONT
  EXPECT_FALSE(cooked(slave_));
  input_.reset();
  EXPECT_TRUE(cooked(slave_));
  devices::ConsoleInput::reapply_raw_mode();  // a late SIGCONT must not make it raw again
  EXPECT_TRUE(cooked(slave_));
}

// How a child in raw mode dies.
enum class DeathHow {
  kRaiseSegv,         // a sent SIGSEGV
  kAbort,             // abort()'s SIGABRT
  kNullWrite,         // a real fault
  kRaiseSigsys,       // what a seccomp trap delivers, but sent
  kSeccompTrap,       // a real seccomp trap: the sandbox's own handler, exit code 14
  kSent,              // `sig` from the parent (kill), the child waiting
  kRaisedUnderFilter  // `sig` raised by a thread under `kind`'s seccomp filter
};

struct TerminalDeath {
  std::string name;
  DeathHow how;
  int sig = 0;  // the signal it must die by (none for kSeccompTrap: exit code 14)
  ThreadKind kind = ThreadKind::kLoop;
};

void PrintTo(const TerminalDeath& d, std::ostream* os) { *os << d.name; }

SyscallAllowList terminal_allow_list(ThreadKind kind) {
  SeccompFacts facts;
#ifdef MINIVMM_SANITIZER_RUNTIME
  facts.sanitizer_runtime = true;
#endif
  switch (kind) {
    case ThreadKind::kLoop: return loop_allow_list(facts);
    case ThreadKind::kVcpu: return vcpu_allow_list(facts, -1);
    case ThreadKind::kSignals: return signals_allow_list(facts);
    case ThreadKind::kNinepWorker: return ninep_worker_allow_list(facts);
    case ThreadKind::kBlkWorker:
    case ThreadKind::kCount: break;
  }
  return blk_worker_allow_list(facts);
}

// Signals the test runner passed on as ignored (SIGXFSZ here; SIGQUIT in a background job of a
// script) are rightly left alone by the handlers, and blocked ones would never arrive: back to
// the default and unblocked, for a child that tests them. A sanitizer's handlers stay.
void reset_inherited_signals() {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa {};
    if (sigaction(sig, nullptr, &sa) == 0 && (sa.sa_flags & SA_SIGINFO) == 0 &&
        sa.sa_handler == SIG_IGN) {
      signal(sig, SIG_DFL);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// In a child: raw mode, then death as `d` says; `ready` is written to once it waits for a sent
// signal. The parent sees the terminal cooked again.
void die_raw(int slave, const TerminalDeath& d, int ready) {
  const rlimit no_core{0, 0};  // these deaths are expected: no core files
  setrlimit(RLIMIT_CORE, &no_core);
  // The filters allow the terminal's ioctls on stdin only (ConsoleInput's terminal in
  // minivmm), so under one the pty is stdin.
  const bool filtered =
      d.how == DeathHow::kSeccompTrap || d.how == DeathHow::kRaisedUnderFilter;
  if (filtered && dup2(slave, STDIN_FILENO) == STDIN_FILENO) slave = STDIN_FILENO;
  reset_inherited_signals();
  timers::MonotonicClock mono;
  timers::PollTimeoutAlarm alarm;
  timers::Dynticks dynticks{alarm, mono, {}};
  loop::EventLoop loop{loop::make_poller(loop::PollerKind::kPpoll), dynticks};
  minivmm::testing::FakeIrqLine irq;
  minivmm::testing::VectorSink sink;
  devices::Uart16550 uart{irq, sink};
  devices::ConsoleInputOptions o;
  o.fd = slave;
  o.interactive = true;
  devices::ConsoleInput input(loop, uart, nullptr, o);
  if (!input.raw_mode()) _exit(90);
  install_crash_signal_handlers();
  switch (d.how) {
    case DeathHow::kRaiseSegv: raise(SIGSEGV); break;
    case DeathHow::kAbort: abort();
    case DeathHow::kNullWrite: {
      // Not through nullptr: UBSan would stop at the null store with exit(1), which no signal
      // handler sees.
      volatile std::uintptr_t unmapped = 8;  // volatile: nothing the compiler can reason about
      *reinterpret_cast<volatile int*>(unmapped) = 1;
      break;
    }
    case DeathHow::kRaiseSigsys: raise(SIGSYS); break;
    case DeathHow::kSeccompTrap: {
      // The sandbox's SIGSYS handler restores the terminal before its _exit.
      SeccompSandbox sandbox(SeccompMode::kOn);
      sandbox.enter(ThreadKind::kVcpu, terminal_allow_list(ThreadKind::kVcpu));
      ::syscall(SeccompSandbox::selftest_syscall(), AF_UNIX, SOCK_STREAM, 0);
      break;
    }
    case DeathHow::kSent:
      if (write(ready, "r", 1) != 1) _exit(92);
      for (;;) pause();
    case DeathHow::kRaisedUnderFilter: {
      // The handler runs on whichever thread the signal reaches: every kind's list must let it
      // give the terminal back and raise the signal again, or the run ends with exit code 14.
      SeccompSandbox sandbox(SeccompMode::kOn);
      sandbox.enter(d.kind, terminal_allow_list(d.kind));
      raise(d.sig);
      break;
    }
  }
  _exit(91);
}

class TerminalCrashTest : public TerminalTest,
                          public ::testing::WithParamInterface<TerminalDeath> {};

TEST_P(TerminalCrashTest, AFatalSignalGivesTheTerminalBack) {
  const TerminalDeath& d = GetParam();
  int ready[2] = {-1, -1};
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    die_raw(slave_, d, ready[1]);
  }
  close(ready[1]);
  if (d.how == DeathHow::kSent) {
    char byte = 0;
    EXPECT_EQ(read(ready[0], &byte, 1), 1) << "the child never got to wait";
    kill(pid, d.sig);
  }
  close(ready[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(cooked(slave_)) << "the terminal was left raw";
  if (d.how == DeathHow::kSeccompTrap) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == to_int(ExitCode::kSeccompViolation))
        << "status " << status;
    return;
  }
  // 90 and up: the child's own failures (die_raw).
  const bool child_failed = WIFEXITED(status) && WEXITSTATUS(status) >= 90;
  if (!child_failed && minivmm::testing::sanitizer_reported(d.sig, status)) return;
  // As itself: the parent's wait status is what it would have been without the handler.
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == d.sig)
      << "status " << status
      << (WIFEXITED(status) ? " (exit code " + std::to_string(WEXITSTATUS(status)) + ")" : "");
}

std::vector<TerminalDeath> terminal_deaths() {
  std::vector<TerminalDeath> all = {{"Sigsegv", DeathHow::kRaiseSegv, SIGSEGV},
                                    {"Abort", DeathHow::kAbort, SIGABRT},
                                    {"NullWrite", DeathHow::kNullWrite, SIGSEGV},
                                    {"Sigsys", DeathHow::kRaiseSigsys, SIGSYS},
                                    {"SeccompTrap", DeathHow::kSeccompTrap}};
#if defined(__SANITIZE_THREAD__)
  // Under ThreadSanitizer a forked child sent a deadly signal now and then hangs until ctest's
  // timeout (CI, 2026-12-02: SIGPROF in one run, SIGRTMIN+17 in the next; TSan intercepts the
  // signals and defers them, and the cause is not established). The ASan build runs them all;
  // the crashes raised from inside the process still run here.
  const bool sent_signals = false;
#else
  const bool sent_signals = true;
#endif
  for (const int sig : minivmm::testing::deadly_signals()) {
    if (!sent_signals) break;
    std::string name = "Sent" + minivmm::testing::signal_name(sig);
    name.erase(std::remove(name.begin(), name.end(), '+'), name.end());
    all.push_back({name, DeathHow::kSent, sig});
  }
  for (const ThreadKind kind : kThreadKinds) {
    std::string kind_name(thread_kind_name(kind));
    kind_name[0] = static_cast<char>(kind_name[0] - 'a' + 'A');
    const std::string name = "SIGUSR1Under" + kind_name + "Filter";
    all.push_back({name, DeathHow::kRaisedUnderFilter, SIGUSR1, kind});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(
    Deaths, TerminalCrashTest, ::testing::ValuesIn(terminal_deaths()),
    [](const ::testing::TestParamInfo<TerminalDeath>& p) { return p.param.name; });

// What the handlers must not take: minivmm's own signals, those with an owner of their own,
// those that do not end the process, and one the process inherited as ignored.
TEST(TerminalSignalsTest, TheirOwnersSignalsAndIgnoredOnesAreLeftAlone) {
  int out[2] = {-1, -1};
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(out[0]);
    reset_inherited_signals();
    signal(SIGPIPE, SIG_IGN);  // as main() does, before installing
    signal(SIGQUIT, SIG_IGN);  // as a non-interactive shell's background job inherits it
    install_crash_signal_handlers();
    std::string wrong;
    const auto check = [&wrong](int sig, bool taken, sighandler_t otherwise) {
      struct sigaction sa {};
      sigaction(sig, nullptr, &sa);
      const bool ours = (sa.sa_flags & SA_SIGINFO) != 0;
      if (taken ? !ours : (ours || sa.sa_handler != otherwise)) {
        wrong += minivmm::testing::signal_name(sig) + " ";
      }
    };
    for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGTSTP, SIGCONT, SIGTTIN, SIGTTOU, SIGCHLD,
                          SIGWINCH, SIGURG, Vcpu::kick_signal(), StopSignals::quit_signal(),
                          timers::PosixTimerAlarm::signal_number(),
                          timers::ThreadTimers::signal_number()}) {
      check(sig, false, SIG_DFL);
    }
    check(SIGPIPE, false, SIG_IGN);
    check(SIGQUIT, false, SIG_IGN);
    for (const int sig : minivmm::testing::deadly_signals()) {
      if (sig != SIGQUIT) check(sig, true, SIG_DFL);
    }
    _exit(write(out[1], wrong.data(), wrong.size()) == static_cast<ssize_t>(wrong.size()) ? 0 : 1);
  }
  close(out[1]);
  std::string wrong;
  char buf[256];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) {
    wrong.append(buf, static_cast<std::size_t>(n));
  }
  close(out[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(wrong, "") << "taken where they should not be, or left where they should be taken";
}

}  // namespace
}  // namespace minivmm::vmm
