// Snapshot records of the PC board devices (issue 23): each device is put in a state worth
// keeping, saved, loaded into a freshly made twin on a clock at the same vm_clock instant, and
// both are then driven the same way; what the guest sees must not tell them apart. Hostile
// records (short, one byte long, impossible values) must be refused with StateError.
#include <gtest/gtest.h>

#include <cstring>

#include <chrono>
#include <cstdint>
#include <vector>

#include "devices/bus/device_state.h"
#include "devices/pc/debug_exit.h"
#include "devices/pc/i8042.h"
#include "devices/pc/i8254/i8254_channel.h"
#include "devices/pc/i8254/i8254_pit.h"
#include "devices/pc/i8254/i8254_speaker_port.h"
#include "devices/pc/mc146818_rtc.h"
#include "devices/pc/post_port.h"
#include "devices/pc/pvpanic.h"
#include "devices/pc/uart_16550.h"
#include "tests/support/fake_clock.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_pulse_train.h"
#include "tests/support/time_driver.h"
#include "tests/support/vector_sink.h"
#include "timers/timer_list.h"

namespace minivmm::devices {
namespace {

using namespace std::chrono_literals;
using timers::Nanos;
namespace mt = minivmm::testing;

std::vector<std::uint8_t> save(const StatefulDevice& d) {
  StateWriter w;
  d.save_state(w);
  return w.data();
}

void load(StatefulDevice& d, std::vector<std::uint8_t> record) {
  StateReader r(record, std::string(d.state_key()));
  d.load_state(r);
}

// The record cut short at every length, and one byte longer: each is refused.
void expect_truncations_refused(const std::vector<std::uint8_t>& record,
                                const std::function<std::unique_ptr<StatefulDevice>()>& fresh) {
  for (std::size_t n = 0; n < record.size(); ++n) {
    auto d = fresh();
    EXPECT_THROW(load(*d, std::vector<std::uint8_t>(record.begin(), record.begin() + static_cast<std::ptrdiff_t>(n))), StateError) << n;
  }
  auto longer = record;
  longer.push_back(0);
  auto d = fresh();
  EXPECT_THROW(load(*d, longer), StateError);
}

std::uint8_t in8(PortIoDevice& d, std::uint16_t off) {
  std::uint8_t v = 0;
  d.read(off, std::span<std::uint8_t>(&v, 1));
  return v;
}
void out8(PortIoDevice& d, std::uint16_t off, std::uint8_t v) {
  d.write(off, std::span<const std::uint8_t>(&v, 1));
}

// --- UART -----------------------------------------------------------------------------------

struct UartRig {
  explicit UartRig(mt::FakeClock& clock) : vm(timers::ClockType::kVm, clock), uart(irq, sink, nullptr, &vm) {}
  timers::TimerList vm;
  mt::FakeIrqLine irq;
  mt::VectorSink sink;
  Uart16550 uart;
};

TEST(UartStateTest, RoundTripKeepsRegistersFifoAndTimeoutDeadline) {
  mt::FakeClock clock;
  UartRig a(clock);
  out8(a.uart, 3, 0x80);  // DLAB
  out8(a.uart, 0, 0x01);  // 115200 baud
  out8(a.uart, 3, 0x03);  // 8N1
  out8(a.uart, 2, 0xc1);  // FIFO on, trigger 14
  out8(a.uart, 1, 0x01);  // RDI
  out8(a.uart, 4, 0x0b);  // DTR RTS OUT2
  out8(a.uart, 7, 0x5a);
  const std::uint8_t input[] = {'a', 'b', 'c'};
  ASSERT_EQ(a.uart.receive(input), 3u);
  EXPECT_EQ(in8(a.uart, 0), 'a');  // restarts the character timeout count
  const auto record = save(a.uart);

  UartRig b(clock);
  load(b.uart, record);
  EXPECT_EQ(save(b.uart), record);
  EXPECT_EQ(in8(b.uart, 7), 0x5a);
  EXPECT_EQ(in8(b.uart, 3), 0x03);
  EXPECT_EQ(in8(b.uart, 2), in8(a.uart, 2));
  // The timeout fires at the same vm_clock instant in both.
  ASSERT_TRUE(a.vm.next_deadline().has_value());
  EXPECT_EQ(b.vm.next_deadline(), a.vm.next_deadline());
  mt::advance(clock, {&a.vm, &b.vm}, a.uart.rx_timeout_delay());
  EXPECT_EQ(in8(a.uart, 2), 0xcc);
  EXPECT_EQ(in8(b.uart, 2), 0xcc);
  EXPECT_TRUE(b.irq.level());
  EXPECT_EQ(in8(b.uart, 0), 'b');
  EXPECT_EQ(in8(b.uart, 0), 'c');
  EXPECT_EQ(b.uart.stats().bytes_in, 3u);
}

TEST(UartStateTest, HostileRecordsAreRefused) {
  mt::FakeClock clock;
  UartRig a(clock);
  out8(a.uart, 2, 0x01);
  const auto record = save(a.uart);
  expect_truncations_refused(record, [&] {
    struct Owner : StatefulDevice {
      explicit Owner(mt::FakeClock& c) : rig(c) {}
      std::string_view state_key() const noexcept override { return "uart"; }
      void save_state(StateWriter& o) const override { rig.uart.save_state(o); }
      void load_state(StateReader& i) override { rig.uart.load_state(i); }
      UartRig rig;
    };
    return std::make_unique<Owner>(clock);
  });
  auto bad = record;
  bad[3] = 0xf0;  // IER with reserved bits
  UartRig b(clock);
  EXPECT_THROW(load(b.uart, bad), StateError);
  bad = record;
  bad[9] = 3;  // RX trigger level 3
  UartRig c(clock);
  EXPECT_THROW(load(c.uart, bad), StateError);
}

// --- RTC ------------------------------------------------------------------------------------

Nanos wall_epoch() {
  const std::chrono::sys_days day{std::chrono::year{2026} / 11 / 29};
  return Nanos{std::chrono::duration_cast<Nanos>(day.time_since_epoch()) + 12h};
}

struct RtcRig {
  RtcRig(mt::FakeClock& vm_clock, mt::FakeClock& wall)
      : vm(timers::ClockType::kVm, vm_clock), rtc(vm, wall, irq, 64ull << 20) {}
  std::uint8_t reg(std::uint8_t i) {
    out8(rtc, 0, i);
    return in8(rtc, 1);
  }
  void set_reg(std::uint8_t i, std::uint8_t v) {
    out8(rtc, 0, i);
    out8(rtc, 1, v);
  }
  timers::TimerList vm;
  mt::FakeIrqLine irq;
  Mc146818Rtc rtc;
};

TEST(RtcStateTest, RestoreLaterReadsWallClockAndKeepsPeriodicPhase) {
  mt::FakeClock vm_clock;
  mt::FakeClock wall(wall_epoch());
  RtcRig a(vm_clock, wall);
  a.set_reg(0x0a, 0x26);          // 1024 Hz
  a.set_reg(0x0b, 0x40 | 0x02 | 0x04);  // PIE, 24 h, binary
  a.set_reg(0x0e, 0x77);          // CMOS RAM
  // The guest sets its clock an hour ahead of the host's.
  a.set_reg(0x0b, 0x80 | 0x40 | 0x06);
  a.set_reg(0x04, 13);
  a.set_reg(0x0b, 0x40 | 0x06);
  mt::advance(vm_clock, a.vm, 3'500'000ns);
  const auto record = save(a.rtc);
  const auto deadline = a.vm.next_deadline();
  ASSERT_TRUE(deadline.has_value());

  // Restored 30 s of wall time later, vm_clock at the snapshot instant.
  wall.advance(30s);
  RtcRig b(vm_clock, wall);
  load(b.rtc, record);
  EXPECT_EQ(b.vm.next_deadline(), deadline);  // the periodic phase goes on
  EXPECT_EQ(b.reg(0x0e), 0x77);
  EXPECT_EQ(b.reg(0x04), 13);  // the guest's offset kept
  EXPECT_EQ(b.reg(0x00), 30);  // and the host's wall clock moved on
  EXPECT_EQ(b.reg(0x0b), 0x46);
  const int edges = b.irq.pulses();
  b.reg(0x0c);
  mt::advance(vm_clock, b.vm, *deadline - vm_clock.now());
  EXPECT_EQ(b.irq.pulses(), edges + 1);
}

TEST(RtcStateTest, HostileRecordsAreRefused) {
  mt::FakeClock vm_clock;
  mt::FakeClock wall(wall_epoch());
  RtcRig a(vm_clock, wall);
  a.set_reg(0x0b, 0x42);
  const auto record = save(a.rtc);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{100}, record.size() - 1}) {
    RtcRig b(vm_clock, wall);
    EXPECT_THROW(load(b.rtc, std::vector<std::uint8_t>(record.begin(), record.begin() + static_cast<std::ptrdiff_t>(n))), StateError);
  }
  auto longer = record;
  longer.push_back(1);
  RtcRig c(vm_clock, wall);
  EXPECT_THROW(load(c.rtc, longer), StateError);
  auto bad = record;
  bad[1 + 4 + 128] = 0x80;  // CMOS index past 127
  RtcRig d(vm_clock, wall);
  EXPECT_THROW(load(d.rtc, bad), StateError);
  bad = record;
  bad[1 + 4 + 128 + 1 + 1 + 1 + 1] = 0x40;  // PF set, but IRQF says no interrupt
  RtcRig e(vm_clock, wall);
  EXPECT_THROW(load(e.rtc, bad), StateError);
}

