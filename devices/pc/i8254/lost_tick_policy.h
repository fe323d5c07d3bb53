// What a periodic emulated timer does when the host ran its expiry a whole period or more late
// (a descheduled VMM, a paused loop thread): the guest asked for N ticks in that time and the
// VMM must decide whether N still arrive.
//
// kDelay (QEMU's `-global kvm-pit.lost_tick_policy=delay`, KVM's PIT "reinject"): every tick is
// still delivered, late, so a guest that counts ticks to keep time (jiffies) does not fall
// behind. kDiscard (QEMU `discard`): the missed ticks are dropped and counted; one tick is
// delivered and the grid skips to the next point after now, right for guests that read a
// clocksource and only use the tick as a wakeup.
#pragma once

#include <optional>
#include <string_view>

namespace minivmm::devices {

enum class LostTickPolicy { kDelay, kDiscard };

constexpr std::string_view lost_tick_policy_name(LostTickPolicy policy) noexcept {
  switch (policy) {
    case LostTickPolicy::kDelay:
      return "delay";
    case LostTickPolicy::kDiscard:
      return "discard";
  }
  return "?";
}

// The inverse of lost_tick_policy_name(), for command-line parsing; nullopt for other names.
constexpr std::optional<LostTickPolicy> parse_lost_tick_policy(std::string_view name) noexcept {
  if (name == "delay") return LostTickPolicy::kDelay;
  if (name == "discard") return LostTickPolicy::kDiscard;
  return std::nullopt;
}

}  // namespace minivmm::devices
