#include "timers/timerfd_alarm.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

#include "timers/syscall_counters.h"
#include "timers/timespec.h"

namespace minivmm::timers {

TimerfdAlarm::TimerfdAlarm(Nanos fixed_interval)
    : fixed_interval_(fixed_interval), interval_(fixed_interval) {
  fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "timerfd_create");
  if (fixed_interval_ > Nanos{0} && !settime(fixed_interval_, fixed_interval_, false)) {
    const int err = errno;
    close(fd_);
    throw std::system_error(err, std::generic_category(), "timerfd_settime");
  }
}

TimerfdAlarm::~TimerfdAlarm() {
  if (fd_ >= 0) close(fd_);
}

bool TimerfdAlarm::settime(Nanos value, Nanos interval, bool absolute) {
  itimerspec spec{};
  spec.it_value = to_timespec(value);
  spec.it_interval = to_timespec(interval);
  thread_syscalls().add(Syscall::kTimerfdSettime);
  return timerfd_settime(fd_, absolute ? TFD_TIMER_ABSTIME : 0, &spec, nullptr) == 0;
}

bool TimerfdAlarm::arm(Nanos deadline, Nanos interval) {
  if (fixed_rate()) return true;
  // A zero it_value disarms a timerfd; Dynticks never passes one, but be defensive.
  if (deadline <= Nanos{0}) deadline = Nanos{1};
  interval_ = interval;
  return settime(deadline, interval, true);
}

bool TimerfdAlarm::disarm() {
  if (fixed_rate()) return true;
  interval_ = Nanos{0};
  return settime(Nanos{0}, Nanos{0}, false);
}

bool TimerfdAlarm::consume(bool edge) {
  // A periodic timerfd is only forwarded to its next interval by read(); a one-shot one under
  // EPOLLET needs no read at all, since the next timerfd_settime resets it.
  if (edge && interval_ == Nanos{0} && !fixed_rate()) return true;
  std::uint64_t expirations = 0;
  thread_syscalls().add(Syscall::kRead);
  const ssize_t n = read(fd_, &expirations, sizeof expirations);
  return n == sizeof expirations || (n < 0 && errno == EAGAIN);
}

}  // namespace minivmm::timers