// Issue 31: a record whose times passed the range checks one by one could still overflow once
// combined (the wall clock's move across the restore added to a far anchor: UBSan's signed
// overflow). Every RTC instant is now 1970-2199, as the live device keeps them.
TEST(RtcStateTest, AWallClockInstantBefore1970IsRefusedBeforeAnyArithmetic) {
  mt::FakeClock vm_clock;
  mt::FakeClock wall(wall_epoch());
  RtcRig a(vm_clock, wall);
  a.set_reg(0x0a, 0x26);
  a.set_reg(0x0b, 0x42);  // PIE: the timer runs, so the anchor is moved at the load
  const auto record = save(a.rtc);
  // The record ends with the saved host instant and the seven counters.
  auto bad = record;
  const std::size_t saved_host = bad.size() - 7 * 8 - 8;
  const std::int64_t far_past = -7'000'000'000'000'000'000;
  std::memcpy(bad.data() + saved_host, &far_past, sizeof far_past);
  RtcRig b(vm_clock, wall);
  EXPECT_THROW(load(b.rtc, bad), StateError);
  RtcRig c(vm_clock, wall);
  EXPECT_NO_THROW(load(c.rtc, record));
}

// --- i8042 ----------------------------------------------------------------------------------

TEST(I8042StateTest, RoundTripKeepsQueuedKeyboardBytes) {
  mt::FakeIrqLine irq1a, irq1b;
  I8042 a(nullptr, &irq1a);
  out8(a, 0, 0xf2);  // identify: ACK, 0xAB, 0x41
  EXPECT_EQ(in8(a, 0), 0xfa);
  out8(a, 4, 0xd1);  // write output port: waits for its byte
  const auto record = save(a);
  I8042 b(nullptr, &irq1b);
  load(b, record);
  EXPECT_EQ(save(b), record);
  EXPECT_EQ(irq1b.level(), irq1a.level());
  EXPECT_EQ(in8(b, 4), in8(a, 4));
  EXPECT_EQ(in8(b, 0), 0xab);
  EXPECT_EQ(in8(b, 0), 0x41);
  out8(b, 0, 0x03);  // the pending 0xD1's byte: A20 on, reset line high
  out8(b, 4, 0xd0);
  EXPECT_EQ(in8(b, 0), 0x03);
}

