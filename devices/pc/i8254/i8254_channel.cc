#include "devices/pc/i8254/i8254_channel.h"

#include <algorithm>

namespace minivmm::devices {
namespace {

using timers::Nanos;

constexpr std::uint64_t kNanosPerSecond = 1'000'000'000;

// Time since `start`, never negative: a vCPU may read the clock a little before another vCPU's
// write moved `start` forward.
Nanos since(Nanos start, Nanos now) noexcept { return now > start ? now - start : Nanos{0}; }

}  // namespace

std::uint64_t pit_ticks_in(Nanos elapsed) noexcept {
  if (elapsed <= Nanos{0}) return 0;
  const auto ns = static_cast<std::uint64_t>(elapsed.count());
  const std::uint64_t seconds = ns / kNanosPerSecond;
  const std::uint64_t rest = ns % kNanosPerSecond;  // rest * 1193182 < 1.2e15: no overflow
  return seconds * kPitFrequencyHz + rest * kPitFrequencyHz / kNanosPerSecond;
}

Nanos pit_ticks_duration(std::uint64_t ticks) noexcept {
  const std::uint64_t seconds = ticks / kPitFrequencyHz;
  const std::uint64_t rest = ticks % kPitFrequencyHz;
  // Round the sub-second part up: the first nanosecond at which `ticks` ticks have elapsed.
  const std::uint64_t rest_ns = (rest * kNanosPerSecond + kPitFrequencyHz - 1) / kPitFrequencyHz;
  return Nanos{static_cast<std::int64_t>(seconds * kNanosPerSecond + rest_ns)};
}

Nanos pit_cycle_duration(std::uint32_t count) noexcept {
  return Nanos{static_cast<std::int64_t>(
      (std::uint64_t{count} * kNanosPerSecond + kPitFrequencyHz / 2) / kPitFrequencyHz)};
}

I8254Channel::I8254Channel(bool gate) noexcept : gate_(gate) {}

void I8254Channel::write_control(std::uint8_t control_word, Nanos now) noexcept {
  settle(now);
  const auto access = static_cast<std::uint8_t>((control_word >> kPitControlAccessShift) & 0x3u);
  if (access == kPitAccessLatch) {
    latch_count(now);
    return;
  }
  // "When a Control Word is written to a Counter, all Control Logic is immediately reset": the
  // CE holds whatever it had until a new count arrives.
  frozen_ce_ = counting_element(now);
  access_ = access;
  mode_bits_ = static_cast<std::uint8_t>((control_word >> kPitControlModeShift) & 0x7u);
  mode_ = mode_bits_ >= 6 ? mode_bits_ - 4 : mode_bits_;
  bcd_ = (control_word & kPitControlBcd) != 0;
  write_msb_next_ = false;
  read_msb_next_ = false;
  latched_count_.reset();
  latched_msb_next_ = false;
  latched_status_.reset();
  armed_ = false;
  loaded_ = false;
  running_ = false;
  triggered_ = false;
  writing_ = false;
  reload_pending_ = false;
  null_count_ = true;
  ticks_base_ = 0;
}

void I8254Channel::latch_count(Nanos now) noexcept {
  settle(now);
  if (latched_count_) return;
  latched_count_ = encode(counting_element(now));
  latched_msb_next_ = false;
}

void I8254Channel::latch_status(Nanos now) noexcept {
  settle(now);
  if (latched_status_) return;
  latched_status_ = status(now);
}

I8254Channel::WriteResult I8254Channel::write(std::uint8_t value, Nanos now) noexcept {
  settle(now);
  switch (access_) {
    case kPitAccessLsb:
      return load_count(value, now);
    case kPitAccessMsb:
      return load_count(static_cast<std::uint16_t>(value << 8), now);
    default:
      break;
  }
  if (!write_msb_next_) {
    write_lsb_ = value;
    write_msb_next_ = true;
    if (mode_ == kPitModeInterruptOnTerminalCount) {
      // Mode 0 only: "writing the first byte disables counting; OUT is set low immediately".
      ticks_base_ = ticks_elapsed(now);
      running_ = false;
      writing_ = true;
      return WriteResult::kStopped;
    }
    return WriteResult::kPartial;
  }
  write_msb_next_ = false;
  return load_count(static_cast<std::uint16_t>(write_lsb_ | (value << 8)), now);
}

std::uint8_t I8254Channel::read(Nanos now) noexcept {
  settle(now);
  if (latched_status_) {
    const std::uint8_t s = *latched_status_;
    latched_status_.reset();
    return s;
  }
  std::uint16_t value = 0;
  bool msb = false;
  if (latched_count_) {
    value = *latched_count_;
    if (access_ == kPitAccessWord && !latched_msb_next_) {
      latched_msb_next_ = true;  // the MSB stays latched until read too
    } else {
      msb = access_ == kPitAccessMsb || latched_msb_next_;
      latched_count_.reset();
      latched_msb_next_ = false;
    }
  } else {
    value = encode(counting_element(now));
    if (access_ == kPitAccessWord) {
      msb = read_msb_next_;
      read_msb_next_ = !read_msb_next_;
    } else {
      msb = access_ == kPitAccessMsb;
    }
  }
  return static_cast<std::uint8_t>(msb ? value >> 8 : value & 0xffu);
}

bool I8254Channel::set_gate(bool level, Nanos now) noexcept {
  settle(now);
  if (level == gate_) return false;
  gate_ = level;
  switch (mode_) {
    case kPitModeInterruptOnTerminalCount:
    case kPitModeSoftwareTriggeredStrobe:
      // GATE low suspends counting, high resumes it where it stopped.
      if (!loaded_ || writing_) return false;
      if (!level) {
        ticks_base_ = ticks_elapsed(now);
        running_ = false;
      } else {
        run_start_ = now;
        running_ = true;
      }
      return true;
    case kPitModeHardwareRetriggerableOneShot:
    case kPitModeHardwareTriggeredStrobe:
      // Only a rising edge matters: it (re)starts the count from the count register.
      if (!level || !armed_) return false;
      start_run(now);
      running_ = true;
      triggered_ = true;
      return true;
    default:
      // Modes 2/3: GATE low stops counting with OUT high; the rising edge reloads the count.
      if (!loaded_) return false;
      if (!level) {
        frozen_ce_ = counting_element(now);
        running_ = false;
        reload_pending_ = false;  // the count register loads at the next trigger instead
      } else {
        n_ = cr_;
        run_start_ = now;
        running_ = true;
        reload_pending_ = false;
        null_count_ = false;
      }
      return true;
  }
}

bool I8254Channel::out(Nanos now) noexcept {
  settle(now);
  switch (mode_) {
    case kPitModeInterruptOnTerminalCount:
      // Low from the control word until terminal count, then high until rewritten.
      if (!loaded_ || writing_) return false;
      return ticks_elapsed(now) >= n_;
    case kPitModeHardwareRetriggerableOneShot:
      if (!triggered_) return true;
      return ticks_elapsed(now) >= n_;
    case kPitModeRateGenerator:
      // Low for the one tick at which the CE holds 1. A count of 1 is illegal in mode 2.
      if (!running_) return true;
      return n_ < 2 || phase_ticks(now) != n_ - 1;
    case kPitModeSquareWave:
      // High for ceil(N/2) ticks, low for floor(N/2).
      if (!running_) return true;
      return phase_ticks(now) < (n_ + 1) / 2;
    case kPitModeSoftwareTriggeredStrobe:
      if (!loaded_) return true;
      return ticks_elapsed(now) != n_;
    default:  // kPitModeHardwareTriggeredStrobe
      if (!triggered_) return true;
      return ticks_elapsed(now) != n_;
  }
}

std::optional<I8254Channel::RisingEdges> I8254Channel::next_rising_edges(Nanos now) noexcept {
  settle(now);
  switch (mode_) {
    case kPitModeInterruptOnTerminalCount:
      if (!loaded_ || writing_ || !running_) return std::nullopt;
      return edge_after_ticks(n_, now);
    case kPitModeHardwareRetriggerableOneShot:
      if (!triggered_) return std::nullopt;
      return edge_after_ticks(n_, now);
    case kPitModeSoftwareTriggeredStrobe:
      // OUT drops at terminal count and rises one tick later: the strobe's rising edge.
      if (!loaded_ || !running_) return std::nullopt;
      return edge_after_ticks(std::uint64_t{n_} + 1, now);
    case kPitModeHardwareTriggeredStrobe:
      if (!triggered_) return std::nullopt;
      return edge_after_ticks(std::uint64_t{n_} + 1, now);
    default: {
      // Modes 2/3: OUT rises whenever the CE reloads, i.e. on the cycle grid.
      if (!running_) return std::nullopt;
      if (reload_pending_) return RisingEdges{reload_at_, pit_cycle_duration(cr_)};
      const Nanos cycle = pit_cycle_duration(n_);
      const auto k = since(run_start_, now) / cycle + 1;
      return RisingEdges{run_start_ + k * cycle, cycle};
    }
  }
}

void I8254Channel::settle(Nanos now) noexcept {
  if (!reload_pending_ || now < reload_at_) return;
  n_ = cr_;
  run_start_ = reload_at_;
  reload_pending_ = false;
  null_count_ = false;
}

std::uint64_t I8254Channel::ticks_elapsed(Nanos now) const noexcept {
  std::uint64_t d = ticks_base_;
  if (running_) d += pit_ticks_in(since(run_start_, now));
  return d;
}

std::uint64_t I8254Channel::phase_ticks(Nanos now) const noexcept {
  const Nanos cycle = pit_cycle_duration(n_);
  const Nanos phase = since(run_start_, now) % cycle;
  // The rounded cycle may hold one tick more than n_ in its last nanosecond; clamp.
  return std::min<std::uint64_t>(pit_ticks_in(phase), n_ - 1);
}

std::uint32_t I8254Channel::counting_element(Nanos now) const noexcept {
  const std::uint32_t m = modulus();
  switch (mode_) {
    case kPitModeInterruptOnTerminalCount:
    case kPitModeSoftwareTriggeredStrobe:
    case kPitModeHardwareRetriggerableOneShot:
    case kPitModeHardwareTriggeredStrobe: {
      const bool counting =
          (mode_ == kPitModeInterruptOnTerminalCount || mode_ == kPitModeSoftwareTriggeredStrobe)
              ? loaded_
              : triggered_;
      if (!counting) return frozen_ce_ % m;
      // Past terminal count the CE keeps counting down, wrapping at the modulus.
      const auto d = static_cast<std::uint32_t>(ticks_elapsed(now) % m);
      return (n_ % m + m - d) % m;
    }
    case kPitModeRateGenerator:
      if (!running_) return frozen_ce_ % m;
      return static_cast<std::uint32_t>((n_ - phase_ticks(now)) % m);
    default: {  // kPitModeSquareWave
      if (!running_) return frozen_ce_ % m;
      // Data sheet, mode 3: an even count is decremented by two on every tick in both halves.
      // An odd count is decremented by one on the first tick of the high half and by three on
      // the first tick of the low half, then by two, so the halves last (N+1)/2 and (N-1)/2.
      const auto p = static_cast<std::uint32_t>(phase_ticks(now));
      const std::uint32_t high = (n_ + 1) / 2;
      const bool odd = (n_ & 1u) != 0;
      std::uint32_t value = n_;
      if (p < high) {
        if (p > 0) value = odd ? n_ + 1 - 2 * p : n_ - 2 * p;
      } else {
        const std::uint32_t j = p - high;
        if (j > 0) value = odd ? n_ - 1 - 2 * j : n_ - 2 * j;
      }
      return value % m;
    }
  }
}

std::uint16_t I8254Channel::encode(std::uint32_t value) const noexcept {
  if (!bcd_) return static_cast<std::uint16_t>(value & 0xffffu);
  value %= 10'000u;
  std::uint32_t out = 0;
  for (unsigned shift = 0; shift < 16; shift += 4) {
    out |= (value % 10) << shift;
    value /= 10;
  }
  return static_cast<std::uint16_t>(out);
}

std::uint32_t I8254Channel::decode(std::uint16_t raw) const noexcept {
  if (!bcd_) return raw == 0 ? 0x10000u : raw;
  std::uint32_t value = 0;
  for (unsigned digit = 0; digit < 4; ++digit) {
    value = value * 10 + ((std::uint32_t{raw} >> (12 - 4 * digit)) & 0xfu);
  }
  value %= 10'000u;
  return value == 0 ? 10'000u : value;  // 0 means the largest count: 10^4 in BCD
}

std::uint8_t I8254Channel::status(Nanos now) noexcept {
  return static_cast<std::uint8_t>(
      (out(now) ? kPitStatusOutput : 0u) | (null_count_ ? kPitStatusNullCount : 0u) |
      (unsigned{access_} << kPitControlAccessShift) |
      (unsigned{mode_bits_} << kPitControlModeShift) | (bcd_ ? kPitControlBcd : 0u));
}

I8254Channel::WriteResult I8254Channel::load_count(std::uint16_t raw, Nanos now) noexcept {
  cr_ = decode(raw);
  armed_ = true;
  writing_ = false;
  null_count_ = true;  // until the CE takes the count
  switch (mode_) {
    case kPitModeInterruptOnTerminalCount:
    case kPitModeSoftwareTriggeredStrobe:
      // A new count restarts the count immediately (one strobe / one edge per write).
      start_run(now);
      running_ = gate_;
      break;
    case kPitModeHardwareRetriggerableOneShot:
    case kPitModeHardwareTriggeredStrobe:
      break;  // waits in the count register for a gate trigger
    default:
      if (!loaded_) {
        // The first count after the control word starts the cycle now.
        n_ = cr_;
        loaded_ = true;
        null_count_ = false;
        run_start_ = now;
        running_ = gate_;
        frozen_ce_ = n_;
      } else if (running_) {
        // "Writing a new count while counting does not affect the current counting sequence":
        // it loads when the current cycle ends.
        const Nanos cycle = pit_cycle_duration(n_);
        reload_at_ = run_start_ + (since(run_start_, now) / cycle + 1) * cycle;
        reload_pending_ = true;
      }
      // Gated off: the next gate rising edge loads it.
      break;
  }
  return WriteResult::kCount;
}

void I8254Channel::start_run(Nanos now) noexcept {
  n_ = cr_;
  loaded_ = true;
  null_count_ = false;
  ticks_base_ = 0;
  run_start_ = now;
}

std::optional<I8254Channel::RisingEdges> I8254Channel::edge_after_ticks(std::uint64_t ticks,
                                                                        Nanos now) const noexcept {
  if (ticks_base_ >= ticks) return std::nullopt;
  const Nanos at = run_start_ + pit_ticks_duration(ticks - ticks_base_);
  if (at <= now) return std::nullopt;
  return RisingEdges{at, Nanos{0}};
}

}  // namespace minivmm::devices
