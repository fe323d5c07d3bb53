#include "devices/pc/mc146818_rtc.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "devices/bus/irq_line.h"
#include "tests/support/fake_clock.h"
#include "tests/support/map_report_writer.h"
#include "tests/support/time_driver.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

namespace minivmm::devices {
namespace {

using namespace std::chrono_literals;
using timers::Nanos;

constexpr std::uint8_t kSeconds = 0x00, kSecondsAlarm = 0x01, kMinutes = 0x02, kMinutesAlarm = 0x03,
                       kHours = 0x04, kHoursAlarm = 0x05, kDayOfWeek = 0x06, kDay = 0x07,
                       kMonth = 0x08, kYear = 0x09, kRegA = 0x0a, kRegB = 0x0b, kRegC = 0x0c,
                       kRegD = 0x0d, kCentury = 0x32;
constexpr std::uint8_t kSet = 0x80, kPie = 0x40, kAie = 0x20, kUie = 0x10, kDm = 0x04, k24h = 0x02;
constexpr std::uint8_t kIrqf = 0x80, kPf = 0x40, kAf = 0x20, kUf = 0x10;
constexpr std::uint8_t kUip = 0x80, kDivider32Khz = 0x20, kDividerReset = 0x60;
constexpr std::uint64_t kMib = 1ull << 20;

// 2026-11-29 12:34:56 UTC, a Sunday; on a second boundary so that grid arithmetic is exact.
Nanos test_epoch() {
  const std::chrono::sys_days day{std::chrono::year{2026} / 11 / 29};
  return Nanos{std::chrono::duration_cast<Nanos>(day.time_since_epoch()) + 12h + 34min + 56s};
}

// IRQ8 as a guest sees it: records each edge and, when acking, runs an "interrupt handler" that
// reads register C right after the edge (a vm_clock timer due at once), as Linux's rtc driver
// does. Without that read the chip's IRQF stays set and no further edge comes.
class GuestIrq8 final : public IrqLine {
 public:
  GuestIrq8(testing::FakeClock& clock, timers::TimerList& list)
      : clock_(clock), isr_(list, "guest-isr", [this](const timers::Timer::Expiry&) {
          if (ack_) ack_();
        }) {}

  void set_level(bool) noexcept override { ++level_calls_; }
  void pulse() noexcept override {
    edges_.push_back(clock_.now());
    if (ack_) isr_.arm_at(clock_.now());
  }

  void set_ack(std::function<void()> ack) { ack_ = std::move(ack); }
  const std::vector<Nanos>& edges() const { return edges_; }
  int level_calls() const { return level_calls_; }

 private:
  testing::FakeClock& clock_;
  std::function<void()> ack_;
  std::vector<Nanos> edges_;
  int level_calls_ = 0;
  timers::Timer isr_;
};

class Mc146818RtcTest : public ::testing::Test {
 protected:
  explicit Mc146818RtcTest(std::uint64_t ram = 64 * kMib) : ram_(ram) {}

  std::uint8_t reg(std::uint8_t index) {
    select(index);
    std::uint8_t v = 0;
    rtc_->read(1, std::span<std::uint8_t>(&v, 1));
    return v;
  }
  void set_reg(std::uint8_t index, std::uint8_t value) {
    select(index);
    rtc_->write(1, std::span<const std::uint8_t>(&value, 1));
  }
  void select(std::uint8_t index) { rtc_->write(0, std::span<const std::uint8_t>(&index, 1)); }
  void ack_interrupts() {
    irq_.set_ack([this] { reg(kRegC); });
  }
  std::size_t advance(Nanos by) { return testing::advance(clock_, vm_, by); }

