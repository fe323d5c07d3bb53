// The VMM's own count of every syscall kind it makes on the loop path, so the stats can be
// checked against `strace -c -f` (and still be had without strace, which inflates timing).
// Process-wide, lock-free; incremented right where the syscall is made.
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

}  // namespace minivmm::timers
