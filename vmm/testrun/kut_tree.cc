#include "vmm/testrun/kut_tree.h"

#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "vmm/testrun/host_files.h"

extern char** environ;

namespace minivmm::testrun {
namespace {

// The suite's config.mak: NAME=value lines.
std::map<std::string, std::string> read_config_mak(const std::string& text) {
  std::map<std::string, std::string> vars;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    vars[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return vars;
}

// A cfg's commands (`disabled_if`, `$(...)` in its values) are the suite's own code, run as
// run_tests.sh runs them. But one that never ends (`sleep 1000`, a background process that
// keeps its stdout) held `minivmm test` forever before any test started, and one that writes
// without end (`yes`) grew the runner's memory until the host's OOM killer came: each now has
// kCommandTimeout and kCommandOutputCap, and is stopped with its whole process group.
constexpr int kCommandTimeoutMs = 10'000;
constexpr std::size_t kCommandOutputCap = 1u << 20;

// Runs `bash -c command` in `dir` with `extra_env` added (the environment wins); its stdout,
// and its exit status (-1 when it could not run, did not exit, or was stopped: then a warning
// says why). Ctrl-C (SIGINT, SIGTERM, SIGHUP) while it runs stops it, then ends the runner by
// the same signal, as before the command started.
std::pair<std::string, int> run_bash(const std::string& dir, const std::string& command,
                                     const std::map<std::string, std::string>& extra_env) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {"", -1};
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  for (const auto& [k, v] : extra_env) {
    if (!std::getenv(k.c_str())) env_strings.push_back(k + "=" + v);
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, sig);
  ::sigprocmask(SIG_BLOCK, &stop_signals, &old_mask);
  const int sigfd = ::signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Its own process group, so that a stop takes what it started too.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(devnull, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::chdir(dir.c_str()) != 0) ::_exit(127);
    const char* argv[] = {"bash", "-c", command.c_str(), nullptr};
    ::execve("/bin/bash", const_cast<char**>(argv), envp.data());
    ::_exit(127);
  }
  if (pid > 0) ::setpgid(pid, pid);
  ::close(out[1]);
  std::string text;
  std::string stopped;  // why it was stopped
  int stop_signal = 0;
  if (pid > 0) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kCommandTimeoutMs);
    char buf[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) {
        stopped = "ran for " + std::to_string(kCommandTimeoutMs / 1000) + " s";
        break;
      }
      pollfd p[2] = {{out[0], POLLIN, 0}, {sigfd, POLLIN, 0}};
      const int rc = ::poll(p, sigfd >= 0 ? 2 : 1, static_cast<int>(left));
      if (rc < 0 && errno != EINTR) break;
      if (rc <= 0) continue;
      if (sigfd >= 0 && (p[1].revents & POLLIN)) {
        signalfd_siginfo si{};
        if (::read(sigfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
          stop_signal = static_cast<int>(si.ssi_signo);
          stopped = "interrupted";
          break;
        }
      }
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t n = ::read(out[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // EOF: every writer is gone
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > kCommandOutputCap) {
          stopped = "wrote more than " + std::to_string(kCommandOutputCap >> 20) + " MiB";
          break;
        }
      }
    }
    // Whatever it left in its group goes with it (a background process kept the pipe open).
    ::kill(-pid, SIGKILL);
  }
  ::close(out[0]);
  int status = 0;
  if (pid > 0) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (sigfd >= 0) ::close(sigfd);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (stop_signal != 0) {
    // As if the command had not been running: the signal's own action (the runner's
    // interrupted status comes later, once tests run).
    ::signal(stop_signal, SIG_DFL);
    ::raise(stop_signal);
  }
  if (!stopped.empty()) {
    std::string shown = command.substr(0, 80);
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    }
    std::fprintf(stderr, "minivmm test: warning: the cfg's command '%s%s' %s; stopped\n",
                 shown.c_str(), command.size() > 80 ? "..." : "", stopped.c_str());
    return {"", -1};
  }
  return {text, pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

std::vector<std::string> environ_errata() {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "ERRATA_", 7) == 0) out.emplace_back(*e);
  }
  return out;
}

}  // namespace

