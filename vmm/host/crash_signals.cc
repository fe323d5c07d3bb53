#include "vmm/host/crash_signals.h"

#include <signal.h>

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cerrno>
#include <cstddef>

#include "devices/host/console_input.h"
#include "timers/posix_timer_alarm.h"
#include "timers/thread_timers.h"
#include "vmm/host/stop_signals.h"
#include "vmm/vcpu/vcpu.h"

namespace minivmm::vmm {
namespace {

// Raised for the instruction that failed, or by abort(): taken whatever their disposition.
constexpr int kCrash[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP};
// Only ever sent (kill, a terminal's quit key, the kernel for a limit, an interval timer or
// I/O): taken while the default action, which ends the process, is still theirs. The real-time
// signals join them.
constexpr int kSent[] = {SIGQUIT,   SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU,
                         SIGXFSZ,   SIGIO,   SIGPWR,  SIGSTKFLT,
#ifdef SIGEMT
                         SIGEMT,
#endif
};

// Written before the signal's handler goes in, read-only afterwards.
std::array<struct sigaction, NSIG> g_previous{};

// set_file_backed_memory(): written once, before other threads touch the range.
std::atomic<std::uintptr_t> g_backed_begin{0};
std::atomic<std::size_t> g_backed_length{0};
std::atomic<const char*> g_backed_message{nullptr};
std::atomic<int> g_backed_exit{0};

// A SIGBUS for a page of the file-backed range that has no file behind it any more.
bool backing_gone(int sig, const siginfo_t* info) {
  if (sig != SIGBUS || info == nullptr || info->si_code != BUS_ADRERR) return false;
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  const std::uintptr_t begin = g_backed_begin.load(std::memory_order_acquire);
  return begin != 0 && addr >= begin &&
         addr - begin < g_backed_length.load(std::memory_order_acquire);
}

bool minivmm_sends(int sig) {
  return sig == Vcpu::kick_signal() || sig == StopSignals::quit_signal() ||
         sig == timers::PosixTimerAlarm::signal_number() ||
         sig == timers::ThreadTimers::signal_number();
}

// Whether returning from the handler runs the failed instruction again, which raises the
// signal again under the previous disposition (a sanitizer then reports the real fault
// address). si_code <= 0: sent (kill, tgkill from abort(), sigqueue). A breakpoint (SIGTRAP)
// resumes after the int3, a seccomp trap (SIGSYS) after the syscall, and the kernel's own
// SIGXCPU, SIGALRM or SIGIO (SI_KERNEL) or a memory error found in the background
// (BUS_MCEERR_AO) belong to no instruction: those are raised again instead.
bool refaults(int sig, const siginfo_t* info) {
  if (info == nullptr || info->si_code <= 0) return false;
  if (sig == SIGBUS) return info->si_code != BUS_MCEERR_AO;
  return sig == SIGSEGV || sig == SIGILL || sig == SIGFPE;
}

void on_deadly(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;  // a fault returns into the code it interrupted
  devices::ConsoleInput::restore_terminal();
  if (backing_gone(sig, info)) {
    const char* msg = g_backed_message.load(std::memory_order_acquire);
    std::size_t len = 0;
    while (msg != nullptr && msg[len] != '\0') ++len;
    if (len > 0) (void)!::write(STDERR_FILENO, msg, len);
    ::_exit(g_backed_exit.load(std::memory_order_acquire));
  }
  if (sig > 0 && sig < NSIG) ::sigaction(sig, &g_previous[static_cast<std::size_t>(sig)], nullptr);
  // The signal stays blocked until this handler returns, so the previous disposition sees the
  // raised one then.
  if (!refaults(sig, info)) ::raise(sig);
  errno = saved_errno;
}

void take(int sig, bool whatever_its_disposition) {
  struct sigaction previous {};
  if (::sigaction(sig, nullptr, &previous) != 0) return;
  const bool by_default = (previous.sa_flags & SA_SIGINFO) == 0 && previous.sa_handler == SIG_DFL;
  if (!by_default && !whatever_its_disposition) return;
  g_previous[static_cast<std::size_t>(sig)] = previous;
  struct sigaction sa {};
  sa.sa_sigaction = on_deadly;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, nullptr);
}

}  // namespace

void set_file_backed_memory(const void* begin, std::size_t length, const char* message,
                            int exit_code) noexcept {
  g_backed_message.store(message, std::memory_order_release);
  g_backed_exit.store(exit_code, std::memory_order_release);
  g_backed_length.store(length, std::memory_order_release);
  g_backed_begin.store(reinterpret_cast<std::uintptr_t>(begin), std::memory_order_release);
}

void install_crash_signal_handlers() noexcept {
  // Once: a second install would find its own handler as the previous disposition.
  static const bool installed = [] {
    for (const int sig : kCrash) take(sig, true);
    for (const int sig : kSent) take(sig, false);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) {
      if (!minivmm_sends(sig)) take(sig, false);
    }
    return true;
  }();
  (void)installed;
}

}  // namespace minivmm::vmm
