// A host alarm that records every arm/disarm instead of making a syscall.
#pragma once

#include <vector>

#include "timers/alarm_timer.h"

namespace minivmm::testing {

class FakeAlarm final : public timers::AlarmTimer {
 public:
  struct Arm {
    timers::Nanos deadline;
    timers::Nanos interval;
  };

  explicit FakeAlarm(int fake_fd = 1000) : fd_(fake_fd) {}

  timers::AlarmKind kind() const noexcept override { return timers::AlarmKind::kTimerfd; }
  int fd() const noexcept override { return fd_; }
  bool arm(timers::Nanos deadline, timers::Nanos interval) override {
    arms.push_back(Arm{deadline, interval});
    return !fail;
  }
  bool disarm() override {
    ++disarms;
    return !fail;
  }
  bool consume(bool /*edge*/) override { return true; }

  std::vector<Arm> arms;
  int disarms = 0;
  bool fail = false;

 private:
  int fd_;
};

}  // namespace minivmm::testing
