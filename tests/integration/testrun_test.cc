// `minivmm test` end to end, with real guests: a kvm-unit-tests tree of our own making (its
// config.mak and unittests.cfg, the bundled guest as its x86/*.flat) and a manifest, run
// through the binary as a user runs it. Checks the verdict lines, the exit status, the
// timeout's stop and report, Ctrl-C, the logs and the TAP report, and reads the JUnit report
// with a real consumer (python3-junitparser, tests/testrun/check_junit.py). The usage errors
// need no KVM (BadInputTestrun*, label unit); the rest skip only where /dev/kvm cannot be used.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run_minivmm.h"
#include "testrun_support.h"

namespace minivmm::testing {
namespace {



// The processes whose command line mentions `needle` (a test's logs folder is on every guest's).
int processes_mentioning(const std::string& needle) {
  int n = 0;
  DIR* d = ::opendir("/proc");
  if (!d) return -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    if (std::atoi(e->d_name) == ::getpid()) continue;
    std::string cmd = slurp(std::string("/proc/") + e->d_name + "/cmdline");
    for (char& c : cmd) {
      if (c == '\0') c = ' ';
    }
    n += has(cmd, needle) && has(cmd, " run ");
  }
  ::closedir(d);
  return n;
}

// A kvm-unit-tests tree: config.mak, x86/unittests.cfg, the bundled guest as x86/guest.flat.
void make_suite(const std::string& dir, const std::string& cfg) {
  ::mkdir((dir + "/x86").c_str(), 0755);
  spit(dir + "/config.mak", "ARCH=x86_64\nTEST_DIR=x86\nERRATATXT=\n");
  spit(dir + "/x86/unittests.cfg", cfg);
  ASSERT_EQ(::symlink(guest_image(), (dir + "/x86/guest.flat").c_str()), 0);
}

const char* kSuiteCfg =
    "[pass]\n"
    "file = guest.flat\n"
    "test_args = 'timer=pit hz=250 ticks=25'\n"
    "groups = quick\n"
    "\n"
    "[exception]\n"
    "file = guest.flat\n"
    "test_args = fault\n"
    "\n"
    "# The guest idles forever: the suite's timeout must stop it.\n"
    "[idle]\n"
    "file = guest.flat\n"
    "test_args = \"timer=pit hz=250 ticks=0\"\n"
    "timeout = 1\n"
    "\n"
    "[panic]\n"
    "file = guest.flat\n"
    "test_args = panic\n"
    "\n"
    "[i386_only]\n"
    "file = guest.flat\n"
    "arch = i386\n"
    "\n"
    "[manual]\n"
    "file = guest.flat\n"
    "groups = nodefault\n"
    "\n"
    "[nofile]\n"
    "file = missing.flat\n"
    "\n"
    "[warned]\n"
    "file = guest.flat\n"
    "test_args = 'timer=pit hz=250 ticks=25'\n"
    "qemu_params = -cpu qemu64,+x2apic -device edu -m 4g\n"
    "Bogus = 1\n";

TEST(BootTestrunTest, SuiteVerdictsReportsAndLogs) {
  SKIP_WITHOUT_KVM();
  TempDir t;
  make_suite(t.path(), kSuiteCfg);
  const std::string logs = t.path() + "/logs", junit = t.path() + "/r.xml", tap = t.path() + "/r.tap";
  const RunResult r = run_minivmm({"test", "--kvm-unit-tests", t.path(), "-j", "3", "--logs", logs,
                                   "--junit", junit, "--tap", tap},
                                  false, 60);
  EXPECT_EQ(r.exit_code, 1) << "a test failed\n" << r.out << r.err;
  // One plain line per test as it ends (stdout is no terminal here).
  EXPECT_TRUE(has(r.out, "PASS pass [")) << r.out;
  EXPECT_TRUE(has(r.out, "PASS warned [")) << "warnings do not fail a passing guest\n" << r.out;
  // The guest's 0x7f reads as a signal, as run_tests.sh reads QEMU's 255.
  EXPECT_TRUE(has(r.out, "FAIL exception (terminated on SIG) [")) << r.out;
  EXPECT_TRUE(has(r.out, "FAIL idle (timeout; duration=1) [")) << r.out;
  EXPECT_TRUE(has(r.out, "    | minivmm-guest:")) << "a timeout shows the console's last lines\n" << r.out;
  EXPECT_TRUE(has(r.out, "FAIL panic (guest panicked) [")) << r.out;
  EXPECT_TRUE(has(r.out, "SKIP i386_only (i386 only)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "SKIP manual (test marked as manual run only)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "SKIP nofile (Test file 'x86/missing.flat' not found)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "\n2 passed, 3 failed, 3 skipped\n")) << r.out;
  EXPECT_TRUE(has(r.err, "x86/unittests.cfg:35: 'Bogus' is not a key run_tests.sh reads; ignored"))
      << r.err;
  EXPECT_EQ(processes_mentioning(logs), 0) << "the timed-out guest is still running";

  // The logs: each test's console, stderr, command and run report, and the results table.
  EXPECT_TRUE(has(slurp(logs + "/pass.log"), "done 25"));
  EXPECT_TRUE(has(slurp(logs + "/idle.log"), "minivmm-guest:"));
  const std::string cmd = slurp(logs + "/warned.cmd");
  EXPECT_TRUE(has(cmd, " run --kernel " + t.path() + "/x86/guest.flat --cpus 1 --memory 3072M ")) << cmd;
  EXPECT_TRUE(has(cmd, "--testdev")) << cmd;
  EXPECT_TRUE(has(cmd, "--initrd " + logs + "/kvm-unit-tests.env")) << cmd;
  EXPECT_TRUE(has(cmd, "warning: -device edu: not provided by minivmm")) << cmd;
  EXPECT_TRUE(has(slurp(logs + "/pass.json"), "\"exit\"")) << "the run report";
  EXPECT_TRUE(has(slurp(logs + "/kvm-unit-tests.env"), "QEMU_ACCEL=kvm\n"));
  const std::string tsv = slurp(logs + "/results.tsv");
  EXPECT_EQ(line_count(tsv), 9) << tsv;
  EXPECT_TRUE(has(tsv, "\nidle\tFAIL\ttimeout; duration=1\t")) << tsv;

  const std::string tap_text = slurp(tap);
  EXPECT_EQ(tap_text.rfind("TAP version 13\n1..8\nok 1 - pass\n", 0), 0u) << tap_text;
  EXPECT_TRUE(has(tap_text, "not ok 3 - idle\n  ---\n  message: 'timeout; duration=1'\n")) << tap_text;
  EXPECT_TRUE(has(tap_text, "ok 5 - i386_only # SKIP i386 only\n")) << tap_text;

  // The JUnit report, read by junitparser: every test, its verdict, its reason, its time.
  const int rc = std::system(("/usr/bin/python3 " MINIVMM_TESTRUN_DIR "/check_junit.py '" + junit +
                              "' pass=PASS exception=FAIL:SIG idle=FAIL:timeout panic=FAIL:panicked "
                              "i386_only=SKIP:i386 manual=SKIP:manual nofile=SKIP:missing.flat "
                              "warned=PASS")
                                 .c_str());
  EXPECT_EQ(rc, 0) << slurp(junit);

  // Again in the same logs folder, one at a time: the earlier run's times start the longest
  // (the 1 s timeout) first, though the cfg lists it after `pass`; the reports keep cfg order.
  const RunResult again = run_minivmm({"test", "--kvm-unit-tests", t.path(), "-j", "1", "--logs",
                                       logs, "--tap", tap, "pass", "idle"},
                                      false, 60);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_LT(again.out.find("FAIL idle"), again.out.find("PASS pass")) << again.out;
  EXPECT_EQ(slurp(tap).rfind("TAP version 13\n1..2\nok 1 - pass\nnot ok 2 - idle\n", 0), 0u)
      << slurp(tap);
}

TEST(BootTestrunTest, GroupAndNameFiltersAndList) {
  SKIP_WITHOUT_KVM();
  TempDir t;
  make_suite(t.path(), kSuiteCfg);
  RunResult r = run_minivmm({"test", "--kvm-unit-tests", t.path(), "--list"}, false, 30);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "pass\nexception\nidle\npanic\ni386_only\nmanual\nnofile\nwarned\n");
  r = run_minivmm({"test", "--kvm-unit-tests", t.path(), "-g", "quick"}, false, 30);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "PASS pass")) << r.out;
  EXPECT_TRUE(has(r.out, "\n1 passed, 0 failed, 0 skipped\n")) << r.out;
  // Patterns; a nodefault test named is still a SKIP, unless -a.
  r = run_minivmm({"test", "--kvm-unit-tests", t.path(), "man*", "i386_only"}, false, 30);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "0 passed, 0 failed, 2 skipped\n")) << r.out;
  // With -a it runs. The bundled guest, given no command line, idles: --timeout (which
  // overrides the cfg's) ends it.
  r = run_minivmm({"test", "--kvm-unit-tests", t.path(), "-a", "--timeout", "0.5", "manual"}, false, 30);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "FAIL manual (timeout; duration=0.5)")) << r.out;
}

