// The ACPI PM block (devices/pc/acpi_pm.h) on a fake clock: the PM timer's rate and wrap,
// TMR_STS and its SCI, PM1 status write-1-to-clear, SLP_EN sequences, hostile accesses, and the
// snapshot record.
#include "devices/pc/acpi_pm.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "tests/support/fake_clock.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/map_report_writer.h"
#include "tests/support/time_driver.h"
#include "timers/timer_list.h"

namespace minivmm::devices {
namespace {

using namespace std::chrono_literals;
using timers::Nanos;

constexpr std::uint16_t kSts = 0, kEn = 2, kCnt = 4, kTmr = 8;

class AcpiPmTest : public ::testing::Test {
 protected:
  AcpiPmTest() { make(); }

  void make() {
    pm_.reset();
    pm_ = std::make_unique<AcpiPm>(list_, sci_, AcpiPm::Callbacks{[this] { ++power_offs_; },
                                                                  [this] { ++suspends_; }});
  }

  std::uint32_t in(std::uint16_t port, std::size_t width) {
    std::array<std::uint8_t, 4> b{};
    pm_->read(port, std::span(b.data(), width));
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < width; ++i) v |= std::uint32_t{b[i]} << (8 * i);
    return v;
  }
  void out(std::uint16_t port, std::uint32_t value, std::size_t width) {
    std::array<std::uint8_t, 4> b{};
    for (std::size_t i = 0; i < width; ++i) b[i] = static_cast<std::uint8_t>(value >> (8 * i));
    pm_->write(port, std::span<const std::uint8_t>(b.data(), width));
  }
  std::uint32_t tmr() { return in(kTmr, 4); }
  void advance(Nanos d) { testing::advance(clock_, list_, d); }
  std::uint64_t counter(const char* key) {
    testing::MapReportWriter w;
    pm_->report(w);
    return w.counter(key);
  }

