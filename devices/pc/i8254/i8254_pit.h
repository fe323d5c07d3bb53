// Emulates the Intel 8254 Programmable Interval Timer (data sheet "8254 PROGRAMMABLE INTERVAL
// TIMER", Intel order number 231164) as wired on a PC: ports 0x40-0x43 (offsets 0-3: counters
// 0-2 and the control word register), a 1.193182 MHz clock, counter 0's OUT on IRQ0, counter 1
// unconnected (it once paced DRAM refresh), counter 2's GATE and OUT on port 0x61 (see
// I8254SpeakerPort).
//
// Subset: all six modes, LSB/MSB/word access with the flip-flops, counter latch, read-back
// (count and/or status for any set of counters), NULL COUNT, BCD, count 0 = 65536 (10^4 in
// BCD). Counters are computed from vm_clock, never ticked (I8254Channel); only counter 0 arms a
// timer, one for the next IRQ0 rising edge.
//
// Missing or different, on purpose:
// - Counter 0's and 1's GATE are tied high on a PC, so their hardware-triggered modes 1 and 5
//   never start and never raise IRQ0 (true of the real board too).
// - IRQ0 is edge-triggered at the PIC, so each rising edge of OUT0 is sent as irq0.pulse() and
//   the line's level is never held (QEMU drives the level; edges are all a PIC/IOAPIC in edge
//   mode sees, and pulse() is the cheapest injection).
// - IRQ0 period floor: a guest that asks for a periodic IRQ0 faster than kMinIrqPeriod (count
//   < 120, i.e. > 10 kHz) gets its IRQ0 timer clamped to that period and stats().period_clamps
//   counts it; the counter itself still counts at full speed. KVM's in-kernel PIT does the same
//   with a 200 us floor (min_timer_period_us); without a floor a guest could make the loop
//   thread spin at 600 kHz.
// - The data sheet's one-CLK load delay and mode 3's half-cycle reload point are not modelled
//   (see i8254_channel.h); no speaker sound is produced.
// - Reading the control word register (offset 3) returns 0xff, as a floating ISA bus does (QEMU
//   returns 0); it is counted as a bad access.
//
// Ticks: modes 2 and 3 on counter 0 use one Timer::arm_periodic, so a steady PIT costs the loop
// one expiry per tick and no re-arm (the dynticks fast path). What each expiry sends, and what
// a late, coalesced or merged tick becomes, is TickDelivery's (tick_delivery.h: the
// LostTickPolicy, owed ticks, the pulse-train hand-off and AckAudit, the acknowledgement
// audit); this class keeps the chip and drives it. The counters in Stats say what happened to
// every tick.
//
// Threads: read()/write()/set_gate()/out() on vCPU threads, stats()/report() on any, timer
// callbacks on the thread that runs its timer list (the loop, or the vCPU with --pit-tick
// vcpu); all take mu_. Lock order:
// I8254SpeakerPort::mu_ -> mu_ -> TickDelivery's lock -> PulseTrain's lock -> TimerList mutex.
// IRQ0 is pulsed with mu_ held (IrqLine implementations take no lock of ours).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>

#include "devices/bus/irq_line.h"
#include "devices/bus/port_io_device.h"
#include "devices/bus/report_writer.h"
#include "devices/pc/i8254/i8254_channel.h"
#include "devices/pc/i8254/lost_tick_policy.h"
#include "devices/pc/i8254/pulse_train.h"
#include "devices/pc/i8254/tick_delivery.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