TEST(BootTestrunTest, ManifestVerdictsAndAMissingKernelFailsAlone) {
  SKIP_WITHOUT_KVM();
  TempDir t;
  const std::string manifest = t.path() + "/m.toml";
  spit(manifest,
       "[defaults]\n"
       "kernel = \"${guest}\"\n"
       "exit = 1\n"
       "timeout = 30\n"
       "[[test]]\n"
       "name = \"ticks\"\n"
       "cmdline = \"timer=pit hz=250 ticks=25\"\n"
       "console = [\"done 25\"]\n"
       "[[test]]\n"
       "name = \"gone\"\n"
       "kernel = \"no-such-kernel.bin\"\n"
       "[[test]]\n"
       "name = \"forbidden\"\n"
       "cmdline = \"timer=pit hz=250 ticks=25\"\n"
       "not_console = [\"done 25\"]\n"
       "[[test]]\n"
       "name = \"wrong-status\"\n"
       "cmdline = \"fault\"\n"
       "# pvpanic ends the run at once: a verdict of its own, not a timeout.\n"
       "[[test]]\n"
       "name = \"panics\"\n"
       "cmdline = \"panic\"\n"
       "# Longer than steady_clock can count: no timeout, not an instant one.\n"
       "[[test]]\n"
       "name = \"forever\"\n"
       "timeout = 1e300\n"
       "cmdline = \"timer=pit hz=250 ticks=25\"\n"
       "# The guest idles forever: its own timeout stops it.\n"
       "[[test]]\n"
       "name = \"idle\"\n"
       "timeout = 0.5\n"
       "cmdline = \"timer=pit hz=250 ticks=0\"\n");
  const RunResult r = run_minivmm({"test", "--manifest", manifest, "--define",
                                   std::string("guest=") + guest_image(), "-j", "2", "--tap", "-"},
                                  false, 60);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  // --tap -: the report is stdout, the per-test lines go to stderr.
  EXPECT_EQ(r.out.rfind("TAP version 13\n1..7\nok 1 - ticks\nnot ok 2 - gone\n", 0), 0u) << r.out;
  EXPECT_TRUE(has(r.err, "PASS ticks [")) << r.err;
  EXPECT_TRUE(has(r.err, "FAIL gone (kernel '" + t.path() + "/no-such-kernel.bin': No such file or directory)"))
      << r.err;
  EXPECT_TRUE(has(r.err, "FAIL forbidden (console has 'done 25')")) << r.err;
  EXPECT_TRUE(has(r.err, "FAIL wrong-status (exit status 255, expected 1)")) << r.err;
  EXPECT_TRUE(has(r.err, "FAIL panics (guest panicked)")) << r.err;
  EXPECT_TRUE(has(r.err, "    | minivmm-guest: panic\n")) << r.err;
  EXPECT_TRUE(has(r.err, "PASS forever [")) << r.err;
  EXPECT_TRUE(has(r.err, "FAIL idle (timeout; duration=0.5s) [")) << r.err;
  EXPECT_TRUE(has(r.err, "\n2 passed, 5 failed, 0 skipped\n")) << r.err;

  // --timeout overrides a manifest test's own.
  const RunResult shorter = run_minivmm({"test", "--manifest", manifest, "--define",
                                         std::string("guest=") + guest_image(), "--timeout", "0.2",
                                         "idle"},
                                        false, 60);
  EXPECT_EQ(shorter.exit_code, 1) << shorter.out << shorter.err;
  EXPECT_TRUE(has(shorter.out, "FAIL idle (timeout; duration=0.2) [")) << shorter.out;
}

