#include "vmm/testrun/kut_tree.h"

#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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

// Runs `bash -c command` in `dir` with `extra_env` added (the environment wins); its stdout,
// and its exit status (-1 when it could not run or did not exit).
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
  const pid_t pid = ::fork();
  if (pid == 0) {
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
  ::close(out[1]);
  std::string text;
  if (pid > 0) {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(out[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) text.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(out[0]);
  int status = 0;
  if (pid > 0) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
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