  const Nanos epoch_ = test_epoch();
  const std::uint64_t ram_;
  testing::FakeClock clock_{epoch_};  // wall time and vm_clock at once: they move together
  timers::TimerList vm_{timers::ClockType::kVm, clock_};
  GuestIrq8 irq_{clock_, vm_};
  std::unique_ptr<Mc146818Rtc> rtc_ = std::make_unique<Mc146818Rtc>(vm_, clock_, irq_, ram_);
};

TEST_F(Mc146818RtcTest, ReadsHostTimeInBcd24Hour) {
  EXPECT_EQ(reg(kSeconds), 0x56);
  EXPECT_EQ(reg(kMinutes), 0x34);
  EXPECT_EQ(reg(kHours), 0x12);
  EXPECT_EQ(reg(kDayOfWeek), 0x01);  // Sunday
  EXPECT_EQ(reg(kDay), 0x29);
  EXPECT_EQ(reg(kMonth), 0x11);
  EXPECT_EQ(reg(kYear), 0x26);
  EXPECT_EQ(reg(kCentury), 0x20);
  EXPECT_EQ(reg(kRegB), k24h);
  EXPECT_EQ(reg(kRegA), 0x26);  // 32.768 kHz, 1024 Hz: what PC firmware leaves
  EXPECT_EQ(reg(kRegD), 0x80);  // VRT
}

TEST_F(Mc146818RtcTest, ReadsHostTimeInBinary) {
  set_reg(kRegB, k24h | kDm);
  EXPECT_EQ(reg(kSeconds), 56);
  EXPECT_EQ(reg(kMinutes), 34);
  EXPECT_EQ(reg(kHours), 12);
  EXPECT_EQ(reg(kDay), 29);
  EXPECT_EQ(reg(kMonth), 11);
  EXPECT_EQ(reg(kYear), 26);
  EXPECT_EQ(reg(kCentury), 20);
}

TEST_F(Mc146818RtcTest, TwelveHourModeMarksPmInBit7) {
  set_reg(kRegB, 0);             // BCD, 12 h
  EXPECT_EQ(reg(kHours), 0x92);  // 12 PM
  clock_.advance(1h);
  EXPECT_EQ(reg(kHours), 0x81);  // 1 PM
  clock_.advance(11h);
  EXPECT_EQ(reg(kHours), 0x12);      // 00:34 is 12 AM
  EXPECT_EQ(reg(kDayOfWeek), 0x02);  // Monday
  EXPECT_EQ(reg(kDay), 0x30);
  clock_.advance(10h);
  EXPECT_EQ(reg(kHours), 0x10);  // 10 AM
  set_reg(kRegB, kDm);           // binary, 12 h
  EXPECT_EQ(reg(kHours), 10);
  clock_.advance(12h);
  EXPECT_EQ(reg(kHours), 0x80 | 10);
}

TEST_F(Mc146818RtcTest, SetHoldsTheWrittenTimeUntilClearedThenRunsFromIt) {
  set_reg(kRegB, kSet | k24h);
  // 2027-01-01 00:00:00, a Friday.
  set_reg(kSeconds, 0x00);
  set_reg(kMinutes, 0x00);
  set_reg(kHours, 0x00);
  set_reg(kDay, 0x01);
  set_reg(kMonth, 0x01);
  set_reg(kYear, 0x27);
  set_reg(kCentury, 0x20);
  advance(10s);  // time passes while SET is held
  EXPECT_EQ(reg(kSeconds), 0x00);
  EXPECT_EQ(reg(kYear), 0x27);
  EXPECT_EQ(reg(kRegA) & kUip, 0);  // no update in progress while SET is held

  set_reg(kRegB, k24h);
  EXPECT_EQ(reg(kSeconds), 0x00);
  EXPECT_EQ(reg(kMinutes), 0x00);
  advance(5s);
  EXPECT_EQ(reg(kSeconds), 0x05);
  EXPECT_EQ(reg(kMinutes), 0x00);
  EXPECT_EQ(reg(kHours), 0x00);
  EXPECT_EQ(reg(kDayOfWeek), 0x06);
  EXPECT_EQ(reg(kDay), 0x01);
  EXPECT_EQ(reg(kMonth), 0x01);
  EXPECT_EQ(reg(kYear), 0x27);
  EXPECT_EQ(reg(kCentury), 0x20);
  EXPECT_EQ(rtc_->stats().invalid_time_sets, 0u);
}

TEST_F(Mc146818RtcTest, SettingSetClearsUie) {
  set_reg(kRegB, kUie | k24h);
  set_reg(kRegB, kSet | kUie | k24h);
  EXPECT_EQ(reg(kRegB), kSet | k24h);
}

TEST_F(Mc146818RtcTest, WritingATimeRegisterWhileRunningTakesEffectAtOnce) {
  set_reg(kMinutes, 0x00);
  EXPECT_EQ(reg(kMinutes), 0x00);
  EXPECT_EQ(reg(kSeconds), 0x56);
  advance(4s);
  EXPECT_EQ(reg(kSeconds), 0x00);
  EXPECT_EQ(reg(kMinutes), 0x01);
}

TEST_F(Mc146818RtcTest, InvalidWrittenTimeIsClampedAndCounted) {
  set_reg(kRegB, kSet | k24h);
  set_reg(kMonth, 0x13);    // month 13
  set_reg(kSeconds, 0x7a);  // not BCD
  set_reg(kRegB, k24h);
  EXPECT_EQ(rtc_->stats().invalid_time_sets, 1u);
  EXPECT_EQ(reg(kMonth), 0x12);
}

TEST_F(Mc146818RtcTest, UipIsSetOnlyForThe244MicrosecondsBeforeAnUpdate) {
  EXPECT_EQ(reg(kRegA) & kUip, 0);
  clock_.advance(1s - 244'141ns);
  EXPECT_EQ(reg(kRegA) & kUip, 0);
  clock_.advance(1ns);
  EXPECT_EQ(reg(kRegA) & kUip, kUip);
  EXPECT_EQ(reg(kSeconds), 0x56);  // the update has not happened yet
  clock_.advance(244'139ns);
  EXPECT_EQ(reg(kRegA) & kUip, kUip);
  clock_.advance(1ns);
  EXPECT_EQ(reg(kRegA) & kUip, 0);
  EXPECT_EQ(reg(kSeconds), 0x57);
}

TEST_F(Mc146818RtcTest, DividerResetStopsTheClockAndTheFirstUpdateComesHalfASecondLater) {
  set_reg(kRegA, kDividerReset | 0x06);
  advance(3s);
  EXPECT_EQ(reg(kSeconds), 0x56);
  set_reg(kRegA, kDivider32Khz | 0x06);
  advance(499ms);
  EXPECT_EQ(reg(kSeconds), 0x56);
  advance(1ms);
  EXPECT_EQ(reg(kSeconds), 0x57);
}

// Expected rate for each RS value with the 32.768 kHz time base (data sheet Table 5).
double rate_hz(unsigned rs) {
  if (rs == 1) return 256;
  if (rs == 2) return 128;
  return 32768.0 / (1u << (rs - 1));
}

TEST_F(Mc146818RtcTest, EveryPeriodicRateGivesExactlyItsInterruptCountOverTenSeconds) {
  for (unsigned rs = 1; rs <= 15; ++rs) {
    SCOPED_TRACE(rs);
    testing::FakeClock clock(epoch_);
    timers::TimerList vm(timers::ClockType::kVm, clock);
    GuestIrq8 irq(clock, vm);
    Mc146818Rtc rtc(vm, clock, irq, 64 * kMib);
    const auto out = [&](std::uint8_t index, std::uint8_t value) {
      rtc.write(0, std::span<const std::uint8_t>(&index, 1));
      rtc.write(1, std::span<const std::uint8_t>(&value, 1));
    };
    irq.set_ack([&] {
      const std::uint8_t c = kRegC;
      std::uint8_t v = 0;
      rtc.write(0, std::span<const std::uint8_t>(&c, 1));
      rtc.read(1, std::span<std::uint8_t>(&v, 1));
    });
    out(kRegA, static_cast<std::uint8_t>(kDivider32Khz | rs));
    out(kRegB, kPie | k24h);
    // Ten seconds: ten re-layings of the grid for the rates whose period is not whole ns, and
    // 0.15 M edges over all rates (a minute took 21 s under ASan at -O0, for no more coverage).
    testing::advance(clock, vm, 10s);

    const auto expected = static_cast<std::size_t>(rate_hz(rs) * 10);
    ASSERT_EQ(irq.edges().size(), expected);
    EXPECT_EQ(rtc.stats().periodic_irqs, expected);
    // One periodic arm, no re-arm per tick. Periods that are not whole ns (rates 3-6) are laid
    // out again once per second so that they do not drift.
    const auto cycles = static_cast<std::int64_t>(32768.0 / rate_hz(rs));
    const bool whole_ns = cycles * 1'000'000'000 % 32768 == 0;
    EXPECT_EQ(rtc.stats().timer_arms, whole_ns ? 1u : 11u);
    // Edge i is due at the exact grid point i+1 (rounded up to a ns); it may be late by the
    // period's rounding summed over a second (8192 x 0.3125 ns at rate 3), never early.
    for (std::size_t i = 0; i < expected; ++i) {
      const auto k = static_cast<std::int64_t>(i) + 1;
      const Nanos exact{(k * cycles * 1'000'000'000 + 32767) / 32768};
      const Nanos late = irq.edges()[i] - (epoch_ + exact);
      ASSERT_GE(late, 0ns) << "edge " << i;
      ASSERT_LE(late, 2560ns) << "edge " << i;
    }
  }
}

TEST_F(Mc146818RtcTest, PeriodicInterruptWaitsForRegisterCToBeRead) {
  set_reg(kRegB, kPie | k24h);  // 1024 Hz
  advance(1s);
  EXPECT_EQ(irq_.edges().size(), 1u);  // IRQF stayed set: no further edge
  EXPECT_EQ(reg(kRegC), kIrqf | kPf | kUf);
  EXPECT_EQ(reg(kRegC), 0);  // cleared on read
  advance(1ms);
  EXPECT_EQ(irq_.edges().size(), 2u);
  EXPECT_EQ(irq_.level_calls(), 0);  // edges only
}

TEST_F(Mc146818RtcTest, PeriodicFlagIsSetWithoutPieAndWithoutATimer) {
  set_reg(kRegA, kDivider32Khz | 0x0f);  // 2 Hz
  EXPECT_FALSE(vm_.next_deadline().has_value());
  clock_.advance(400ms);
  EXPECT_EQ(reg(kRegC), 0);
  clock_.advance(100ms);
  EXPECT_EQ(reg(kRegC), kPf);
  EXPECT_EQ(reg(kRegC), 0);
  clock_.advance(500ms);
  EXPECT_EQ(reg(kRegC), kPf | kUf);  // the update flag is set whatever UIE says, too
  EXPECT_TRUE(irq_.edges().empty());
  EXPECT_EQ(rtc_->stats().timer_arms, 0u);
}

TEST_F(Mc146818RtcTest, EnablingAnInterruptForAFlagAlreadySetRaisesIrqf) {
  clock_.advance(1s);
  set_reg(kRegB, kUie | k24h);
  EXPECT_EQ(irq_.edges().size(), 1u);
  EXPECT_EQ(reg(kRegC), kIrqf | kUf | kPf);
}

TEST_F(Mc146818RtcTest, UpdateEndedInterruptOncePerSecond) {
  ack_interrupts();
  set_reg(kRegB, kUie | k24h);
  advance(60s);
  ASSERT_EQ(irq_.edges().size(), 60u);
  for (std::size_t i = 0; i < irq_.edges().size(); ++i) {
    EXPECT_EQ(irq_.edges()[i], epoch_ + Nanos{std::chrono::seconds(i + 1)});
  }
  EXPECT_EQ(rtc_->stats().update_irqs, 60u);
  EXPECT_EQ(rtc_->stats().timer_arms, 1u);
  EXPECT_EQ(reg(kSeconds), 0x56);
  EXPECT_EQ(reg(kMinutes), 0x35);
}

TEST_F(Mc146818RtcTest, AlarmFiresAtTheProgrammedSecond) {
  ack_interrupts();
  set_reg(kSecondsAlarm, 0x10);
  set_reg(kMinutesAlarm, 0x35);
  set_reg(kHoursAlarm, 0x12);
  set_reg(kRegB, kAie | k24h);
  advance(60s);
  ASSERT_EQ(irq_.edges().size(), 1u);
  EXPECT_EQ(irq_.edges()[0], epoch_ + 14s);  // 12:34:56 + 14 s = 12:35:10
  EXPECT_EQ(rtc_->stats().alarm_irqs, 1u);
  EXPECT_EQ(rtc_->stats().update_irqs, 0u);
}

TEST_F(Mc146818RtcTest, AlarmDontCareBytesMatchEveryValue) {
  ack_interrupts();
  set_reg(kSecondsAlarm, 0x00);
  set_reg(kMinutesAlarm, 0xc0);
  set_reg(kHoursAlarm, 0xff);
  set_reg(kRegB, kAie | k24h);
  advance(180s);
  ASSERT_EQ(irq_.edges().size(), 3u);  // at 12:35:00, 12:36:00, 12:37:00
  EXPECT_EQ(irq_.edges()[0], epoch_ + 4s);
  EXPECT_EQ(irq_.edges()[2], epoch_ + 124s);
}

TEST_F(Mc146818RtcTest, AlarmFlagIsFoundLazilyWithoutAie) {
  set_reg(kSecondsAlarm, 0x00);
  set_reg(kMinutesAlarm, 0x35);
  set_reg(kHoursAlarm, 0x12);
  clock_.advance(10s);  // past 12:35:00
  EXPECT_EQ(reg(kRegC) & kAf, kAf);
  clock_.advance(10s);
  EXPECT_EQ(reg(kRegC) & kAf, 0);
}

TEST_F(Mc146818RtcTest, PeriodicAndUpdateInterruptsShareOneTimer) {
  ack_interrupts();
  set_reg(kRegA, kDivider32Khz | 0x0f);  // 2 Hz
  set_reg(kRegB, kPie | kUie | k24h);
  advance(10s);
  EXPECT_EQ(irq_.edges().size(), 20u);
  EXPECT_EQ(rtc_->stats().periodic_irqs, 20u);
  EXPECT_EQ(rtc_->stats().update_irqs, 10u);  // every other one also carries UF
  EXPECT_EQ(rtc_->stats().timer_arms, 1u);
}

TEST_F(Mc146818RtcTest, TimerIsArmedOnlyWhileAnInterruptIsEnabled) {
  EXPECT_FALSE(vm_.next_deadline().has_value());
  set_reg(kRegB, kPie | k24h);
  EXPECT_TRUE(vm_.next_deadline().has_value());
  set_reg(kRegB, k24h);
  EXPECT_FALSE(vm_.next_deadline().has_value());
  set_reg(kRegA, kDivider32Khz);  // rate 0: PIE alone arms nothing
  set_reg(kRegB, kPie | k24h);
  EXPECT_FALSE(vm_.next_deadline().has_value());
}

TEST_F(Mc146818RtcTest, NmiMaskBitIsStoredAndNotPartOfTheIndex) {
  select(0x80 | kRegD);
  EXPECT_TRUE(rtc_->nmi_masked());
  std::uint8_t v = 0;
  rtc_->read(1, std::span<std::uint8_t>(&v, 1));
  EXPECT_EQ(v, 0x80);  // register D, not 0x8d
  select(kRegD);
  EXPECT_FALSE(rtc_->nmi_masked());
  rtc_->read(0, std::span<std::uint8_t>(&v, 1));
  EXPECT_EQ(v, 0xff);  // the index port is write-only
}

TEST_F(Mc146818RtcTest, RamBeyondTheClockRegistersKeepsValues) {
  set_reg(0x40, 0xa5);
  set_reg(0x7f, 0x5a);
  EXPECT_EQ(reg(0x40), 0xa5);
  EXPECT_EQ(reg(0x7f), 0x5a);
  set_reg(kRegC, 0xff);  // read-only
  set_reg(kRegD, 0x00);
  EXPECT_EQ(reg(kRegC), 0);
  EXPECT_EQ(reg(kRegD), 0x80);
}

TEST_F(Mc146818RtcTest, MemorySizeFieldsFor64Mib) {
  EXPECT_EQ(reg(0x15), 0x80);  // 640 KiB base memory
  EXPECT_EQ(reg(0x16), 0x02);
  EXPECT_EQ(reg(0x17), 0x00);  // 63 MiB above 1 MiB = 64512 KiB = 0xfc00
  EXPECT_EQ(reg(0x18), 0xfc);
  EXPECT_EQ(reg(0x30), 0x00);
  EXPECT_EQ(reg(0x31), 0xfc);
  EXPECT_EQ(reg(0x34), 0x00);  // 48 MiB above 16 MiB = 768 x 64 KiB = 0x0300
  EXPECT_EQ(reg(0x35), 0x03);
  EXPECT_EQ(reg(0x5b), 0x00);
  EXPECT_EQ(reg(0x5c), 0x00);
  EXPECT_EQ(reg(0x5d), 0x00);
  EXPECT_EQ(reg(0x14), 0x02);  // FPU, no floppy
  // AT checksum over 0x10-0x2d, big-endian at 0x2e.
  unsigned sum = 0;
  for (std::uint8_t i = 0x10; i <= 0x2d; ++i) sum += reg(i);
  EXPECT_EQ(reg(0x2e), (sum >> 8) & 0xff);
  EXPECT_EQ(reg(0x2f), sum & 0xff);
}

class Mc146818RtcBigRamTest : public Mc146818RtcTest {
 protected:
  Mc146818RtcBigRamTest() : Mc146818RtcTest(4608 * kMib) {}  // 4 GiB + 512 MiB
};

TEST_F(Mc146818RtcBigRamTest, MemorySizeFieldsAbove4Gib) {
  // Low RAM stops at the 3 GiB hole; the other 1.5 GiB is above 4 GiB.
  EXPECT_EQ(reg(0x17), 0xff);  // capped at 0xffff KiB
  EXPECT_EQ(reg(0x18), 0xff);
  EXPECT_EQ(reg(0x30), 0xff);
  EXPECT_EQ(reg(0x31), 0xff);
  EXPECT_EQ(reg(0x34), 0x00);  // (3 GiB - 16 MiB) / 64 KiB = 48896 = 0xbf00
  EXPECT_EQ(reg(0x35), 0xbf);
  EXPECT_EQ(reg(0x5b), 0x00);  // 1.5 GiB / 64 KiB = 24576 = 0x006000
  EXPECT_EQ(reg(0x5c), 0x60);
  EXPECT_EQ(reg(0x5d), 0x00);
}

TEST_F(Mc146818RtcTest, WideAndOutOfRangeAccessesAreSplitAndCounted) {
  // outw 0x70: the index from the low byte, the data from the high byte.
  const std::array<std::uint8_t, 2> index_and_data = {0x40, 0x77};
  rtc_->write(0, index_and_data);
  EXPECT_EQ(reg(0x40), 0x77);
  std::array<std::uint8_t, 4> wide{};
  rtc_->read(1, wide);
  EXPECT_EQ(wide[1], 0xff);
  EXPECT_EQ(rtc_->stats().bad_accesses, 2u);
}

// Random register traffic with random time steps must never crash or hang, and the registers
// that cannot change must not.
TEST_F(Mc146818RtcTest, RandomAccessSweepNeverCrashes) {
  ack_interrupts();
  std::mt19937 rng(1795955696);  // fixed seed: reproducible
  constexpr std::array<std::size_t, 3> kWidths = {1, 2, 4};
  for (int i = 0; i < 100'000; ++i) {
    const auto offset = static_cast<std::uint16_t>(rng() % 3);
    const std::size_t width = kWidths[rng() % kWidths.size()];
    std::array<std::uint8_t, 4> data{};
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    if (offset == 0 && rng() % 2 == 0) data[0] = static_cast<std::uint8_t>(rng() % 0x10);
    switch (rng() % 4) {
      case 0:
        rtc_->read(offset, std::span<std::uint8_t>(data.data(), width));
        break;
      case 1:
        advance(Nanos{rng() % 3'000'000});
        break;
      default:
        rtc_->write(offset, std::span<const std::uint8_t>(data.data(), width));
        break;
    }
  }
  advance(2s);
  EXPECT_EQ(reg(kRegD), 0x80);
  EXPECT_EQ(rtc_->stats().bad_accesses > 0, true);
}

// The run report's "rtc" object: the keys and types --stats always had (invalid_time_sets is
// not one of them).
TEST_F(Mc146818RtcTest, ReportsItsCountersUnderRtc) {
  reg(kRegC);
  testing::MapReportWriter report;
  rtc_->report(report);
  EXPECT_EQ(rtc_->report_key(), "rtc");
  EXPECT_EQ(report.typed_paths(),
            (std::set<std::string>{"alarm_irqs number", "bad_accesses number",
                                   "periodic_irqs number", "reg_c_reads number",
                                   "timer_arms number", "update_irqs number"}));
  EXPECT_EQ(report.counter("reg_c_reads"), 1u);
}

}  // namespace
}  // namespace minivmm::devices
