// minivmm exec's exit codes (docs/exec.md) and how a run's status becomes one. The command's
// own status passes through (0..255); a command killed by signal N is 128 + N, as a shell
// says it; minivmm's own outcomes take the codes at the top, which a command rarely uses.
#pragma once

#include <optional>
#include <string>

namespace minivmm::vmm::exec {

enum ExecExit : int {
  kExecUsage = 2,          // bad command line, no kernel or modules folder (one line says which)
  kExecSetupFailed = 249,  // the VMM could not start the guest (kernel, /dev/kvm, modules, host)
  kExecInitFailed = 250,   // the init could not set up the command (it says what, on stderr)
  kExecNoStatus = 251,     // the guest ended before the command's status came back
  kExecPanic = 252,        // the guest kernel panicked (pvpanic)
  kExecTimeout = 253,      // --timeout expired
};

// Machine::run()'s status for --timeout (Config::duration_status): even and above every exit
// code, so no device can produce it.
inline constexpr int kTimeoutRunStatus = 1000;

struct ExecOutcome {
  int exit_code = kExecNoStatus;
  // What to say on stderr besides the command's own output ("" for a plain exit).
  std::string message;
  bool show_console = false;  // print the kernel console's last lines too
};

// The outcome of a run whose Machine::run() returned `run_status` (the guest's isa-debug-exit
// status, minivmm's ExitCode or kTimeoutRunStatus); `reason` is why the run ended.
ExecOutcome decode_exec_status(int run_status, const std::string& reason);

// "mount" for kFailMount and so on; "unknown (N)" otherwise.
std::string init_failure_name(unsigned reason);

}  // namespace minivmm::vmm::exec
