// Runs tests as minivmm child processes, N at a time, with timeouts, and hands each ending to
// the caller. Linux only, single-threaded: one ppoll over a signalfd (SIGCHLD, SIGINT, SIGTERM,
// SIGHUP), whose timeout is the nearest deadline.
//
// Each test is `minivmm run ...` exec'd from the runner's own binary (/proc/self/exe: no shell,
// no PATH search), in a process group of its own, so that a timeout or a Ctrl-C stops all of
// it (the terminal's Ctrl-C reaches only the runner's group; the runner passes it on). stdin
// is /dev/null, the console goes to a file (nothing for the runner to copy while the guest
// runs), stderr to another. The child also dies with the runner (PR_SET_PDEATHSIG), so a
// runner killed by SIGKILL leaves no guest running on.
//
// Stopping: SIGTERM to the group, then SIGKILL after the grace time (1 s, as the suite's
// `timeout -k 1s`). A first SIGINT/SIGTERM/SIGHUP to the runner stops every running test that
// way and starts no more; a second one kills them at once.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "vmm/testrun/test_case.h"
#include "vmm/testrun/verdict.h"

namespace minivmm::testrun {

// How one test ended, with the times the runner measured.
struct TestResult {
  std::size_t index = 0;  // in the runner's list of tests
  Verdict verdict;
  bool ran = false;           // a minivmm process ran
  bool interrupted = false;   // stopped by a Ctrl-C: not a result
  double duration_s = 0;      // from the runner's first step for it to its verdict
  double vmm_s = 0;           // the minivmm process's own life: exec to exit
  std::string console_tail;   // the console's last lines (for the reports)
  std::string console_path;   // the whole console, when the logs are kept
};

// Before a test starts: its `minivmm run` arguments and any text that belongs on its stderr
// (the suite's option-mapping warnings), or a verdict with no process to start.
struct Launch {
  std::vector<std::string> run_args;
  std::string warnings;
};
using Prepare = std::function<std::variant<Launch, Verdict>(const TestCase&)>;

// After a test's process ended: its verdict. `console` is the whole console (up to 64 MiB, the
// last part of a longer one).
using Judge = std::function<Verdict(const TestCase&, const RunObservation&,
                                    const std::string& console, const std::string& warnings)>;

struct RunnerOptions {
  std::string minivmm = "/proc/self/exe";
  unsigned jobs = 1;
  // The order to start the tests in (indices); empty: as given (schedule.h).
  std::vector<std::size_t> order;
  std::string logs_dir;  // the console, stderr and report of each test; a temporary folder if empty
  bool keep_logs = false;
  // --gdb-on-fault: each test gets `--gdb unix:LOGS/NAME.gdb --gdb-on-fault`; a test held for the
  // debugger is said on stderr (its name and socket) and its deadline is dropped.
  bool gdb_on_fault = false;
  std::chrono::milliseconds grace{1000};
  // Called as tests start and end, and about twice a second while any runs (for a live status
  // line); `running` names the tests in progress.
  std::function<void(const std::vector<std::string>& running, std::size_t done, double elapsed_s)> on_tick;
  std::function<void(const TestCase&, const TestResult&)> on_result;
};

struct RunSummary {
  std::vector<TestResult> results;  // in the order the tests were given, finished ones only
  bool interrupted = false;
  double wall_s = 0;
};

// The file name a test's logs use: its name with '/' and control characters replaced (the
// runner adds .2, .3, ... to a second test whose name gives the same stem).
std::string log_file_stem(const std::string& test_name);

// Runs `tests` (those with a `decided` verdict are reported without a process). Throws
// std::system_error when the host refuses what it needs (signalfd, the log folder).
RunSummary run_tests(const std::vector<TestCase>& tests, const RunnerOptions& opt,
                     const Prepare& prepare, const Judge& judge);

}  // namespace minivmm::testrun
