#include "timers/thread_signal_alarm.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "timers/syscall_counters.h"

namespace minivmm::timers {
// Not the loop alarm's SIGRTMIN+3 nor the vCPU kick's SIGRTMIN+4: a kick must stay
// distinguishable from a timer expiry, or every pause would look like a false wakeup.
int ThreadSignalAlarm::signal_number() noexcept { return SIGRTMIN + 5; }

void ThreadSignalAlarm::attach_current_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal_number());
  if (const int err = pthread_sigmask(SIG_BLOCK, &set, nullptr); err != 0) {
    throw std::system_error(err, std::generic_category(), "pthread_sigmask");
  }
  timer_.create(signal_number(), static_cast<pid_t>(syscall(SYS_gettid)));
}

bool ThreadSignalAlarm::arm(Nanos deadline, Nanos interval) {
  return timer_.arm(deadline, interval);
}

bool ThreadSignalAlarm::disarm() { return timer_.disarm(); }

bool ThreadSignalAlarm::consume(bool /*edge*/) { return take() >= 0; }

int ThreadSignalAlarm::take() noexcept {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal_number());
  const timespec zero{};
  thread_syscalls().add(Syscall::kRtSigtimedwait);
  if (sigtimedwait(&set, nullptr, &zero) == signal_number()) return 1;
  // EAGAIN: nothing pending. EINTR: another (handled) signal arrived meanwhile, a kick.
  return errno == EAGAIN || errno == EINTR ? 0 : -1;
}

}  // namespace minivmm::timers
