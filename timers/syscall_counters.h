// The VMM's own count of every syscall kind it makes on its hot paths, so the stats can be
// checked against `strace -c -f` (and still be had without strace, which inflates timing).
// Two process-wide, lock-free sets: the loop thread's and the vCPU threads'. Each call site
// counts into thread_syscalls(), the set of the thread it runs on, so a PIT tick is charged to
// whichever thread delivered it.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace minivmm::timers {

enum class Syscall : std::size_t {
  kPpoll,
  kEpollWait,
  kEpollPwait2,
  kEpollCtl,
  kRead,
  kWrite,
  kTimerSettime,
  kTimerfdSettime,
  kTimerGettime,  // never made: counted so the report can show the zero
  kIoctl,
  kClockGettime,  // only the thread-CPU-time reads of --poll auto's trials (not vDSO)
  kRtSigtimedwait,  // a vCPU thread taking its timer signal after KVM_RUN returned EINTR
  kIoSubmit,        // --pit-tick kernel: a refill's batch of AIO polls
  kIoGetevents,     // --pit-tick kernel: reaping the polls that completed
  kCount,
};

std::string_view syscall_name(Syscall s) noexcept;

class SyscallCounters {
 public:
  void add(Syscall s) noexcept {
    counts_[static_cast<std::size_t>(s)].fetch_add(1, std::memory_order_relaxed);
  }
  std::uint64_t get(Syscall s) const noexcept {
    return counts_[static_cast<std::size_t>(s)].load(std::memory_order_relaxed);
  }
  std::uint64_t total() const noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Syscall::kCount)> counts_{};
};

// The counters of the loop thread's syscalls (the hot path the idle-cost claims are about).
SyscallCounters& loop_syscalls() noexcept;
// The counters of every vCPU thread's syscalls (KVM_RUN, and with --pit-tick vcpu the tick).
SyscallCounters& vcpu_syscalls() noexcept;

// The set the calling thread counts into: loop_syscalls() unless the thread chose another.
SyscallCounters& thread_syscalls() noexcept;
// Called once at the start of a thread that is not the loop thread (a vCPU).
void set_thread_syscalls(SyscallCounters& counters) noexcept;

}  // namespace minivmm::timers
