// The verdict rules, table by table: kvm-unit-tests' (run_tests.sh after qemu_fixup_return_code,
// with minivmm's statuses mapped as scripts/kvm_unit_tests.sh maps them) and the manifest's.
#include "vmm/testrun/verdict.h"

#include <gtest/gtest.h>

namespace {

using minivmm::testrun::Expectation;
using minivmm::testrun::Outcome;
using minivmm::testrun::RunObservation;
using minivmm::testrun::Verdict;

RunObservation exited(int status, std::string console = "", std::string err = "") {
  RunObservation r;
  r.exit_status = status;
  r.console_tail = std::move(console);
  r.stderr_text = std::move(err);
  return r;
}

struct SuiteCase {
  const char* what;
  RunObservation run;
  const char* warnings;
  Verdict want;
};

class SuiteVerdictTest : public ::testing::TestWithParam<SuiteCase> {};

TEST_P(SuiteVerdictTest, MatchesTheSuitesRule) {
  const SuiteCase& c = GetParam();
  EXPECT_EQ(minivmm::testrun::suite_verdict(c.run, "90s", c.warnings), c.want) << c.what;
}

const char* kSummary = "enabling apic\nPASS: IPI\nSUMMARY: 1 tests\n";

RunObservation timed_out() {
  RunObservation r;
  r.timed_out = true;
  r.term_signal = 15;  // what stopped it is the runner's business, not the verdict's
  return r;
}

RunObservation signalled(int sig) {
  RunObservation r;
  r.term_signal = sig;
  return r;
}

INSTANTIATE_TEST_SUITE_P(
    Statuses, SuiteVerdictTest,
    ::testing::Values(
        // The guest's report_summary() returned 0: debug-exit (0 << 1) | 1.
        SuiteCase{"pass with summary", exited(1, kSummary), "", {Outcome::kPass, "1 tests"}},
        SuiteCase{"pass, no SUMMARY line (vmexit)", exited(1, "cpuid 22544\n"), "", {Outcome::kPass, ""}},
        // Status 1 with stderr passes only when some of it says "warning" (any case)...
        SuiteCase{"pass with mapping warnings", exited(1, kSummary),
                  "minivmm test: warning: -cpu: property 'vendor=x' ignored\n",
                  {Outcome::kPass, "1 tests"}},
        SuiteCase{"pass with a WARNING on stderr", exited(1, kSummary, "kvm: WARNING: x\n"), "",
                  {Outcome::kPass, "1 tests"}},
        // ... and one such line excuses every other line, as the suite joins them.
        SuiteCase{"an error beside a warning", exited(1, kSummary, "some error\n"), "a warning\n",
                  {Outcome::kPass, "1 tests"}},
        SuiteCase{"an error alone fails status 1", exited(1, kSummary, "some error\n"), "",
                  {Outcome::kFail, "1 tests"}},
        SuiteCase{"blank stderr is no stderr", exited(1, kSummary, " \n\n"), "", {Outcome::kPass, "1 tests"}},
        // report_summary() returned 1 (unexpected failures): status 3.
        SuiteCase{"fail", exited(3, "SUMMARY: 1844 tests, 7 unexpected failures\n"), "",
                  {Outcome::kFail, "1844 tests, 7 unexpected failures"}},
        // 38 (all skipped): status 77.
        SuiteCase{"skip", exited(77, "SUMMARY: 1 tests, 1 skipped\n"), "", {Outcome::kSkip, "1 tests, 1 skipped"}},
        SuiteCase{"skip with no tests", exited(77, "SUMMARY: 0 tests\n"), "", {Outcome::kSkip, "0 tests"}},
        // abort(): exit(63) is 127, a FAIL (only TAP mode treats it apart).
        SuiteCase{"abort", exited(127, "ABORT: x\nSUMMARY: 2 tests\n"), "", {Outcome::kFail, "2 tests"}},
        // A guest status of 64 or more reads as a signal, as in the suite.
        SuiteCase{"debug-exit 0x7f", exited(255), "", {Outcome::kFail, "terminated on SIG"}},
        SuiteCase{"debug-exit 71 reads as SIGTERM", exited(143), "", {Outcome::kFail, "terminated on SIGTERM"}},
        SuiteCase{"status 129 reads as SIGHUP", exited(129), "", {Outcome::kFail, "terminated on SIGHUP"}},
        // minivmm's 0 (no debug-exit) and 8 (triple fault) are QEMU's 0, which is a FAIL.
        SuiteCase{"no debug-exit", exited(0, kSummary), "", {Outcome::kFail, "1 tests"}},
        SuiteCase{"triple fault", exited(8, "boom\n"), "", {Outcome::kFail, ""}},
        // minivmm's SIGINT status is QEMU's "terminating on signal 2".
        SuiteCase{"minivmm stopped by SIGINT", exited(130), "", {Outcome::kFail, "terminated on SIGINT"}},
        // minivmm's own failures are never a pass, with or without warnings.
        SuiteCase{"KVM internal error", exited(10, "", "minivmm: error: KVM internal error\n"),
                  "minivmm test: warning: x\n",
                  {Outcome::kFail, "minivmm exited with status 10: minivmm: error: KVM internal error"}},
        SuiteCase{"bad kernel, no stderr", exited(4), "", {Outcome::kFail, "minivmm exited with status 4"}},
        SuiteCase{"guest panicked", exited(16), "", {Outcome::kFail, "guest panicked"}},
        SuiteCase{"timeout", timed_out(), "", {Outcome::kFail, "timeout; duration=90s"}},
        SuiteCase{"killed", signalled(9), "", {Outcome::kFail, "terminated on SIGKILL"}},
        SuiteCase{"crashed", signalled(11), "", {Outcome::kFail, "terminated on SIGSEGV"}}));

TEST(SuiteSummaryTest, OnlyTheLastFiveLinesCount) {
  using minivmm::testrun::suite_summary;
  EXPECT_EQ(suite_summary("SUMMARY: 3 tests\n1\n2\n3\n4\n"), "3 tests");
  EXPECT_EQ(suite_summary("SUMMARY: 3 tests\n1\n2\n3\n4\n5\n"), "") << "six lines back is too far";
  EXPECT_EQ(suite_summary("SUMMARY: 2 tests\r\n"), "2 tests") << "one CR is dropped";
  EXPECT_EQ(suite_summary("SUMMARY: 2 tests"), "2 tests") << "a last line without its newline";
  EXPECT_EQ(suite_summary(" SUMMARY: 2 tests\n"), "") << "it must start the line";
  // Two SUMMARY lines: each in its own parentheses once the verdict line wraps the detail.
  EXPECT_EQ(minivmm::testrun::verdict_line(
                "x", {Outcome::kPass, suite_summary("SUMMARY: 2 tests\nSUMMARY: 5 tests\n")}),
            "PASS x (2 tests) (5 tests)");
}

TEST(SignalNameTest, NamesAsBashKillL) {
  using minivmm::testrun::signal_name;
  EXPECT_EQ(signal_name(1), "HUP");
  EXPECT_EQ(signal_name(9), "KILL");
  EXPECT_EQ(signal_name(31), "SYS");
  EXPECT_EQ(signal_name(32), "");
  EXPECT_EQ(signal_name(34), "RTMIN");
  EXPECT_EQ(signal_name(35), "RTMIN+1");
  EXPECT_EQ(signal_name(49), "RTMIN+15");
  EXPECT_EQ(signal_name(50), "RTMAX-14");
  EXPECT_EQ(signal_name(64), "RTMAX");
  EXPECT_EQ(signal_name(65), "");
  EXPECT_EQ(signal_name(0), "");
}

TEST(VerdictLineTest, DetailInParenthesesOnlyWhenThereIsOne) {
  using minivmm::testrun::verdict_line;
  EXPECT_EQ(verdict_line("smptest", {Outcome::kPass, "1 tests"}), "PASS smptest (1 tests)");
  EXPECT_EQ(verdict_line("vmexit_cpuid", {Outcome::kPass, ""}), "PASS vmexit_cpuid");
  EXPECT_EQ(verdict_line("t", {Outcome::kSkip, "i386 only"}), "SKIP t (i386 only)");
}

struct ManifestCase {
  const char* what;
  RunObservation run;
  const char* console;
  Verdict want;
};

class ManifestVerdictTest : public ::testing::TestWithParam<ManifestCase> {};

TEST_P(ManifestVerdictTest, ExitStatusThenConsoleLines) {
  const ManifestCase& c = GetParam();
  Expectation e;
  e.exit_status = 1;
  e.console_has = {"minivmm-guest:", "done 250"};
  e.console_lacks = {"Kernel panic", "exception"};
  EXPECT_EQ(minivmm::testrun::manifest_verdict(c.run, c.console, e, "20s"), c.want) << c.what;
}

const char* kGood = "minivmm-guest: timer=pit hz=250 ticks=250\r\ntick 250\r\ndone 250\r\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, ManifestVerdictTest,
    ::testing::Values(
        ManifestCase{"all there", exited(1), kGood, {Outcome::kPass, ""}},
        ManifestCase{"wrong status", exited(3), kGood, {Outcome::kFail, "exit status 3, expected 1"}},
        ManifestCase{"minivmm's own error is quoted", exited(4, "", "minivmm: error: bad image\nx\n"), "",
                     {Outcome::kFail, "exit status 4, expected 1: minivmm: error: bad image"}},
        ManifestCase{"info lines are not", exited(255, "", "minivmm: info: debug-exit 0x7f\n"), "",
                     {Outcome::kFail, "exit status 255, expected 1"}},
        ManifestCase{"a line missing", exited(1), "minivmm-guest: x\n",
                     {Outcome::kFail, "console lacks 'done 250'"}},
        // The forbidden line is named before the status it caused.
        ManifestCase{"a forbidden line", exited(255), "minivmm-guest: x\r\nexception 6 err=0x0\r\n",
                     {Outcome::kFail, "console has 'exception 6 err=0x0'"}},
        ManifestCase{"Kernel panic", exited(0), "Kernel panic - not syncing: VFS\n",
                     {Outcome::kFail, "console has 'Kernel panic - not syncing: VFS'"}},
        ManifestCase{"guest panicked", exited(16), kGood, {Outcome::kFail, "guest panicked"}},
        ManifestCase{"timeout", timed_out(), kGood, {Outcome::kFail, "timeout; duration=20s"}},
        ManifestCase{"killed", signalled(9), kGood, {Outcome::kFail, "terminated on SIGKILL"}}));

TEST(ManifestVerdictTest, ALineMustBeWithinOneConsoleLine) {
  Expectation e;
  e.console_has = {"done 250"};
  EXPECT_EQ(minivmm::testrun::manifest_verdict(exited(1), "done\n250\n", e, "1s").outcome,
            Outcome::kFail);
}

TEST(LastLinesTest, KeepsTheEnd) {
  using minivmm::testrun::last_lines;
  EXPECT_EQ(last_lines("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(last_lines("a\nb\nc", 2), "b\nc\n");
  EXPECT_EQ(last_lines("", 2), "");
  EXPECT_EQ(last_lines("a\n", 5), "a\n");
  EXPECT_EQ(last_lines("a\r\nb\r\n", 5), "a\nb\n");
}

}  // namespace
