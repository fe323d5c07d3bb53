// The MC146818 RTC and CMOS RAM.
//
// Config byte bits 0-1: the wall-clock epoch (an ordinary date, just before a leap day, just
// before 2000 and just before the model's 2199 limit); bits 2-3: the RAM size the CMOS memory
// fields describe. The wall clock moves with the monotonic clock (also while vm_clock is paused,
// as host time does).
// Host op: steps the wall clock by the value read as signed milliseconds (an NTP step, up to
// +-24 days), so the RTC's drift re-anchoring runs.
//
// Checks:
// - IRQ8 only as edges, never left held, and only while register B enables some interrupt
//   (PIE, AIE or UIE as last written, UIE cleared by SET): at most one edge between two reads of
//   register C (or writes of B, which re-evaluate IRQF against the new enables).
// - Register C: IRQF is set after an edge, and IRQF implies a flag whose enable bit is set; bits
//   0-3 read 0. Register A reads back bits 0-6 as written; D reads 0x80 (VRT).
// - With updates running (not SET, divider not in reset) the time registers hold valid values in
//   the current format (BCD digits 0-9; seconds < 60, hours 0-23 or 1-12 with bit 7 for PM...).
// - The interrupt timer is armed only while some interrupt is enabled (standalone target only).
#pragma once

#include <array>
#include <atomic>
#include <chrono>

#include "devices/pc/mc146818_rtc.h"
#include "tests/fuzz/fuzz_target.h"

namespace minivmm::fuzz {

// Host (wall) time: the fake monotonic clock plus an offset, so it advances with the time driver
// and can be stepped like CLOCK_REALTIME.
class FakeWallClock final : public timers::Clock {
 public:
  FakeWallClock(const timers::Clock& mono, Nanos offset)
      : mono_(mono), offset_ns_(offset.count()) {}

  Nanos now() const noexcept override { return mono_.now() + offset(); }
  std::optional<Nanos> to_monotonic(Nanos t) const noexcept override { return t - offset(); }
  Nanos from_monotonic(Nanos mono) const noexcept override { return mono + offset(); }

  void step(Nanos d) noexcept { offset_ns_.fetch_add(d.count(), std::memory_order_relaxed); }

 private:
  Nanos offset() const noexcept { return Nanos{offset_ns_.load(std::memory_order_relaxed)}; }

  const timers::Clock& mono_;
  std::atomic<std::int64_t> offset_ns_;
};

class Mc146818RtcRig final : public Rig {
 public:
  // `owns_vm_timers`: no other device has timers on vm_clock, so an armed timer there is ours.
  Mc146818RtcRig(Env& env, std::uint8_t config, bool owns_vm_timers = true)
      : env_(env),
        owns_vm_timers_(owns_vm_timers),
        wall_(env.mono(), epoch(config & 0x03) - env.mono().now()),
        rtc_(env.vm_timers(), wall_, irq8_, ram_size((config >> 2) & 0x03)) {
    // Rate 3 (8192 Hz) is the fastest periodic interrupt; one more expiry a second at most for
    // the re-layout of rates whose period is not whole nanoseconds.
    env.add_timer_rate(8192.0 + 2.0);
  }

  std::span<const Slot> slots() const noexcept override { return slots_; }

  void before_access(std::size_t /*slot*/, std::uint16_t /*offset*/) override {
    reg_b_before_ = reg_b_;
  }

  void after_read(std::size_t /*slot*/, std::uint16_t offset,
                  std::span<const std::uint8_t> data) override {
    irq8_.check_idle();
    // Any edge of this access came before its data byte was read (reads compute flags first).
    check_edges(reg_b_);
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (offset + i == 1) {
        check_data_read(data[i]);
      } else {
        FUZZ_CHECK(data[i] == 0xff, "RTC read 0x%02x from port offset %zu (write-only or none)",
                   data[i], offset + i);
      }
    }
  }

