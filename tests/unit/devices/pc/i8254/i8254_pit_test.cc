// Register-level tests of the 8254 PIT and port 0x61, driven by a fake clock: no sleeping, no
// real time. Counter reads are checked at exact tick instants (pit_ticks_duration(k) after the
// count was written is the first nanosecond at which k ticks have elapsed).
#include "devices/pc/i8254/i8254_pit.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "devices/pc/i8254/i8254_speaker_port.h"
#include "tests/support/fake_clock.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_pulse_train.h"
#include "tests/support/map_report_writer.h"
#include "tests/support/time_driver.h"
#include "timers/timer_list.h"
#include "timers/vm_clock.h"

namespace {

using namespace std::chrono_literals;
using minivmm::devices::I8254Pit;
using minivmm::devices::I8254SpeakerPort;
using minivmm::devices::LostTickPolicy;
using minivmm::devices::pit_cycle_duration;
using minivmm::devices::pit_ticks_duration;
using minivmm::devices::pit_ticks_in;
using minivmm::timers::Nanos;
namespace dev = minivmm::devices;
namespace mt = minivmm::testing;
using mt::FakePulseTrain;

constexpr std::uint16_t kControlPort = 0x43;

constexpr std::uint8_t control_word(int channel, std::uint8_t access, int mode, bool bcd = false) {
  return static_cast<std::uint8_t>((channel << 6) | (access << 4) | (mode << 1) | (bcd ? 1 : 0));
}

// The PC's ports, where the board puts the PIT and port B (vmm/machine/pc_board.cc).
constexpr std::uint16_t kPitPorts = 0x40;
constexpr std::uint16_t kPortB = 0x61;

// count 1193 is the classic 1 kHz divisor (1193182 / 1000).
constexpr std::uint16_t kOneKhz = 1193;

struct PitRig {
  explicit PitRig(LostTickPolicy policy = LostTickPolicy::kDelay,
                  dev::PulseTrain* train = nullptr, bool model_controller = false)
      : irq0(model_controller), pit(list, irq0, policy, train) {}

  void out(std::uint16_t port, std::uint8_t value) {
    if (port == kPortB) {
      port61.write(0, std::span<const std::uint8_t>(&value, 1));
    } else {
      pit.write(static_cast<std::uint16_t>(port - kPitPorts),
                std::span<const std::uint8_t>(&value, 1));
    }
  }
  std::uint8_t in(std::uint16_t port) {
    std::uint8_t value = 0;
    if (port == kPortB) {
      port61.read(0, std::span<std::uint8_t>(&value, 1));
    } else {
      pit.read(static_cast<std::uint16_t>(port - kPitPorts),
               std::span<std::uint8_t>(&value, 1));
    }
    return value;
  }
  // Control word (word access), then LSB and MSB: how every OS programs a counter.
  void program(int channel, int mode, std::uint16_t count, bool bcd = false) {
    out(kControlPort, control_word(channel, dev::kPitAccessWord, mode, bcd));
    write_count(channel, count);
  }
  void write_count(int channel, std::uint16_t count) {
    out(port_of(channel), static_cast<std::uint8_t>(count & 0xff));
    out(port_of(channel), static_cast<std::uint8_t>(count >> 8));
  }
  std::uint16_t latched_count(int channel) {
    out(kControlPort, control_word(channel, dev::kPitAccessLatch, 0));
    const std::uint8_t lo = in(port_of(channel));
    const std::uint8_t hi = in(port_of(channel));
    return static_cast<std::uint16_t>(lo | (hi << 8));
  }
  std::uint8_t status(int channel) {
    out(kControlPort, static_cast<std::uint8_t>(0xc0 | dev::kPitReadBackNoCount |
                                                (dev::kPitReadBackCounter0 << channel)));
    return in(port_of(channel));
  }
  bool out_pin(int channel) { return (status(channel) & dev::kPitStatusOutput) != 0; }
  static std::uint16_t port_of(int channel) { return static_cast<std::uint16_t>(0x40 + channel); }

  void advance(Nanos by) { mt::advance(clock, list, by); }
  void advance_to(Nanos t) { advance(t - clock.now()); }
  // The first instant at which `ticks` ticks have passed since `start`.
  static Nanos at_tick(Nanos start, std::uint64_t ticks) {
    return start + pit_ticks_duration(ticks);
  }

