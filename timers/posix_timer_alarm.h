// The 2008 "dynticks" alarm: a one-shot POSIX timer (timer_create + timer_settime, absolute
// CLOCK_MONOTONIC) whose signal is directed at the loop thread (SIGEV_THREAD_ID) and read from a
// signalfd, so no async signal handler runs. Unlike QEMU's, it never calls timer_gettime: the
// armed deadline is cached by Dynticks.
//
// Must be constructed on the loop thread before any other thread starts: it blocks its signal
// in the calling thread, and threads created later inherit that mask.
#pragma once

#include <time.h>

#include "timers/alarm_timer.h"
#include "timers/posix_timer.h"

namespace minivmm::timers {

class PosixTimerAlarm final : public AlarmTimer {
 public:
  PosixTimerAlarm();
  ~PosixTimerAlarm() override;
  PosixTimerAlarm(const PosixTimerAlarm&) = delete;
  PosixTimerAlarm& operator=(const PosixTimerAlarm&) = delete;

  AlarmKind kind() const noexcept override { return AlarmKind::kDynticks; }
  int fd() const noexcept override { return signal_fd_; }
  bool arm(Nanos deadline, Nanos interval) override;
  bool disarm() override;
  bool consume(bool edge) override;

  static int signal_number() noexcept;

 private:
  int signal_fd_ = -1;
  PosixTimer timer_;
};

}  // namespace minivmm::timers
