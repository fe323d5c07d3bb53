#include "vmm/testrun/test_command.h"

#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "vmm/host/output_file.h"
#include "vmm/testrun/host_files.h"
#include "vmm/testrun/kut_tree.h"
#include "vmm/testrun/manifest.h"
#include "vmm/testrun/progress.h"
#include "vmm/testrun/reports.h"
#include "vmm/testrun/runner.h"
#include "vmm/testrun/schedule.h"
#include "vmm/vmm_error.h"

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

// Every file `minivmm test` writes goes through vmm::OutputFile (vmm/host/output_file.h): a
// regular file is written beside and renamed onto, a FIFO or a character device is written in
// place and never replaced, and none may be one of the run's inputs. (The runner once had a
// write path of its own that renamed onto /dev/null, making it a regular file for the whole
// machine: issue 31.)
vmm::OutputFile check_output(const std::string& option, const std::string& path,
                             const std::vector<vmm::InputFile>& inputs) {
  try {
    return vmm::OutputFile::check(option, path, inputs);
  } catch (const vmm::VmmError& e) {
    throw UsageError{e.what()};
  }
}

// Writes `text` to `out` as `option`, opening it first if it is not yet. false with `why`,
// one line that names the option and the file.
bool write_output(const std::string& option, vmm::OutputFile& out, const std::string& text,
                  std::string& why) {
  try {
    out.open();
  } catch (const vmm::VmmError& e) {
    why = e.what();
    return false;
  }
  if (out.write(text, why)) return true;
  why = option + ": " + out.path() + ": " + why;
  return false;
}

// The tests to run, from every source, in the sources' order.
struct Plan {
  std::vector<TestCase> tests;
  std::vector<std::string> suite_of;  // per test: its JUnit <testsuite>
  std::optional<KutTree> suite;       // --kvm-unit-tests
  std::string env_error;              // why the suite's environment module could not be made
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
  try {
    plan.suite = open_kut_tree(o.kvm_unit_tests);
  } catch (const KutTreeError& e) {
    throw UsageError{e.what()};
  }
  const KutTree& tree = *plan.suite;
  for (const auto& w : tree.cfg.warnings) std::fprintf(stderr, "minivmm test: warning: %s\n", w.c_str());