  mt::FakeClock clock;
  minivmm::timers::TimerList list{minivmm::timers::ClockType::kVm, clock};
  mt::FakeIrqLine irq0;
  I8254Pit pit;
  I8254SpeakerPort port61{pit};
  const Nanos t0 = clock.now();
};

// --- Tick arithmetic ------------------------------------------------------------------------

TEST(I8254PitTest, TickConversionIsExactForLongRuntimes) {
  // 30 days of vm_clock: 2.6e15 ns would overflow 64 bits if multiplied by 1193182 directly.
  const Nanos thirty_days = 30 * 24h;
  EXPECT_EQ(pit_ticks_in(thirty_days), 30ull * 86400 * 1'193'182);
  for (std::uint64_t ticks : {1ull, 2ull, 1193ull, 65536ull, 1'193'182ull, 3'000'000'000'000ull}) {
    const Nanos d = pit_ticks_duration(ticks);
    EXPECT_EQ(pit_ticks_in(d), ticks);
    EXPECT_EQ(pit_ticks_in(d - 1ns), ticks - 1);
  }
  EXPECT_EQ(pit_ticks_in(Nanos{-5}), 0u);
}

// --- Mode 2: rate generator ------------------------------------------------------------------

TEST(I8254PitTest, Mode2PulsesIrq0OncePerPeriod) {
  PitRig rig;
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  rig.advance(1ms);  // the period is 999.847 us
  EXPECT_EQ(rig.irq0.pulses(), 1);
  rig.advance(9ms);
  EXPECT_EQ(rig.irq0.pulses(), 10);
  EXPECT_EQ(rig.pit.stats().ticks_injected, 10u);
  EXPECT_EQ(rig.pit.stats().ticks_late, 0u);
}

TEST(I8254PitTest, Mode2CounterReadHalfwayThroughPeriodIsHalfTheCount) {
  PitRig rig;
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  rig.advance(500us);  // 596.591 ticks
  EXPECT_EQ(rig.latched_count(0), kOneKhz - 596);
}

TEST(I8254PitTest, Mode2CounterReloadsAndOutputDipsForOneTick) {
  PitRig rig;
  rig.program(1, dev::kPitModeRateGenerator, 10);
  rig.advance_to(PitRig::at_tick(rig.t0, 8));
  EXPECT_EQ(rig.latched_count(1), 2);
  EXPECT_TRUE(rig.out_pin(1));
  rig.advance_to(PitRig::at_tick(rig.t0, 9));  // CE = 1: OUT low for this tick
  EXPECT_EQ(rig.latched_count(1), 1);
  EXPECT_FALSE(rig.out_pin(1));
  rig.advance_to(rig.t0 + pit_cycle_duration(10));  // reloaded, OUT high again
  EXPECT_EQ(rig.latched_count(1), 10);
  EXPECT_TRUE(rig.out_pin(1));
  EXPECT_EQ(rig.irq0.pulses(), 0);  // counter 1 is not wired to IRQ0
}

TEST(I8254PitTest, PeriodicModeArmsOnePeriodicTimerOnce) {
  PitRig rig;
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  const Nanos period = pit_cycle_duration(kOneKhz);
  EXPECT_EQ(period, 999'847ns);
  EXPECT_EQ(rig.list.head_period(), period);
  EXPECT_EQ(rig.list.next_deadline(), rig.t0 + period);
  EXPECT_EQ(rig.pit.stats().timer_arms, 1u);

  rig.advance(100 * period);
  EXPECT_EQ(rig.irq0.pulses(), 100);
  // The list advanced the deadline on its fixed grid; the PIT never re-armed.
  EXPECT_EQ(rig.list.next_deadline(), rig.t0 + 101 * period);
  EXPECT_EQ(rig.list.head_period(), period);
  EXPECT_EQ(rig.pit.stats().timer_arms, 1u);
}

TEST(I8254PitTest, OnTimeTicksUseThePlainPulse) {
  PitRig rig;
  rig.irq0.coalesce_next(5);  // would only bite a checked pulse
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  rig.advance(5 * pit_cycle_duration(kOneKhz));
  EXPECT_EQ(rig.irq0.pulses(), 5);
  EXPECT_EQ(rig.irq0.coalesced(), 0);
}

TEST(I8254PitTest, CountZeroMeans65536) {
  PitRig rig;
  rig.program(0, dev::kPitModeRateGenerator, 0);
  EXPECT_EQ(rig.list.head_period(), pit_cycle_duration(65536));
  rig.advance_to(PitRig::at_tick(rig.t0, 1));
  EXPECT_EQ(rig.latched_count(0), 0xffff);
  rig.advance(1s);  // 18.2 Hz
  EXPECT_EQ(rig.irq0.pulses(), 18);
}

TEST(I8254PitTest, ReprogrammingMidPeriodRestartsTheCycle) {
  PitRig rig;
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  rig.advance(500us);
  const Nanos reprogrammed_at = rig.clock.now();
  rig.program(0, dev::kPitModeRateGenerator, 2 * kOneKhz);
  EXPECT_EQ(rig.list.next_deadline(), reprogrammed_at + pit_cycle_duration(2 * kOneKhz));
  EXPECT_EQ(rig.list.head_period(), pit_cycle_duration(2 * kOneKhz));

  rig.advance(1ms);  // past the old deadline at 1 ms: cancelled
  EXPECT_EQ(rig.irq0.pulses(), 0);
  rig.advance_to(reprogrammed_at + pit_cycle_duration(2 * kOneKhz));
  EXPECT_EQ(rig.irq0.pulses(), 1);
  EXPECT_EQ(rig.pit.stats().reprogrammings, 4u);  // two control words, two counts
}

TEST(I8254PitTest, Mode2CountRewriteTakesEffectAtEndOfCurrentCycle) {
  PitRig rig;
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  rig.advance(250us);
  rig.write_count(0, 2 * kOneKhz);  // no control word: the current cycle finishes first
  EXPECT_NE(rig.status(0) & dev::kPitStatusNullCount, 0);

  const Nanos old_end = rig.t0 + pit_cycle_duration(kOneKhz);
  rig.advance_to(old_end - 1ns);
  EXPECT_EQ(rig.irq0.pulses(), 0);
  rig.advance_to(old_end);
  EXPECT_EQ(rig.irq0.pulses(), 1);
  EXPECT_EQ(rig.status(0) & dev::kPitStatusNullCount, 0);
  EXPECT_EQ(rig.latched_count(0), 2 * kOneKhz);
  EXPECT_EQ(rig.list.head_period(), pit_cycle_duration(2 * kOneKhz));

  rig.advance_to(old_end + pit_cycle_duration(2 * kOneKhz) - 1ns);
  EXPECT_EQ(rig.irq0.pulses(), 1);
  rig.advance(1ns);
  EXPECT_EQ(rig.irq0.pulses(), 2);
}

// --- Mode 3: square wave ---------------------------------------------------------------------

TEST(I8254PitTest, Mode3SquareWaveRisesOncePerPeriod) {
  PitRig rig;
  rig.program(0, dev::kPitModeSquareWave, kOneKhz);
  rig.advance(10ms);
  EXPECT_EQ(rig.irq0.pulses(), 10);
  EXPECT_EQ(rig.list.head_period(), pit_cycle_duration(kOneKhz));
}

TEST(I8254PitTest, Mode3EvenCountDecrementsByTwoInEachHalf) {
  PitRig rig;
  rig.program(1, dev::kPitModeSquareWave, 1000);
  rig.advance_to(PitRig::at_tick(rig.t0, 10));
  EXPECT_EQ(rig.latched_count(1), 980);
  EXPECT_TRUE(rig.out_pin(1));
  rig.advance_to(PitRig::at_tick(rig.t0, 500));  // second half: reloaded, OUT low
  EXPECT_EQ(rig.latched_count(1), 1000);
  EXPECT_FALSE(rig.out_pin(1));
  rig.advance_to(PitRig::at_tick(rig.t0, 510));
  EXPECT_EQ(rig.latched_count(1), 980);
}

TEST(I8254PitTest, Mode3OddCountIsHighOneTickLongerThanLow) {
  // Count 5: high for 3 ticks (5, 4, 2), low for 2 (5, 2), per the data sheet's odd-count rule.
  PitRig rig;
  rig.program(1, dev::kPitModeSquareWave, 5);
  const std::uint16_t counts[] = {5, 4, 2, 5, 2};
  const bool outs[] = {true, true, true, false, false};
  for (int tick = 0; tick < 5; ++tick) {
    rig.advance_to(PitRig::at_tick(rig.t0, static_cast<std::uint64_t>(tick)));
    EXPECT_EQ(rig.latched_count(1), counts[tick]) << "tick " << tick;
    EXPECT_EQ(rig.out_pin(1), outs[tick]) << "tick " << tick;
  }
}

// --- Mode 0: interrupt on terminal count -----------------------------------------------------

TEST(I8254PitTest, Mode0RaisesIrq0OnceAtTerminalCount) {
  PitRig rig;
  rig.program(0, dev::kPitModeInterruptOnTerminalCount, 100);
  EXPECT_FALSE(rig.out_pin(0));
  EXPECT_EQ(rig.list.head_period(), 0ns);  // one-shot
  rig.advance_to(PitRig::at_tick(rig.t0, 100) - 1ns);
  EXPECT_EQ(rig.irq0.pulses(), 0);
  rig.advance(1ns);
  EXPECT_EQ(rig.irq0.pulses(), 1);
  EXPECT_TRUE(rig.out_pin(0));
  rig.advance(1s);
  EXPECT_EQ(rig.irq0.pulses(), 1);
  EXPECT_FALSE(rig.list.next_deadline().has_value());
  // Past terminal count the counter keeps counting down through 0xffff.
  rig.advance_to(PitRig::at_tick(rig.t0, 102));
  EXPECT_EQ(rig.latched_count(0), 0xfffe);
}

TEST(I8254PitTest, Mode0NewCountRearmsForAnotherEdge) {
  // Linux's PIT clockevent in one-shot mode: each count written is one interrupt.
  PitRig rig;
  rig.program(0, dev::kPitModeInterruptOnTerminalCount, 100);
  rig.advance(1ms);
  EXPECT_EQ(rig.irq0.pulses(), 1);
  const Nanos rewritten_at = rig.clock.now();
  rig.write_count(0, 200);
  EXPECT_FALSE(rig.out_pin(0));
  rig.advance_to(PitRig::at_tick(rewritten_at, 200));
  EXPECT_EQ(rig.irq0.pulses(), 2);
}

TEST(I8254PitTest, Mode0FirstByteOfWordStopsCountingUntilSecondByte) {
  PitRig rig;
  rig.program(0, dev::kPitModeInterruptOnTerminalCount, 1000);
  rig.advance_to(PitRig::at_tick(rig.t0, 400));
  rig.out(0x40, 0xd0);  // LSB of 2000 (0x07d0)
  EXPECT_EQ(rig.latched_count(0), 600);
  EXPECT_FALSE(rig.list.next_deadline().has_value());
  rig.advance(2ms);  // well past the old terminal count
  EXPECT_EQ(rig.latched_count(0), 600);
  EXPECT_EQ(rig.irq0.pulses(), 0);
  EXPECT_FALSE(rig.out_pin(0));

  const Nanos msb_at = rig.clock.now();
  rig.out(0x40, 0x07);
  rig.advance_to(PitRig::at_tick(msb_at, 2000) - 1ns);
  EXPECT_EQ(rig.irq0.pulses(), 0);
  rig.advance(1ns);
  EXPECT_EQ(rig.irq0.pulses(), 1);
}

// --- Modes 1, 4, 5 ---------------------------------------------------------------------------

TEST(I8254PitTest, Mode4StrobesIrq0OneTickAfterTerminalCount) {
  PitRig rig;
  rig.program(0, dev::kPitModeSoftwareTriggeredStrobe, 100);
  EXPECT_TRUE(rig.out_pin(0));
  rig.advance_to(PitRig::at_tick(rig.t0, 100));  // terminal count: OUT low for one tick
  EXPECT_FALSE(rig.out_pin(0));
  EXPECT_EQ(rig.irq0.pulses(), 0);
  rig.advance_to(PitRig::at_tick(rig.t0, 101));  // OUT rises: the strobe's edge
  EXPECT_EQ(rig.irq0.pulses(), 1);
  EXPECT_TRUE(rig.out_pin(0));
  rig.advance_to(PitRig::at_tick(rig.t0, 102));
  EXPECT_EQ(rig.latched_count(0), 0xfffe);
  rig.advance(1s);
  EXPECT_EQ(rig.irq0.pulses(), 1);
}

TEST(I8254PitTest, GateTriggeredModesNeverStartOnChannel0) {
  // Counter 0's GATE is tied high on a PC: modes 1 and 5 wait for a rising edge forever.
  for (int mode :
       {dev::kPitModeHardwareRetriggerableOneShot, dev::kPitModeHardwareTriggeredStrobe}) {
    PitRig rig;
    rig.program(0, mode, 100);
    EXPECT_FALSE(rig.list.next_deadline().has_value());
    rig.advance(1s);
    EXPECT_EQ(rig.irq0.pulses(), 0);
    EXPECT_TRUE(rig.out_pin(0));
    EXPECT_NE(rig.status(0) & dev::kPitStatusNullCount, 0);  // the count never loaded
  }
}

TEST(I8254PitTest, Mode1OneShotOnChannel2IsTriggeredByPort61Gate) {
  PitRig rig;
  rig.program(2, dev::kPitModeHardwareRetriggerableOneShot, 100);
  EXPECT_NE(rig.in(0x61) & I8254SpeakerPort::kNmiScTmr2OutSts, 0);
  const Nanos trigger_at = rig.clock.now() + 1ms;
  rig.advance_to(trigger_at);
  rig.out(0x61, I8254SpeakerPort::kNmiScTimCnt2En);  // GATE2 rising edge
  EXPECT_EQ(rig.in(0x61) & I8254SpeakerPort::kNmiScTmr2OutSts, 0);
  rig.advance_to(PitRig::at_tick(trigger_at, 99));
  EXPECT_EQ(rig.latched_count(2), 1);
  EXPECT_EQ(rig.in(0x61) & I8254SpeakerPort::kNmiScTmr2OutSts, 0);
  rig.advance_to(PitRig::at_tick(trigger_at, 100));
  EXPECT_NE(rig.in(0x61) & I8254SpeakerPort::kNmiScTmr2OutSts, 0);
  EXPECT_EQ(rig.irq0.pulses(), 0);
}

TEST(I8254PitTest, Mode5StrobeOnChannel2StartsAtGateRisingEdge) {
  PitRig rig;
  rig.program(2, dev::kPitModeHardwareTriggeredStrobe, 50);
  rig.advance(1ms);
  EXPECT_TRUE(rig.out_pin(2));
  const Nanos trigger_at = rig.clock.now();
  rig.out(0x61, I8254SpeakerPort::kNmiScTimCnt2En);
  rig.advance_to(PitRig::at_tick(trigger_at, 50));
  EXPECT_FALSE(rig.out_pin(2));
  rig.advance_to(PitRig::at_tick(trigger_at, 51));
  EXPECT_TRUE(rig.out_pin(2));
}

// --- Channel 2 and port 0x61 -----------------------------------------------------------------

TEST(I8254PitTest, Channel2OutIsVisibleThroughPort61OnlyWhileGateCounts) {
  // Linux's pit_calibrate_tsc(): gate on, speaker off, mode 0, poll bit 5 of port 0x61.
  PitRig rig;
  rig.program(2, dev::kPitModeInterruptOnTerminalCount, 11932);  // 10 ms
  rig.advance(20ms);  // GATE2 is low after reset: nothing counts
  EXPECT_EQ(rig.in(0x61) & I8254SpeakerPort::kNmiScTmr2OutSts, 0);
  EXPECT_EQ(rig.latched_count(2), 11932);

  const Nanos gate_at = rig.clock.now();
  rig.out(0x61, I8254SpeakerPort::kNmiScTimCnt2En);
  EXPECT_EQ(rig.in(0x61) & 0x0f, I8254SpeakerPort::kNmiScTimCnt2En);
  rig.advance_to(PitRig::at_tick(gate_at, 11931));
  EXPECT_EQ(rig.in(0x61) & I8254SpeakerPort::kNmiScTmr2OutSts, 0);
  rig.advance_to(PitRig::at_tick(gate_at, 11932));
  EXPECT_NE(rig.in(0x61) & I8254SpeakerPort::kNmiScTmr2OutSts, 0);
  EXPECT_EQ(rig.irq0.pulses(), 0);
  EXPECT_FALSE(rig.list.next_deadline().has_value());  // channel 2 needs no timer
}

TEST(I8254PitTest, Channel2GateLowSuspendsMode0Counting) {
  PitRig rig;
  rig.out(0x61, I8254SpeakerPort::kNmiScTimCnt2En);
  rig.program(2, dev::kPitModeInterruptOnTerminalCount, 1000);
  rig.advance_to(PitRig::at_tick(rig.t0, 300));
  rig.out(0x61, 0);
  rig.advance(5ms);
  EXPECT_EQ(rig.latched_count(2), 700);
  const Nanos resumed_at = rig.clock.now();
  rig.out(0x61, I8254SpeakerPort::kNmiScTimCnt2En);
  rig.advance_to(PitRig::at_tick(resumed_at, 100));
  EXPECT_EQ(rig.latched_count(2), 600);
}

TEST(I8254PitTest, Port61KeepsLowBitsAndTogglesRefreshBit) {
  PitRig rig;
  rig.out(0x61, 0xff);
  const std::uint8_t first = rig.in(0x61);
  EXPECT_EQ(first & 0x0f, 0x0f);
  EXPECT_EQ(first & 0xc0, 0);  // no NMI sources
  rig.advance(pit_ticks_duration(I8254SpeakerPort::kRefreshToggleTicks));
  const std::uint8_t second = rig.in(0x61);
  EXPECT_NE(first & I8254SpeakerPort::kNmiScRefToggle, second & I8254SpeakerPort::kNmiScRefToggle);
}

TEST(I8254PitTest, Port61WideAccessUsesFirstByteAndCountsTheRest) {
  PitRig rig;
  std::vector<std::uint8_t> data = {I8254SpeakerPort::kNmiScTimCnt2En, 0xaa};
  rig.port61.write(0, data);
  EXPECT_TRUE(rig.pit.gate(2));
  std::vector<std::uint8_t> got(4, 0);
  rig.port61.read(0, got);
  EXPECT_EQ(got[0] & 0x0f, I8254SpeakerPort::kNmiScTimCnt2En);
  EXPECT_EQ(got[1], 0xff);
  EXPECT_EQ(got[3], 0xff);
  EXPECT_EQ(rig.port61.bad_accesses(), 4u);
}

// --- Access modes, latches, read-back, status ------------------------------------------------

TEST(I8254PitTest, LsbOnlyAndMsbOnlyAccess) {
  PitRig rig;
  rig.out(kControlPort, control_word(1, dev::kPitAccessLsb, dev::kPitModeRateGenerator));
  rig.out(0x41, 0x50);  // the whole count: 0x0050
  rig.advance_to(PitRig::at_tick(rig.t0, 0x10));
  EXPECT_EQ(rig.in(0x41), 0x40);
  EXPECT_EQ(rig.in(0x41), 0x40);  // every read is the LSB

  const Nanos msb_at = rig.clock.now();
  rig.out(kControlPort, control_word(1, dev::kPitAccessMsb, dev::kPitModeRateGenerator));
  rig.out(0x41, 0x12);  // count 0x1200
  rig.advance_to(PitRig::at_tick(msb_at, 0x100));
  EXPECT_EQ(rig.in(0x41), 0x11);
  EXPECT_EQ(rig.in(0x41), 0x11);  // every read is the MSB
}

TEST(I8254PitTest, WordAccessReadsAlternateLsbAndMsb) {
  PitRig rig;
  rig.program(1, dev::kPitModeRateGenerator, 0x1234);
  rig.advance_to(PitRig::at_tick(rig.t0, 0x34));
  EXPECT_EQ(rig.in(0x41), 0x00);
  EXPECT_EQ(rig.in(0x41), 0x12);
  EXPECT_EQ(rig.in(0x41), 0x00);
  EXPECT_EQ(rig.in(0x41), 0x12);
}

TEST(I8254PitTest, LatchFreezesValueWhileCounterKeepsRunning) {
  PitRig rig;
  rig.program(1, dev::kPitModeRateGenerator, 10000);
  rig.advance_to(PitRig::at_tick(rig.t0, 100));
  rig.out(kControlPort, control_word(1, dev::kPitAccessLatch, 0));
  rig.advance_to(PitRig::at_tick(rig.t0, 150));
  rig.out(kControlPort, control_word(1, dev::kPitAccessLatch, 0));  // ignored: still latched
  EXPECT_EQ(rig.in(0x41), 9900 & 0xff);
  rig.advance_to(PitRig::at_tick(rig.t0, 200));
  EXPECT_EQ(rig.in(0x41), 9900 >> 8);
  // Reading both bytes released the latch: the next reads are live.
  EXPECT_EQ(rig.in(0x41), 9800 & 0xff);
  EXPECT_EQ(rig.in(0x41), 9800 >> 8);
}

TEST(I8254PitTest, ReadBackLatchesStatusAndCountOfSeveralChannels) {
  PitRig rig;
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  rig.out(kControlPort, control_word(1, dev::kPitAccessLsb, dev::kPitModeSquareWave, true));
  rig.out(0x41, 0x50);  // BCD 50

  // GATE2 is low after reset, so counter 2 holds 500.
  rig.program(2, dev::kPitModeInterruptOnTerminalCount, 500);
  rig.advance_to(PitRig::at_tick(rig.t0, 10));

  rig.out(kControlPort, 0xc0 | 0x0e);  // latch count and status of counters 0, 1, 2
  rig.advance(1ms);                    // latched values do not move

  EXPECT_EQ(rig.in(0x40), dev::kPitStatusOutput | 0x30 | (2 << 1));
  EXPECT_EQ(rig.in(0x40), (kOneKhz - 10) & 0xff);
  EXPECT_EQ(rig.in(0x40), (kOneKhz - 10) >> 8);

  EXPECT_EQ(rig.in(0x41), dev::kPitStatusOutput | 0x10 | (3 << 1) | dev::kPitControlBcd);
  EXPECT_EQ(rig.in(0x41), 0x30);  // BCD 50 - 2 * 10

  EXPECT_EQ(rig.in(0x42), 0x30 | 0);  // mode 0 before terminal count: OUT low
  EXPECT_EQ(rig.in(0x42), 500 & 0xff);
  EXPECT_EQ(rig.in(0x42), 500 >> 8);
}

TEST(I8254PitTest, ReadBackStatusOnlyLeavesCountLive) {
  PitRig rig;
  rig.program(1, dev::kPitModeRateGenerator, 1000);
  rig.advance_to(PitRig::at_tick(rig.t0, 1));
  rig.out(kControlPort, 0xc0 | dev::kPitReadBackNoCount | 0x04);
  rig.advance_to(PitRig::at_tick(rig.t0, 5));
  EXPECT_EQ(rig.in(0x41), dev::kPitStatusOutput | 0x30 | (2 << 1));
  EXPECT_EQ(rig.in(0x41), 995 & 0xff);
  EXPECT_EQ(rig.in(0x41), 995 >> 8);
}

TEST(I8254PitTest, NullCountFromControlWordUntilCountLoads) {
  PitRig rig;
  rig.out(kControlPort, control_word(0, dev::kPitAccessWord, dev::kPitModeRateGenerator));
  EXPECT_NE(rig.status(0) & dev::kPitStatusNullCount, 0);
  rig.out(0x40, 0xa9);  // LSB of 1193
  EXPECT_NE(rig.status(0) & dev::kPitStatusNullCount, 0);
  EXPECT_FALSE(rig.list.next_deadline().has_value());  // stopped until the count is complete
  rig.out(0x40, 0x04);
  EXPECT_EQ(rig.status(0) & dev::kPitStatusNullCount, 0);
  EXPECT_TRUE(rig.list.next_deadline().has_value());
}

TEST(I8254PitTest, BcdCountsAreReadAndWrittenInBcd) {
  PitRig rig;
  rig.program(1, dev::kPitModeRateGenerator, 0x1234, true);  // 1234 decimal
  rig.advance_to(PitRig::at_tick(rig.t0, 34));
  EXPECT_EQ(rig.latched_count(1), 0x1200);
  rig.advance_to(rig.t0 + pit_cycle_duration(1234));  // one period of 1234 ticks, not 0x1234
  EXPECT_EQ(rig.latched_count(1), 0x1234);
}

TEST(I8254PitTest, BcdCountZeroMeansTenThousand) {
  PitRig rig;
  rig.program(0, dev::kPitModeRateGenerator, 0, true);
  EXPECT_EQ(rig.list.head_period(), pit_cycle_duration(10'000));
  rig.advance_to(PitRig::at_tick(rig.t0, 1));
  EXPECT_EQ(rig.latched_count(0), 0x9999);
}

TEST(I8254PitTest, WideAccessIsByteAccessRepeatedOnFollowingPorts) {
  PitRig rig;
  rig.out(kControlPort, control_word(0, dev::kPitAccessLsb, dev::kPitModeRateGenerator));
  rig.out(kControlPort, control_word(1, dev::kPitAccessLsb, dev::kPitModeRateGenerator));
  const std::vector<std::uint8_t> counts = {0x40, 0x80};  // `out 0x40, ax`: 0x40 then 0x41
  rig.pit.write(0, counts);
  std::vector<std::uint8_t> got(2, 0);
  rig.pit.read(0, got);
  EXPECT_EQ(got[0], 0x40);
  EXPECT_EQ(got[1], 0x80);

  std::vector<std::uint8_t> beyond(4, 0);
  rig.pit.read(2, beyond);  // 0x42, then 0x43 (write-only), 0x44, 0x45 (not ours)
  EXPECT_EQ(beyond[1], 0xff);
  EXPECT_EQ(beyond[2], 0xff);
  EXPECT_EQ(beyond[3], 0xff);
  EXPECT_EQ(rig.pit.stats().bad_accesses, 3u);
}

TEST(I8254PitTest, CounterStandsStillWhileVmClockIsPaused) {
  mt::FakeClock host;
  minivmm::timers::VmClock vm(host);
  minivmm::timers::TimerList list(minivmm::timers::ClockType::kVm, vm);
  mt::FakeIrqLine irq0;
  I8254Pit pit(list, irq0);
  const std::uint8_t program[] = {control_word(1, dev::kPitAccessWord, dev::kPitModeRateGenerator),
                                  0x10, 0x27};  // 10000
  pit.write(3, std::span(program, 1));
  pit.write(1, std::span(program + 1, 1));
  pit.write(1, std::span(program + 2, 1));
  const auto read_latched = [&] {
    const std::uint8_t latch = control_word(1, dev::kPitAccessLatch, 0);
    pit.write(3, std::span(&latch, 1));
    std::uint8_t bytes[2];
    pit.read(1, std::span(bytes, 1));
    pit.read(1, std::span(bytes + 1, 1));
    return bytes[0] | (bytes[1] << 8);
  };
  host.advance(pit_ticks_duration(100));
  vm.pause();
  const int paused_count = read_latched();
  host.advance(1s);
  EXPECT_EQ(read_latched(), paused_count);
  vm.resume();
  host.advance(pit_ticks_duration(100));
  EXPECT_LE(read_latched(), paused_count - 99);
}

// --- Period floor and lost ticks -------------------------------------------------------------

TEST(I8254PitTest, TinyDivisorClampsIrq0PeriodToFloor) {
  PitRig rig;
  rig.program(0, dev::kPitModeRateGenerator, 2);  // would be 597 kHz
  EXPECT_EQ(rig.list.head_period(), I8254Pit::kMinIrqPeriod);
  EXPECT_EQ(rig.pit.stats().period_clamps, 1u);
  rig.advance(1ms);
  EXPECT_EQ(rig.irq0.pulses(), 10);
  const std::uint16_t count = rig.latched_count(0);  // the counter itself runs at full speed
  EXPECT_GE(count, 1);
  EXPECT_LE(count, 2);
}

TEST(I8254PitTest, LateTicksAreAllDeliveredOnePerPassUnderDelayPolicy) {
  PitRig rig(LostTickPolicy::kDelay);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  const Nanos period = pit_cycle_duration(kOneKhz);
  rig.clock.advance(10 * period);  // one jump, as after a host stall
  for (int pass = 1; pass <= 10; ++pass) {
    EXPECT_EQ(rig.list.run_expired(rig.clock.now()), 1u) << "pass " << pass;
    EXPECT_EQ(rig.irq0.pulses(), pass);
  }
  EXPECT_EQ(rig.list.run_expired(rig.clock.now()), 0u);  // caught up
  const auto stats = rig.pit.stats();
  EXPECT_EQ(stats.ticks_injected, 10u);
  EXPECT_EQ(stats.ticks_late, 9u);  // the tenth was due exactly now
  EXPECT_EQ(stats.ticks_lost, 0u);
  EXPECT_EQ(rig.list.next_deadline(), rig.t0 + 11 * period);
}

TEST(I8254PitTest, LateTicksAreDroppedAndCountedUnderDiscardPolicy) {
  PitRig rig(LostTickPolicy::kDiscard);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  const Nanos period = pit_cycle_duration(kOneKhz);
  rig.clock.advance(10 * period);
  EXPECT_EQ(rig.list.run_expired(rig.clock.now()), 1u);
  EXPECT_EQ(rig.list.run_expired(rig.clock.now()), 0u);
  EXPECT_EQ(rig.irq0.pulses(), 1);
  const auto stats = rig.pit.stats();
  EXPECT_EQ(stats.ticks_lost, 9u);
  EXPECT_EQ(stats.ticks_late, 1u);
  // The grid skipped to its first point after now and keeps its phase.
  EXPECT_EQ(rig.list.next_deadline(), rig.t0 + 11 * period);
  EXPECT_EQ(rig.list.head_period(), period);
  rig.advance(period);
  EXPECT_EQ(rig.irq0.pulses(), 2);
}

TEST(I8254PitTest, CoalescedLateTickIsRetriedNotLost) {
  PitRig rig(LostTickPolicy::kDelay);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  const Nanos period = pit_cycle_duration(kOneKhz);
  rig.irq0.coalesce_next(1);  // the guest has not yet taken the previous IRQ0
  rig.clock.advance(10 * period);
  while (rig.list.run_expired(rig.clock.now()) > 0) {
  }
  EXPECT_EQ(rig.irq0.pulses(), 9);
  EXPECT_EQ(rig.pit.stats().ticks_owed, 1u);
  rig.advance(period - 1ns);  // the retry comes before the next periodic tick
  EXPECT_EQ(rig.irq0.pulses(), 10);
  const auto stats = rig.pit.stats();
  EXPECT_EQ(stats.ticks_coalesced, 1u);
  EXPECT_EQ(stats.ticks_injected, 10u);
  EXPECT_EQ(stats.ticks_injected_by_pit, 10u);  // no train: all of them
  EXPECT_EQ(stats.ticks_lost, 0u);
  EXPECT_EQ(stats.ticks_owed, 0u);
}

TEST(I8254PitTest, OwedTicksAreCappedWhenGuestNeverAcknowledges) {
  PitRig rig(LostTickPolicy::kDelay);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  const Nanos period = pit_cycle_duration(kOneKhz);
  rig.irq0.coalesce_next(1'000'000);  // interrupts off for good
  rig.clock.advance(3000 * period);
  while (rig.list.run_expired(rig.clock.now()) > 0) {
  }
  const auto stats = rig.pit.stats();
  EXPECT_EQ(stats.ticks_owed, I8254Pit::kMaxOwedTicks);
  EXPECT_EQ(stats.ticks_owed + stats.ticks_lost + stats.ticks_injected, 3000u);
}

TEST(I8254PitTest, ReprogrammingDropsOwedTicksAsLost) {
  PitRig rig(LostTickPolicy::kDelay);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  rig.irq0.coalesce_next(1);
  rig.clock.advance(3 * pit_cycle_duration(kOneKhz));
  rig.list.run_expired(rig.clock.now());
  ASSERT_EQ(rig.pit.stats().ticks_owed, 1u);
  rig.program(0, dev::kPitModeInterruptOnTerminalCount, 100);
  EXPECT_EQ(rig.pit.stats().ticks_owed, 0u);
  EXPECT_EQ(rig.pit.stats().ticks_lost, 1u);
  rig.advance(1ms);
  EXPECT_EQ(rig.irq0.pulses(), 1);  // only the one-shot's edge
}

// --- Robustness ------------------------------------------------------------------------------

TEST(I8254PitTest, RandomRegisterSweepNeverCrashesAndKeepsInvariants) {
  PitRig rig;
  std::mt19937 rng(0x8254);  // fixed seed: reproducible
  const std::size_t widths[] = {1, 2, 4};
  for (int i = 0; i < 20000; ++i) {
    const auto offset = static_cast<std::uint16_t>(rng() % I8254Pit::kPortCount);
    std::vector<std::uint8_t> data(widths[rng() % 3]);
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    switch (rng() % 8) {
      case 0:
        rig.port61.write(0, std::span<const std::uint8_t>(data.data(), 1));
        break;
      case 1:
        rig.port61.read(0, data);
        break;
      case 2:
      case 3:
        rig.pit.read(offset, data);
        break;
      default:
        rig.pit.write(offset, data);
        break;
    }
    rig.advance(Nanos{rng() % 200'000});
    const auto stats = rig.pit.stats();
    ASSERT_EQ(stats.ticks_injected, static_cast<std::uint64_t>(rig.irq0.pulses()));
    ASSERT_LE(stats.ticks_owed, I8254Pit::kMaxOwedTicks);
    const Nanos period = rig.list.head_period();
    ASSERT_TRUE(period == 0ns || period >= I8254Pit::kMinIrqPeriod);
    const auto deadline = rig.list.next_deadline();
    ASSERT_TRUE(!deadline || *deadline > rig.clock.now());
  }
}

// --- Pulse train (--pit-tick kernel) -------------------------------------------------------

struct TrainRig {
  explicit TrainRig(bool model_controller = false) : rig{LostTickPolicy::kDelay, &train,
                                                         model_controller} {
    train.clock = &rig.clock;
  }
  FakePulseTrain train;
  PitRig rig;
};

TEST(I8254PitTest, PeriodicProgramIsHandedToTheTrainNotTheTimer) {
  TrainRig t;
  t.rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  const Nanos period = pit_cycle_duration(kOneKhz);
  ASSERT_EQ(t.train.starts.size(), 1u);
  EXPECT_EQ(t.train.starts[0].first, t.rig.t0 + period);
  EXPECT_EQ(t.train.starts[0].period, period);
  EXPECT_FALSE(t.rig.list.next_deadline().has_value()) << "the timer runs alongside the train";
  EXPECT_EQ(t.rig.pit.stats().timer_arms, 0u);
  EXPECT_EQ(t.rig.pit.stats().train_starts, 1u);

  t.rig.advance(10 * period);
  EXPECT_EQ(t.rig.irq0.pulses(), 0) << "the device pulsed what the train delivers";
  EXPECT_EQ(t.rig.pit.stats().ticks_injected, 10u);
  // Counter reads do not depend on who delivers the edges.
  t.rig.advance(period / 2);
  EXPECT_NEAR(t.rig.latched_count(0), kOneKhz / 2, 1);
}

TEST(I8254PitTest, LeavingPeriodicModeStopsTheTrainAndOneShotUsesTheTimer) {
  TrainRig t;
  t.rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  t.rig.advance(5 * pit_cycle_duration(kOneKhz));
  t.rig.program(0, dev::kPitModeInterruptOnTerminalCount, 100);
  EXPECT_EQ(t.train.stops, 1);
  EXPECT_EQ(t.train.starts.size(), 1u);
  ASSERT_TRUE(t.rig.list.next_deadline().has_value());
  t.rig.advance(1ms);
  EXPECT_EQ(t.rig.irq0.pulses(), 1);
  EXPECT_EQ(t.rig.pit.stats().ticks_injected, 6u);  // five from the train, one from the timer
  EXPECT_EQ(t.rig.pit.stats().ticks_injected_by_pit, 1u);
}

TEST(I8254PitTest, CountRewriteRestartsTheTrainAtTheReloadEdge) {
  TrainRig t;
  t.rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  const Nanos old_period = pit_cycle_duration(kOneKhz);
  t.rig.advance(old_period / 3);
  t.rig.write_count(0, kOneKhz / 2);  // takes over at the end of the running cycle
  // Each byte written reschedules; whatever ran in between, the train now running is the new
  // program's, and every earlier one was stopped first.
  ASSERT_GE(t.train.starts.size(), 2u);
  EXPECT_EQ(t.train.stops, static_cast<int>(t.train.starts.size()) - 1);
  EXPECT_EQ(t.train.starts.back().first, t.rig.t0 + old_period);
  EXPECT_EQ(t.train.starts.back().period, pit_cycle_duration(kOneKhz / 2));
  t.rig.advance(old_period);
  EXPECT_EQ(t.rig.pit.stats().ticks_injected, 1u) << "one edge, at the end of the old cycle";
}

TEST(I8254PitTest, RefusedTrainFallsBackToTheTimer) {
  TrainRig t;
  t.train.accept = false;
  t.rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  EXPECT_EQ(t.train.starts.size(), 1u);
  EXPECT_EQ(t.rig.pit.stats().train_starts, 0u);
  t.rig.advance(10 * pit_cycle_duration(kOneKhz));
  EXPECT_EQ(t.rig.irq0.pulses(), 10);
  EXPECT_EQ(t.rig.pit.stats().ticks_injected, 10u);
}

// --- Acknowledgement audit: ticks a starved vCPU never saw ---------------------------------
//
// The rig's IRQ line models the controller's request bit and the guest's acknowledgements
// (KVM's irqfd resampler). A guest that is running takes each tick within a quarter period;
// one the host does not run leaves the request pending, and the loop's on-time ticks merge.

// Runs `periods` periods, the guest taking what is pending every quarter period.
void run_guest(PitRig& rig, int periods, FakePulseTrain* train = nullptr) {
  const Nanos period = pit_cycle_duration(kOneKhz);
  const Nanos quarter = period / 4;
  for (int i = 0; i < periods; ++i) {
    for (int q = 0; q < 4; ++q) {
      rig.advance(q < 3 ? quarter : period - 3 * quarter);  // whole periods, no drift
      if (train) train->pulse_new_edges(rig.irq0);
      rig.irq0.service();
    }
  }
}

// The host runs nothing of the guest for `periods` periods.
void starve_guest(PitRig& rig, int periods, FakePulseTrain* train = nullptr) {
  const Nanos period = pit_cycle_duration(kOneKhz);
  for (int i = 0; i < periods; ++i) {
    rig.advance(period);
    if (train) train->pulse_new_edges(rig.irq0);
  }
}

TEST(I8254PitTest, OnTimeTicksMergedWhileTheVcpuIsStarvedAreFoundAndRedelivered) {
  PitRig rig(LostTickPolicy::kDelay, nullptr, /*model_controller=*/true);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  run_guest(rig, 20);
  EXPECT_EQ(rig.irq0.serviced(), 20);
  EXPECT_EQ(rig.pit.stats().ticks_merged, 0u);

  starve_guest(rig, 40);
  // 40 on-time ticks, one request bit: the plain pulses up to the next audit merge unseen
  // until the audit finds them; from then on the owed ticks go out checked, and are retried.
  EXPECT_GT(rig.irq0.merged(), 0);
  EXPECT_GT(rig.pit.stats().ticks_merged, 0u);
  EXPECT_GT(rig.pit.stats().ticks_owed, 0u);
  run_guest(rig, 100);

  const auto st = rig.pit.stats();
  const int due = 160;  // periods elapsed, each one tick
  EXPECT_EQ(st.ticks_lost, 0u);
  EXPECT_EQ(st.ticks_owed, 0u) << "caught up";
  EXPECT_EQ(rig.irq0.serviced(), due) << "the guest saw every tick";
  EXPECT_EQ(st.ticks_injected, static_cast<std::uint64_t>(due));
  EXPECT_GE(st.ack_audits, 5u);
}

TEST(I8254PitTest, AGuestThatTakesEveryTickIsNeverOwedOne) {
  PitRig rig(LostTickPolicy::kDelay, nullptr, /*model_controller=*/true);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  run_guest(rig, 200);
  const auto st = rig.pit.stats();
  EXPECT_EQ(st.ticks_merged, 0u);
  EXPECT_EQ(st.ticks_coalesced, 0u);
  EXPECT_EQ(st.ticks_owed, 0u);
  EXPECT_EQ(st.ticks_injected, 200u);
  EXPECT_EQ(rig.irq0.serviced(), 200);
  EXPECT_EQ(rig.irq0.pulses(), 200) << "every tick took the plain pulse";
  // In the steady state one read of the acknowledgement count per kAuditEveryTicks ticks (and
  // the one at construction), not one per tick.
  EXPECT_EQ(rig.irq0.ack_reads(), 1 + 200 / static_cast<int>(I8254Pit::kAuditEveryTicks));
}

TEST(I8254PitTest, MergedTicksAreCountedLostUnderDiscardPolicy) {
  PitRig rig(LostTickPolicy::kDiscard, nullptr, /*model_controller=*/true);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  run_guest(rig, 20);
  starve_guest(rig, 40);
  run_guest(rig, 40);
  const auto st = rig.pit.stats();
  EXPECT_EQ(st.ticks_merged, 39u) << "discard sends every tick plain, so all merge";
  EXPECT_EQ(st.ticks_lost, 39u);
  EXPECT_EQ(st.ticks_owed, 0u);
  EXPECT_EQ(rig.irq0.serviced(), 100 - 39) << "discard: the guest sees fewer, and says so";
  EXPECT_EQ(st.ticks_injected, static_cast<std::uint64_t>(rig.irq0.serviced()));
}

TEST(I8254PitTest, AcknowledgementsOfOtherSourcesNeitherInventNorHideTicks) {
  PitRig rig(LostTickPolicy::kDelay, nullptr, /*model_controller=*/true);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  run_guest(rig, 20);
  for (int i = 0; i < 5; ++i) rig.irq0.foreign_ack();  // a test device on the same GSI
  run_guest(rig, 20);
  EXPECT_EQ(rig.pit.stats().ticks_merged, 0u);
  starve_guest(rig, 40);
  run_guest(rig, 100);
  const auto st = rig.pit.stats();
  EXPECT_GT(st.ticks_merged, 0u);
  EXPECT_EQ(st.ticks_lost, 0u);
  EXPECT_EQ(st.ticks_owed, 0u);
  // The foreign acknowledgements were counted at an audit where our last tick was pending, so
  // one of them can pass for ours: at most one tick in doubt, never more.
  EXPECT_NEAR(rig.irq0.serviced(), 180, 1);
}

TEST(I8254PitTest, AnEdgeMergedUnseenDoesNotStallTheOwedTicks) {
  PitRig rig(LostTickPolicy::kDelay, nullptr, /*model_controller=*/true);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  const Nanos period = pit_cycle_duration(kOneKhz);
  run_guest(rig, 10);
  // A tick arrives while the handler of the previous one runs (taken, no EOI yet): KVM's
  // resampler still holds the line, so it merges, and the one EOI that follows leaves
  // sent - acknowledged = 1 with nothing pending.
  rig.advance(period);
  rig.irq0.take();
  rig.advance(period);
  rig.irq0.eoi();
  EXPECT_EQ(rig.irq0.merged(), 1);
  run_guest(rig, 5);
  // Then the loop runs late: the late ticks are owed and go out only when IRQ0 is free, which
  // the count never says again. The PIT must probe rather than wait for ever.
  rig.clock.advance(3 * period);
  while (rig.list.run_expired(rig.clock.now()) > 0) {
  }
  run_guest(rig, 60);
  const auto st = rig.pit.stats();
  const int due = 10 + 2 + 5 + 3 + 60;
  EXPECT_EQ(st.ticks_owed, 0u) << "stalled";
  EXPECT_EQ(st.ticks_lost, 0u);
  EXPECT_NEAR(rig.irq0.serviced(), due, 1);
}

TEST(I8254PitTest, AcknowledgementsThatNeverComeAreAbandonedWithoutLosingTicks) {
  PitRig rig(LostTickPolicy::kDelay, nullptr, /*model_controller=*/true);
  rig.irq0.silence_acks();  // the guest takes every tick, but no EOI is ever reported
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  run_guest(rig, 600);
  const auto st = rig.pit.stats();
  EXPECT_TRUE(st.acks_abandoned);
  EXPECT_TRUE(rig.irq0.acks_stopped()) << "the wire must go back to plain edges";
  EXPECT_EQ(st.ticks_merged, 0u) << "nothing concluded from a count that never moved";
  EXPECT_EQ(st.ticks_owed, 0u);
  EXPECT_EQ(st.ticks_lost, 0u);
  EXPECT_EQ(rig.irq0.serviced(), 600);
  const int reads = rig.irq0.ack_reads();
  run_guest(rig, 100);
  EXPECT_EQ(rig.irq0.ack_reads(), reads) << "no more audits";
  EXPECT_EQ(rig.irq0.serviced(), 700);
}

TEST(I8254PitTest, WithoutAcknowledgementsThereIsNoAudit) {
  PitRig rig;  // a line that cannot count acknowledgements
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  rig.advance(100 * pit_cycle_duration(kOneKhz));
  EXPECT_EQ(rig.pit.stats().ack_audits, 0u);
  EXPECT_EQ(rig.irq0.pulses(), 100);
}

TEST(I8254PitTest, TrainEdgesMergedWhileTheVcpuIsStarvedAreFoundAndRedelivered) {
  TrainRig t(/*model_controller=*/true);
  t.rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  ASSERT_EQ(t.rig.pit.stats().train_starts, 1u);
  run_guest(t.rig, 40, &t.train);
  EXPECT_EQ(t.rig.irq0.serviced(), 40);
  const int reads_before = t.rig.irq0.ack_reads();
  starve_guest(t.rig, 64, &t.train);
  // The train's 64 edges merge into one; the audit's redeliveries during the stall merge too.
  // In the train's first second merges do not hold it (TickDelivery::kTrainSettle).
  EXPECT_GE(t.rig.irq0.merged(), 63);
  EXPECT_EQ(t.rig.pit.stats().train_fallbacks, 0u);
  run_guest(t.rig, 400, &t.train);

  const auto st = t.rig.pit.stats();
  EXPECT_EQ(st.ticks_lost, 0u);
  EXPECT_EQ(st.ticks_owed, 0u);
  // The redelivered ticks collide with the train's own edges now and then, and those merge too
  // (and are owed again): more than the 63 merges of the stall itself.
  EXPECT_GE(st.ticks_merged, 63u);
  // Every tick but at most the one in doubt (an edge that merged with a redelivered one after
  // the last audit: sent - acknowledged = 1 cannot tell it from one still pending).
  EXPECT_NEAR(t.rig.irq0.serviced(), 504, 1) << "the guest saw every tick";
  EXPECT_NEAR(static_cast<double>(st.ticks_injected), t.rig.irq0.serviced(), 1.0);
  // Before the stall the count was read only on the train's turns, every 2 * kAuditEveryTicks
  // periods (recovering reads it before each redelivered tick), and the device ran no timer.
  EXPECT_LE(reads_before, 1 + 40 / (2 * static_cast<int>(I8254Pit::kAuditEveryTicks)) + 1);
  EXPECT_GE(t.train.turns, 1);
}

// A guest the host runs just in time: it takes each train edge at the end of its period, so
// whenever the PIT looks, the newest edge is pending.
void run_slow_guest(PitRig& rig, int periods, FakePulseTrain& train) {
  const Nanos period = pit_cycle_duration(kOneKhz);
  const Nanos eighth = period / 8;
  for (int i = 0; i < periods; ++i) {
    for (int e = 0; e < 8; ++e) {
      rig.advance(e < 7 ? eighth : period - 7 * eighth);
      train.pulse_new_edges(rig.irq0);
      if (e == 1 + (i * 5) % 7) rig.irq0.service();  // late, at a varying point
    }
  }
}

TEST(I8254PitTest, OwedTicksUnderTheTrainAreRepaidPromptlyAfterAStall) {
  TrainRig t(/*model_controller=*/true);
  t.rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  run_guest(t.rig, 40, &t.train);
  starve_guest(t.rig, 64, &t.train);
  // The audit owes all but one of the merged edges; that one stays unresolved, so every owed
  // tick finds one edge in doubt. A guest that takes its interrupts again must get them back
  // at about one per retry, not one per probe (5 retries with back-off).
  run_guest(t.rig, 150, &t.train);
  const auto st = t.rig.pit.stats();
  EXPECT_EQ(st.ticks_owed, 0u) << "still owed 150 periods after the stall";
  EXPECT_EQ(st.ticks_lost, 0u);
  EXPECT_NEAR(t.rig.irq0.serviced(), 40 + 64 + 150, 1);
}

TEST(I8254PitTest, ASlowGuestUnderTheTrainGetsNoTickTwice) {
  TrainRig t(/*model_controller=*/true);
  t.rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  run_guest(t.rig, 40, &t.train);
  starve_guest(t.rig, 64, &t.train);  // ticks owed from here on
  ASSERT_GT(t.rig.irq0.merged(), 0);
  // The owed ticks' retries find one edge unresolved and the count moving: the train's newest
  // edge, pending, not one that merged. Owing it again would hand the guest an extra tick.
  run_slow_guest(t.rig, 200, t.train);
  run_guest(t.rig, 400, &t.train);
  const int due = 40 + 64 + 200 + 400;
  const auto st = t.rig.pit.stats();
  EXPECT_EQ(st.ticks_owed, 0u);
  EXPECT_EQ(st.ticks_lost, 0u);
  EXPECT_LE(t.rig.irq0.serviced(), due) << "the guest saw more ticks than periods went by";
  EXPECT_GE(t.rig.irq0.serviced(), due - 1);
  EXPECT_NEAR(static_cast<double>(st.ticks_injected), t.rig.irq0.serviced(), 1.0);
}

TEST(I8254PitTest, TrainTurnsMoreOftenThanTheAuditReadTheCountOnlyWhenDue) {
  TrainRig t(/*model_controller=*/true);
  t.train.turn_every = 2;  // a slow rate's refills: a few periods apart
  t.rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  const int reads_before = t.rig.irq0.ack_reads();
  run_guest(t.rig, 320, &t.train);
  EXPECT_GE(t.train.turns, 150);
  const int audits = t.rig.irq0.ack_reads() - reads_before;
  EXPECT_GE(audits, 320 / (2 * static_cast<int>(I8254Pit::kAuditEveryTicks)) - 1);
  EXPECT_LE(audits, 320 / (2 * static_cast<int>(I8254Pit::kAuditEveryTicks)) + 1);
  EXPECT_FALSE(t.rig.list.next_deadline().has_value()) << "the device armed a timer of its own";
  EXPECT_EQ(t.rig.irq0.serviced(), 320);
}

// --- Report ---------------------------------------------------------------------------------

TEST(I8254PitTest, ReportsEveryCounterUnderTheRunReportsKeys) {
  PitRig rig(LostTickPolicy::kDelay);
  rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  rig.irq0.coalesce_next(1);
  rig.clock.advance(3 * pit_cycle_duration(kOneKhz));
  rig.list.run_expired(rig.clock.now());
  rig.in(kControlPort);  // a bad access
  EXPECT_EQ(rig.pit.report_key(), "pit");
  mt::MapReportWriter out;
  rig.pit.report(out);
  const auto s = rig.pit.stats();
  // devices.pit in the --stats JSON, keys and types as before the devices reported themselves.
  const std::map<std::string, mt::MapReportWriter::Value> expected = {
      {"ticks_injected", s.ticks_injected},
      {"ticks_late", s.ticks_late},
      {"ticks_lost", s.ticks_lost},
      {"ticks_coalesced", s.ticks_coalesced},
      {"ticks_owed", s.ticks_owed},
      {"reprogrammings", s.reprogrammings},
      {"period_clamps", s.period_clamps},
      {"timer_arms", s.timer_arms},
      {"train_starts", s.train_starts},
      {"train_fallbacks", s.train_fallbacks},
      {"fallback_ticks", s.fallback_ticks},
      {"bad_accesses", s.bad_accesses},
      {"ticks_merged", s.ticks_merged},
      {"ticks_missed", s.ticks_missed},
      {"ticks_redelivered", s.ticks_redelivered},
      {"ticks_injected_by_pit", s.ticks_injected_by_pit},
      {"ack_audits", s.ack_audits},
      {"irq_level_releases", s.level_releases},
      {"acks_abandoned", false}};
  EXPECT_EQ(out.values(), expected);
  EXPECT_EQ(out.counter("ticks_coalesced"), 1u);
  EXPECT_EQ(out.counter("ticks_owed"), 1u);
  EXPECT_EQ(out.counter("bad_accesses"), 1u);
}

TEST(I8254PitTest, ReportNestsThePulseTrainsOwnUnderKernelTrain) {
  TrainRig t;
  t.rig.program(0, dev::kPitModeRateGenerator, kOneKhz);
  t.rig.advance(10 * pit_cycle_duration(kOneKhz));
  mt::MapReportWriter out;
  t.rig.pit.report(out);
  EXPECT_EQ(out.counter("ticks_injected"), 10u);
  EXPECT_EQ(out.counter("train_starts"), 1u);
  // What the train wrote, as it wrote it (FakePulseTrain::report).
  EXPECT_EQ(out.counter("kernel_train/starts"), 1u);
  EXPECT_EQ(out.counter("kernel_train/stops"), 0u);
  EXPECT_EQ(out.values().size(), 19u + 2u);
}

}  // namespace
