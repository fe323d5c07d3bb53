// Process-wide count of host clock reads. clock_gettime is served by the vDSO, so strace cannot
// see it; the VMM counts its own reads to prove "at most one clock read per loop iteration".
#pragma once

#include <atomic>
#include <cstdint>

namespace minivmm::timers {

inline std::atomic<std::uint64_t>& clock_read_counter() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return counter;
}

}  // namespace minivmm::timers
