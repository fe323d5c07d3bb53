#include "vmm/testrun/test_command.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "vmm/testrun/kut_config.h"
#include "vmm/testrun/kut_suite.h"
#include "vmm/testrun/manifest.h"
#include "vmm/testrun/reports.h"
#include "vmm/testrun/runner.h"
#include "vmm/testrun/schedule.h"

extern char** environ;

namespace minivmm::testrun {
namespace {

constexpr int kExitPassed = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;

// A usage or input error: one line, exit 2.
struct UsageError {
  std::string what;
};

std::optional<std::string> read_whole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

bool is_regular(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

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

// Runs `bash -c command` in `dir` with `extra_env` added; its stdout, and its exit status.
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
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  if (pid > 0) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return {text, pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

std::optional<std::string> kvm_unusable() {
  const int fd = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::string("/dev/kvm: ") + std::strerror(errno);
  ::close(fd);
  return std::nullopt;
}

// A report target is judged before anything runs, so a typo costs no test run.
void check_output_path(const char* option, const std::string& path) {
  if (path.empty() || path == "-") return;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw UsageError{std::string(option) + ": '" + path + "' is a directory"};
  }
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  if (::access(dir.c_str(), W_OK) != 0) {
    throw UsageError{std::string(option) + ": cannot write in '" + dir + "': " + std::strerror(errno)};
  }
}

std::string colored(Outcome o, bool color) {
  const std::string word(outcome_word(o));
  if (!color) return word;
  const char* code = o == Outcome::kPass ? "32" : o == Outcome::kSkip ? "33" : "31";
  return std::string("\033[") + code + "m" + word + "\033[0m";
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.1f s", s);
  return buf;
}

// The human side: a live status line on a terminal, else one line per test as it ends.
class Progress {
 public:
  Progress(std::FILE* out, bool live, std::size_t total) : out_(out), live_(live), total_(total) {}

  void tick(const std::vector<std::string>& running, std::size_t done, double elapsed) {
    if (!live_) return;
    std::string line = "[" + std::to_string(done) + "/" + std::to_string(total_) + "] " +
                       seconds_text(elapsed);
    if (!running.empty()) {
      line += "  running:";
      for (const auto& n : running) line += " " + n;
    }
    winsize ws{};
    const std::size_t width =
        ::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
    if (line.size() >= width) line = line.substr(0, width - 1);
    std::fprintf(out_, "\r\033[K%s", line.c_str());
    std::fflush(out_);
    shown_ = true;
  }

  void result(const TestCase& t, const TestResult& r) {
    std::string line = colored(r.verdict.outcome, live_) + " " + t.name;
    if (!r.verdict.detail.empty()) line += " (" + r.verdict.detail + ")";
    if (r.ran) line += " [" + seconds_text(r.duration_s) + "]";
    if (live_ && shown_) std::fputs("\r\033[K", out_);
    std::fprintf(out_, "%s\n", line.c_str());
    // A failure shows where the guest was: its console's last lines.
    if (r.verdict.outcome == Outcome::kFail && !r.console_tail.empty()) {
      std::istringstream tail(last_lines(r.console_tail, 5));
      for (std::string l; std::getline(tail, l);) {
        if (!l.empty() && l.back() == '\r') l.pop_back();
        std::fprintf(out_, "    | %s\n", l.c_str());
      }
    }
    std::fflush(out_);
    shown_ = false;
  }

  void clear() {
    if (live_ && shown_) std::fputs("\r\033[K", out_);
    shown_ = false;
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  bool live_;
  std::size_t total_;
  bool shown_ = false;
};

struct Plan {
  std::vector<TestCase> tests;
  std::vector<std::string> suite_of;  // per test, for JUnit
  KutConfig kut;
  KutHost host;
  std::string suite_dir;
  std::map<std::string, std::string> config_mak;
  std::string env_error;
};

bool matches_filters(const std::string& name, const std::vector<std::string>& filters,
                     std::set<std::string>& used) {
  if (filters.empty()) return true;
  bool hit = false;
  for (const auto& f : filters) {
    if (::fnmatch(f.c_str(), name.c_str(), 0) == 0) {
      used.insert(f);
      hit = true;
    }
  }
  return hit;
}

void add_suite(const TestCommandOptions& o, Plan& plan, std::set<std::string>& used) {
  plan.suite_dir = o.kvm_unit_tests;
  const auto mak = read_whole(plan.suite_dir + "/config.mak");
  if (!mak) {
    throw UsageError{"--kvm-unit-tests: '" + plan.suite_dir +
                     "' is not a configured kvm-unit-tests tree (no config.mak; run ./configure "
                     "&& make there)"};
  }
  plan.config_mak = read_config_mak(*mak);
  KutHost& host = plan.host;
  if (auto a = plan.config_mak.find("ARCH"); a != plan.config_mak.end()) host.arch = a->second;
  if (auto d = plan.config_mak.find("TEST_DIR"); d != plan.config_mak.end()) host.test_dir = d->second;
  const std::string cfg_rel = host.test_dir + "/unittests.cfg";
  const auto cfg_text = read_whole(plan.suite_dir + "/" + cfg_rel);
  if (!cfg_text) {
    throw UsageError{"--kvm-unit-tests: cannot read " + plan.suite_dir + "/" + cfg_rel};
  }
  plan.kut = parse_kut_config(*cfg_text, cfg_rel);
  for (const auto& w : plan.kut.warnings) std::fprintf(stderr, "minivmm test: warning: %s\n", w.c_str());

  struct stat st {};
  host.kvm_available = ::stat("/dev/kvm", &st) == 0 && S_ISCHR(st.st_mode) && !kvm_unusable();
  const std::string dir = plan.suite_dir;
  host.read_file = [](const std::string& path) -> std::optional<std::string> {
    auto text = read_whole(path);
    if (text) {
      while (!text->empty() && text->back() == '\n') text->pop_back();
    }
    return text;
  };
  host.is_file = [dir](const std::string& rel) { return is_regular(dir + "/" + rel); };
  const auto vars = plan.config_mak;
  host.disabled = [dir, vars](const std::string& condition) {
    return run_bash(dir, condition, vars).second == 0;
  };

  KutSelection sel;
  sel.group = o.group;
  sel.all = o.all;
  std::optional<std::string> timeout_override = o.timeout;
  for (std::size_t i = 0; i < plan.kut.entries.size(); ++i) {
    const KutEntry& e = plan.kut.entries[i];
    if (!matches_filters(e.name, o.filters, used)) continue;
    const Selection s = select_kut_entry(e, sel, host);
    if (s.what == Selected::kNo) continue;
    TestCase t;
    t.name = e.name;
    t.kind = TestCase::Kind::kSuite;
    t.origin = cfg_rel + ":" + std::to_string(e.line);
    std::istringstream groups(e.groups);
    for (std::string g; groups >> g;) t.groups.push_back(g);
    t.suite_entry = i;
    t.timeout_text = kut_timeout_text(e, timeout_override);
    if (s.what == Selected::kSkip) {
      t.decided = Verdict{Outcome::kSkip, s.reason};
    } else if (const auto d = parse_duration(t.timeout_text)) {
      if (*d > 0) t.timeout_s = *d;
    } else {
      t.decided = Verdict{Outcome::kSkip, "invalid timeout '" + t.timeout_text + "'"};
    }
    plan.tests.push_back(std::move(t));
    plan.suite_of.push_back("kvm-unit-tests");
  }
}

void add_manifests(const TestCommandOptions& o, Plan& plan, std::set<std::string>& used) {
  std::map<std::string, std::string> defines;
  for (const auto& d : o.defines) {
    const auto eq = d.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError{"--define: '" + d + "' is not NAME=VALUE"};
    }
    defines[d.substr(0, eq)] = d.substr(eq + 1);
  }
  const auto no_kvm = o.manifests.empty() ? std::nullopt : kvm_unusable();
  for (const auto& path : o.manifests) {
    std::vector<TestCase> tests;
    try {
      if (!is_regular(path)) throw ManifestError(path + ": not a readable file");
      tests = load_manifest(path, defines);
    } catch (const ManifestError& e) {
      throw UsageError{e.what()};
    }
    std::string suite = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    if (suite.size() > 5 && suite.substr(suite.size() - 5) == ".toml") suite.resize(suite.size() - 5);
    for (auto& t : tests) {
      if (!matches_filters(t.name, o.filters, used)) continue;
      if (!o.group.empty() && std::find(t.groups.begin(), t.groups.end(), o.group) == t.groups.end()) {
        continue;
      }
      if (no_kvm) t.decided = Verdict{Outcome::kSkip, "KVM is not available here: " + *no_kvm};
      plan.tests.push_back(std::move(t));
      plan.suite_of.push_back(suite);
    }
  }
}

std::vector<std::string> environ_errata() {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "ERRATA_", 7) == 0) out.emplace_back(*e);
  }
  return out;
}

