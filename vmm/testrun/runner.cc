#include "vmm/testrun/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <system_error>

#include "vmm/host/output_file.h"

namespace minivmm::testrun {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// The last `cap` bytes of the file at `path` (all of a smaller one); empty if unreadable.
std::string read_tail(const std::string& path, std::size_t cap) {
  // O_NONBLOCK: a FIFO put there meanwhile must not hold the runner.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "";
  struct stat st {};
  std::string out;
  if (::fstat(fd, &st) == 0) {
    const auto size = static_cast<std::size_t>(st.st_size);
    const std::size_t want = std::min(size, cap);
    out.resize(want);
    std::size_t got = 0;
    const auto start = static_cast<off_t>(size - want);
    while (got < want) {
      const ssize_t n = ::pread(fd, out.data() + got, want - got, start + static_cast<off_t>(got));
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    out.resize(got);
  }
  ::close(fd);
  return out;
}

constexpr std::size_t kConsoleCap = 64u << 20;
constexpr std::size_t kStderrCap = 1u << 20;
constexpr std::size_t kTailLines = 20;
// A quoted line's last bytes: a guest that floods one endless line had all of it (up to
// kConsoleCap) quoted on stdout and in both reports, and kept in memory per test until the end.
constexpr std::size_t kTailLineCap = 512;

// `tail` with each line longer than kTailLineCap cut to its end, saying how much went.
std::string cap_lines(const std::string& tail) {
  std::string out;
  std::size_t start = 0;
  while (start < tail.size()) {
    std::size_t nl = tail.find('\n', start);
    if (nl == std::string::npos) nl = tail.size();
    const std::size_t len = nl - start;
    if (len > kTailLineCap) {
      out += "[" + std::to_string(len - kTailLineCap) + " bytes cut] ";
      out.append(tail, nl - kTailLineCap, kTailLineCap);
    } else {
      out.append(tail, start, len);
    }
    if (nl < tail.size()) out += '\n';
    start = nl + 1;
  }
  return out;
}
// A timeout longer than this is none: steady_clock counts nanoseconds in 64 bits (292 years),
// and timeout(1) too treats what its clock cannot hold as forever.
constexpr double kLongestTimeoutS = 100.0 * 365 * 86400;

struct Running {
  std::size_t index = 0;
  pid_t pid = -1;
  Clock::time_point begin, exec_at;
  std::optional<Clock::time_point> deadline, kill_at;
  bool timed_out = false;
  bool interrupted = false;
  std::string console_path, stderr_path, warnings;
  std::string gdb_socket;  // --gdb-on-fault: where its stub listens
  bool held = false;       // --gdb-on-fault: it said it waits for the debugger
};

class Runner {
 public:
  Runner(const std::vector<TestCase>& tests, const RunnerOptions& opt, const Prepare& prepare,
         const Judge& judge)
      : tests_(tests), opt_(opt), prepare_(prepare), judge_(judge) {}

  RunSummary run() {
    const auto start = Clock::now();
    set_up_logs();
    name_logs();
    set_up_signals();
    if (opt_.order.size() == tests_.size()) {
      queue_.assign(opt_.order.begin(), opt_.order.end());
    } else {
      for (std::size_t i = 0; i < tests_.size(); ++i) queue_.push_back(i);
    }

    while (true) {
      while (!interrupted_ && !queue_.empty() && running_.size() < std::max(1u, opt_.jobs)) {
        const std::size_t i = queue_.front();
        queue_.pop_front();
        start_test(i);
      }
      if (running_.empty() && (queue_.empty() || interrupted_)) break;
      wait_for_events();
    }

    ::close(sigfd_);
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    if (!opt_.keep_logs && !logs_dir_.empty()) ::rmdir(logs_dir_.c_str());

    RunSummary summary;
    summary.interrupted = interrupted_;
    for (auto& [index, r] : done_) summary.results.push_back(std::move(r));
    summary.wall_s = seconds(Clock::now() - start);
    return summary;
  }

 private:
  void set_up_logs() {
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) self_path_.assign(self, static_cast<std::size_t>(n));
    if (opt_.keep_logs) {
      logs_dir_ = opt_.logs_dir;
      if (::mkdir(logs_dir_.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("--logs " + logs_dir_);
      return;
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/minivmm-test-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw_errno("a temporary folder for the consoles");
    logs_dir_ = tmpl;
  }

  // Each test's file stem, unique within the run: two tests whose names become the same stem
  // (`a/b` and `a_b`, or one name given twice by a cfg) must not share a console file.
  void name_logs() {
    std::set<std::string> used;
    for (const TestCase& t : tests_) {
      const std::string stem = log_file_stem(t.name);
      std::string unique = stem;
      for (int n = 2; !used.insert(unique).second; ++n) unique = stem + "." + std::to_string(n);
      stems_.push_back(unique);
    }
  }

  void set_up_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    if (::sigprocmask(SIG_BLOCK, &set, &old_mask_) != 0) throw_errno("sigprocmask");
    sigfd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd_ < 0) throw_errno("signalfd");
  }

  void tick() {
    if (!opt_.on_tick) return;
    std::vector<std::string> names;
    for (const auto& [pid, r] : running_) names.push_back(tests_[r.index].name);
    opt_.on_tick(names, done_.size(), seconds(Clock::now() - start_));
    last_tick_ = Clock::now();
  }

  void finish(std::size_t index, TestResult r, Clock::time_point begin) {
    r.index = index;
    r.duration_s = seconds(Clock::now() - begin);
    if (opt_.on_result && !r.interrupted) opt_.on_result(tests_[index], r);
    if (!r.interrupted) done_.emplace(index, std::move(r));
    tick();
  }

  void start_test(std::size_t i) {
    const TestCase& t = tests_[i];
    const auto begin = Clock::now();
    if (t.decided) {
      TestResult r;
      r.verdict = *t.decided;
      finish(i, std::move(r), begin);
      return;
    }
    auto prepared = prepare_(t);
    if (auto* v = std::get_if<Verdict>(&prepared)) {
      TestResult r;
      r.verdict = std::move(*v);
      finish(i, std::move(r), begin);
      return;
    }
    Launch& launch = std::get<Launch>(prepared);
    Running run;
    run.index = i;
    run.begin = begin;
    run.warnings = std::move(launch.warnings);
    const std::string stem = logs_dir_ + "/" + stems_[i];
    run.console_path = stem + ".log";
    run.stderr_path = stem + ".stderr";

    std::vector<std::string> args{opt_.minivmm, t.subcommand};
    // `exec` (a manifest's command) takes no --stats or --gdb, and its arguments end with the
    // command.
    if (t.subcommand == "run") {
      if (opt_.keep_logs) launch.run_args.insert(launch.run_args.end(), {"--stats", stem + ".json"});
      if (opt_.gdb_on_fault) {
        run.gdb_socket = stem + ".gdb";
        launch.run_args.insert(launch.run_args.end(),
                               {"--gdb", "unix:" + run.gdb_socket, "--gdb-on-fault"});
      }
    }
    args.insert(args.end(), launch.run_args.begin(), launch.run_args.end());
    if (opt_.keep_logs) write_command(stem + ".cmd", args, run.warnings, self_path_);

    std::string why;
    const pid_t pid = spawn(args, run.console_path, run.stderr_path, why);
    if (pid < 0) {
      if (!opt_.keep_logs) {
        ::unlink(run.console_path.c_str());
        ::unlink(run.stderr_path.c_str());
      }
      TestResult r;
      r.verdict = {Outcome::kFail, "cannot start minivmm: " + why};
      finish(i, std::move(r), begin);
      return;
    }
    run.pid = pid;
    run.exec_at = Clock::now();
    if (t.timeout_s && *t.timeout_s <= kLongestTimeoutS) {
      run.deadline = run.exec_at + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(*t.timeout_s));
    }
    running_.emplace(pid, std::move(run));
    tick();
  }

  // The exact command, for repeating a test by hand, and the mapping's warnings.
  // `self` stands for /proc/self/exe, which names another binary in the reader's shell.
  static void write_command(const std::string& path, std::vector<std::string> args,
                            const std::string& warnings, const std::string& self) {
    if (args[0] == "/proc/self/exe" && !self.empty()) args[0] = self;
    std::string text;
    for (const auto& a : args) {
      const bool plain = !a.empty() && a.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=,:+@%") ==
          std::string::npos;
      std::string quoted = "'";
      for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      quoted += "'";
      text += (text.empty() ? "" : " ") + (plain ? a : quoted);
    }
    text += "\n" + warnings;
    // A log of convenience: one that cannot be written loses nothing the verdict needs. Through
    // OutputFile all the same, so a FIFO or a device of that name is never replaced.
    try {
      vmm::OutputFile out = vmm::OutputFile::check("--logs", path, {});
      out.open();
      std::string why;
      static_cast<void>(out.write(text, why));
    } catch (const std::exception&) {
    }
  }

  // fork + exec, the child in its own process group and dying with the runner. -1 with `why`
  // when the files cannot be opened or the exec fails (reported back through a CLOEXEC pipe).
  pid_t spawn(const std::vector<std::string>& args, const std::string& out_path,
              const std::string& err_path, std::string& why) {
    // The console and stderr grow while the test runs: regular files of the logs folder only
    // (a FIFO there was a hang in open(), a symbolic link was followed and truncated).
    std::string log_error;
    const int out = vmm::open_streamed_log(out_path, log_error);
    const int err = out < 0 ? -1 : vmm::open_streamed_log(err_path, log_error);
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    int report[2] = {-1, -1};
    auto close_all = [&] {
      for (int fd : {out, err, in, report[0], report[1]}) {
        if (fd >= 0) ::close(fd);
      }
    };
    if (out < 0 || err < 0) {
      why = "cannot open the test's logs: " + log_error;
      close_all();
      return -1;
    }
    if (in < 0 || ::pipe2(report, O_CLOEXEC) != 0) {
      why = std::string("cannot open the test's files: ") + std::strerror(errno);
      close_all();
      return -1;
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0) {
      why = std::string("fork: ") + std::strerror(errno);
      close_all();
      return -1;
    }
    if (pid == 0) {
      // Only async-signal-safe calls from here to exec.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the runner died before the line above
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::signal(SIGPIPE, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execv(argv[0], argv.data());
      const int e = errno;
      ssize_t n = ::write(report[1], &e, sizeof e);
      static_cast<void>(n);
      ::_exit(127);
    }
    // Both sides set the group, so that it exists before either goes on (a kill before the
    // child ran its setpgid would otherwise miss it).
    ::setpgid(pid, pid);
    ::close(report[1]);
    report[1] = -1;
    int child_errno = 0;
    ssize_t n;
    do {
      n = ::read(report[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    close_all();
    if (n == static_cast<ssize_t>(sizeof child_errno)) {
      why = std::string("exec ") + args[0] + ": " + std::strerror(child_errno);
      int status = 0;
      ::waitpid(pid, &status, 0);
      return -1;
    }
    return pid;
  }

  void wait_for_events() {
    const auto now = Clock::now();
    std::optional<Clock::time_point> next;
    auto consider = [&](const std::optional<Clock::time_point>& t) {
      if (t && (!next || *t < *next)) next = t;
    };
    for (const auto& [pid, r] : running_) {
      consider(r.timed_out || r.interrupted ? std::nullopt : r.deadline);
      consider(r.kill_at);
    }
    if (opt_.on_tick) consider(last_tick_ + std::chrono::milliseconds(500));
    // --gdb-on-fault: each test's stderr is looked at for its stub's "held" line.
    if (opt_.gdb_on_fault) consider(now + std::chrono::milliseconds(200));

    timespec ts{};
    timespec* timeout = nullptr;
    if (next) {
      const auto wait = std::max(Clock::duration::zero(), *next - now);
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
      ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
      ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
      timeout = &ts;
    }
    pollfd p{sigfd_, POLLIN, 0};
    const int rc = ::ppoll(&p, 1, timeout, nullptr);
    if (rc < 0 && errno != EINTR) throw_errno("ppoll");
    if (rc > 0) read_signals();
    reap();
    if (opt_.gdb_on_fault) find_held();
    enforce_deadlines();
    if (opt_.on_tick && Clock::now() - last_tick_ >= std::chrono::milliseconds(500)) tick();
  }

  void read_signals() {
    signalfd_siginfo si{};
    while (::read(sigfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      if (si.ssi_signo == SIGCHLD) continue;  // reap() collects every child that ended
      if (!interrupted_) {
        interrupted_ = true;
        const auto now = Clock::now();
        for (auto& [pid, r] : running_) {
          r.interrupted = true;
          ::kill(-pid, SIGTERM);
          r.kill_at = now + opt_.grace;
        }
      } else {
        for (auto& [pid, r] : running_) ::kill(-pid, SIGKILL);  // a second Ctrl-C: at once
      }
    }
  }

  // A test whose guest faulted under --gdb-on-fault waits for a person: said once, with where
  // to attach, and its timeout no longer runs.
  void find_held() {
    for (auto& [pid, r] : running_) {
      if (r.held || r.gdb_socket.empty()) continue;
      std::ifstream f(r.stderr_path);
      std::stringstream ss;
      ss << f.rdbuf();
      if (ss.str().find("held for the debugger") == std::string::npos) continue;
      r.held = true;
      r.deadline.reset();
      std::fprintf(stderr,
                   "minivmm test: %s: the guest faulted and waits for the debugger: gdb -ex "
                   "'target remote %s' (detach or quit gdb to let the test end)\n",
                   tests_[r.index].name.c_str(), r.gdb_socket.c_str());
      std::fflush(stderr);
    }
  }

  void enforce_deadlines() {
    const auto now = Clock::now();
    for (auto& [pid, r] : running_) {
      if (r.kill_at && now >= *r.kill_at) {
        ::kill(-pid, SIGKILL);
        r.kill_at.reset();
      } else if (!r.timed_out && !r.interrupted && r.deadline && now >= *r.deadline) {
        r.timed_out = true;
        ::kill(-pid, SIGTERM);
        r.kill_at = now + opt_.grace;
      }
    }
  }

  void reap() {
    while (true) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      auto it = running_.find(pid);
      if (it == running_.end()) continue;
      Running r = std::move(it->second);
      running_.erase(it);
      const auto exited_at = Clock::now();
      // Anything the guest's process left in its group (minivmm forks nothing; a wrapper
      // might) goes with it.
      ::kill(-pid, SIGKILL);

      RunObservation obs;
      obs.timed_out = r.timed_out;
      if (WIFEXITED(status)) obs.exit_status = WEXITSTATUS(status);
      // A signal the runner sent for a timeout is the timeout, not the signal.
      if (WIFSIGNALED(status) && !r.timed_out) obs.term_signal = WTERMSIG(status);
      const std::string console = read_tail(r.console_path, kConsoleCap);
      obs.console_tail = cap_lines(last_lines(console, kTailLines));
      obs.stderr_text = read_tail(r.stderr_path, kStderrCap);

      TestResult result;
      result.ran = true;
      result.interrupted = r.interrupted;
      result.vmm_s = seconds(exited_at - r.exec_at);
      result.verdict = judge_(tests_[r.index], obs, console, r.warnings);
      result.console_tail = obs.console_tail;
      if (opt_.keep_logs) {
        result.console_path = r.console_path;
      } else {
        ::unlink(r.console_path.c_str());
        ::unlink(r.stderr_path.c_str());
      }
      finish(r.index, std::move(result), r.begin);
    }
  }

  const std::vector<TestCase>& tests_;
  const RunnerOptions& opt_;
  const Prepare& prepare_;
  const Judge& judge_;
  std::string logs_dir_;
  std::string self_path_;
  std::vector<std::string> stems_;  // per test: its log files' name, without the folder
  int sigfd_ = -1;
  sigset_t old_mask_{};
  std::deque<std::size_t> queue_;
  std::map<pid_t, Running> running_;
  std::map<std::size_t, TestResult> done_;
  bool interrupted_ = false;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_tick_ = Clock::now();
};

}  // namespace

std::string log_file_stem(const std::string& test_name) {
  std::string s = test_name;
  for (char& c : s) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  // A file name holds 255 bytes (NAME_MAX): a cfg's 5000-byte name made every log's open fail.
  // 200 leaves room for ".stderr" and name_logs()'s ".N".
  if (s.size() > 200) s.resize(200);
  return s;
}

RunSummary run_tests(const std::vector<TestCase>& tests, const RunnerOptions& opt,
                     const Prepare& prepare, const Judge& judge) {
  return Runner(tests, opt, prepare, judge).run();
}

}  // namespace minivmm::testrun
