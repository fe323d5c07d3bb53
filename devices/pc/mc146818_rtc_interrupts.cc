// Mc146818Rtc's interrupts: register C's flags, set for every periodic, update and alarm event
// that passed (lazily, when the guest looks, or from the timer), IRQ8's edge when IRQF rises,
// and the one vm_clock timer armed only while an interrupt is enabled. The register file is in
// mc146818_rtc.cc.
#include "devices/pc/mc146818_rtc.h"

#include <algorithm>

#include "devices/pc/mc146818_rtc_regs.h"
#include "devices/pc/mc146818_rtc_time.h"

namespace minivmm::devices {

// The chip's register map and time arithmetic, private to this device.
using namespace mc146818;

namespace {

using timers::Nanos;

// Beyond this the vm_clock grid and the wall clock have drifted apart (a pause, an NTP step),
// and the timer is re-anchored.
constexpr Nanos kResyncThreshold{1'000'000};

}  // namespace

void Mc146818Rtc::scan_flags(Nanos rtc, bool from_access) noexcept {
  if (rtc <= last_scan_) {
    // A host clock stepped back by more than the timer's rounding: follow it, losing events
    // rather than waiting for the old time to come back.
    if (from_access && rtc < last_scan_ - Nanos{kNsPerSecond}) last_scan_ = rtc;
    return;
  }
  const Nanos from = last_scan_;
  last_scan_ = rtc;
  if (!divider_running()) return;
  const std::uint32_t cycles = periodic_cycles();
  if (cycles != 0 && grid_index(rtc, cycles) > grid_index(from, cycles)) flags_ |= kRegCPf;
  if (!set_mode()) {
    const std::int64_t s0 = floor_div(from.count(), kNsPerSecond);
    const std::int64_t s1 = floor_div(rtc.count(), kNsPerSecond);
    if (s1 > s0) {
      flags_ |= kRegCUf;
      if (alarm_between(s0 + 1, s1)) flags_ |= kRegCAf;
    }
  }
  update_irqf();
}

bool Mc146818Rtc::alarm_between(std::int64_t first_second,
                                std::int64_t last_second) const noexcept {
  // A day holds every time of day once: more is never needed.
  first_second = std::max(first_second, last_second - kSecondsPerDay + 1);
  const auto matches = [](std::uint8_t alarm, std::uint8_t now) {
    return (alarm & kAlarmDontCare) == kAlarmDontCare || alarm == now;
  };
  for (std::int64_t s = first_second; s <= last_second; ++s) {
    const std::int64_t sod = floor_mod(s, kSecondsPerDay);
    if (matches(cmos_[kRegSecondsAlarm], to_reg(static_cast<int>(sod % 60))) &&
        matches(cmos_[kRegMinutesAlarm], to_reg(static_cast<int>(sod / 60 % 60))) &&
        matches(cmos_[kRegHoursAlarm], hour_to_reg(static_cast<int>(sod / 3600)))) {
      return true;
    }
  }
  return false;
}

std::optional<timers::Nanos> Mc146818Rtc::next_alarm_host() const {
  std::lock_guard lock(mu_);
  if ((reg_b_ & kRegBAie) == 0 || held()) return std::nullopt;
  const Nanos host = host_clock_.now();
  const std::int64_t now_second = floor_div(rtc_at(host).count(), kNsPerSecond);
  // A day holds every time of day once; each second is checked alone (the search runs once,
  // when the guest goes to sleep).
  for (std::int64_t s = now_second + 1; s <= now_second + kSecondsPerDay; ++s) {
    if (alarm_between(s, s)) return Nanos{s * kNsPerSecond} - offset_;
  }
  return std::nullopt;
}

void Mc146818Rtc::update_irqf() noexcept {
  const bool pf = (flags_ & kRegCPf) && (reg_b_ & kRegBPie);
  const bool af = (flags_ & kRegCAf) && (reg_b_ & kRegBAie);
  const bool uf = (flags_ & kRegCUf) && (reg_b_ & kRegBUie);
  const bool irqf = pf || af || uf;
  if (irqf && !irqf_) {
    if (pf) ++stats_.periodic_irqs;
    if (af) ++stats_.alarm_irqs;
    if (uf) ++stats_.update_irqs;
    irq_.pulse();
  }
  irqf_ = irqf;
}

std::uint32_t Mc146818Rtc::periodic_cycles() const noexcept {
  const unsigned rs = reg_a_ & kRegARateMask;
  if (rs == 0) return 0;
  // Rates 1 and 2 would be faster than rate 3 (8192 Hz); with a 32.768 kHz time base the chip
  // gives 256 Hz and 128 Hz instead (data sheet Table 5, note).
  if (rs <= 2) return 1u << (rs + 6);
  return 1u << (rs - 1);
}

std::uint32_t Mc146818Rtc::timer_cycles_wanted() const noexcept {
  const std::uint32_t periodic = periodic_cycles();
  const bool pie = (reg_b_ & kRegBPie) && periodic != 0;
  const bool updates = !set_mode() && (reg_b_ & (kRegBUie | kRegBAie));
  if (!divider_running() || !(pie || updates)) return 0;
  // The periodic grid holds every second boundary (all rates divide 32768), so one timer at the
  // periodic rate also serves the update and alarm checks.
  return pie ? periodic : kCyclesPerSecond;
}

void Mc146818Rtc::program_timer(Nanos host, bool force) noexcept {
  const std::uint32_t cycles = timer_cycles_wanted();
  if (cycles == 0) {
    if (timer_on_) {
      timer_.cancel();
      timer_on_ = false;
    }
    return;
  }
  if (timer_on_ && cycles == timer_cycles_ && !force) return;

  arm_after(rtc_at(host), vm_timers_.clock().now(), cycles);
}

void Mc146818Rtc::arm_after(Nanos rtc, Nanos vm, std::uint32_t cycles) noexcept {
  // The period in whole ns, rounded down when the exact one is not (rates 3-6: 1024 Hz is
  // 976562.5 ns). Such a grid runs slightly fast, so it is laid out backwards from the next
  // second boundary: expiries are at most (ticks per second) x (rounding) late - 2.56 us at
  // 8192 Hz - and never early, and the one on the boundary is exact. on_timer() lays it out
  // again at each boundary: one re-arm per second, and only for those rates.
  const Nanos period{std::int64_t{cycles} * kNsPerSecond / kBaseHz};
  const std::int64_t tps = ticks_per_second(cycles);
  const std::int64_t k = grid_index(rtc, cycles) + 1;  // the first grid point after `rtc`
  const std::int64_t second = floor_div(k, tps);
  const std::int64_t j = k - second * tps;
  const Nanos first =
      j == 0 ? grid_point(k, cycles) : Nanos{(second + 1) * kNsPerSecond} - (tps - j) * period;
  anchor_rtc_ = first;
  anchor_vm_ = vm + (first - rtc);
  timer_.arm_periodic(anchor_vm_, period);
  timer_on_ = true;
  timer_cycles_ = cycles;
  ++stats_.timer_arms;
}

void Mc146818Rtc::on_timer(const timers::Timer::Expiry& expiry) {
  std::lock_guard lock(mu_);
  // Stale: cancelled, or re-armed after this expiry was taken off the list.
  if (!timer_on_ || expiry.deadline < anchor_vm_) return;
  const Nanos predicted = anchor_rtc_ + (expiry.deadline - anchor_vm_);
  const std::int64_t k = grid_index(predicted, timer_cycles_);
  const Nanos before = grid_point(k, timer_cycles_);
  const Nanos after = grid_point(k + 1, timer_cycles_);
  const Nanos target = predicted - before <= after - predicted ? before : after;

  if (floor_mod(target.count(), kNsPerSecond) == 0) {
    // Once a second, check the grid against the wall clock: vm_clock stops while the VM is
    // paused and wall time does not, so the two drift apart; re-anchor when they have.
    const Nanos host = host_clock_.now();
    const Nanos late = vm_timers_.clock().now() - expiry.deadline;
    const Nanos drift = rtc_at(host) - late - predicted;
    if (drift > kResyncThreshold || drift < -kResyncThreshold) {
      scan_flags(rtc_at(host), true);
      program_timer(host, true);
      return;
    }
    if (std::int64_t{timer_cycles_} * kNsPerSecond % kBaseHz != 0) {
      arm_after(target, expiry.deadline + (target - predicted), timer_cycles_);
    }
  }
  scan_flags(target, false);
}

}  // namespace minivmm::devices