  KutSelection sel;
  sel.group = o.group;
  sel.all = o.all;
  std::optional<std::string> timeout_override = o.timeout;
  for (std::size_t i = 0; i < tree.cfg.entries.size(); ++i) {
    const KutEntry& e = tree.cfg.entries[i];
    if (!matches_filters(e.name, o.filters, used)) continue;
    const Selection s = select_kut_entry(e, sel, tree.host);
    if (s.what == Selected::kNo) continue;
    TestCase t;
    t.name = e.name;
    t.kind = TestCase::Kind::kSuite;
    t.origin = tree.cfg_path + ":" + std::to_string(e.line);
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
  std::map<std::string, std::string> origin_of;  // every test's name: where it is defined
  if (plan.suite) {
    for (const KutEntry& e : plan.suite->cfg.entries) {
      origin_of.emplace(e.name, plan.suite->cfg_path + ":" + std::to_string(e.line));
    }
  }
  for (const auto& path : o.manifests) {
    std::vector<TestCase> tests;
    try {
      if (!is_regular_file(path)) throw ManifestError(path + ": not a readable file");
      tests = load_manifest(path, defines);
    } catch (const ManifestError& e) {
      throw UsageError{e.what()};
    }
    std::string suite = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    if (suite.size() > 5 && suite.substr(suite.size() - 5) == ".toml") suite.resize(suite.size() - 5);
    for (auto& t : tests) {
      // Names are what the reports and the logs go by: one per test across every source.
      if (const auto [it, fresh] = origin_of.emplace(t.name, t.origin); !fresh) {
        throw UsageError{t.origin + ": a second test named '" + t.name + "' (the first is " +
                         it->second + ")"};
      }
      if (!matches_filters(t.name, o.filters, used)) continue;
      if (!o.group.empty() && std::find(t.groups.begin(), t.groups.end(), o.group) == t.groups.end()) {
        continue;
      }
      if (o.timeout) {  // checked by run(): a duration
        const double d = *parse_duration(*o.timeout);
        t.timeout_s = d > 0 ? std::optional<double>(d) : std::nullopt;
        t.timeout_text = *o.timeout;
      }
      if (no_kvm) t.decided = Verdict{Outcome::kSkip, "KVM is not available here: " + *no_kvm};
      plan.tests.push_back(std::move(t));
      plan.suite_of.push_back(suite);
    }
  }
}

// The environment module, written once for the whole run. Returns its path ("" when there is
// no suite or the module could not be made: then plan.env_error says why).
std::string write_environment(const TestCommandOptions& o, Plan& plan, const std::string& dir) {
  if (!plan.suite) return "";
  const auto text = kut_host_environment(*plan.suite, o.all, plan.env_error);
  if (!text) return "";
  std::string path = dir + "/kvm-unit-tests.env";
  vmm::OutputFile out = check_output("the environment module", path, {});
  std::string why;
  if (!write_output("the environment module", out, *text, why)) {
    throw UsageError{"cannot write the environment module: " + why};
  }
  return path;
}

// What the reports must never overwrite, known before the plan: the manifests, the suite's
// config.mak and cfg, and minivmm itself (`--junit build/minivmm` would replace the binary
// every test runs).
std::vector<vmm::InputFile> command_line_inputs(const TestCommandOptions& o) {
  std::vector<vmm::InputFile> in;
  for (const auto& m : o.manifests) in.push_back({"--manifest", m});
  if (!o.kvm_unit_tests.empty()) {
    in.push_back({"--kvm-unit-tests", o.kvm_unit_tests + "/config.mak"});
    in.push_back({"--kvm-unit-tests", o.kvm_unit_tests + "/x86/unittests.cfg"});
  }
  in.push_back({"minivmm test (its own binary)", "/proc/self/exe"});
  return in;
}

// ... and once the plan is made: every test's kernel and initrd, the suite's cfg wherever its
// TEST_DIR says and its environment module in the logs folder (check_reports() adds
// results.tsv, which is no input but must not be a report either).
void plan_inputs(const TestCommandOptions& o, const Plan& plan, std::vector<vmm::InputFile>& in) {
  if (plan.suite) {
    const KutTree& tree = *plan.suite;
    in.push_back({"--kvm-unit-tests", tree.dir + "/" + tree.cfg_path});
    std::set<std::string> files;
    for (const KutEntry& e : tree.cfg.entries) {
      if (!e.file.empty()) files.insert(tree.dir + "/" + tree.host.test_dir + "/" + e.file);
    }
    for (const auto& f : files) in.push_back({"--kvm-unit-tests (a test's kernel)", f});
    if (!o.logs.empty()) {
      in.push_back({"--logs (the environment module)", o.logs + "/kvm-unit-tests.env"});
    }
  }
  std::set<std::string> files;
  for (const TestCase& t : plan.tests) {
    if (!t.kernel.empty()) files.insert(t.kernel);
    for (std::size_t i = 0; i + 1 < t.run_args.size(); ++i) {
      if (t.run_args[i] == "--initrd" || t.run_args[i] == "--kernel") {
        files.insert(t.run_args[i + 1]);
      }
    }
  }
  for (const auto& f : files) in.push_back({"a test's kernel or initrd", f});
}

struct Reports {
  vmm::OutputFile tap, junit;
};

Reports check_reports(const TestCommandOptions& o, std::vector<vmm::InputFile> inputs) {
  // Not inputs, but files of this run the reports must not take either.
  if (!o.logs.empty()) inputs.push_back({"--logs (results.tsv)", o.logs + "/results.tsv"});
  Reports r;
  if (!o.tap.empty()) r.tap = check_output("--tap", o.tap, inputs);
  if (!o.junit.empty()) {
    r.junit = check_output("--junit", o.junit, inputs);
    // Two reports renamed onto one file: the second would replace the first.
    if (!r.junit.resolved().empty() && r.junit.resolved() == r.tap.resolved()) {
      throw UsageError{"--junit: '" + o.junit + "' is the --tap report too ('" + o.tap + "')"};
    }
  }
  return r;
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
  // The reports are judged before anything runs, so a typo costs no test run: first against
  // the inputs known from the command line, then (below) against every test's files too.
  std::vector<vmm::InputFile> inputs = command_line_inputs(o);
  Reports reports = check_reports(o, inputs);
  if (!o.logs.empty()) {
    struct stat st {};
    if (::stat(o.logs.c_str(), &st) != 0) {
      // Made when the run starts, in a folder that exists.
      const auto slash = o.logs.find_last_of('/', o.logs.find_last_not_of('/'));
      const std::string dir =
          slash == std::string::npos ? "." : o.logs.substr(0, slash == 0 ? 1 : slash);
      if (::access(dir.c_str(), W_OK | X_OK) != 0) {
        throw UsageError{"--logs: cannot create '" + o.logs + "' in '" + dir + "': " +
                         std::strerror(errno)};
      }
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

  plan_inputs(o, plan, inputs);
  reports = check_reports(o, inputs);
  // A FIFO's reader is asked for now, before any test runs: one that is not there is a usage
  // error, not a run whose report is lost at the end.
  if (!o.list) {
    try {
      reports.tap.open();
      reports.junit.open();
    } catch (const vmm::VmmError& e) {
      throw UsageError{e.what()};
    }
  }

  if (o.list) {
    for (const auto& t : plan.tests) std::printf("%s\n", t.name.c_str());
    return kExitPassed;
  }

  RunnerOptions ro;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  ro.jobs = static_cast<unsigned>(o.jobs ? std::min<long long>(*o.jobs, 1024) : std::max(1L, cpus));
  ro.keep_logs = !o.logs.empty();
  ro.gdb_on_fault = o.gdb_on_fault;
  ro.logs_dir = o.logs;
  // An earlier run's times in the logs folder: longest first (schedule.h).
  if (!o.logs.empty()) {
    if (const auto tsv = read_regular_file(o.logs + "/results.tsv")) {
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

  const ShellContext shell = plan.suite ? kut_shell(*plan.suite) : ShellContext{};
  const Prepare prepare = [&](const TestCase& t) -> std::variant<Launch, Verdict> {
    if (t.kind == TestCase::Kind::kManifest) {
      if (!t.kernel.empty() && ::access(t.kernel.c_str(), R_OK) != 0) {
        return Verdict{Outcome::kFail, "kernel '" + t.kernel + "': " + std::strerror(errno)};
      }
      return Launch{t.run_args, ""};
    }
    const KutTree& tree = *plan.suite;
    auto p = prepare_kut_run(tree.cfg.entries[t.suite_entry], tree.host, shell, tree.dir, env_path,
                             plan.env_error);
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
  auto write = [&](const char* option, vmm::OutputFile& out, const std::string& text) {
    if (out.kind() == vmm::OutputFile::Kind::kNone) return;
    std::string why;
    if (!write_output(option, out, text, why)) {
      std::fprintf(stderr, "minivmm test: error: %s\n", vmm::one_line(why).c_str());
      report_failed = true;
    }
  };
  write("--tap", reports.tap, tap_report(plan.tests, summary.results));
  write("--junit", reports.junit,
        junit_report(plan.tests, summary.results, plan.suite_of, summary.wall_s));
  if (!o.logs.empty()) {
    try {
      vmm::OutputFile tsv = vmm::OutputFile::check("--logs", o.logs + "/results.tsv", inputs);
      write("--logs", tsv, results_tsv(plan.tests, summary.results));
    } catch (const vmm::VmmError& e) {
      std::fprintf(stderr, "minivmm test: error: %s\n", e.what());
      report_failed = true;
    }
  }

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
    // One line whatever a manifest's or cfg's text quoted in it holds (a name with a newline).
    std::fprintf(stderr, "minivmm: error: %s\n", vmm::one_line(e.what).c_str());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minivmm test: error: %s\n", vmm::one_line(e.what()).c_str());
    return kExitFailed;
  }
}

}  // namespace minivmm::testrun
