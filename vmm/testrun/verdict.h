// How one finished run becomes a verdict, for both sources of tests `minivmm test` runs. Pure
// functions of what the runner observed (exit status, console, stderr, whether the timeout
// fired): no processes, no files, so every rule is unit-tested with tables
// (tests/unit/vmm/testrun/verdict_test.cc).
//
// kvm-unit-tests' rules are the ones its run_tests.sh applies to a QEMU status after
// scripts/vmm.bash's qemu_fixup_return_code, with minivmm's statuses first mapped the way
// scripts/kvm_unit_tests.sh maps them to QEMU's (docs/test-runner.md has the table and says
// where the runner deliberately differs).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/exit_code.h"

namespace minivmm::testrun {

enum class Outcome { kPass, kFail, kSkip };

std::string_view outcome_word(Outcome o) noexcept;  // "PASS", "FAIL", "SKIP"

struct Verdict {
  Outcome outcome = Outcome::kFail;
  // Shown in parentheses after the test's name: the suite's SUMMARY text ("1 tests") or a
  // reason ("timeout; duration=90s", "i386 only"). Empty: nothing after the name.
  std::string detail;

  bool operator==(const Verdict&) const = default;
};

// `PASS name (detail)`, or `PASS name` when there is no detail.
std::string verdict_line(std::string_view name, const Verdict& v);

// minivmm's exit status for "the guest panicked" (its pvpanic device, ISA port 0x505). It is
// even, like every status minivmm gives for itself, so no guest's isa-debug-exit value can
// produce it. Both sources report it as `FAIL (guest panicked)`.
inline constexpr int kGuestPanickedStatus = static_cast<int>(vmm::ExitCode::kGuestPanicked);

// What the runner saw of one minivmm process.
struct RunObservation {
  bool timed_out = false;     // the runner stopped it at its timeout
  int exit_status = -1;       // its exit status, when it exited
  int term_signal = 0;        // the signal that ended it, when one did (and it was not ours)
  std::string console_tail;   // the console's last lines (at least the last 5)
  std::string stderr_text;    // what minivmm wrote on stderr
};

// The shell's name for signal `n` as `kill -l` prints it (HUP, RTMIN+3, RTMAX), empty for a
// number that names no signal: the suite prints "terminated on SIG" then.
std::string signal_name(int n);

// The suite's summary: each of the console's last 5 lines that starts with "SUMMARY: ",
// as "(text)", joined with "; " (run_tests.sh's extract_summary; one trailing CR dropped).
// Returned without the parentheses when there is exactly one, as the Verdict's detail.
std::string suite_summary(std::string_view console_tail);

// The verdict run_tests.sh gives a test whose minivmm run ended as `r`. `timeout_text` is the
// cfg's text ("90s", "30"), quoted as the suite does; `mapping_warnings` are the lines the
// option mapping wrote (the suite's stand-in writes them on stderr, where a guest's success is
// judged: status 1 passes only with no stderr, or stderr that says "warning").
Verdict suite_verdict(const RunObservation& r, std::string_view timeout_text,
                      std::string_view mapping_warnings);

// What a manifest test expects.
struct Expectation {
  int exit_status = 1;
  std::vector<std::string> console_has;    // each must be part of some console line
  std::vector<std::string> console_lacks;  // none may be part of any console line
};

// The verdict for a manifest test. `console` is the whole console; `timeout_text` says how
// long it was given ("20s").
Verdict manifest_verdict(const RunObservation& r, std::string_view console,
                         const Expectation& e, std::string_view timeout_text);

// The last `n` lines of `text` (a final line without a newline counts), each ended by a
// newline alone (a guest's CR before it dropped), for reports.
std::string last_lines(std::string_view text, std::size_t n);

}  // namespace minivmm::testrun
