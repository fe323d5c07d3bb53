#include "vmm/sandbox/seccomp_sandbox.h"

#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "devices/host/console_input.h"
#include "devices/log/log.h"
#include "vmm/exit_code.h"

namespace minivmm::vmm {
namespace {

// si_code of a seccomp SIGSYS (asm-generic/siginfo.h; glibc does not export the name).
constexpr int kSysSeccomp = 1;
// Above every x86-64 syscall number (~460 in 2025): names beyond it are reported as "?".
constexpr int kNamedSyscalls = 512;

// Filled once, before any filter exists: the handler must not allocate (the trapped syscall
// may have come from inside malloc).
const char* g_names[kNamedSyscalls] = {};
struct sigaction g_previous_sigsys {};
// The calling thread's kind, for the report. Static TLS in the executable: the handler may
// read it.
thread_local const char* t_kind = "unsandboxed";

// Appends without allocating; stops at the end of `buf`.
struct LineBuffer {
  char buf[256];
  std::size_t len = 0;
  void add(const char* s) {
    while (*s != '\0' && len < sizeof buf - 1) buf[len++] = *s++;
  }
  void add(long v) {
    char digits[24];
    std::size_t n = 0;
    unsigned long u = v < 0 ? 0ul - static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
    do {
      digits[n++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0 && n < sizeof digits);
    if (v < 0) add("-");
    while (n > 0 && len < sizeof buf - 1) buf[len++] = digits[--n];
  }
};

void on_sigsys(int sig, siginfo_t* info, void* context) {
  if (info == nullptr || info->si_code != kSysSeccomp) {
    // Someone else's SIGSYS (a raise, a kill): the previous handler deals with it.
    if ((g_previous_sigsys.sa_flags & SA_SIGINFO) != 0 &&
        g_previous_sigsys.sa_sigaction != nullptr) {
      g_previous_sigsys.sa_sigaction(sig, info, context);
      return;
    }
    ::sigaction(sig, &g_previous_sigsys, nullptr);
    ::raise(sig);
    return;
  }
  const int nr = info->si_syscall;
  const char* name = nr >= 0 && nr < kNamedSyscalls && g_names[nr] != nullptr ? g_names[nr] : "?";
  LineBuffer line;
  line.add("minivmm: seccomp: the ");
  line.add(t_kind);
  line.add(" thread made forbidden syscall ");
  line.add(static_cast<long>(nr));
  line.add(" (");
  line.add(name);
  line.add("); exiting with code ");
  line.add(static_cast<long>(to_int(ExitCode::kSeccompViolation)));
  line.add(" (--seccomp log finds what a new code path needs)\n");
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.buf, line.len);
  devices::ConsoleInput::restore_terminal();
  ::_exit(to_int(ExitCode::kSeccompViolation));
}

void resolve_names_once() {
  static const bool done = [] {
    for (int nr = 0; nr < kNamedSyscalls; ++nr) {
      // Returns a malloc'd string, kept for the life of the process.
      g_names[nr] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
    }
    return true;
  }();
  (void)done;
}

void install_sigsys_handler() {
  static const int err = [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    return ::sigaction(SIGSYS, &sa, &g_previous_sigsys) == 0 ? 0 : errno;
  }();
  if (err != 0) throw std::system_error(err, std::generic_category(), "sigaction(SIGSYS)");
}

// libseccomp returns -errno.
void check(int rc, const char* what) {
  if (rc < 0) throw std::system_error(-rc, std::generic_category(), what);
}

// Argument `index` equal to `value` in its low 32 bits: the kernel reads fds, ioctl requests
// and fcntl commands as unsigned int, whatever the caller left in the upper half of the
// register. What SCMP_A0_32 expands to, without its C compound literal.
scmp_arg_cmp low32_equals(unsigned index, std::uint32_t value) {
  scmp_arg_cmp c{};
  c.arg = index;
  c.op = SCMP_CMP_MASKED_EQ;
  c.datum_a = 0xffffffffu;
  c.datum_b = value;
  return c;
}

class FilterContext {
 public:
  explicit FilterContext(std::uint32_t default_action) : ctx_(seccomp_init(default_action)) {
    if (ctx_ == nullptr) throw std::system_error(ENOMEM, std::generic_category(), "seccomp_init");
  }
  ~FilterContext() { seccomp_release(ctx_); }
  FilterContext(const FilterContext&) = delete;
  FilterContext& operator=(const FilterContext&) = delete;
  scmp_filter_ctx get() const noexcept { return ctx_; }

