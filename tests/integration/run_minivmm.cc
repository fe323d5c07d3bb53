#include "run_minivmm.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

namespace minivmm::testing {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

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

bool under_nested_kvm() {
  const char* v = std::getenv("MINIVMM_NESTED_KVM");
  return v != nullptr && std::string(v) == "1";
}

Child start_minivmm(const std::vector<std::string>& args, bool with_stats, bool console_to_file,
                    const std::vector<std::string>& wrapper) {
  Child c;
  c.out_path = temp_path("out");
  c.err_path = temp_path("err");
  c.stats_path = temp_path("stats");
  c.with_stats = with_stats;
  std::vector<std::string> argv_s = wrapper;
  argv_s.push_back(MINIVMM_BINARY);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  if (with_stats) {
    argv_s.push_back("--stats");
    argv_s.push_back(c.stats_path);
    argv_s.push_back("--quiet");
  }
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);

  c.pid = fork();
  if (c.pid == 0) {
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(console_to_file ? c.out_path.c_str() : "/dev/null", O_WRONLY | O_TRUNC);
    const int err = open(c.err_path.c_str(), O_WRONLY | O_TRUNC);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return c;
}

bool wait_for_console(const Child& child, const std::string& text, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(child.out_path);
    const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (out.find(text) != std::string::npos) return true;
    siginfo_t info{};
    // WNOWAIT: look without reaping; finish_minivmm collects the status.
    if (::waitid(P_PID, static_cast<id_t>(child.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid != 0) {
      return false;  // it has exited
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

RunResult finish_minivmm(Child& c, int timeout_s) {
  RunResult r;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    const pid_t w = waitpid(c.pid, &status, WNOHANG);
    if (w == c.pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &status, 0);
      break;
    }
    // Polling a child's exit is the one real-time wait in the test suite: the child is a real
    // VM running for a real second or two.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  r.out = slurp(c.out_path);
  r.err = slurp(c.err_path);
  if (c.with_stats) {
    const std::string s = slurp(c.stats_path);
    if (!s.empty()) r.stats = nlohmann::json::parse(s, nullptr, false);
    if (r.stats && r.stats->is_discarded()) r.stats.reset();
  }
  unlink(c.out_path.c_str());
  unlink(c.err_path.c_str());
  unlink(c.stats_path.c_str());
  return r;
}

RunResult run_minivmm(const std::vector<std::string>& args, bool with_stats, int timeout_s) {
  Child c = start_minivmm(args, with_stats);
  return finish_minivmm(c, timeout_s);
}

}  // namespace minivmm::testing