TEST(I8042StateTest, HostileRecordsAreRefused) {
  I8042 a(nullptr);
  const auto record = save(a);
  expect_truncations_refused(record, [] { return std::make_unique<I8042>(nullptr); });
  auto bad = record;
  bad[5] = 0x42;  // pending controller command that takes no byte
  I8042 b(nullptr);
  EXPECT_THROW(load(b, bad), StateError);
  bad = record;
  bad[4] = 0x00;  // output port holding the CPU in reset
  I8042 c(nullptr);
  EXPECT_THROW(load(c, bad), StateError);
}

// --- PIT ------------------------------------------------------------------------------------

struct PitRig {
  explicit PitRig(mt::FakeClock& clock, bool model = false)
      : list(timers::ClockType::kVm, clock), irq0(model), pit(list, irq0), port61(pit) {}
  void program(int channel, int mode, std::uint16_t count) {
    out8(pit, 3, static_cast<std::uint8_t>((channel << 6) | 0x30 | (mode << 1)));
    out8(pit, static_cast<std::uint16_t>(channel), static_cast<std::uint8_t>(count & 0xff));
    out8(pit, static_cast<std::uint16_t>(channel), static_cast<std::uint8_t>(count >> 8));
  }
  timers::TimerList list;
  mt::FakeIrqLine irq0;
  I8254Pit pit;
  I8254SpeakerPort port61;
};

