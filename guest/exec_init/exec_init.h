// The init's parts: the run's spec (spec.c) and the helpers that end the run (exec_init.c).
#ifndef MINIVMM_GUEST_EXEC_INIT_H_
#define MINIVMM_GUEST_EXEC_INIT_H_

#include <stdarg.h>

#include "exec_status.h"

#define kMaxShares 32
#define kMaxArgs 4096
#define kMaxEnv 256

struct exec_share {
  const char* tag;
  const char* path;  // absolute, as on the host
  int read_only;
};

// /exec.spec, written by the VMM (vmm/exec/exec_spec.cc): records of NUL-terminated strings,
// each a key and its values: "arg" A, "env" K=V, "cwd" DIR, "root" TAG, "share" TAG PATH ro|rw,
// "stdout" DEV, "stderr" DEV. The strings point into the file's bytes, kept for the run.
struct exec_spec {
  char* argv[kMaxArgs + 1];
  char* env[kMaxEnv + 1];
  const char* cwd;
  const char* root_tag;
  const char* stdout_dev;
  const char* stderr_dev;
  struct exec_share share[kMaxShares];
  int shares;
  char error[128];  // why read_exec_spec failed
};

// 0, or -1 with spec->error set.
int read_exec_spec(const char* path, struct exec_spec* spec);
// Parses `len` bytes at `bytes` (kept: the spec points into them).
int parse_exec_spec(char* bytes, unsigned long len, struct exec_spec* spec);

void init_say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void init_failed(unsigned reason, const char* fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
void report_status(unsigned kind, unsigned value) __attribute__((noreturn));

#endif  // MINIVMM_GUEST_EXEC_INIT_H_
