// A POSIX timer (timer_create + timer_settime, absolute CLOCK_MONOTONIC) whose signal is aimed at
// one thread (SIGEV_THREAD_ID) to interrupt the blocking call that thread sleeps in: a vCPU
// thread's KVM_RUN. No fd and no handler: the thread keeps the signal blocked except inside that
// call (KVM_SET_SIGNAL_MASK, ppoll's mask), so the call returns EINTR, and take() dequeues it.
//
// Threads: attach_current_thread() and everything else on the thread it is aimed at.
#pragma once

#include <time.h>

#include "timers/alarm_timer.h"
#include "timers/posix_timer.h"

namespace minivmm::timers {

class ThreadSignalAlarm final : public AlarmTimer {
 public:
  ThreadSignalAlarm() = default;
  ~ThreadSignalAlarm() override = default;
  ThreadSignalAlarm(const ThreadSignalAlarm&) = delete;
  ThreadSignalAlarm& operator=(const ThreadSignalAlarm&) = delete;

  // Blocks signal_number() in the calling thread and creates the timer aimed at it.
  // Throws std::system_error when the host refuses.
  void attach_current_thread();

  // A POSIX timer, like the loop's dynticks alarm, only delivered differently.
  AlarmKind kind() const noexcept override { return AlarmKind::kDynticks; }
  int fd() const noexcept override { return -1; }
  bool has_host_timer() const noexcept override { return true; }
  bool arm(Nanos deadline, Nanos interval) override;
  bool disarm() override;
  bool consume(bool edge) override;

  // Dequeues the timer's signal if it is pending, without blocking: 1 taken, 0 none pending,
  // -1 host failure (errno set). A pending timer signal is never queued twice (later expiries
  // are overruns), so one take empties it.
  int take() noexcept;

  static int signal_number() noexcept;

 private:
  PosixTimer timer_;
};

}  // namespace minivmm::timers
