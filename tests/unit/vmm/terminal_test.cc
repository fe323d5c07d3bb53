// The terminal on every exit path: raw mode on a real pseudo-terminal (openpty), given back on
// restore, taken again on reapply (SIGCONT), given back for good by the destructor, and given
// back when the process dies of a fatal signal (crash_signals.h).
#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "devices/console_input.h"
#include "devices/uart_16550.h"
#include "loop/event_loop.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/vector_sink.h"
#include "timers/dynticks.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "vmm/crash_signals.h"
#include "vmm/exit_code.h"
#include "vmm/seccomp_allow_lists.h"
#include "vmm/seccomp_sandbox.h"

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

// In a child: raw mode, then death by `how`. The parent sees the terminal cooked again.
void die_raw(int slave, int how) {
  const rlimit no_core{0, 0};  // these deaths are expected: no core files
  setrlimit(RLIMIT_CORE, &no_core);
  if (how == 4 && dup2(slave, STDIN_FILENO) == STDIN_FILENO) slave = STDIN_FILENO;
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
  if (how == 0) raise(SIGSEGV);  // sent
  if (how == 1) abort();         // abort()'s SIGABRT
  // A real fault. Not through nullptr: UBSan would stop at the null store with exit(1), which
  // no signal handler sees.
  volatile std::uintptr_t unmapped = 8;  // volatile: nothing the compiler can reason about
  if (how == 2) *reinterpret_cast<volatile int*>(unmapped) = 1;
  if (how == 3) raise(SIGSYS);  // what a seccomp trap delivers
  if (how == 4) {
    // A real seccomp trap: the sandbox's SIGSYS handler restores the terminal before its
    // _exit. It may touch stdin only (ConsoleInput's terminal in minivmm), so the pty is
    // stdin here.
    SeccompFacts facts;
#ifdef MINIVMM_SANITIZER_RUNTIME
    facts.sanitizer_runtime = true;
#endif
    SeccompSandbox sandbox(SeccompMode::kOn);
    sandbox.enter(ThreadKind::kVcpu, vcpu_allow_list(facts, -1));
    ::syscall(SeccompSandbox::selftest_syscall(), AF_UNIX, SOCK_STREAM, 0);
  }
  _exit(91);
}

class TerminalCrashTest : public TerminalTest, public ::testing::WithParamInterface<int> {};

TEST_P(TerminalCrashTest, AFatalSignalGivesTheTerminalBack) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) die_raw(slave_, GetParam());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  // Killed by the signal; under a sanitizer its handler reports and exits non-zero instead.
  EXPECT_TRUE(WIFSIGNALED(status) ||
              (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) < 90))
      << "status " << status;
  EXPECT_TRUE(cooked(slave_)) << "the terminal was left raw";
  if (GetParam() == 4) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == to_int(ExitCode::kSeccompViolation))
        << "status " << status;
  }
}

std::string death_name(const ::testing::TestParamInfo<int>& p) {
  static const char* const kNames[] = {"Sigsegv", "Abort", "NullWrite", "Sigsys",
                                       "SeccompTrap"};
  return kNames[p.param];
}

INSTANTIATE_TEST_SUITE_P(Deaths, TerminalCrashTest, ::testing::Values(0, 1, 2, 3, 4),
                         death_name);

}  // namespace
}  // namespace minivmm::vmm
