// Host alarm on a timerfd (CLOCK_MONOTONIC, absolute). Also serves the "periodic" baseline:
// the same fd armed once at a fixed rate, as pre-dynticks QEMU's 1 kHz "unix" alarm did.
#pragma once

#include "timers/alarm_timer.h"

namespace minivmm::timers {

class TimerfdAlarm final : public AlarmTimer {
 public:
  // With `fixed_interval` > 0 this is the periodic baseline: armed now, never re-armed.
  explicit TimerfdAlarm(Nanos fixed_interval = Nanos{0});
  ~TimerfdAlarm() override;
  TimerfdAlarm(const TimerfdAlarm&) = delete;
  TimerfdAlarm& operator=(const TimerfdAlarm&) = delete;

  AlarmKind kind() const noexcept override {
    return fixed_interval_ > Nanos{0} ? AlarmKind::kPeriodic : AlarmKind::kTimerfd;
  }
  int fd() const noexcept override { return fd_; }
  // A one-shot expiry wakes the fd's waiters even while it is still readable; a periodic one
  // needs the read (see AlarmTimer), which consume() then does.
  bool edge_triggered_without_read() const noexcept override { return true; }
  bool arm(Nanos deadline, Nanos interval) override;
  bool disarm() override;
  bool consume(bool edge) override;
  bool fixed_rate() const noexcept override { return fixed_interval_ > Nanos{0}; }

 private:
  bool settime(Nanos value, Nanos interval, bool absolute);

  int fd_ = -1;
  const Nanos fixed_interval_;
  Nanos interval_{0};  // of the current arm
};

}  // namespace minivmm::timers
