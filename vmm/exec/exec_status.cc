#include "vmm/exec/exec_status.h"

#include <cstring>

#include "guest/exec_init/exec_status.h"
#include "vmm/exit_code.h"

namespace minivmm::vmm::exec {

std::string init_failure_name(unsigned reason) {
  switch (reason) {
    case kFailSpec: return "its spec (/exec.spec)";
    case kFailModule: return "loading a module";
    case kFailConsole: return "the stdout/stderr consoles never appeared";
    case kFailRoot: return "mounting the host's / (9p) with a tmpfs over it";
    case kFailShare: return "mounting a --share";
    case kFailMount: return "mounting /proc, /sys, /dev or /tmp, or entering the new root";
    case kFailCwd: return "the working directory";
    case kFailFork: return "starting the command";
    default: return "unknown (" + std::to_string(reason) + ")";
  }
}

ExecOutcome decode_exec_status(int s, const std::string& reason) {
  ExecOutcome o;
  const auto word = static_cast<unsigned>(s) >> 1;
  if (s > 0 && (s & 1) != 0 && (word & ~0xfffu) == kExecStatusMagic) {
    const unsigned kind = (word >> 8) & 0xf, value = word & 0xff;
    switch (kind) {
      case kStatusExited:
        o.exit_code = static_cast<int>(value);
        return o;
      case kStatusSignaled: {
        o.exit_code = 128 + static_cast<int>(value);
        const char* name = sigabbrev_np(static_cast<int>(value));
        o.message = "the command was killed by signal " + std::to_string(value) +
                    (name ? std::string(" (SIG") + name + ")" : "");
        return o;
      }
      case kStatusInitFailed:
        o.exit_code = kExecInitFailed;
        o.message = "init failed: " + init_failure_name(value);
        o.show_console = true;
        return o;
      default:
        break;
    }
  }
  if (s == kTimeoutRunStatus) {
    o.exit_code = kExecTimeout;
    o.message = "--timeout expired";
    o.show_console = true;
    return o;
  }
  if (s == to_int(ExitCode::kGuestPanicked)) {
    o.exit_code = kExecPanic;
    o.message = "the guest kernel panicked";
    o.show_console = true;
    return o;
  }
  if (s == to_int(ExitCode::kHostFailure) || s == to_int(ExitCode::kSeccompViolation) ||
      s == to_int(ExitCode::kSigint) || s == to_int(ExitCode::kSigterm) ||
      s == to_int(ExitCode::kSighup)) {
    o.exit_code = s >= 128 ? s : kExecSetupFailed;
    o.message = "the run ended: " + reason;
    return o;
  }
  o.exit_code = kExecNoStatus;
  o.message = "the guest ended before the command's status came back (" + reason +
              "): the boot never reached the command, or the init died";
  o.show_console = true;
  return o;
}

}  // namespace minivmm::vmm::exec