  testing::FakeClock clock_{Nanos{0}};
  timers::TimerList list_{timers::ClockType::kVm, clock_};
  testing::FakeIrqLine sci_;
  int power_offs_ = 0;
  int suspends_ = 0;
  std::unique_ptr<AcpiPm> pm_;
};

TEST_F(AcpiPmTest, TheTimerCountsAt3579545HzFromVmClock) {
  EXPECT_EQ(tmr(), 0u);
  clock_.set(1s);
  EXPECT_EQ(tmr(), 3'579'545u);
  clock_.set(1s + 1000ns);  // 3.58 ticks per microsecond
  EXPECT_EQ(tmr(), 3'579'548u);
  clock_.set(Nanos{279});  // one tick is 279.37 ns
  EXPECT_EQ(tmr(), 0u);
  clock_.set(Nanos{280});
  EXPECT_EQ(tmr(), 1u);
  EXPECT_EQ(counter("timer_reads"), 5u);
}

TEST_F(AcpiPmTest, TheTimerIs24BitsAndWrapsEvery4Point69Seconds) {
  // 2^24 ticks = 4.686993 s.
  const Nanos wrap{(std::int64_t{1} << 24) * 1'000'000'000 / 3'579'545 + 1};
  clock_.set(wrap - 1us);
  EXPECT_GT(tmr(), 0xff0000u);
  clock_.set(wrap);
  EXPECT_LT(tmr(), 4u);
  EXPECT_EQ(in(kTmr + 3, 1), 0u);  // the top byte is always 0
  clock_.set(1000s);
  EXPECT_EQ(tmr(), static_cast<std::uint32_t>(3'579'545'000ull & 0xffffff));
}

TEST_F(AcpiPmTest, TheTimerIsReadableByteByByteAndIgnoresWrites) {
  clock_.set(3s);
  const std::uint32_t whole = tmr();
  std::uint32_t bytes = 0;
  for (std::uint16_t i = 0; i < 4; ++i) bytes |= in(static_cast<std::uint16_t>(kTmr + i), 1) << (8 * i);
  EXPECT_EQ(bytes, whole);
  out(kTmr, 0, 4);
  EXPECT_EQ(tmr(), whole);
  EXPECT_EQ(counter("bad_accesses"), 4u);
}

TEST_F(AcpiPmTest, TheTimerStopsWithVmClock) {
  // Nothing but vm_clock drives it: the same reading gives the same count.
  clock_.set(2s);
  const std::uint32_t a = tmr();
  EXPECT_EQ(tmr(), a);
  EXPECT_FALSE(list_.next_deadline().has_value());  // no timer without TMR_EN
}

TEST_F(AcpiPmTest, TmrStsRisesAtEachBit23FlipAndIsFoundWithoutAnInterrupt) {
  const Nanos flip{(std::int64_t{1} << 23) * 1'000'000'000 / 3'579'545 + 1};  // 2.343 s
  clock_.set(flip - 1ms);
  EXPECT_EQ(in(kSts, 2) & AcpiPm::kTmrSts, 0u);
  clock_.set(flip);
  EXPECT_EQ(in(kSts, 2) & AcpiPm::kTmrSts, AcpiPm::kTmrSts);
  EXPECT_FALSE(sci_.level());  // TMR_EN off: a flag, no SCI
  out(kSts, AcpiPm::kTmrSts, 2);
  EXPECT_EQ(in(kSts, 2) & AcpiPm::kTmrSts, 0u);
  clock_.set(2 * flip);
  EXPECT_EQ(in(kSts, 2) & AcpiPm::kTmrSts, AcpiPm::kTmrSts);
  EXPECT_EQ(counter("timer_overflows"), 2u);
}

TEST_F(AcpiPmTest, TmrEnRaisesTheSciAtTheFlipAndClearingLowersIt) {
  out(kEn, AcpiPm::kTmrEn, 2);
  ASSERT_TRUE(list_.next_deadline().has_value());
  const Nanos flip{(std::int64_t{1} << 23) * 1'000'000'000 / 3'579'545 + 1};
  EXPECT_EQ(*list_.next_deadline(), flip);
  advance(flip - 1ns);
  EXPECT_FALSE(sci_.level());
  advance(1ns);
  EXPECT_TRUE(sci_.level());
  EXPECT_EQ(counter("sci_raised"), 1u);
  // The level stays until the status is cleared, however many flips pass.
  advance(10s);
  EXPECT_TRUE(sci_.level());
  EXPECT_EQ(sci_.rising_edges(), 1);
  out(kSts, AcpiPm::kTmrSts, 2);
  EXPECT_FALSE(sci_.level());
  // Disabling stops the timer; the status still rises, silently.
  out(kEn, 0, 2);
  EXPECT_FALSE(list_.next_deadline().has_value());
  advance(3s);
  EXPECT_FALSE(sci_.level());
  EXPECT_EQ(in(kSts, 2) & AcpiPm::kTmrSts, AcpiPm::kTmrSts);
  // Enabling with the status already set raises the SCI at once.
  out(kEn, AcpiPm::kTmrEn, 2);
  EXPECT_TRUE(sci_.level());
  EXPECT_EQ(counter("sci_raised"), 2u);
}

TEST_F(AcpiPmTest, StatusIsWriteOneToClearAndEnableIsPlain) {
  pm_->wake(AcpiPm::WakeReason::kRtc);
  EXPECT_EQ(in(kSts, 2), static_cast<std::uint32_t>(AcpiPm::kWakSts | AcpiPm::kRtcSts));
  out(kSts, 0, 2);  // zeros clear nothing
  EXPECT_EQ(in(kSts, 2), static_cast<std::uint32_t>(AcpiPm::kWakSts | AcpiPm::kRtcSts));
  out(kSts + 1, AcpiPm::kWakSts >> 8, 1);  // the high byte alone
  EXPECT_EQ(in(kSts, 2), AcpiPm::kRtcSts);
  out(kEn, 0x1234, 2);
  EXPECT_EQ(in(kEn, 2), 0x1234u);
  out(kEn + 1, 0xab, 1);
  EXPECT_EQ(in(kEn, 2), 0xab34u);
  // RTC_EN with RTC_STS set: the SCI.
  EXPECT_TRUE(pm_->rtc_wake_enabled() == false);
  out(kEn, AcpiPm::kRtcEn, 2);
  EXPECT_TRUE(pm_->rtc_wake_enabled());
  EXPECT_TRUE(sci_.level());
  out(kSts, 0xffff, 2);
  EXPECT_EQ(in(kSts, 2), 0u);
  EXPECT_FALSE(sci_.level());
  // A dword at 0 writes status and enable at once, as the chipset's byte enables do.
  pm_->wake(AcpiPm::WakeReason::kOther);
  out(kSts, 0x0001'8000, 4);
  EXPECT_EQ(in(kSts, 4), 0x0001'0000u);
}

TEST_F(AcpiPmTest, SciEnReadsOneAndStrobesReadZero) {
  EXPECT_EQ(in(kCnt, 2), AcpiPm::kSciEn);
  out(kCnt, 0, 2);  // SCI_EN cannot be turned off: no SMI_CMD, always ACPI mode
  EXPECT_EQ(in(kCnt, 2), AcpiPm::kSciEn);
  out(kCnt, AcpiPm::kGblRls | (5u << AcpiPm::kSlpTypShift), 2);
  EXPECT_EQ(in(kCnt, 2), AcpiPm::kSciEn | (5u << AcpiPm::kSlpTypShift));
}

TEST_F(AcpiPmTest, SlpEnWithS5PowersOffAndWithS3Suspends) {
  out(kCnt, AcpiPm::kSlpEn | (AcpiPm::kSlpTypS5 << AcpiPm::kSlpTypShift), 2);
  EXPECT_EQ(power_offs_, 1);
  EXPECT_EQ(suspends_, 0);
  out(kCnt, AcpiPm::kSlpEn | (AcpiPm::kSlpTypS3 << AcpiPm::kSlpTypShift), 2);
  EXPECT_EQ(suspends_, 1);
  EXPECT_EQ(in(kCnt, 2) & AcpiPm::kSlpEn, 0u);  // write-only
  EXPECT_EQ(counter("power_offs"), 1u);
  EXPECT_EQ(counter("suspends"), 1u);
}

TEST_F(AcpiPmTest, TheTypeIsWrittenFirstThenSlpEnAsLinuxDoes) {
  // ACPICA's sequence: SLP_TYP alone, then SLP_TYP | SLP_EN.
  const std::uint16_t typ = AcpiPm::kSlpTypS3 << AcpiPm::kSlpTypShift;
  out(kCnt, AcpiPm::kSciEn | typ, 2);
  EXPECT_EQ(suspends_, 0);
  out(kCnt, AcpiPm::kSciEn | typ | AcpiPm::kSlpEn, 2);
  EXPECT_EQ(suspends_, 1);
  // kvm-unit-tests' s3 writes 0x2400 with one outw.
  out(kCnt, 0x2400, 2);
  EXPECT_EQ(suspends_, 2);
  // SLP_EN in the high byte alone uses the type already there.
  out(kCnt + 1, AcpiPm::kSlpEn >> 8 | typ >> 8, 1);
  EXPECT_EQ(suspends_, 3);
}

TEST_F(AcpiPmTest, OtherSleepTypesAreCountedAndIgnored) {
  for (std::uint16_t typ = 2; typ < 8; ++typ) {
    out(kCnt, static_cast<std::uint32_t>(AcpiPm::kSlpEn | (typ << AcpiPm::kSlpTypShift)), 2);
  }
  EXPECT_EQ(power_offs_, 0);
  EXPECT_EQ(suspends_, 0);
  EXPECT_EQ(counter("unknown_sleeps"), 6u);
}

TEST_F(AcpiPmTest, WakeSetsWakStsAndCounts) {
  pm_->wake(AcpiPm::WakeReason::kOther);
  EXPECT_EQ(in(kSts, 2), AcpiPm::kWakSts);
  EXPECT_FALSE(sci_.level());  // WAK_STS raises no SCI
  EXPECT_EQ(counter("wakes"), 1u);
}

TEST_F(AcpiPmTest, HolesReadAllOnesAndIgnoreWrites) {
  EXPECT_EQ(in(6, 2), 0xffffu);
  out(6, 0xffff, 2);
  EXPECT_EQ(in(12, 4), 0xffffffffu);
  EXPECT_EQ(counter("bad_accesses"), 8u);
  // A dword at 4 is PM1_CNT and the hole.
  EXPECT_EQ(in(4, 4), 0xffff'0000u | AcpiPm::kSciEn);
}

TEST_F(AcpiPmTest, HostileAccessesOfEveryWidthAndValueNeverBreakIt) {
  std::mt19937 rng(36);
  for (int i = 0; i < 20000; ++i) {
    const std::size_t width = std::size_t{1} << (rng() % 3);
    const auto port = static_cast<std::uint16_t>(rng() % 16);
    if (rng() % 2) {
      out(port, static_cast<std::uint32_t>(rng()), width);
    } else {
      (void)in(port, width);
    }
    if (rng() % 64 == 0) advance(Nanos{static_cast<std::int64_t>(rng() % 3'000'000'000u)});
    // The invariants: SCI_EN on, SLP_EN never stored, the SCI exactly the enabled causes.
    const std::uint32_t cnt = in(kCnt, 2);
    ASSERT_EQ(cnt & AcpiPm::kSciEn, AcpiPm::kSciEn);
    ASSERT_EQ(cnt & AcpiPm::kSlpEn, 0u);
    ASSERT_EQ(sci_.level(), (in(kSts, 2) & in(kEn, 2) & AcpiPm::kSciCauses) != 0);
    ASSERT_LT(tmr(), 1u << 24);
  }
  EXPECT_GT(suspends_ + power_offs_, 0);
}

TEST_F(AcpiPmTest, TheStateRoundTripsAndTheTimerGoesOn) {
  clock_.set(5s);
  out(kEn, AcpiPm::kTmrEn | AcpiPm::kRtcEn, 2);
  out(kCnt, AcpiPm::kSlpTypS3 << AcpiPm::kSlpTypShift, 2);
  out(kSts, AcpiPm::kTmrSts, 2);  // the flips at 2.3 and 4.7 s
  pm_->wake(AcpiPm::WakeReason::kOther);
  const std::uint32_t count = tmr();
  StateWriter w;
  pm_->save_state(w);
  const auto deadline = list_.next_deadline();

  make();  // a fresh device, as a restore makes them
  StateReader r(w.data(), "acpi_pm");
  pm_->load_state(r);
  EXPECT_EQ(tmr(), count);
  EXPECT_EQ(in(kEn, 2), static_cast<std::uint32_t>(AcpiPm::kTmrEn | AcpiPm::kRtcEn));
  EXPECT_EQ(in(kSts, 2), AcpiPm::kWakSts);
  EXPECT_EQ(in(kCnt, 2), AcpiPm::kSciEn | (AcpiPm::kSlpTypS3 << AcpiPm::kSlpTypShift));
  EXPECT_EQ(list_.next_deadline(), deadline);
  EXPECT_EQ(counter("wakes"), 1u);
  advance(3s);
  EXPECT_TRUE(sci_.level());
}

TEST_F(AcpiPmTest, HostileRecordsAreRefused) {
  clock_.set(5s);
  StateWriter good;
  pm_->save_state(good);
  const auto refused = [&](std::vector<std::uint8_t> rec) {
    make();
    StateReader r(rec, "acpi_pm");
    EXPECT_THROW(pm_->load_state(r), StateError);
  };
  auto rec = good.data();
  // Layout: version(1) sts(2) en(2) cnt(2) next_flip(8) sci(1) counters(64).
  ASSERT_EQ(rec.size(), 1u + 2 + 2 + 2 + 8 + 1 + 64);
  auto with = [&](std::size_t at, std::vector<std::uint8_t> bytes) {
    auto r = rec;
    std::copy(bytes.begin(), bytes.end(), r.begin() + static_cast<std::ptrdiff_t>(at));
    return r;
  };
  refused(with(0, {2}));                   // another layout
  refused(with(1, {0x02, 0x00}));          // a status bit it never sets
  refused(with(5, {0x00, 0x00}));          // SCI_EN off
  refused(with(5, {0x01, 0x20}));          // SLP_EN stored
  refused(with(7, {0, 0, 0, 0, 0, 0, 0, 0}));           // no flip
  refused(with(7, {1, 0, 0, 0, 0, 0, 0, 0}));           // off the grid
  refused(with(7, {0, 0, 0, 0, 0, 0, 0, 0x10}));        // far in the future
  refused(with(15, {1}));                  // SCI up with nothing enabled
  refused(with(15, {2}));                  // not a flag
  auto shorter = rec;
  shorter.pop_back();
  refused(shorter);
  auto longer = rec;
  longer.push_back(0);
  refused(longer);
  // The good one still loads.
  make();
  StateReader r(rec, "acpi_pm");
  EXPECT_NO_THROW(pm_->load_state(r));
}

}  // namespace
}  // namespace minivmm::devices