 private:
  scmp_filter_ctx ctx_;
};

}  // namespace

SeccompSandbox::SeccompSandbox(SeccompMode mode, std::optional<ThreadKind> selftest)
    : mode_(mode), selftest_(selftest) {
  if (mode_ == SeccompMode::kOff) return;
  resolve_names_once();
  install_sigsys_handler();
}

long SeccompSandbox::selftest_syscall() noexcept { return SYS_socket; }

void SeccompSandbox::enter(ThreadKind kind, const SyscallAllowList& list) {
  t_kind = thread_kind_name(kind).data();  // the names are string literals
  if (mode_ != SeccompMode::kOff) {
    // Forbidden: trap and report (on), or allow and write to the kernel's audit log (log).
    FilterContext filter(mode_ == SeccompMode::kLog ? SCMP_ACT_LOG : SCMP_ACT_TRAP);
    // A binary search over the syscall numbers instead of a linear scan: every KVM_RUN and
    // every loop wait pays for the filter.
    check(seccomp_attr_set(filter.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2), "seccomp_attr_set");
    SyscallAllowList all = list;
    // What the trap report itself needs: its line, the terminal (ConsoleInput puts only stdin
    // in raw mode; glibc's tcsetattr reads the settings back after setting them) and the exit.
    // crash_signals.h's handler needs the same terminal ioctls, on any thread.
    all.allow({SYS_write, SYS_exit_group});
    all.allow_ioctl(STDIN_FILENO, TCSETS);
    all.allow_ioctl(STDIN_FILENO, TCGETS);
    for (const long nr : all.syscalls()) {
      check(seccomp_rule_add(filter.get(), SCMP_ACT_ALLOW, static_cast<int>(nr), 0),
            "seccomp_rule_add");
    }
    for (const SyscallAllowList::ArgRule& r : all.arg_rules()) {
      const int nr = static_cast<int>(r.nr);
      if (r.fd == SyscallAllowList::kAnyFd) {
        const scmp_arg_cmp args[] = {low32_equals(1, r.arg1)};
        check(seccomp_rule_add_array(filter.get(), SCMP_ACT_ALLOW, nr, 1, args),
              "seccomp_rule_add(arg1)");
      } else {
        const scmp_arg_cmp args[] = {low32_equals(0, static_cast<std::uint32_t>(r.fd)),
                                     low32_equals(1, r.arg1)};
        check(seccomp_rule_add_array(filter.get(), SCMP_ACT_ALLOW, nr, 2, args),
              "seccomp_rule_add(fd, arg1)");
      }
    }
    // This thread only (no TSYNC), with no_new_privs set first (libseccomp's default).
    check(seccomp_load(filter.get()), "seccomp_load");
    KindCounters& c = counters_[static_cast<std::size_t>(kind)];
    c.filters.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t rules = all.rule_count();
    std::uint64_t seen = c.rules.load(std::memory_order_relaxed);
    while (seen < rules && !c.rules.compare_exchange_weak(seen, rules)) {
    }
  }
  if (selftest_ == kind) {
    // The hidden --seccomp-selftest: a syscall no thread's list has. With the filter on, the
    // process ends here with the report; with log or off it goes on.
    const long fd = ::syscall(selftest_syscall(), AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) ::close(static_cast<int>(fd));
  }
}

bool SeccompSandbox::try_enter(ThreadKind kind, const SyscallAllowList& list) noexcept {
  bool ok = true;
  try {
    enter(kind, list);
  } catch (const std::exception& e) {
    ok = false;
    const std::string why = std::string("seccomp: cannot filter the ") +
                            std::string(thread_kind_name(kind)) + " thread: " + e.what();
    log::error("{}", why);
    std::lock_guard lock(mu_);
    if (!failure_) failure_ = why;
  }
  std::lock_guard lock(mu_);
  ++entered_[static_cast<std::size_t>(kind)];
  entered_cv_.notify_all();
  return ok;
}

void SeccompSandbox::wait_entered(ThreadKind kind, std::uint64_t count) {
  std::unique_lock lock(mu_);
  entered_cv_.wait(lock, [&] { return entered_[static_cast<std::size_t>(kind)] >= count; });
}

std::optional<std::string> SeccompSandbox::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

SeccompStats SeccompSandbox::stats() const noexcept {
  SeccompStats s;
  s.mode = mode_;
  for (std::size_t i = 0; i < s.kinds.size(); ++i) {
    s.kinds[i].filters = counters_[i].filters.load(std::memory_order_relaxed);
    s.kinds[i].rules = counters_[i].rules.load(std::memory_order_relaxed);
  }
  return s;
}

}  // namespace minivmm::vmm
