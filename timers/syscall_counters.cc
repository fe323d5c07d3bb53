#include "timers/syscall_counters.h"

namespace minivmm::timers {

std::string_view syscall_name(Syscall s) noexcept {
  switch (s) {
    case Syscall::kPpoll: return "ppoll";
    case Syscall::kEpollWait: return "epoll_wait";
    case Syscall::kEpollPwait2: return "epoll_pwait2";
    case Syscall::kEpollCtl: return "epoll_ctl";
    case Syscall::kRead: return "read";
    case Syscall::kWrite: return "write";
    case Syscall::kTimerSettime: return "timer_settime";
    case Syscall::kTimerfdSettime: return "timerfd_settime";
    case Syscall::kTimerGettime: return "timer_gettime";
    case Syscall::kIoctl: return "ioctl";
    case Syscall::kClockGettime: return "clock_gettime";
    case Syscall::kRtSigtimedwait: return "rt_sigtimedwait";
    case Syscall::kIoSubmit: return "io_submit";
    case Syscall::kIoGetevents: return "io_getevents";
    case Syscall::kCount: break;
  }
  return "?";
}

std::uint64_t SyscallCounters::total() const noexcept {
  std::uint64_t sum = 0;
  for (const auto& c : counts_) sum += c.load(std::memory_order_relaxed);
  return sum;
}

SyscallCounters& loop_syscalls() noexcept {
  static SyscallCounters counters;
  return counters;
}

SyscallCounters& vcpu_syscalls() noexcept {
  static SyscallCounters counters;
  return counters;
}

namespace {
thread_local SyscallCounters* this_thread_counters = nullptr;
}  // namespace

SyscallCounters& thread_syscalls() noexcept {
  return this_thread_counters ? *this_thread_counters : loop_syscalls();
}

void set_thread_syscalls(SyscallCounters& counters) noexcept { this_thread_counters = &counters; }

}  // namespace minivmm::timers