// The environment module, written once for the whole run. Returns its path ("" when there is
// no suite or the module could not be made: then plan.env_error says why).
std::string write_environment(const TestCommandOptions& o, Plan& plan, const std::string& dir) {
  if (o.kvm_unit_tests.empty()) return "";
  KutEnvInputs in;
  utsname u{};
  if (::uname(&u) == 0) in.kernel_release = u.release;
  if (auto e = plan.config_mak.find("ERRATATXT"); e != plan.config_mak.end()) {
    in.errata_path = e->second;
    if (!in.errata_path.empty()) in.errata_txt = read_whole(in.errata_path);
  }
  in.environ_errata = environ_errata();
  if (const char* user = std::getenv("KVM_UNIT_TESTS_ENV")) in.user_env = read_whole(user).value_or("");
  in.errata_force = o.all;
  std::string error;
  const auto text = kut_environment(in, error);
  if (!text) {
    plan.env_error = error;
    return "";
  }
  std::string path = dir + "/kvm-unit-tests.env";
  std::string why;
  if (!write_report(path, *text, why)) throw UsageError{"cannot write the environment module: " + why};
  return path;
}

ShellContext suite_shell(const Plan& plan) {
  ShellContext sh;
  const auto vars = plan.config_mak;
  const std::string dir = plan.suite_dir;
  sh.variable = [vars](std::string_view name) -> std::optional<std::string> {
    const std::string n(name);
    if (const char* v = std::getenv(n.c_str())) return std::string(v);
    if (auto it = vars.find(n); it != vars.end()) return it->second;
    if (n == "MAX_SMP") return std::to_string(::sysconf(_SC_NPROCESSORS_ONLN));
    return std::nullopt;
  };
  sh.command_output = [dir, vars](std::string_view command) {
    return run_bash(dir, std::string(command), vars).first;
  };
  sh.glob = [dir](std::string_view pattern) {
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

int run(const TestCommandOptions& o) {
  if (o.jobs && *o.jobs < 1) {
    throw UsageError{"-j: " + std::to_string(*o.jobs) + " is not a number of tests at once (1 or more)"};
  }
  if (o.timeout && !parse_duration(*o.timeout)) {
    throw UsageError{"--timeout: '" + *o.timeout +
                     "' is not a duration (seconds, or a number with s, m, h or d; 0: none)"};
  }
  if (o.kvm_unit_tests.empty() && o.manifests.empty()) {
    throw UsageError{"no tests: give --kvm-unit-tests DIR or --manifest FILE (see 'minivmm test --help')"};
  }
  check_output_path("--tap", o.tap);
  check_output_path("--junit", o.junit);
  if (!o.logs.empty()) {
    struct stat st {};
    if (::stat(o.logs.c_str(), &st) != 0) {
      check_output_path("--logs", o.logs);  // made when the run starts, in a folder that exists
    } else if (!S_ISDIR(st.st_mode)) {
      throw UsageError{"--logs: '" + o.logs + "' is not a directory"};
    } else if (::access(o.logs.c_str(), W_OK) != 0) {
      throw UsageError{"--logs: cannot write in '" + o.logs + "': " + std::strerror(errno)};
    }
  }

  Plan plan;
  std::set<std::string> used;
  if (!o.kvm_unit_tests.empty()) add_suite(o, plan, used);
  add_manifests(o, plan, used);
  for (const auto& f : o.filters) {
    if (!used.count(f)) throw UsageError{"no test is named or matches '" + f + "'"};
  }

  if (o.list) {
    for (const auto& t : plan.tests) std::printf("%s\n", t.name.c_str());
    return kExitPassed;
  }

  RunnerOptions ro;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  ro.jobs = static_cast<unsigned>(o.jobs ? std::min<long long>(*o.jobs, 1024) : std::max(1L, cpus));
  ro.keep_logs = !o.logs.empty();
  ro.logs_dir = o.logs;
  // An earlier run's times in the logs folder: longest first (schedule.h).
  if (!o.logs.empty()) {
    if (const auto tsv = read_whole(o.logs + "/results.tsv")) {
      ro.order = start_order(plan.tests, previous_durations(*tsv));
    }
  }
  if (ro.keep_logs && ::mkdir(o.logs.c_str(), 0755) != 0 && errno != EEXIST) {
    throw UsageError{"--logs: cannot create '" + o.logs + "': " + std::strerror(errno)};
  }

  // The environment module lives in the logs folder, or a temporary one of its own.
  std::string env_dir = o.logs;
  bool env_dir_is_temp = false;
  if (env_dir.empty() && !o.kvm_unit_tests.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/minivmm-test-env-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw UsageError{std::string("a temporary folder: ") + std::strerror(errno)};
    env_dir = tmpl;
    env_dir_is_temp = true;
  }
  const std::string env_path = write_environment(o, plan, env_dir);

  // Human output goes to stdout, unless the TAP report does.
  std::FILE* human = o.tap == "-" ? stderr : stdout;
  const bool live = ::isatty(::fileno(human)) == 1;
  Progress progress(human, live, plan.tests.size());
  ro.on_tick = [&](const std::vector<std::string>& running, std::size_t done, double elapsed) {
    progress.tick(running, done, elapsed);
  };
  ro.on_result = [&](const TestCase& t, const TestResult& r) { progress.result(t, r); };

  const ShellContext shell = suite_shell(plan);
  const Prepare prepare = [&](const TestCase& t) -> std::variant<Launch, Verdict> {
    if (t.kind == TestCase::Kind::kManifest) {
      if (::access(t.kernel.c_str(), R_OK) != 0) {
        return Verdict{Outcome::kFail, "kernel '" + t.kernel + "': " + std::strerror(errno)};
      }
      return Launch{t.run_args, ""};
    }
    auto p = prepare_kut_run(plan.kut.entries[t.suite_entry], plan.host, shell, plan.suite_dir,
                             env_path, plan.env_error);
    if (auto* v = std::get_if<Verdict>(&p)) return *v;
    auto& l = std::get<KutLaunch>(p);
    return Launch{std::move(l.run_args), std::move(l.warnings)};
  };
  const Judge judge = [](const TestCase& t, const RunObservation& obs, const std::string& console,
                         const std::string& warnings) {
    if (t.kind == TestCase::Kind::kManifest) {
      return manifest_verdict(obs, console, t.expect, t.timeout_text);
    }
    return suite_verdict(obs, t.timeout_text, warnings);
  };

  const RunSummary summary = run_tests(plan.tests, ro, prepare, judge);
  progress.clear();
  if (env_dir_is_temp) {
    ::unlink(env_path.c_str());
    ::rmdir(env_dir.c_str());
  }

  bool report_failed = false;
  auto write = [&](const char* option, const std::string& path, const std::string& text) {
    if (path.empty()) return;
    std::string why;
    if (!write_report(path, text, why)) {
      std::fprintf(stderr, "minivmm test: error: %s: %s\n", option, why.c_str());
      report_failed = true;
    }
  };
  write("--tap", o.tap, tap_report(plan.tests, summary.results));
  write("--junit", o.junit, junit_report(plan.tests, summary.results, plan.suite_of, summary.wall_s));
  if (!o.logs.empty()) write("--logs", o.logs + "/results.tsv", results_tsv(plan.tests, summary.results));

  std::size_t passed = 0, failed = 0, skipped = 0;
  for (const auto& r : summary.results) {
    passed += r.verdict.outcome == Outcome::kPass;
    failed += r.verdict.outcome == Outcome::kFail;
    skipped += r.verdict.outcome == Outcome::kSkip;
  }
  if (summary.interrupted) {
    std::fprintf(human, "interrupted: %zu of %zu tests finished\n", summary.results.size(),
                 plan.tests.size());
  }
  std::fprintf(human, "%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
  std::fflush(human);
  if (summary.interrupted) return kExitInterrupted;
  return failed > 0 || report_failed ? kExitFailed : kExitPassed;
}

}  // namespace

int run_test_command(const TestCommandOptions& options) {
  try {
    return run(options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "minivmm: error: %s\n", e.what.c_str());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minivmm test: error: %s\n", e.what());
    return kExitFailed;
  }
}

}  // namespace minivmm::testrun