// Ctrl-C: every running guest is stopped, nothing more starts, and the reports hold what had
// finished; the exit status is the shell's for SIGINT.
TEST(BootTestrunTest, InterruptStopsEveryGuestAndReportsWhatFinished) {
  SKIP_WITHOUT_KVM();
  TempDir t;
  const std::string manifest = t.path() + "/m.toml", logs = t.path() + "/logs",
                    junit = t.path() + "/r.xml";
  spit(manifest,
       "[defaults]\n"
       "kernel = \"${guest}\"\n"
       "exit = 1\n"
       "timeout = 120\n"
       "cmdline = \"timer=pit hz=250 ticks=0\"\n"
       "[[test]]\n"
       "name = \"quick\"\n"
       "cmdline = \"timer=pit hz=250 ticks=5\"\n"
       "[[test]]\n"
       "name = \"idle1\"\n"
       "[[test]]\n"
       "name = \"idle2\"\n"
       "[[test]]\n"
       "name = \"never-started\"\n");
  Child c = start_minivmm({"test", "--manifest", manifest, "--define",
                           std::string("guest=") + guest_image(), "-j", "2", "--logs", logs,
                           "--junit", junit},
                          false);
  // Both idle guests booted: the quick one has finished and the queue is at never-started.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline &&
         !(has(slurp(logs + "/idle1.log"), "minivmm-guest:") &&
           has(slurp(logs + "/idle2.log"), "minivmm-guest:"))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(::kill(c.pid, SIGINT), 0);
  const RunResult r = finish_minivmm(c, 20);
  EXPECT_EQ(r.exit_code, 130) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "PASS quick")) << r.out;
  EXPECT_TRUE(has(r.out, "interrupted: 1 of 4 tests finished\n1 passed, 0 failed, 0 skipped\n")) << r.out;
  EXPECT_EQ(processes_mentioning(logs), 0) << "a guest outlived the Ctrl-C";
  const int rc = std::system(
      ("/usr/bin/python3 " MINIVMM_TESTRUN_DIR "/check_junit.py '" + junit + "' quick=PASS").c_str());
  EXPECT_EQ(rc, 0) << slurp(junit);
}