namespace minivmm::devices {

class I8254Pit final : public PortIoDevice, public ReportingDevice, public StatefulDevice {
 public:
  static constexpr std::uint16_t kPortCount = 4;  // counters 0-2 and the control word
  static constexpr int kChannelCount = 3;
  // Shortest IRQ0 timer period for the periodic modes (10 kHz).
  static constexpr timers::Nanos kMinIrqPeriod{100'000};
  // IRQ0's delivery limits (TickDelivery's): the kDelay backlog's cap, and the ticks between
  // two reads of the guest's acknowledgement count.
  static constexpr std::uint64_t kMaxOwedTicks = TickDelivery::kMaxOwedTicks;
  static constexpr std::uint64_t kAuditEveryTicks = TickDelivery::kAuditEveryTicks;

  // What happened to IRQ0's ticks (TickDelivery::Stats), and the chip's own counters.
  struct Stats : TickDelivery::Stats {
    std::uint64_t reprogrammings = 0;   // control words and complete counts, any counter
    std::uint64_t period_clamps = 0;    // periodic IRQ0 programmings raised to kMinIrqPeriod
    std::uint64_t timer_arms = 0;       // IRQ0 timer arms (a steady periodic tick: one)
    std::uint64_t bad_accesses = 0;     // bytes outside 0x40-0x43, reads of the control port
  };

  // `vm_timers` must run on vm_clock; its clock drives the counters. `irq0` is ISA IRQ0.
  // With `train`, a periodic program (modes 2 and 3) is handed to it instead of the IRQ0 timer:
  // its edges then reach IRQ0 without this device running per tick, so the lost-tick policy
  // and the late/coalesced counters apply only to what the timer delivers (one-shot modes, or
  // a train that refused to start).
  I8254Pit(timers::TimerList& vm_timers, IrqLine& irq0,
           LostTickPolicy policy = LostTickPolicy::kDelay, PulseTrain* train = nullptr);
  ~I8254Pit() override = default;
  I8254Pit(const I8254Pit&) = delete;
  I8254Pit& operator=(const I8254Pit&) = delete;

  std::string_view name() const noexcept override { return report_key(); }

  // The ports are 8 bits wide. An access of width > 1 at offset N is the byte access repeated at
  // N, N+1, ... the way the ISA bus splits a 16-bit `in ax, 0x40` into 0x40 then 0x41; bytes
  // beyond offset 3 read 0xff and are ignored on write (and counted as bad accesses).
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  // The counters' GATE and OUT pins (QEMU pit_set_gate / pit_get_out), for board wiring such as
  // port 0x61. `channel` outside 0..2 is ignored (OUT reads false).
  void set_gate(int channel, bool level) noexcept;
  bool gate(int channel) const noexcept;
  bool out(int channel) noexcept;

  std::string_view report_key() const noexcept override { return "pit"; }
  // Every Stats counter under its field's name (acks_abandoned as a flag), then, with a pulse
  // train, the train's own report as "kernel_train".
  void report(ReportWriter& out) const override;

  // StatefulDevice (i8254_state.cc): the three counters, the chip's counters and the tick
  // delivery's (owed ticks included). Loading runs reschedule_locked() from the loaded counter
  // 0: its edges derive from the counter's run start on vm_clock, so the IRQ0 timer (or the
  // pulse train, which arms on resume if the VM is paused) continues on the same grid.
  std::string_view state_key() const noexcept override { return report_key(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

  const timers::Clock& clock() const noexcept { return clock_; }
  LostTickPolicy policy() const noexcept { return delivery_.policy(); }
  Stats stats() const;

 private:
  void write_byte_locked(std::uint16_t offset, std::uint8_t value, timers::Nanos now) noexcept;
  std::uint8_t read_byte_locked(std::uint16_t offset, timers::Nanos now) noexcept;
  void write_control_locked(std::uint8_t value, timers::Nanos now) noexcept;
  // Counter 0 changed what it does: a new program for the delivery, the IRQ0 timer re-armed.
  void reschedule_locked(timers::Nanos now) noexcept;
  // The IRQ0 timer's period for counter 0's `period` (0: one-shot), clamped to kMinIrqPeriod.
  timers::Nanos irq_period_locked(timers::Nanos period) noexcept;
  void on_irq_timer(const timers::Timer::Expiry& expiry) noexcept;

  const timers::Clock& clock_;

  // Guards everything below but delivery_ (its own lock, taken after this one).
  mutable std::mutex mu_;
  std::array<I8254Channel, kChannelCount> channels_;
  // The IRQ0 timer's next expiry as last armed and advanced; an expiry that does not match was
  // superseded by a reprogramming on a vCPU thread while the loop was about to run it.
  std::optional<timers::Nanos> expected_deadline_;
  timers::Nanos timer_period_{0};  // the IRQ0 timer's period after clamping; 0 = one-shot
  Stats stats_;  // the chip's counters; the delivery keeps its own

  TickDelivery delivery_;
  // Last member: destroyed (and so cancelled) first, before the state its callback uses.
  timers::Timer irq_timer_;
};

}  // namespace minivmm::devices
