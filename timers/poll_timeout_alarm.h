// No host timer at all: the deadline becomes the loop's poll timeout (ppoll's timespec or
// epoll_pwait2's), as QEMU has done since 2013. Arming costs nothing.
#pragma once

#include "timers/alarm_timer.h"

namespace minivmm::timers {

class PollTimeoutAlarm final : public AlarmTimer {
 public:
  AlarmKind kind() const noexcept override { return AlarmKind::kPpoll; }
  int fd() const noexcept override { return -1; }
  bool arm(Nanos /*deadline*/, Nanos /*interval*/) override { return true; }
  bool disarm() override { return true; }
  bool consume(bool /*edge*/) override { return true; }
};

}  // namespace minivmm::timers
