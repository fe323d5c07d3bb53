// `minivmm run --interactive` on a pseudo-terminal, ended by each catchable signal whose default
// action ends a process and that minivmm does not take for itself (vmm/host/crash_signals.h): the
// terminal must be as it was before the run, and the parent must see the process killed by
// that very signal, as it would have been without minivmm's handler. The signal comes from
// kill(2) once the terminal is raw and minivmm's threads run under their seccomp filters, so the
// handler runs as in a real run: on the thread the kernel picks (the loop, in practice), under
// that thread's allow-list. (tests/unit/vmm/host/terminal_test.cc checks the other thread kinds'
// lists, and what the handler leaves alone.)
#include <gtest/gtest.h>

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <utmp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/run_minivmm.h"
#include "tests/support/deadly_signals.h"

namespace minivmm::testing {
namespace {

using TtyClock = std::chrono::steady_clock;

bool same_tty_settings(const termios& a, const termios& b) {
  return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag &&
         a.c_lflag == b.c_lflag && std::equal(std::begin(a.c_cc), std::end(a.c_cc), b.c_cc);
}

bool tty_raw(int fd) {
  termios t{};
  return tcgetattr(fd, &t) == 0 && (t.c_lflag & ICANON) == 0;
}

// minivmm's threads (the loop, which is the main thread, vcpu0 and signals) run under their
// seccomp filters. The loop's is loaded last, once the others exist. Other threads are not
// minivmm's and need not have one: TSan's background thread, started before main(), has none
// (and blocks every signal); KVM's own workers.
bool vmm_threads_filtered(pid_t pid) {
  std::error_code ec;
  int filtered_threads = 0;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream comm_file(task.path() / "comm");
    std::string comm;
    std::getline(comm_file, comm);
    const bool vmm_thread = task.path().filename() == std::to_string(pid) ||
                            comm.rfind("vcpu", 0) == 0 || comm == "signals";
    if (!vmm_thread) continue;
    std::ifstream status(task.path() / "status");
    bool filtered = false;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Seccomp:", 0) == 0) filtered = line.find('2') != std::string::npos;
    }
    if (!filtered) return false;
    ++filtered_threads;
  }
  return !ec && filtered_threads >= 3;
}

// One run on a terminal of its own.
struct TtyRun {
  int sig = 0;
  int master = -1;
  int slave = -1;  // kept open here too: the parent reads the settings through it
  termios before{};
  pid_t pid = -1;
  bool ready = false;
  bool reaped = false;
  int status = 0;
  std::string console;  // what it printed, for a failure message

  void drain() {
    char buf[512];
    for (;;) {
      const ssize_t n = read(master, buf, sizeof buf);
      if (n <= 0) return;
      console.append(buf, static_cast<std::size_t>(n));
      if (console.size() > 4096) console.erase(0, console.size() - 4096);
    }
  }
  bool exited() {
    if (!reaped && waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    return reaped;
  }
};

void start_on_tty(TtyRun& r, std::vector<char*>& argv) {
  ASSERT_EQ(openpty(&r.master, &r.slave, nullptr, nullptr, nullptr), 0);
  ASSERT_EQ(tcgetattr(r.slave, &r.before), 0);
  ASSERT_FALSE(tty_raw(r.slave));
  // Non-blocking: the guest's console output is read and kept only so it cannot fill the pty.
  fcntl(r.master, F_SETFL, fcntl(r.master, F_GETFL) | O_NONBLOCK);
  r.pid = fork();
  ASSERT_GE(r.pid, 0);
  if (r.pid == 0) {
    close(r.master);
    // As from a shell: a session of its own, the pty its controlling terminal (stdin, stdout,
    // stderr), nothing ignored or blocked (a test started from a script in the background
    // would pass on an ignored SIGQUIT, which minivmm leaves ignored), no core files.
    if (login_tty(r.slave) != 0) _exit(126);
    for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);  // fails, harmlessly, on KILL and STOP
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    execv(argv[0], argv.data());
    _exit(127);
  }
}

// Kills and reaps whatever a failed assertion left running, closes the terminals.
struct TtyReaper {
  std::vector<TtyRun>& runs;
  ~TtyReaper() {
    for (TtyRun& r : runs) {
      if (r.pid > 0 && !r.reaped) {
        kill(r.pid, SIGKILL);
        waitpid(r.pid, &r.status, 0);
      }
      if (r.master >= 0) close(r.master);
      if (r.slave >= 0) close(r.slave);
    }
  }
};

// A few at a time, not all 45: the host may have two CPUs and other tests beside this one.
constexpr std::size_t kTtyRunsAtOnce = 8;

TEST(BootInteractiveTest, EveryDeadlySignalGivesTheTerminalBackAndKillsAsItself) {
  SKIP_WITHOUT_KVM();
  // --duration: a run the signal failed to end still ends.
  std::vector<std::string> args = {MINIVMM_BINARY, "run",        "--kernel",
                                   guest_image(),  "--cmdline",  "timer=pit hz=250 ticks=0",
                                   "--interactive", "--duration", "60", "--quiet"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const std::vector<int> signals = deadly_signals();
  std::vector<TtyRun> runs(signals.size());
  TtyReaper reaper{runs};
  const auto started = TtyClock::now();
  for (std::size_t first = 0; first < runs.size(); first += kTtyRunsAtOnce) {
    const std::size_t end = std::min(first + kTtyRunsAtOnce, runs.size());
    for (std::size_t i = first; i < end; ++i) {
      runs[i].sig = signals[i];
      start_on_tty(runs[i], argv);
    }
    // Raw and filtered, then the signal, then the end; generous for a sanitizer build.
    const auto deadline = TtyClock::now() + std::chrono::seconds(60);
    for (bool waiting = true; waiting && TtyClock::now() < deadline;) {
      waiting = false;
      for (std::size_t i = first; i < end; ++i) {
        TtyRun& r = runs[i];
        r.drain();
        if (r.exited()) continue;
        if (!r.ready && tty_raw(r.slave) && vmm_threads_filtered(r.pid)) {
          r.ready = true;
          kill(r.pid, r.sig);
        }
        waiting = true;
      }
      if (waiting) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  RecordProperty("seconds",
                 std::to_string(std::chrono::duration<double>(TtyClock::now() - started).count()));

  for (TtyRun& r : runs) {
    SCOPED_TRACE(signal_name(r.sig));
    EXPECT_TRUE(r.ready) << "never raw and filtered; console: " << r.console;
    ASSERT_TRUE(r.reaped) << "still running";
    termios after{};
    ASSERT_EQ(tcgetattr(r.slave, &after), 0);
    EXPECT_TRUE(same_tty_settings(after, r.before)) << "the terminal was not given back";
    if (sanitizer_reported(r.sig, r.status)) continue;
    EXPECT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == r.sig)
        << "status " << r.status << (WIFEXITED(r.status) ? " (exited)" : "")
        << (WIFSIGNALED(r.status) ? " (killed by " + signal_name(WTERMSIG(r.status)) + ")" : "")
        << "; console: " << r.console;
  }
  // Nothing left behind: every minivmm started here has been reaped (and starts none itself).
  int status = 0;
  const pid_t left = waitpid(-1, &status, WNOHANG);
  const int err = errno;
  EXPECT_EQ(left, -1);
  EXPECT_EQ(err, ECHILD);
}

}  // namespace
}  // namespace minivmm::testing