TEST(PitStateTest, RoundTripContinuesIrq0OnTheSameGridWithOwedTicks) {
  mt::FakeClock clock;
  PitRig a(clock);
  a.program(0, 2, 1193);  // ~1 kHz
  a.program(2, 3, 0x1234);
  out8(a.port61, 0, 0x01);  // counter 2's gate
  mt::advance(clock, a.list, 10'300'000ns);
  // The guest has not taken the last IRQ0 when a pass runs three periods late: a tick is owed.
  a.irq0.coalesce_next(1);
  clock.advance(3 * pit_cycle_duration(1193));
  a.list.run_expired(clock.now());
  const auto before = a.pit.stats();
  ASSERT_GT(before.ticks_owed, 0u);
  const auto record = save(a.pit);
  const auto record61 = save(a.port61);

  PitRig b(clock);
  load(b.pit, record);
  load(b.port61, record61);
  const auto after = b.pit.stats();
  // Owed: the coalesced tick, and the two late grid points a's timer has still to run.
  EXPECT_EQ(after.ticks_owed, before.ticks_owed + 2);
  EXPECT_EQ(after.ticks_injected, before.ticks_injected);
  EXPECT_EQ(after.reprogrammings, before.reprogrammings);
  EXPECT_EQ(in8(b.port61, 0) & 0x0f, 0x01);
  // Counter 2 reads the same.
  out8(a.pit, 3, 0x80);
  out8(b.pit, 3, 0x80);
  EXPECT_EQ(in8(b.pit, 2), in8(a.pit, 2));
  EXPECT_EQ(in8(b.pit, 2), in8(a.pit, 2));
  // Both catch up (a through its late grid points, b through retries) and then tick on the
  // same grid: the same edges delivered, the same next IRQ0 instants.
  mt::advance(clock, {&a.list, &b.list}, 20ms);
  EXPECT_EQ(b.pit.stats().ticks_owed, 0u);
  EXPECT_EQ(b.pit.stats().ticks_injected, a.pit.stats().ticks_injected);
  EXPECT_EQ(b.irq0.pulses(), a.irq0.pulses() - static_cast<int>(before.ticks_injected));
  for (int i = 0; i < 5; ++i) {
    const auto da = a.list.next_deadline();
    ASSERT_TRUE(da.has_value());
    EXPECT_EQ(b.list.next_deadline(), da);
    mt::advance(clock, {&a.list, &b.list}, *da - clock.now());
  }
}

// With a pulse train running the periodic program, the PIT's own IRQ0 timer is not armed and
// every edge is the train's: a snapshot owes the guest nothing, and the restored program goes
// back to a train (the grid points the record counts owed are only the timer's late ones).
TEST(PitStateTest, ATrainsDeliveredEdgesAreNotOwed) {
  mt::FakeClock clock;
  timers::TimerList list(timers::ClockType::kVm, clock);
  mt::FakeIrqLine irq0;
  mt::FakePulseTrain train;
  train.clock = &clock;
  I8254Pit pit(list, irq0, LostTickPolicy::kDelay, &train);
  out8(pit, 3, 0x34);  // counter 0, word, mode 2
  out8(pit, 0, 1193 & 0xff);
  out8(pit, 0, 1193 >> 8);
  ASSERT_EQ(train.starts.size(), 1u);
  for (int i = 0; i < 300; ++i) {
    clock.advance(1ms);
    train.pulse_new_edges(irq0);
    list.run_expired(clock.now());
  }
  const auto record = save(pit);
  mt::FakePulseTrain train2;
  train2.clock = &clock;
  timers::TimerList list2(timers::ClockType::kVm, clock);
  mt::FakeIrqLine irq2;
  I8254Pit restored(list2, irq2, LostTickPolicy::kDelay, &train2);
  load(restored, record);
  EXPECT_EQ(restored.stats().ticks_owed, 0u);
  ASSERT_EQ(train2.starts.size(), 1u) << "the restored program goes back to a train";
  EXPECT_EQ(train2.starts[0].period, pit_cycle_duration(1193));
}

TEST(PitStateTest, HostileRecordsAreRefused) {
  mt::FakeClock clock;
  PitRig a(clock);
  a.program(0, 2, 1193);
  const auto record = save(a.pit);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{40}, record.size() - 1}) {
    PitRig b(clock);
    EXPECT_THROW(load(b.pit, std::vector<std::uint8_t>(record.begin(), record.begin() + static_cast<std::ptrdiff_t>(n))), StateError);
  }
  auto longer = record;
  longer.push_back(0);
  PitRig c(clock);
  EXPECT_THROW(load(c.pit, longer), StateError);
  // Channel 0's fields start after the version byte: access, mode bits, mode.
  auto bad = record;
  bad[3] = 6;  // mode 6 (an alias, never the effective mode)
  PitRig d(clock);
  EXPECT_THROW(load(d.pit, bad), StateError);
  bad = record;
  bad[1] = 0;  // access mode 0 is the latch command, never stored
  PitRig e(clock);
  EXPECT_THROW(load(e.pit, bad), StateError);
  // Count register 0 (counts are 1..65536): cr_ follows 12 bytes of flags and latches.
  bad = record;
  for (int i = 0; i < 4; ++i) bad[static_cast<std::size_t>(15 + i)] = 0;
  PitRig f(clock);
  EXPECT_THROW(load(f.pit, bad), StateError);
}

