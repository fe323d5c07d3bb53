// Every output target a user can give, under the seccomp filters (the default): the console
// (stdout) and the log (stderr) on a terminal, a file, a pipe, /dev/null, /dev/full or closed,
// and the --stats report to `-`, a file, a character device, a terminal or a FIFO. A run never
// ends with 14 (seccomp) for something the user was allowed to do (issue 20: `--stats -` with
// stdout on /dev/null ended that way, because glibc's stdio asked ioctl(1, TCGETS)); a write
// that fails is said and gives 12; a target that cannot work is refused up front with 2.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "run_minivmm.h"

namespace minivmm::testing {
namespace {

constexpr int kHostFailure = 12;

// Where an fd of the child goes.
enum class Target { kFile, kTerminal, kPipe, kDevNull, kDevFull, kClosed };

const char* target_name(Target t) {
  switch (t) {
    case Target::kFile: return "file";
    case Target::kTerminal: return "terminal";
    case Target::kPipe: return "pipe";
    case Target::kDevNull: return "devnull";
    case Target::kDevFull: return "devfull";
    case Target::kClosed: return "closed";
  }
  return "?";
}

// What --stats names: the child's stdout, a path of the kind below, or none.
enum class Stats { kNone, kStdout, kFile, kDevNull, kDevFull, kTerminal, kFifoRead, kFifoNoReader };

const char* stats_name(Stats s) {
  switch (s) {
    case Stats::kNone: return "none";
    case Stats::kStdout: return "stdout";
    case Stats::kFile: return "file";
    case Stats::kDevNull: return "devnull";
    case Stats::kDevFull: return "devfull";
    case Stats::kTerminal: return "terminal";
    case Stats::kFifoRead: return "fifo";
    case Stats::kFifoNoReader: return "fifo_without_reader";
  }
  return "?";
}

struct OutputCase {
  Target out;
  Target err;
  Stats stats;
  int expect_exit;             // 1: the guest's success through debug-exit
  bool expect_report = false;  // the JSON report must arrive where --stats sent it
};

void PrintTo(const OutputCase& c, std::ostream* os) {
  *os << "stdout=" << target_name(c.out) << " stderr=" << target_name(c.err)
      << " stats=" << stats_name(c.stats);
}

std::string slurp_fd(int fd) {
  std::string s;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) s.append(buf, static_cast<std::size_t>(n));
  return s;
}

std::string slurp_path(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// One end the child writes to and one the test reads back (or nothing to read).
struct Endpoint {
  int child_fd = -1;  // -1 with kClosed
  int read_fd = -1;   // the pty master or the pipe's read end
  std::string path;   // a file, the pty slave's name
};

Endpoint make_endpoint(Target t, const std::string& file) {
  Endpoint e;
  switch (t) {
    case Target::kFile:
      e.path = file;
      e.child_fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      break;
    case Target::kTerminal: {
      int master = -1, slave = -1;
      char name[64] = {};
      EXPECT_EQ(::openpty(&master, &slave, name, nullptr, nullptr), 0);
      ::fcntl(master, F_SETFD, FD_CLOEXEC);
      ::fcntl(slave, F_SETFD, FD_CLOEXEC);
      ::fcntl(master, F_SETFL, O_NONBLOCK);
      e.read_fd = master;
      e.child_fd = slave;
      e.path = name;
      break;
    }
    case Target::kPipe: {
      int p[2];
      EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
      e.read_fd = p[0];
      e.child_fd = p[1];
      break;
    }
    case Target::kDevNull:
      e.child_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      break;
    case Target::kDevFull:
      e.child_fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
      break;
    case Target::kClosed:
      break;
  }
  return e;
}

class BootOutputTargetTest : public ::testing::TestWithParam<OutputCase> {};

TEST_P(BootOutputTargetTest, NeverASeccompDeathAndEveryFailureSaid) {
  SKIP_WITHOUT_KVM();
  const OutputCase& c = GetParam();
  char dir_template[] = "/tmp/minivmm-outputs-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string safe_dir = dir_template;

  Endpoint out = make_endpoint(c.out, safe_dir + "/console.txt");
  Endpoint err = make_endpoint(c.err, safe_dir + "/log.txt");
  std::vector<std::string> args{MINIVMM_BINARY, "run", "--kernel", guest_image(), "--cmdline",
                                "timer=pit hz=250 ticks=25", "--no-console-input"};
  std::string stats_path;
  Endpoint stats_tty;
  int fifo_reader = -1;
  switch (c.stats) {
    case Stats::kNone: break;
    case Stats::kStdout: stats_path = "-"; break;
    case Stats::kFile: stats_path = safe_dir + "/report.json"; break;
    case Stats::kDevNull: stats_path = "/dev/null"; break;
    case Stats::kDevFull: stats_path = "/dev/full"; break;
    case Stats::kTerminal:
      stats_tty = make_endpoint(Target::kTerminal, "");
      stats_path = stats_tty.path;
      break;
    case Stats::kFifoRead:
    case Stats::kFifoNoReader:
      stats_path = safe_dir + "/report.fifo";
      ASSERT_EQ(::mkfifo(stats_path.c_str(), 0600), 0);
      if (c.stats == Stats::kFifoRead) {
        fifo_reader = ::open(stats_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      }
      break;
  }
  if (!stats_path.empty()) args.insert(args.end(), {"--stats", stats_path});

  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    if (out.child_fd >= 0) ::dup2(out.child_fd, 1); else ::close(1);
    if (err.child_fd >= 0) ::dup2(err.child_fd, 2); else ::close(2);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  if (out.child_fd >= 0) ::close(out.child_fd);
  if (err.child_fd >= 0) ::close(err.child_fd);
  if (stats_tty.child_fd >= 0) ::close(stats_tty.child_fd);

  // Drain what must not fill up (a pipe, a pty) while the child runs; bounded.
  std::string out_text, err_text, tty_report, fifo_report;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    for (auto* e : {&out, &err, &stats_tty}) {
      if (e->read_fd < 0) continue;
      ::fcntl(e->read_fd, F_SETFL, O_NONBLOCK);
      std::string& into = e == &out ? out_text : e == &err ? err_text : tty_report;
      into += slurp_fd(e->read_fd);
    }
    if (fifo_reader >= 0) fifo_report += slurp_fd(fifo_reader);
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "minivmm hung";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto* e : {&out, &err, &stats_tty}) {
    if (e->read_fd < 0) continue;
    std::string& into = e == &out ? out_text : e == &err ? err_text : tty_report;
    into += slurp_fd(e->read_fd);
    ::close(e->read_fd);
  }
  if (fifo_reader >= 0) {
    fifo_report += slurp_fd(fifo_reader);
    ::close(fifo_reader);
  }
  if (c.out == Target::kFile) out_text = slurp_path(out.path);
  if (c.err == Target::kFile) err_text = slurp_path(err.path);

  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  const int code = WEXITSTATUS(status);
  EXPECT_NE(code, 14) << "a seccomp death: " << err_text;
  EXPECT_EQ(code, c.expect_exit) << "stderr: " << err_text;
  if (c.err == Target::kFile || c.err == Target::kPipe || c.err == Target::kTerminal) {
    EXPECT_EQ(err_text.find("forbidden syscall"), std::string::npos) << err_text;
    if (c.expect_exit == kHostFailure) {
      EXPECT_NE(err_text.find("cannot write the report"), std::string::npos) << err_text;
    }
  }
  if (c.expect_report) {
    std::string report;
    switch (c.stats) {
      case Stats::kStdout: report = out_text; break;
      case Stats::kFile: report = slurp_path(stats_path); break;
      case Stats::kTerminal: report = tty_report; break;
      case Stats::kFifoRead: report = fifo_report; break;
      default: break;
    }
    EXPECT_NE(report.find("\"ticks_injected\""), std::string::npos)
        << "no report where --stats sent it";
  }
  if (c.stats == Stats::kFile) {
    // Written beside the target and renamed onto it: no temporary file stays behind.
    DIR* d = ::opendir(safe_dir.c_str());
    ASSERT_NE(d, nullptr);
    while (const dirent* e = ::readdir(d)) {
      EXPECT_EQ(std::string(e->d_name).find(".tmp-"), std::string::npos) << e->d_name;
    }
    ::closedir(d);
  }
  std::string cleanup = "rm -rf '" + safe_dir + "'";
  EXPECT_EQ(std::system(cleanup.c_str()), 0);
}

constexpr int kOk = 1;  // the guest's success (debug-exit 0)

INSTANTIATE_TEST_SUITE_P(
    Targets, BootOutputTargetTest,
    ::testing::Values(
        // The console and the report on stdout, for each kind of stdout.
        OutputCase{Target::kTerminal, Target::kFile, Stats::kStdout, kOk, true},
        OutputCase{Target::kFile, Target::kFile, Stats::kStdout, kOk, true},
        OutputCase{Target::kPipe, Target::kFile, Stats::kStdout, kOk, true},
        OutputCase{Target::kDevNull, Target::kFile, Stats::kStdout, kOk},
        OutputCase{Target::kDevFull, Target::kFile, Stats::kStdout, kHostFailure},
        OutputCase{Target::kClosed, Target::kFile, Stats::kStdout, kUsage},
        // The report to a path of each kind; the console wherever.
        OutputCase{Target::kClosed, Target::kFile, Stats::kFile, kOk, true},
        OutputCase{Target::kDevNull, Target::kFile, Stats::kDevNull, kOk},
        OutputCase{Target::kDevNull, Target::kFile, Stats::kDevFull, kHostFailure},
        OutputCase{Target::kDevNull, Target::kFile, Stats::kTerminal, kOk, true},
        OutputCase{Target::kDevNull, Target::kFile, Stats::kFifoRead, kOk, true},
        OutputCase{Target::kDevNull, Target::kFile, Stats::kFifoNoReader, kUsage},
        // The log on each kind of stderr (its failures cannot be said: they are not fatal).
        OutputCase{Target::kFile, Target::kTerminal, Stats::kFile, kOk, true},
        OutputCase{Target::kFile, Target::kPipe, Stats::kNone, kOk},
        OutputCase{Target::kFile, Target::kDevNull, Stats::kNone, kOk},
        OutputCase{Target::kFile, Target::kDevFull, Stats::kFile, kOk, true},
        OutputCase{Target::kFile, Target::kClosed, Stats::kFile, kOk, true},
        OutputCase{Target::kDevFull, Target::kDevFull, Stats::kNone, kOk}),
    [](const ::testing::TestParamInfo<OutputCase>& param_info) {
      return std::string("stdout_") + target_name(param_info.param.out) + "_stderr_" +
             target_name(param_info.param.err) + "_stats_" + stats_name(param_info.param.stats);
    });

// A run killed outright (SIGKILL cannot be caught) leaves the old report whole: the new one
// is written beside it and renamed only at the end. A run ended by SIGTERM ends in order and
// writes its report whole.
TEST(BootOutputKillTest, AKilledRunLeavesTheOldReportAndATerminatedOneWritesItsOwn) {
  SKIP_WITHOUT_KVM();
  char dir_template[] = "/tmp/minivmm-killed-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string report = std::string(dir_template) + "/report.json";
  for (const int sig : {SIGKILL, SIGTERM}) {
    { std::ofstream(report) << "the previous report\n"; }
    Child child = start_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                                 "timer=pit hz=250 ticks=0", "--duration", "60",
                                 "--no-console-input", "--stats", report},
                                false);
    ASSERT_TRUE(wait_for_console(child, "minivmm-guest:"));
    ::kill(child.pid, sig);
    const RunResult r = finish_minivmm(child, 30);
    const std::string now = slurp_path(report);
    if (sig == SIGKILL) {
      EXPECT_EQ(r.term_signal, SIGKILL);
      EXPECT_EQ(now, "the previous report\n");
    } else {
      EXPECT_EQ(r.exit_code, 143) << r.err;
      const auto json = nlohmann::json::parse(now, nullptr, false);
      ASSERT_FALSE(json.is_discarded()) << now;
      EXPECT_EQ(json["exit"]["code"], 143);
    }
  }
  std::string cleanup = std::string("rm -rf '") + dir_template + "'";
  EXPECT_EQ(std::system(cleanup.c_str()), 0);
}

}  // namespace
}  // namespace minivmm::testing
