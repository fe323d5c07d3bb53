#include "timers/thread_signal_alarm.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "timers/syscall_counters.h"

namespace minivmm::timers {
namespace {

timespec to_timespec(Nanos n) {
  return timespec{static_cast<time_t>(n.count() / 1'000'000'000),
                  static_cast<long>(n.count() % 1'000'000'000)};
}

}  // namespace

// Not the loop alarm's SIGRTMIN+3 nor the vCPU kick's SIGRTMIN+4: a kick must stay
// distinguishable from a timer expiry, or every pause would look like a false wakeup.
int ThreadSignalAlarm::signal_number() noexcept { return SIGRTMIN + 5; }

ThreadSignalAlarm::~ThreadSignalAlarm() {
  if (created_) timer_delete(timer_);
}

void ThreadSignalAlarm::attach_current_thread() {
  if (created_) {
    timer_delete(timer_);
    created_ = false;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal_number());
  if (const int err = pthread_sigmask(SIG_BLOCK, &set, nullptr); err != 0) {
    throw std::system_error(err, std::generic_category(), "pthread_sigmask");
  }
  sigevent sev{};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = signal_number();
  sev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &sev, &timer_) != 0) {
    throw std::system_error(errno, std::generic_category(), "timer_create");
  }
  created_ = true;
}

bool ThreadSignalAlarm::arm(Nanos deadline, Nanos interval) {
  if (!created_) {
    errno = EBADF;
    return false;
  }
  if (deadline <= Nanos{0}) deadline = Nanos{1};  // zero would disarm
  itimerspec spec{};
  spec.it_value = to_timespec(deadline);
  spec.it_interval = to_timespec(interval);
  thread_syscalls().add(Syscall::kTimerSettime);
  return timer_settime(timer_, TIMER_ABSTIME, &spec, nullptr) == 0;
}

bool ThreadSignalAlarm::disarm() {
  if (!created_) return true;
  itimerspec spec{};
  thread_syscalls().add(Syscall::kTimerSettime);
  return timer_settime(timer_, 0, &spec, nullptr) == 0;
}

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