  void after_write(std::size_t /*slot*/, std::uint16_t offset,
                   std::span<const std::uint8_t> data) override {
    irq8_.check_idle();
    bool wrote_b = false;
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (offset + i == 0) {
        index_ = data[i] & 0x7f;
      } else if (offset + i == 1) {
        if (index_ == kRegA) reg_a_ = data[i] & 0x7f;
        if (index_ == kRegB) {
          reg_b_ = data[i];
          if ((reg_b_ & kSet) != 0) reg_b_ &= static_cast<std::uint8_t>(~kUie);
          wrote_b = true;
        }
      }
    }
    // A B write first catches up on flags under the old enables, then re-evaluates IRQF under
    // the new ones: an edge may come from either.
    check_edges(static_cast<std::uint8_t>(reg_b_before_ | reg_b_));
    if (wrote_b) {
      // IRQF now follows the new enables; what C shows next depends on them only.
      edges_since_ack_ = 0;
      edge_unacked_ = false;
    }
  }

  void host_op(const Op& op) override {
    wall_.step(std::chrono::milliseconds{static_cast<std::int32_t>(op.value)});
  }

  void check() override {
    irq8_.check_idle();
    check_edges(reg_b_);
    if (owns_vm_timers_ && (reg_b_ & kEnables) == 0) {
      FUZZ_CHECK(!env_.vm_timers().next_deadline(),
                 "RTC timer armed with no interrupt enabled (B = 0x%02x)", reg_b_);
    }
    const devices::RtcStats s = rtc_.stats();
    FUZZ_CHECK(s.periodic_irqs + s.alarm_irqs + s.update_irqs >= irq8_.pulses(),
               "RTC pulsed IRQ8 %llu times, attributed %llu",
               static_cast<unsigned long long>(irq8_.pulses()),
               static_cast<unsigned long long>(s.periodic_irqs + s.alarm_irqs + s.update_irqs));
  }

  std::uint64_t digest() const override {
    const devices::RtcStats s = rtc_.stats();
    return irq8_.rises() * 31 + s.timer_arms * 17 + s.invalid_time_sets * 7 + s.alarm_irqs * 3 +
           s.update_irqs;
  }

 private:
  static constexpr std::uint8_t kRegA = 0x0a, kRegB = 0x0b, kRegC = 0x0c, kRegD = 0x0d;
  static constexpr std::uint8_t kSet = 0x80, kPie = 0x40, kAie = 0x20, kUie = 0x10, kDm = 0x04,
                                k24h = 0x02;
  static constexpr std::uint8_t kEnables = kPie | kAie | kUie;
  static constexpr std::uint8_t kIrqf = 0x80;

  static Nanos epoch(unsigned choice) {
    using namespace std::chrono;
    static constexpr std::array<sys_days, 4> kDays = {
        sys_days{year{2026} / 11 / 29}, sys_days{year{2024} / 2 / 28},
        sys_days{year{1999} / 12 / 31}, sys_days{year{2199} / 12 / 31}};
    // 23:59:58: the first seconds cross a day (and for three of them a month, a year or the end
    // of the supported range).
    return duration_cast<Nanos>(kDays[choice].time_since_epoch() + hours{23} + minutes{59} +
                                seconds{58});
  }

  static std::uint64_t ram_size(unsigned choice) {
    static constexpr std::array<std::uint64_t, 4> kSizes = {16ull << 20, 512ull << 20, 3ull << 30,
                                                            64ull << 30};
    return kSizes[choice];
  }

  bool held() const noexcept {
    const auto dv = (reg_a_ >> 4) & 0x07;
    return (reg_b_ & kSet) != 0 || (dv & 0x06) == 0x06;
  }

  // New edges since the last look; `enables` is register B as it was while they could happen.
  void check_edges(std::uint8_t enables) {
    const std::uint64_t edges = irq8_.rises();
    if (edges == edges_seen_) return;
    FUZZ_CHECK((enables & kEnables) != 0,
               "RTC raised IRQ8 with no interrupt enabled in register B (0x%02x)", enables);
    edges_since_ack_ += edges - edges_seen_;
    edges_seen_ = edges;
    FUZZ_CHECK(edges_since_ack_ <= 1, "RTC raised IRQ8 %llu times without a read of C",
               static_cast<unsigned long long>(edges_since_ack_));
    edge_unacked_ = true;
  }

  void check_data_read(std::uint8_t v) {
    switch (index_) {
      case kRegA:
        FUZZ_CHECK((v & 0x7f) == reg_a_, "RTC register A read 0x%02x, written 0x%02x", v, reg_a_);
        if (held()) FUZZ_CHECK((v & 0x80) == 0, "RTC UIP set while updates are held");
        return;
      case kRegB:
        FUZZ_CHECK(v == reg_b_, "RTC register B read 0x%02x, expected 0x%02x", v, reg_b_);
        return;
      case kRegC:
        FUZZ_CHECK((v & 0x0f) == 0, "RTC register C low bits set: 0x%02x", v);
        if (edge_unacked_) FUZZ_CHECK((v & kIrqf) != 0, "RTC edge sent but C reads 0x%02x", v);
        if ((v & kIrqf) != 0) {
          FUZZ_CHECK((v & reg_b_ & kEnables) != 0,
                     "RTC IRQF with no enabled flag: C 0x%02x B 0x%02x", v, reg_b_);
        }
        edge_unacked_ = false;
        edges_since_ack_ = 0;
        return;
      case kRegD:
        FUZZ_CHECK(v == 0x80, "RTC register D read 0x%02x", v);
        return;
      default:
        break;
    }
    if (held()) return;  // the time registers hold whatever the guest wrote
    switch (index_) {
      case 0x00:
      case 0x02:
        check_field(v, 0, 59);
        return;
      case 0x04:
        if ((reg_b_ & k24h) != 0) {
          check_field(v, 0, 23);
        } else {
          check_field(static_cast<std::uint8_t>(v & 0x7f), 1, 12);
        }
        return;
      case 0x06:
        check_field(v, 1, 7);
        return;
      case 0x07:
        check_field(v, 1, 31);
        return;
      case 0x08:
        check_field(v, 1, 12);
        return;
      case 0x09:
        check_field(v, 0, 99);
        return;
      case 0x32:
        check_field(v, 0, 99);  // the running clock may pass 2199; writes are what is limited
        return;
      default:
        return;
    }
  }

  void check_field(std::uint8_t v, int lo, int hi) const {
    int value = v;
    if ((reg_b_ & kDm) == 0) {
      FUZZ_CHECK((v & 0x0f) <= 9 && (v >> 4) <= 9, "RTC index 0x%02x: bad BCD 0x%02x", index_, v);
      value = (v >> 4) * 10 + (v & 0x0f);
    }
    FUZZ_CHECK(value >= lo && value <= hi, "RTC index 0x%02x read %d, outside %d..%d (B 0x%02x)",
               index_, value, lo, hi, reg_b_);
  }

  Env& env_;
  const bool owns_vm_timers_;
  FakeWallClock wall_;
  // IRQ8 edges come from register accesses (flags are computed lazily) and from the timer.
  CheckedIrqLine irq8_{env_, "RTC IRQ8", CheckedIrqLine::Kind::kEdge,
                       Phase::kGuestAccess | Phase::kTimers};
  devices::Mc146818Rtc rtc_;

  std::uint8_t index_ = 0;
  std::uint8_t reg_a_ = 0x26;  // the model's power-on values
  std::uint8_t reg_b_ = k24h;
  std::uint8_t reg_b_before_ = k24h;
  std::uint64_t edges_seen_ = 0;
  std::uint64_t edges_since_ack_ = 0;
  bool edge_unacked_ = false;
  const std::array<Slot, 1> slots_ = {
      Slot{&rtc_, devices::Mc146818Rtc::kPortCount, 0x70}};  // the board's place for it
};

}  // namespace minivmm::fuzz
