// vm_clock: guest time. It is the base clock minus the time spent paused, and stands still while
// the VM is paused, so a paused guest neither receives ticks nor a burst of them on resume.
//
// Threads: now()/to_monotonic()/from_monotonic() from any thread (vCPU threads read it on every
// PIT counter read, so it is lock-free); pause()/resume() from the loop thread only.
#pragma once

#include <atomic>

#include "timers/clock.h"

namespace minivmm::timers {

class VmClock final : public Clock {
 public:
  // `base` must be the monotonic clock (real or fake) the loop reads; it must outlive this.
  explicit VmClock(const Clock& base) : base_(base) {}

  Nanos now() const noexcept override;
  std::optional<Nanos> to_monotonic(Nanos t) const noexcept override;
  Nanos from_monotonic(Nanos mono) const noexcept override;

  void pause() noexcept;
  void resume() noexcept;
  // A restored VM: paused, at the vm_clock instant its snapshot was taken (>= 0), so that
  // resume() carries on from there: no jump for the time the snapshot lay on disk.
  void set_paused_at(Nanos vm_now) noexcept;
  bool paused() const noexcept { return frozen_ns_.load(std::memory_order_acquire) >= 0; }
  // Total time spent paused so far (base time minus vm time while running).
  Nanos paused_total() const noexcept { return Nanos{offset_ns_.load(std::memory_order_acquire)}; }

 private:
  static constexpr std::int64_t kRunning = -1;

  const Clock& base_;
  // vm = base - offset while running. offset_ns_ is written before frozen_ns_ is released, so a
  // reader that sees kRunning also sees the offset that goes with it.
  std::atomic<std::int64_t> offset_ns_{0};
  std::atomic<std::int64_t> frozen_ns_{kRunning};
};

}  // namespace minivmm::timers
