// A POSIX timer on CLOCK_MONOTONIC whose signal goes to one thread (SIGEV_THREAD_ID): what the
// dynticks alarm (read through a signalfd on the loop) and the thread-signal alarm (interrupting
// a vCPU's KVM_RUN) share. Arms are absolute, so a late arm never stretches a period.
//
// Threads: any one thread at a time (each alarm uses it from its own thread).
#pragma once

#include <sys/types.h>
#include <time.h>

#include "timers/clock.h"

namespace minivmm::timers {

class PosixTimer {
 public:
  PosixTimer() = default;
  ~PosixTimer();
  PosixTimer(const PosixTimer&) = delete;
  PosixTimer& operator=(const PosixTimer&) = delete;

  // Creates (or re-creates) the timer, signalling `signo` to thread `tid`.
  // Throws std::system_error when the host refuses.
  void create(int signo, pid_t tid);
  bool created() const noexcept { return created_; }

  // Fires at the absolute CLOCK_MONOTONIC instant `deadline` (clamped to >= 1 ns: zero
  // disarms), then every `interval` if > 0. Counted as timer_settime. False on a host failure
  // (errno set; EBADF before create()).
  bool arm(Nanos deadline, Nanos interval) noexcept;
  bool disarm() noexcept;

 private:
  timer_t timer_{};
  bool created_ = false;
};

}  // namespace minivmm::timers
