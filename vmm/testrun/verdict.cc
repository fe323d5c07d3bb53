#include "vmm/testrun/verdict.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace minivmm::testrun {
namespace {

// Splits on '\n'; a final line without one counts, an empty text has no lines.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

bool contains_ignoring_case(std::string_view hay, std::string_view needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) ==
                  std::tolower(static_cast<unsigned char>(b));
         }) != hay.end();
}

std::string last_nonblank_line(std::string_view text) {
  const auto lines = split_lines(text);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (!blank(*it)) return std::string(*it);
  }
  return "";
}

// The console line that contains `needle`, if one does (a CR before the newline is not part
// of the line).
std::optional<std::string> line_containing(std::string_view console, std::string_view needle) {
  for (std::string_view line : split_lines(console)) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find(needle) != std::string_view::npos) return std::string(line);
  }
  return std::nullopt;
}

Verdict fail(std::string detail) { return {Outcome::kFail, std::move(detail)}; }

}  // namespace

std::string_view outcome_word(Outcome o) noexcept {
  switch (o) {
    case Outcome::kPass: return "PASS";
    case Outcome::kSkip: return "SKIP";
    case Outcome::kFail: break;
  }
  return "FAIL";
}

std::string verdict_line(std::string_view name, const Verdict& v) {
  std::string line(outcome_word(v.outcome));
  line += ' ';
  line += name;
  if (!v.detail.empty()) line += " (" + v.detail + ")";
  return line;
}

std::string signal_name(int n) {
  // Linux x86's numbering, as bash's `kill -l N` names them; 32 and 33 are glibc's own.
  static constexpr std::array<const char*, 32> kNames = {
      "",     "HUP",  "INT",    "QUIT", "ILL",  "TRAP", "ABRT",   "BUS",
      "FPE",  "KILL", "USR1",   "SEGV", "USR2", "PIPE", "ALRM",   "TERM",
      "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU",   "URG",
      "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO",  "PWR",    "SYS"};
  if (n >= 1 && n <= 31) return kNames[static_cast<std::size_t>(n)];
  if (n == 34) return "RTMIN";
  if (n >= 35 && n <= 49) return "RTMIN+" + std::to_string(n - 34);
  if (n >= 50 && n <= 63) return "RTMAX-" + std::to_string(64 - n);
  if (n == 64) return "RTMAX";
  return "";
}

std::string last_lines(std::string_view text, std::size_t n) {
  const auto lines = split_lines(text);
  const std::size_t first = lines.size() > n ? lines.size() - n : 0;
  std::string out;
  for (std::size_t i = first; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // a guest's CR LF
    out += line;
    out += '\n';
  }
  return out;
}

std::string suite_summary(std::string_view console_tail) {
  const auto lines = split_lines(console_tail);
  const std::size_t first = lines.size() > 5 ? lines.size() - 5 : 0;
  std::vector<std::string> found;
  for (std::size_t i = first; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    constexpr std::string_view kPrefix = "SUMMARY: ";
    if (line.substr(0, kPrefix.size()) != kPrefix) continue;
    line.remove_prefix(kPrefix.size());
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    found.emplace_back(line);
  }
  if (found.size() == 1) return found.front();
  // Two SUMMARY lines: run_tests.sh prints "(a)\n(b)"; one line reads better in a report.
  std::string joined;
  for (const auto& s : found) joined += (joined.empty() ? "" : ") (") + s;
  return joined;
}

Verdict suite_verdict(const RunObservation& r, std::string_view timeout_text,
                      std::string_view mapping_warnings) {
  if (r.timed_out) return fail("timeout; duration=" + std::string(timeout_text));
  if (r.term_signal != 0) return fail("terminated on SIG" + signal_name(r.term_signal));
  const int s = r.exit_status;
  if (s == kGuestPanickedStatus) return fail("guest panicked");

  // minivmm -> what QEMU would have exited with (scripts/kvm_unit_tests.sh's map_status):
  // an odd status is the guest's isa-debug-exit value, the same under both; 0 (no debug-exit,
  // a reset) and 8 (a triple fault, which QEMU's -no-reboot ends with 0) are QEMU's 0; SIGINT
  // is QEMU's "terminating on signal 2", which the suite turns into 130.
  int q = 0;
  if (s % 2 == 1) {
    q = s;
  } else if (s == 0 || s == 8) {
    q = 0;
  } else if (s == 130) {
    q = 130;
  } else {
    // minivmm itself failed (a bad image, no KVM, a KVM internal error). The stand-in script
    // makes that 2, "a run script failed" in the suite's table: a FAIL, given here with the
    // reason minivmm wrote.
    std::string why = "minivmm exited with status " + std::to_string(s);
    const std::string last = last_nonblank_line(r.stderr_text);
    if (!last.empty()) why += ": " + last;
    return fail(why);
  }

  // scripts/vmm.bash's qemu_fixup_return_code. Its stderr is the whole text joined into one
  // line, so one "warning" anywhere, in any case, lets every other line pass.
  if (q == 0) {
    q = 1;
  } else if (q == 1) {
    const std::string errors = std::string(mapping_warnings) + r.stderr_text;
    if (blank(errors) || contains_ignoring_case(errors, "warning")) q = 0;
  }

  // runtime.bash's run(): the verdict of the fixed-up status.
  std::string summary = suite_summary(r.console_tail);
  if (q == 0) return {Outcome::kPass, std::move(summary)};
  if (q == 77) return {Outcome::kSkip, std::move(summary)};
  if (q > 127) return fail("terminated on SIG" + signal_name(q - 128));
  return fail(std::move(summary));
}

Verdict manifest_verdict(const RunObservation& r, std::string_view console, const Expectation& e,
                         std::string_view timeout_text) {
  if (r.timed_out) return fail("timeout; duration=" + std::string(timeout_text));
  if (r.term_signal != 0) return fail("terminated on SIG" + signal_name(r.term_signal));
  if (r.exit_status == kGuestPanickedStatus) return fail("guest panicked");
  // A forbidden line first: "Kernel panic" says more than the exit status that follows it.
  for (const auto& bad : e.console_lacks) {
    if (auto line = line_containing(console, bad)) return fail("console has '" + *line + "'");
  }
  if (r.exit_status != e.exit_status) {
    std::string why = "exit status " + std::to_string(r.exit_status) + ", expected " +
                      std::to_string(e.exit_status);
    // minivmm's own error says why it ended; its info lines (a debug-exit write) do not.
    const auto lines = split_lines(r.stderr_text);
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      if (contains_ignoring_case(*it, "error")) {
        why += ": " + std::string(*it);
        break;
      }
    }
    return fail(why);
  }
  for (const auto& want : e.console_has) {
    if (!line_containing(console, want)) return fail("console lacks '" + want + "'");
  }
  return {Outcome::kPass, ""};
}

}  // namespace minivmm::testrun