// The record's tick counters, from its end: owed, the nine delivery counts, then merged,
// audits, the train's delivered count, and the abandoned flag.
constexpr std::size_t kTicksMissedFromEnd = 1 + 3 * 8 + (9 - 4) * 8;

// Issue 31: a counter no PIT could have reached (more edges than vm_clock holds input clock
// ticks) was accepted, and the train's trouble check multiplied it into a signed overflow once
// the guest ran. Refused at the load now.
TEST(PitStateTest, ACountBeyondWhatVmClockHoldsIsRefused) {
  mt::FakeClock clock;
  PitRig a(clock);
  a.program(0, 2, 1193);
  mt::advance(clock, a.list, 5ms);
  auto bad = save(a.pit);
  const std::uint64_t huge = std::uint64_t{1} << 62;
  std::memcpy(bad.data() + bad.size() - kTicksMissedFromEnd, &huge, sizeof huge);
  PitRig b(clock);
  EXPECT_THROW(load(b.pit, bad), StateError);
}

// The counts a record carries are history, not news: a restored train does not judge itself by
// the edges a train before the snapshot missed (its baselines were the fresh device's zeros
// when the reschedule started it, before the record's counts were set).
TEST(PitStateTest, ARestoredTrainIsNotHeldForTheMissesOfTheOneBeforeIt) {
  mt::FakeClock clock;
  timers::TimerList list(timers::ClockType::kVm, clock);
  mt::FakeIrqLine irq0;
  I8254Pit pit(list, irq0);
  out8(pit, 3, 0x34);
  out8(pit, 0, 1193 & 0xff);
  out8(pit, 0, 1193 >> 8);
  mt::advance(clock, list, 2s);
  auto record = save(pit);
  const std::uint64_t missed = 1000;  // well within the 2 s of ticks vm_clock holds
  std::memcpy(record.data() + record.size() - kTicksMissedFromEnd, &missed, sizeof missed);
  mt::FakePulseTrain train;
  train.clock = &clock;
  timers::TimerList list2(timers::ClockType::kVm, clock);
  mt::FakeIrqLine irq2(true);  // acknowledgements: the audit (and its trouble check) runs
  I8254Pit restored(list2, irq2, LostTickPolicy::kDelay, &train);
  load(restored, record);
  ASSERT_EQ(train.starts.size(), 1u);
  for (int i = 0; i < 3000; ++i) {
    clock.advance(1ms);
    train.pulse_new_edges(irq2);
    irq2.service();  // the guest takes every tick
    list2.run_expired(clock.now());
  }
  EXPECT_EQ(restored.stats().train_fallbacks, 0u) << "held for the old train's misses";
  EXPECT_EQ(restored.stats().ticks_missed, missed);
}

// --- The small board devices ----------------------------------------------------------------

TEST(SmallDeviceStateTest, RoundTripsAndRefusals) {
  PostPort post;
  out8(post, 0, 0x42);
  PostPort post2;
  load(post2, save(post));
  EXPECT_EQ(post2.last_code(), 0x42);
  EXPECT_EQ(post2.writes(), 1u);
  expect_truncations_refused(save(post), [] { return std::make_unique<PostPort>(); });

  DebugExit exit1([](int) {});
  DebugExit exit2([](int) {});
  load(exit2, save(exit1));
  expect_truncations_refused(save(exit1), [] { return std::make_unique<DebugExit>([](int) {}); });

  PvPanic panic1([] {});
  out8(panic1, 0, 0x01);
  PvPanic panic2([] {});
  load(panic2, save(panic1));
  EXPECT_EQ(panic2.panics(), 1u);
  expect_truncations_refused(save(panic1), [] { return std::make_unique<PvPanic>([] {}); });

  auto bad = save(post);
  bad[0] = 2;  // another layout
  PostPort post3;
  EXPECT_THROW(load(post3, bad), StateError);
}

}  // namespace
}  // namespace minivmm::devices
