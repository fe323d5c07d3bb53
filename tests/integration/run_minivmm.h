// Runs the minivmm binary as a child process and collects what a user would see: exit status,
// stdout (the guest console), stderr (logs and summary) and the --stats JSON.
#pragma once

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

// Runs `minivmm <args...>`, adding `--stats FILE` when `with_stats`. Kills it after
// `timeout_s` (a hang is a failure, reported as term_signal SIGKILL).
RunResult run_minivmm(const std::vector<std::string>& args, bool with_stats = true,
                      int timeout_s = 90);

// Why /dev/kvm cannot be used here, or nullopt when it can.
std::optional<std::string> kvm_unavailable_reason();

const char* guest_image();

}  // namespace minivmm::testing
