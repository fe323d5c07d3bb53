// Process exit codes (documented in the README, "Exit codes"). Odd values 1..255 other
// than the ones below come from the guest through isa-debug-exit: (value << 1) | 1, as QEMU.
// minivmm's own outcomes are even so they cannot be confused with a guest's debug-exit status,
// except the signal ones, which follow the shell's 128 + signal convention.
#pragma once

namespace minivmm::vmm {

enum class ExitCode : int {
  kOk = 0,               // --duration expired, i8042 reset, quit from the console or API
  kUsage = 2,            // bad command line
  kBadKernel = 4,        // kernel image missing, unreadable or not a valid image
  kKvmUnavailable = 6,   // /dev/kvm cannot be opened, wrong API version, missing capability
  kTripleFault = 8,      // KVM_EXIT_SHUTDOWN: the guest triple-faulted
  kGuestUnsupported = 10,  // KVM internal error / emulation failure / failed entry
  kHostFailure = 12,     // a host syscall failed while running
  kSeccompViolation = 14,  // a thread made a syscall outside its seccomp allow-list (--seccomp)
  kGuestPanicked = 16,     // the guest kernel said it panicked (pvpanic, port 0x505)
  // A restored guest's memory went away under it: its snapshot file (mapped MAP_PRIVATE) was
  // cut short while it ran, so what the guest did afterwards (a fault, a triple fault) is the
  // host's doing, not the guest's.
  kSnapshotGone = 18,
  kSighup = 129,  // the terminal or the session went away: end the run like SIGTERM
  kSigint = 130,
  kSigterm = 143,
};

inline int to_int(ExitCode c) noexcept { return static_cast<int>(c); }

}  // namespace minivmm::vmm
