// A settable clock for tests: no test reads the real clock or sleeps (crosvm FakeClock,
// Chromium SimpleTestTickClock). Its epoch is CLOCK_MONOTONIC's, so to_monotonic is identity.
#pragma once

#include <atomic>

#include "timers/clock.h"

namespace minivmm::testing {

using timers::Nanos;

class FakeClock final : public timers::Clock {
 public:
  explicit FakeClock(Nanos start = Nanos{1'000'000'000}) : now_ns_(start.count()) {}

  Nanos now() const noexcept override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    return Nanos{now_ns_.load(std::memory_order_acquire)};
  }
  std::optional<Nanos> to_monotonic(Nanos t) const noexcept override { return t; }
  Nanos from_monotonic(Nanos mono) const noexcept override { return mono; }

  void set(Nanos t) noexcept { now_ns_.store(t.count(), std::memory_order_release); }
  void advance(Nanos d) noexcept { now_ns_.fetch_add(d.count(), std::memory_order_acq_rel); }
  std::uint64_t reads() const noexcept { return reads_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> now_ns_;
  mutable std::atomic<std::uint64_t> reads_{0};
};

}  // namespace minivmm::testing
