// The host alarm: what wakes the loop thread when the earliest timer of any clock is due.
// Backends (QEMU's qemu_alarm_timer table, 2008-2013, plus the 2013+ "the poll timeout is the
// timer"): dynticks (POSIX timer -> signalfd), timerfd, poll-timeout (no host timer), periodic.
//
// Threads: every method on the loop thread only.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "timers/clock.h"

namespace minivmm::timers {

enum class AlarmKind { kDynticks, kTimerfd, kPpoll, kPeriodic };

std::string_view alarm_kind_name(AlarmKind kind) noexcept;
// Parses a --alarm value; nullopt for an unknown name.
std::optional<AlarmKind> parse_alarm_kind(std::string_view name) noexcept;

class AlarmTimer {
 public:
  virtual ~AlarmTimer() = default;

  virtual AlarmKind kind() const noexcept = 0;

  // The fd that becomes readable when the alarm fires; -1 when the backend has none and the
  // loop must pass deadline() as its poll timeout instead.
  virtual int fd() const noexcept = 0;

  // True if arm()/disarm() program a host timer (a syscall each), so Dynticks must call them;
  // false for the poll-timeout alarm, whose "arm" is the next wait's timeout. Every backend with
  // an fd has one; the thread-signal alarm has one and no fd (its signal interrupts a blocking
  // call of the thread it is aimed at).
  virtual bool has_host_timer() const noexcept { return fd() >= 0; }

  // True if, registered edge-triggered (epoll's EPOLLET), the fd reports each new expiry without
  // being read, so consume() may skip its read: a one-shot timerfd re-armed by timerfd_settime
  // does. A signalfd does not (a pending timer signal is not queued twice), nor does a periodic
  // timerfd (the kernel forwards its interval only inside read()).
  virtual bool edge_triggered_without_read() const noexcept { return false; }

  // Arm for the absolute CLOCK_MONOTONIC instant `deadline` (> 0); with `interval` > 0 the host
  // timer repeats every interval after that (the periodic fast path). Replaces any earlier arm.
  // Returns false on a host failure (errno set); the caller shuts down in order.
  virtual bool arm(Nanos deadline, Nanos interval) = 0;
  virtual bool disarm() = 0;

  // Called when fd() was reported readable: drains it, unless `edge` (the fd is registered
  // edge-triggered) and the backend can tell the read is not needed. False on a host failure.
  virtual bool consume(bool edge) = 0;

  // True for the baseline backend that fires at a fixed rate whatever the deadline is.
  virtual bool fixed_rate() const noexcept { return false; }
};

struct AlarmOptions {
  Nanos periodic_interval{1'000'000};  // --alarm periodic: the pre-dynticks 1 kHz tick
};

// Creates a backend. Throws std::system_error when the host refuses (e.g. timer_create).
std::unique_ptr<AlarmTimer> make_alarm_timer(AlarmKind kind, const AlarmOptions& options);

}  // namespace minivmm::timers
