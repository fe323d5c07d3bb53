#include "timers/posix_timer.h"

#include <signal.h>

#include <cerrno>
#include <system_error>

#include "timers/syscall_counters.h"
#include "timers/timespec.h"

namespace minivmm::timers {

PosixTimer::~PosixTimer() {
  if (created_) timer_delete(timer_);
}

void PosixTimer::create(int signo, pid_t tid) {
  if (created_) {
    timer_delete(timer_);
    created_ = false;
  }
  sigevent sev{};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = signo;
  sev._sigev_un._tid = tid;
  if (timer_create(CLOCK_MONOTONIC, &sev, &timer_) != 0) {
    throw std::system_error(errno, std::generic_category(), "timer_create");
  }
  created_ = true;
}

bool PosixTimer::arm(Nanos deadline, Nanos interval) noexcept {
  if (!created_) {
    errno = EBADF;
    return false;
  }
  itimerspec spec{};
  spec.it_value = to_timespec(std::max(deadline, Nanos{1}));
  spec.it_interval = to_timespec(interval);
  thread_syscalls().add(Syscall::kTimerSettime);
  return timer_settime(timer_, TIMER_ABSTIME, &spec, nullptr) == 0;
}

bool PosixTimer::disarm() noexcept {
  if (!created_) return true;
  const itimerspec off{};
  thread_syscalls().add(Syscall::kTimerSettime);
  return timer_settime(timer_, 0, &off, nullptr) == 0;
}

}  // namespace minivmm::timers
