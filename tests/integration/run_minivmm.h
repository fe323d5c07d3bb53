// Runs the minivmm binary as a child process and collects what a user would see: exit status,
// stdout (the guest console), stderr (logs and summary) and the --stats JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace minivmm::testing {

struct RunResult {
  int exit_code = -1;     // WEXITSTATUS, or -1 if killed by a signal
  int term_signal = 0;    // the signal that killed it, if any
  std::string out;        // guest console
  std::string err;        // logs and summary
  std::optional<nlohmann::json> stats;
};

// A minivmm started in the background, for tests that talk to it while it runs.
struct Child {
  int pid = -1;
  std::string out_path, err_path, stats_path;
  bool with_stats = false;
};

// The guest console (the child's stdout) goes to a file the test can read, or, with
// `console_to_file` false, to /dev/null (a console nobody keeps). A `wrapper` (e.g. `ip netns
// exec NS`, `setpriv ... --`) runs minivmm; it must exec it in place, so that the child's pid is
// minivmm's.
// A whole file's bytes ("" if it cannot be read).
std::string slurp(const std::string& path);
// Whether `text` contains `part`: a console line, a report's word.
inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Child start_minivmm(const std::vector<std::string>& args, bool with_stats = true,
                    bool console_to_file = true, const std::vector<std::string>& wrapper = {});
// Polls the child's console (stdout) until it contains `text`; false after `timeout_s` or if
// the child has exited. For tests that must act on a running guest: a fixed sleep is too short
// on a slow host (a sanitizer build under nested KVM took longer than 700 ms to boot).
bool wait_for_console(const Child& child, const std::string& text, int timeout_s = 30);
// Waits for it to exit (killing it after `timeout_s`) and collects what it printed.
RunResult finish_minivmm(Child& child, int timeout_s = 90);

// Runs `minivmm <args...>`, adding `--stats FILE` when `with_stats`. Kills it after
// `timeout_s` (a hang is a failure, reported as term_signal SIGKILL).
RunResult run_minivmm(const std::vector<std::string>& args, bool with_stats = true,
                      int timeout_s = 90);

// Why /dev/kvm cannot be used here, or nullopt when it can.
std::optional<std::string> kvm_unavailable_reason();

// In a KVM test: skip, saying why, where /dev/kvm cannot be used (and only there).
#define SKIP_WITHOUT_KVM()                                                                 \
  do {                                                                                     \
    if (auto why = ::minivmm::testing::kvm_unavailable_reason()) {                         \
      GTEST_SKIP() << "KVM boot test skipped: " << *why << " (no usable /dev/kvm here)";   \
    }                                                                                      \
  } while (0)

const char* guest_image();

// Whether this run is inside scripts/nested_kvm.sh (it sets MINIVMM_NESTED_KVM=1): a KVM under
// QEMU's TCG, where every instruction of the L1 kernel, minivmm and the guest is emulated and
// each VM exit costs a hundred times what it does on a KVM host. There the tests prove
// behaviour (counts, exit codes, checksums, verdicts) and skip their time bounds: a gap, a
// wall-clock window or a latency measured under TCG says nothing about minivmm
// (docs/nested-kvm.md).
bool under_nested_kvm();

// The exit statuses the tests expect, written out as the contract they are (vmm/exit_code.h
// documents them): a bad command line, a bad kernel image, and the guest's success through
// debug-exit (it writes 0; QEMU's convention makes the status (0 << 1) | 1).
inline constexpr int kUsage = 2;
inline constexpr int kBadKernel = 4;
inline constexpr int kGuestSuccess = 1;

// How often a run's vCPU-thread timer left its periodic grid for a one-shot: passes so late that
// their next tick was already due (clamped to min_delta), and owed-tick retries (the timers it
// ran beyond the ticks it injected: a late, merged or busy tick sent again). Each episode costs
// at most two alarm arms, leaving the grid and rejoining it; none happen on a quiet host.
inline std::uint64_t vcpu_catch_ups(const nlohmann::json& stats) {
  const auto& vt = stats["vcpu_timers"];
  const auto ran = vt["timers_run"].get<std::uint64_t>();
  const auto injected = stats["guest"]["ticks_injected"].get<std::uint64_t>();
  return vt["clamped_deadlines"].get<std::uint64_t>() + (ran > injected ? ran - injected : 0);
}

// The bundled guest's `stamps` line (guest/README.md): its ticks timed with kvmclock.
struct Stamps {
  unsigned long long ticks = 0, elapsed_us = 0, gap_min_us = 0, gap_max_us = 0, bunched = 0,
                     run = 0;
};

inline std::optional<Stamps> parse_stamps(const std::string& console) {
  const auto at = console.find("stamps: ");
  if (at == std::string::npos) return std::nullopt;
  Stamps s;
  if (std::sscanf(console.c_str() + at,
                  "stamps: ticks=%llu elapsed_us=%llu gap_min_us=%llu gap_max_us=%llu "
                  "bunched=%llu run=%llu",
                  &s.ticks, &s.elapsed_us, &s.gap_min_us, &s.gap_max_us, &s.bunched,
                  &s.run) != 6) {
    return std::nullopt;
  }
  return s;
}

inline int line_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace minivmm::testing
