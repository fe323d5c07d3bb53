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
// one expiry per tick and no re-arm (the dynticks fast path). A late expiry follows the
// LostTickPolicy (lost_tick_policy.h); the counters in Stats say what happened to every tick.
//
// Threads: read()/write()/set_gate()/out() on vCPU threads, timer callbacks on the thread that
// runs its timer list (the loop, or the vCPU with --pit-tick vcpu); all take mu_. Lock order:
// I8254SpeakerPort::mu_ -> mu_ -> PulseTrain's lock -> TimerList mutex. IRQ0 is pulsed with mu_
// held (IrqLine implementations take no lock of ours).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>

#include "devices/pc/i8254/i8254_channel.h"
#include "devices/bus/irq_line.h"
#include "devices/pc/i8254/lost_tick_policy.h"
#include "devices/pc/i8254/pulse_train.h"
#include "devices/bus/port_io_device.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

namespace minivmm::devices {

class I8254Pit final : public PortIoDevice {
 public:
  // Attach at port 0x40, length 4.
  static constexpr std::uint16_t kBasePort = 0x40;
  static constexpr std::uint16_t kPortCount = 4;
  static constexpr int kChannelCount = 3;
  // Shortest IRQ0 timer period for the periodic modes (10 kHz).
  static constexpr timers::Nanos kMinIrqPeriod{100'000};
  // kDelay: most ticks owed but not yet delivered; beyond it the oldest are counted lost, so a
  // guest that never acknowledges IRQ0 (interrupts off for minutes) cannot build an unbounded
  // burst. One second's worth at 1 kHz.
  static constexpr std::uint64_t kMaxOwedTicks = 1000;
  // How often the guest's acknowledgement count is read (IrqLine::acknowledgements(), a syscall
  // on KVM) to find ticks that merged: every this many periodic ticks from the loop, and at most
  // every twice that, on the train's own wakeups (its turn hook), while a pulse train delivers
  // them. A merged tick is owed (kDelay) and redelivered at most that many periods late.
  static constexpr std::uint64_t kAuditEveryTicks = 16;
  // Edges after which a count that never moved from 0 means the controller path the guest uses
  // reports no acknowledgements: the audit stops and IRQ0 goes back to plain edges.
  static constexpr std::uint64_t kAcklessEdgesLimit = 512;

  struct Stats {
    std::uint64_t ticks_injected = 0;   // IRQ0 rising edges delivered to the interrupt controller
    std::uint64_t ticks_late = 0;       // periodic expiries run a whole period or more late
    std::uint64_t ticks_lost = 0;       // never delivered: discarded, over kMaxOwedTicks, or
                                        // still owed when the guest reprogrammed counter 0
    std::uint64_t ticks_coalesced = 0;  // owed-tick tries that found IRQ0 still pending (a
                                        // checked pulse merged, or the acknowledgement count
                                        // said busy): retried later
    std::uint64_t ticks_merged = 0;     // unchecked edges (on-time ticks, the pulse train's) that
                                        // the acknowledgement count shows merged: owed (kDelay)
                                        // or lost (kDiscard); not in ticks_injected
    std::uint64_t ticks_injected_by_pit = 0;  // the edges this device sent itself (its timer,
                                              // owed-tick retries); ticks_injected is these plus
                                              // the pulse train's, less the merged ones
    std::uint64_t ack_audits = 0;       // reads of the guest's acknowledgement count
    bool acks_abandoned = false;        // none came in kAcklessEdgesLimit edges: plain edges
    std::uint64_t ticks_owed = 0;       // kDelay backlog right now
    std::uint64_t reprogrammings = 0;   // control words and complete counts, any counter
    std::uint64_t period_clamps = 0;    // periodic IRQ0 programmings raised to kMinIrqPeriod
    std::uint64_t timer_arms = 0;       // IRQ0 timer arms (a steady periodic tick: one)
    std::uint64_t train_starts = 0;     // periodic programs handed to the pulse train
    std::uint64_t bad_accesses = 0;     // bytes outside 0x40-0x43, reads of the control port
  };

  // `vm_timers` must run on vm_clock; its clock drives the counters. `irq0` is ISA IRQ0.
  // With `train`, a periodic program (modes 2 and 3) is handed to it instead of the IRQ0 timer:
  // its edges then reach IRQ0 without this device running per tick, so the lost-tick policy
  // and the late/coalesced counters apply only to what the timer delivers (one-shot modes, or
  // a train that refused to start).
  I8254Pit(timers::TimerList& vm_timers, IrqLine& irq0,
           LostTickPolicy policy = LostTickPolicy::kDelay, PulseTrain* train = nullptr);
  ~I8254Pit() override;
  I8254Pit(const I8254Pit&) = delete;
  I8254Pit& operator=(const I8254Pit&) = delete;

  std::string_view name() const noexcept override { return "i8254-pit"; }

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

  const timers::Clock& clock() const noexcept { return clock_; }
  LostTickPolicy policy() const noexcept { return policy_; }
  Stats stats() const;

 private:
  void write_byte_locked(std::uint16_t offset, std::uint8_t value, timers::Nanos now) noexcept;
  std::uint8_t read_byte_locked(std::uint16_t offset, timers::Nanos now) noexcept;
  void write_control_locked(std::uint8_t value, timers::Nanos now) noexcept;
  // Counter 0 changed what it does: drop what the old program owed, re-arm the IRQ0 timer.
  void reschedule_locked(timers::Nanos now) noexcept;
  void on_irq_timer(const timers::Timer::Expiry& expiry) noexcept;
  void on_retry_timer(const timers::Timer::Expiry& expiry) noexcept;
  void deliver_periodic_tick_locked(bool late, timers::Nanos now) noexcept;
  void deliver_owed_locked(timers::Nanos now) noexcept;
  // Reads the guest's acknowledgement count and turns edges it shows merged into owed ticks,
  // then delivers what is owed.
  void audit_locked(timers::Nanos now) noexcept;
  // The reading and bookkeeping alone: the edges now unresolved (0: IRQ0 is free; 1: one edge
  // pending, or merged in doubt), or nullopt when the line cannot count acknowledgements.
  std::optional<std::uint64_t> resolve_acks_locked() noexcept;
  // Edges that reached the controller: ours and the train's.
  std::uint64_t edges_sent_locked() noexcept;
  // The train's wakeup (loop thread, no lock held): the audit, when one is due.
  void on_train_turn(timers::Nanos now) noexcept;
  void pulse_locked() noexcept;
  timers::Nanos base_retry_delay() const noexcept;

  const timers::Clock& clock_;
  IrqLine& irq0_;
  const LostTickPolicy policy_;
  PulseTrain* const train_;

  // Guards everything below; lock order mu_ -> TimerList mutex.
  mutable std::mutex mu_;
  std::array<I8254Channel, kChannelCount> channels_;
  // The IRQ0 timer's next expiry as last armed and advanced; an expiry that does not match was
  // superseded by a reprogramming on a vCPU thread while the loop was about to run it.
  std::optional<timers::Nanos> expected_deadline_;
  timers::Nanos timer_period_{0};  // the IRQ0 timer's period after clamping; 0 = one-shot
  bool train_running_ = false;     // the periodic program is the train's, not the timer's
  std::uint64_t owed_ticks_ = 0;   // kDelay: ticks due but not yet accepted by the controller
  timers::Nanos retry_delay_{0};
  Stats stats_;

  // The acknowledgement audit. Every edge that reached the controller (edges_sent_ plus the
  // train's) ends acknowledged by the guest, merged with one still pending, or pending — and at
  // most one can be pending — so sent - acknowledged - merged >= 2 means all but one of those
  // merged. A vCPU the host does not run for a while (many guests on few CPUs) leaves IRQ0
  // pending while the loop's on-time ticks keep coming: without this they vanish silently.
  std::uint64_t edges_sent_ = 0;     // this device's pulses that the controller took
  std::uint64_t edges_merged_ = 0;   // found merged so far
  std::uint64_t acks_foreign_ = 0;   // acknowledgements of edges not ours (another source)
  std::uint64_t ticks_since_audit_ = 0;
  timers::Nanos last_train_audit_{0};  // when the train's turn hook last audited
  timers::Nanos train_first_{0};       // the running train's first edge: its grid's origin
  bool acks_unavailable_ = false;    // the line cannot count acknowledgements: no audits
  bool acks_seen_ = false;           // the guest has acknowledged IRQ0 at least once
  // An edge unresolved at an owed-tick retry (in_doubt_), the acknowledgement count when that
  // was first seen (the last read is last_acks_), and the retries since without any.
  bool in_doubt_ = false;
  std::uint64_t doubtful_retries_ = 0;
  std::uint64_t doubt_acks_ = 0;
  std::uint64_t last_acks_ = 0;
  static constexpr std::uint64_t kMaxDoubtfulRetries = 4;

  // Last members: destroyed (and so cancelled) first, before the state their callbacks use.
  timers::Timer irq_timer_;
  // kDelay: redelivers owed ticks after a coalesced pulse. Without an interrupt-acknowledge
  // notification (KVM's PIT reinjects on the guest's EOI) the next best signal is time: retry a
  // fraction of a period later, backing off while the guest keeps IRQ0 pending.
  timers::Timer retry_timer_;
};

}  // namespace minivmm::devices
