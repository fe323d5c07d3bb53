// How minivmm exec's init hands the command's end to the VMM: one 32-bit write to QEMU's
// isa-debug-exit port (devices/pc/debug_exit.h), which ends the run with status (word << 1) | 1.
// The word is kExecStatusMagic | kind << 8 | value, so the VMM tells a command's status from a
// signal death, from an init failure, and from any other debug-exit write (a guest that is not
// this init). Shared, as C, by the init (guest/exec_init/) and the VMM (vmm/exec/exec_status.h).
#ifndef MINIVMM_GUEST_EXEC_STATUS_H_
#define MINIVMM_GUEST_EXEC_STATUS_H_

#define kExecStatusPort 0xf4u
#define kExecStatusMagic 0xE0000u  /* bits 12..19; (word << 1) | 1 still fits an int */

// kind: what the value is.
enum {
  kStatusExited = 1,      // value: the command's exit status, 0..255
  kStatusSignaled = 2,    // value: the signal that killed it
  kStatusInitFailed = 3,  // value: one of kFail* (the init said what on the stderr console)
};

// Init failures: where it stopped.
enum {
  kFailSpec = 1,     // /exec.spec missing or malformed
  kFailModule = 2,   // a module would not load
  kFailConsole = 3,  // a stdout/stderr console never appeared
  kFailRoot = 4,     // the host's / (9p) or the tmpfs over it
  kFailShare = 5,    // a --share
  kFailMount = 6,    // /proc, /sys, /dev, /tmp or the switch to the new root
  kFailCwd = 7,      // the working directory is not there
  kFailFork = 8,     // fork or waitpid
};

static inline unsigned exec_status_word(unsigned kind, unsigned value) {
  return kExecStatusMagic | ((kind & 0xfu) << 8) | (value & 0xffu);
}

#endif  // MINIVMM_GUEST_EXEC_STATUS_H_
