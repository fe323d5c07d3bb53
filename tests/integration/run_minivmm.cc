#include "run_minivmm.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace minivmm::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_path(const char* what) {
  std::string tmpl = std::string("/tmp/minivmm-test-") + what + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const int fd = mkstemp(buf.data());
  if (fd >= 0) close(fd);
  return std::string(buf.data());
}

}  // namespace

const char* guest_image() { return MINIVMM_GUEST_IMAGE; }

std::optional<std::string> kvm_unavailable_reason() {
  const int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::string("/dev/kvm: ") + std::strerror(errno);
  close(fd);
  return std::nullopt;
}

RunResult run_minivmm(const std::vector<std::string>& args, bool with_stats, int timeout_s) {
  const std::string out_path = temp_path("out");
  const std::string err_path = temp_path("err");
  const std::string stats_path = temp_path("stats");
  std::vector<std::string> argv_s{MINIVMM_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  if (with_stats) {
    argv_s.push_back("--stats");
    argv_s.push_back(stats_path);
    argv_s.push_back("--quiet");
  }
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_TRUNC);
    const int err = open(err_path.c_str(), O_WRONLY | O_TRUNC);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  RunResult r;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    // Polling a child's exit is the one real-time wait in the test suite: the child is a real
    // VM running for a real second or two.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  if (with_stats) {
    const std::string s = slurp(stats_path);
    if (!s.empty()) r.stats = nlohmann::json::parse(s, nullptr, false);
    if (r.stats && r.stats->is_discarded()) r.stats.reset();
  }
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  unlink(stats_path.c_str());
  return r;
}

}  // namespace minivmm::testing