std::optional<std::string> kvm_unusable() {
  const int fd = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::string("/dev/kvm: ") + std::strerror(errno);
  ::close(fd);
  return std::nullopt;
}

KutTree open_kut_tree(const std::string& dir) {
  KutTree tree;
  tree.dir = dir;
  const auto mak = read_regular_file(dir + "/config.mak");
  if (!mak) {
    throw KutTreeError("--kvm-unit-tests: '" + dir +
                       "' is not a configured kvm-unit-tests tree (no config.mak; run ./configure "
                       "&& make there)");
  }
  tree.config_mak = read_config_mak(*mak);
  KutHost& host = tree.host;
  if (auto a = tree.config_mak.find("ARCH"); a != tree.config_mak.end()) host.arch = a->second;
  if (auto d = tree.config_mak.find("TEST_DIR"); d != tree.config_mak.end()) host.test_dir = d->second;
  tree.cfg_path = host.test_dir + "/unittests.cfg";
  const auto cfg_text = read_regular_file(dir + "/" + tree.cfg_path);
  if (!cfg_text) throw KutTreeError("--kvm-unit-tests: cannot read " + dir + "/" + tree.cfg_path);
  tree.cfg = parse_kut_config(*cfg_text, tree.cfg_path);

  struct stat st {};
  host.kvm_available = ::stat("/dev/kvm", &st) == 0 && S_ISCHR(st.st_mode) && !kvm_unusable();
  host.read_file = [](const std::string& path) -> std::optional<std::string> {
    auto text = read_regular_file(path);
    if (text) {
      while (!text->empty() && text->back() == '\n') text->pop_back();
    }
    return text;
  };
  host.is_file = [dir](const std::string& rel) { return is_regular_file(dir + "/" + rel); };
  host.disabled = [dir, vars = tree.config_mak](const std::string& condition) {
    return run_bash(dir, condition, vars).second == 0;
  };
  return tree;
}

ShellContext kut_shell(const KutTree& tree) {
  ShellContext sh;
  sh.variable = [vars = tree.config_mak](std::string_view name) -> std::optional<std::string> {
    const std::string n(name);
    if (const char* v = std::getenv(n.c_str())) return std::string(v);
    if (auto it = vars.find(n); it != vars.end()) return it->second;
    if (n == "MAX_SMP") return std::to_string(::sysconf(_SC_NPROCESSORS_ONLN));
    return std::nullopt;
  };
  sh.command_output = [dir = tree.dir, vars = tree.config_mak](std::string_view command) {
    return run_bash(dir, std::string(command), vars).first;
  };
  sh.glob = [dir = tree.dir](std::string_view pattern) {
    std::vector<std::string> out;
    // The pattern is relative to the suite's folder; escape the folder's own glob characters.
    std::string escaped;
    for (char c : dir) {
      if (c == '*' || c == '?' || c == '[' || c == '\\') escaped += '\\';
      escaped += c;
    }
    glob_t g{};
    if (::glob((escaped + "/" + std::string(pattern)).c_str(), 0, nullptr, &g) == 0) {
      for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i] + dir.size() + 1);
    }
    ::globfree(&g);
    return out;
  };
  return sh;
}

std::optional<std::string> kut_host_environment(const KutTree& tree, bool all, std::string& error) {
  KutEnvInputs in;
  utsname u{};
  if (::uname(&u) == 0) in.kernel_release = u.release;
  if (auto e = tree.config_mak.find("ERRATATXT"); e != tree.config_mak.end()) {
    in.errata_path = e->second;
    if (!in.errata_path.empty()) in.errata_txt = read_regular_file(in.errata_path);
  }
  in.environ_errata = environ_errata();
  if (const char* user = std::getenv("KVM_UNIT_TESTS_ENV")) {
    in.user_env = read_regular_file(user).value_or("");
  }
  in.errata_force = all;
  return kut_environment(in, error);
}

}  // namespace minivmm::testrun
