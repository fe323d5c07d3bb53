// The signals that must give the terminal back and then kill minivmm as themselves
// (vmm/host/crash_signals.h, README's exit codes, docs/reliability.md), for the unit test of the
// handler and the test of the real binary on a pseudo-terminal. Written out rather than taken
// from crash_signals.cc: this list is the promise the code is held to.
#pragma once

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "timers/posix_timer_alarm.h"
#include "timers/thread_timers.h"
#include "vmm/host/stop_signals.h"
#include "vmm/vcpu/vcpu.h"

namespace minivmm::testing {

// Every signal of signal(7) whose default action is to terminate or to dump core, but SIGKILL
// (cannot be caught), SIGINT/SIGTERM/SIGHUP (an orderly stop instead) and SIGPIPE (ignored);
// and every real-time signal but those minivmm sends itself.
inline std::vector<int> deadly_signals() {
  std::vector<int> s = {SIGQUIT, SIGILL,    SIGTRAP,   SIGABRT, SIGBUS, SIGFPE,
                        SIGUSR1, SIGSEGV,   SIGUSR2,   SIGALRM, SIGSTKFLT, SIGXCPU,
                        SIGXFSZ, SIGVTALRM, SIGPROF,   SIGIO,   SIGPWR, SIGSYS};
  const int own[] = {vmm::Vcpu::kick_signal(), vmm::StopSignals::quit_signal(),
                     timers::PosixTimerAlarm::signal_number(),
                     timers::ThreadTimers::signal_number()};
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) {
    if (std::find(std::begin(own), std::end(own), sig) == std::end(own)) s.push_back(sig);
  }
  return s;
}

// Whether `status` is a sanitizer's report of `sig` rather than a death by it: ASan, UBSan and
// TSan have handlers of their own for crash signals, which crash_signals.h chains to; they
// report and exit non-zero. Not with 14, though: that is a seccomp trap that cut the report
// short (vmm/exit_code.h).
inline bool sanitizer_reported([[maybe_unused]] int sig, [[maybe_unused]] int status) {
#ifdef MINIVMM_SANITIZER_RUNTIME
  const bool crash = sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
                     sig == SIGABRT || sig == SIGTRAP;
  return crash && WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 14;
#else
  return false;
#endif
}

// "SIGUSR1", "SIGRTMIN+7": also usable in a test's name once the '+' is dropped.
inline std::string signal_name(int sig) {
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) return "SIGRTMIN+" + std::to_string(sig - SIGRTMIN);
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : std::to_string(sig);
}

}  // namespace minivmm::testing