struct Usage {
  const char* name;  // the ctest name's last part
  std::vector<std::string> args;
  const char* error;
};

// Named in ctest's test names instead of the struct's bytes.
void PrintTo(const Usage& u, std::ostream* os) { *os << u.name; }

class BadInputTestrunTest : public ::testing::TestWithParam<Usage> {};

// Usage and manifest errors: exit 2 and one line, before anything runs (no KVM needed).
TEST_P(BadInputTestrunTest, ExitsTwoWithOneLine) {
  TempDir t;
  spit(t.path() + "/syntax.toml", "[[test]]\nname = \"a\"\nkernel = /k\n");
  spit(t.path() + "/unknown.toml", "[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\ntimout = 5\n");
  spit(t.path() + "/ok.toml", "[[test]]\nname = \"a\"\nkernel = \"/k\"\nexit = 1\n");
  spit(t.path() + "/negative.toml", "[[test]]\nname = \"b\"\nkernel = \"/k\"\nexit = 1\ntimeout = -5\n");
  std::vector<std::string> args{"test"};
  for (std::string a : GetParam().args) {
    if (a.rfind("@", 0) == 0) a = t.path() + "/" + a.substr(1);
    args.push_back(a);
  }
  const RunResult r = run_minivmm(args, false, 30);
  EXPECT_EQ(r.exit_code, kUsage) << r.out << r.err;
  std::string want = GetParam().error;
  for (auto at = want.find('@'); at != std::string::npos; at = want.find('@', at + 1)) {
    want.replace(at, 1, t.path() + "/");
  }
  EXPECT_EQ(r.err, "minivmm: error: " + want + "\n");
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    BadInputTestrun, BadInputTestrunTest,
    ::testing::Values(
        Usage{"TomlSyntax", {"--manifest", "@syntax.toml"},
              "@syntax.toml:3:10: Error while parsing value: could not determine value type"},
        Usage{"UnknownKey", {"--manifest", "@unknown.toml"},
              "@unknown.toml:5: unknown key 'timout' in [[test]]"},
        Usage{"MissingManifest", {"--manifest", "@missing.toml"},
              "@missing.toml: not a readable file"},
        Usage{"ZeroJobs", {"--manifest", "@ok.toml", "-j", "0"},
              "-j: 0 is not a number of tests at once (1 or more)"},
        Usage{"NegativeJobs", {"--manifest", "@ok.toml", "-j", "-3"},
              "-j: -3 is not a number of tests at once (1 or more)"},
        Usage{"NegativeTimeout", {"--manifest", "@ok.toml", "--timeout", "-1"},
              "--timeout: '-1' is not a duration (seconds, or a number with s, m, h or d; 0: none)"},
        Usage{"NegativeManifestTimeout", {"--manifest", "@negative.toml"},
              "@negative.toml:5: 'timeout' must be 0 (none) or a positive number of seconds"},
        Usage{"DuplicateName", {"--manifest", "@ok.toml", "--manifest", "@ok.toml"},
              "@ok.toml:1: a second test named 'a' (the first is @ok.toml:1)"},
        Usage{"UnmatchedFilter", {"--manifest", "@ok.toml", "nope"},
              "no test is named or matches 'nope'"},
        Usage{"JunitIsADirectory", {"--manifest", "@ok.toml", "--junit", "@"},
              "--junit: '@' is a directory"},
        Usage{"TapInAMissingFolder", {"--manifest", "@ok.toml", "--tap", "/nonexistent/r.tap"},
              "--tap: '/nonexistent/r.tap' is in a folder that does not exist"},
        Usage{"DefineWithoutValue", {"--manifest", "@ok.toml", "--define", "x"},
              "--define: 'x' is not NAME=VALUE"},
        Usage{"NotASuiteTree", {"--kvm-unit-tests", "@"},
              "--kvm-unit-tests: '@' is not a configured kvm-unit-tests tree (no config.mak; run "
              "./configure && make there)"},
        Usage{"NoTests", {},
              "no tests: give --kvm-unit-tests DIR or --manifest FILE (see 'minivmm test --help')"}),
    [](const ::testing::TestParamInfo<Usage>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace minivmm::testing
