#include "timers/vm_clock.h"

namespace minivmm::timers {

Nanos VmClock::now() const noexcept {
  const std::int64_t frozen = frozen_ns_.load(std::memory_order_acquire);
  if (frozen >= 0) return Nanos{frozen};
  return base_.now() - Nanos{offset_ns_.load(std::memory_order_acquire)};
}

std::optional<Nanos> VmClock::to_monotonic(Nanos t) const noexcept {
  if (paused()) return std::nullopt;
  return t + Nanos{offset_ns_.load(std::memory_order_acquire)};
}

Nanos VmClock::from_monotonic(Nanos mono) const noexcept {
  const std::int64_t frozen = frozen_ns_.load(std::memory_order_acquire);
  if (frozen >= 0) return Nanos{frozen};
  return mono - Nanos{offset_ns_.load(std::memory_order_acquire)};
}

void VmClock::pause() noexcept {
  if (paused()) return;
  frozen_ns_.store(now().count(), std::memory_order_release);
}

void VmClock::set_paused_at(Nanos vm_now) noexcept {
  frozen_ns_.store(vm_now.count() < 0 ? 0 : vm_now.count(), std::memory_order_release);
}

void VmClock::resume() noexcept {
  const std::int64_t frozen = frozen_ns_.load(std::memory_order_acquire);
  if (frozen < 0) return;
  offset_ns_.store(base_.now().count() - frozen, std::memory_order_release);
  frozen_ns_.store(kRunning, std::memory_order_release);
}

}  // namespace minivmm::timers
