// How a periodic timer's ticks reach the guest over an edge-triggered IRQ line: the policy half
// of the PIT's counter 0 (I8254Pit keeps the chip and its timer; this decides what each expiry
// sends, and what a tick the guest did not get becomes).
//
// - On time: one plain IrqLine::pulse() per tick, the cheapest injection.
// - Late (the host ran the expiry a whole period or more late): LostTickPolicy. kDelay owes the
//   missed ticks and sends them one per expiry or retry, never two edges with no guest code
//   between them (they would merge): a catch-up at the guest's pace, not a burst. At most
//   kMaxOwedTicks are owed; beyond that the oldest are counted lost, so a guest that never
//   takes IRQ0 (interrupts off for minutes) cannot build an unbounded burst. kDiscard drops
//   them, counts them lost and moves the grid to its first point after now.
// - Coalesced: an owed tick that finds IRQ0 still pending is retried a fraction of a period
//   later, backing off while the guest keeps it pending. Without an interrupt-acknowledge
//   notification (KVM's PIT reinjects on the guest's EOI) the next best signal is time.
// - Merged unseen: on-time ticks and a pulse train's edges go out unchecked; every
//   kAuditEveryTicks ticks (or on the train's own wakeups) AckAudit reads the guest's
//   acknowledgement count and the edges it shows merged are owed (kDelay) or lost (kDiscard).
// - A pulse train (PulseTrain: the host kernel raising the edges itself) takes a periodic
//   schedule when it can; then this object runs only for the audit and the redeliveries. Edges
//   the train reports missed (PulseTrain::missed()) are owed or lost like merged ones, at the
//   same turns.
// - A train whose edges keep going missing or merging (kFallbackTroubleEdges at one audit: the
//   host holds off the kernel worker that injects them) is held, and this object's own
//   periodic timer delivers on the same grid through IrqLine::pulse_now() — the loop thread's
//   KVM_IRQ_LINE, which no worker queue can delay — for a hold time that doubles each time
//   (kFirstFallbackHold .. kMaxFallbackHold; back to the first after kTrainTrustedAfter of a
//   train without trouble). Then the train is tried again.
// - Owed ticks go out through IrqLine::pulse_now(): the calling thread raises them itself, so a
//   catch-up never waits in the host worker queue that made the ticks late (docs/timekeeping.md).
//
// Threads: the owner's calls on its threads (the PIT's, under its lock), the retry timer on the
// thread that runs its list, the train's turn hook on the train's; all take mu_. Lock order:
// the owner's lock -> mu_ -> PulseTrain's lock -> TimerList mutex. The line is pulsed with mu_
// held (IrqLine implementations take no lock of ours).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

#include "devices/bus/device_state.h"
#include "devices/bus/irq_line.h"
#include "devices/pc/i8254/ack_audit.h"
#include "devices/pc/i8254/lost_tick_policy.h"
#include "devices/pc/i8254/pulse_train.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

namespace minivmm::devices {

class TickDelivery {
 public:
  // kDelay: most ticks owed but not yet delivered; beyond it the oldest are counted lost. One
  // second's worth at 1 kHz.
  static constexpr std::uint64_t kMaxOwedTicks = 1000;
  // How often the guest's acknowledgement count is read (a syscall on KVM) to find ticks that
  // merged: every this many periodic ticks of the owner's timer, and at most every twice that,
  // on the train's own wakeups (its turn hook), while a pulse train delivers them. A merged
  // tick is owed (kDelay) and redelivered at most that many periods late.
  static constexpr std::uint64_t kAuditEveryTicks = 16;
  // Retry pacing for owed ticks: a quarter period gives the guest time to run its handler,
  // bounded so a slow tick still retries promptly and a fast one not absurdly often.
  static constexpr timers::Nanos kMinRetryDelay{25'000};
  static constexpr timers::Nanos kMaxRetryDelay{1'000'000};
  // Edges found missed or merged since the last audit of a running train that make this object
  // hold the train and deliver the ticks itself: at least this many, and at least
  // 1/kFallbackTroubleShare of the periods since. An idle guest on a quiet host has none; a few
  // merged edges are a vCPU the host ran a few periods late (at 1 kHz, 10-30 a second here
  // beside a build), which holding the train would not help; half the periods is a stall.
  static constexpr std::uint64_t kFallbackTroubleEdges = 3;
  static constexpr std::int64_t kFallbackTroubleShare = 2;
  // Merged edges count toward a fallback only once the train has run this long: a booting
  // guest leaves many ticks unacknowledged (interrupts off while it sets up), which is no
  // fault of the train's. Missed edges (PulseTrain::missed()) count from the start: they are.
  static constexpr timers::Nanos kTrainSettle{1'000'000'000};
  static constexpr timers::Nanos kFirstFallbackHold{1'000'000'000};
  static constexpr timers::Nanos kMaxFallbackHold{64'000'000'000};
  static constexpr timers::Nanos kTrainTrustedAfter{30'000'000'000};

  struct Stats {
    std::uint64_t ticks_injected = 0;   // rising edges delivered to the interrupt controller
    std::uint64_t ticks_late = 0;       // periodic expiries run a whole period or more late
    std::uint64_t ticks_lost = 0;       // never delivered: discarded, over kMaxOwedTicks, or
                                        // still owed when the program was replaced
    std::uint64_t ticks_coalesced = 0;  // owed-tick tries that found the IRQ still pending (a
                                        // checked pulse merged, or the acknowledgement count
                                        // said busy): retried later
    std::uint64_t ticks_merged = 0;     // unchecked edges (on-time ticks, the pulse train's) that
                                        // the acknowledgement count shows merged: owed (kDelay)
                                        // or lost (kDiscard); not in ticks_injected
    std::uint64_t ticks_injected_by_pit = 0;  // the edges this object sent itself (the owner's
                                              // timer, owed-tick retries); ticks_injected is
                                              // these plus the train's, less the merged ones
    std::uint64_t ack_audits = 0;       // reads of the guest's acknowledgement count
    std::uint64_t level_releases = 0;   // IRQ0 found stuck raised and let go (AckAudit)
    bool acks_abandoned = false;        // none came in kAcklessEdgesLimit edges: plain edges
    std::uint64_t ticks_missed = 0;     // the pulse train's edges that never reached the line
                                        // (PulseTrain::missed()): owed (kDelay) or lost
    std::uint64_t ticks_redelivered = 0;  // owed ticks (late, merged or missed) sent later, at
                                          // the guest's pace; part of ticks_injected
    std::uint64_t ticks_owed = 0;       // kDelay backlog right now
    std::uint64_t train_starts = 0;     // periodic programs handed to the pulse train
    std::uint64_t train_fallbacks = 0;  // times the train was held for late edges
    std::uint64_t fallback_ticks = 0;   // ticks this object's own timer sent meanwhile
  };

  // A periodic program's edges: at `first`, then every `period` (> 0).
  struct Schedule {
    timers::Nanos first;
    timers::Nanos period;
  };

  // `timers` holds the retry timer (the owner's list: the same thread runs both). `irq` is the
  // line; `train` (may be null) takes periodic schedules.
  TickDelivery(timers::TimerList& timers, IrqLine& irq, LostTickPolicy policy,
               PulseTrain* train) noexcept;
  ~TickDelivery();
  TickDelivery(const TickDelivery&) = delete;
  TickDelivery& operator=(const TickDelivery&) = delete;

  // The owner's timer was reprogrammed: what the old program still owed is of no use to the
  // new one (a guest switching from periodic to one-shot would take it for its one-shot), so
  // it is lost, and the train stops. `periodic` is the new program's schedule if it is
  // periodic; returns true if the train runs it (the owner arms no timer), false if the owner's
  // timer delivers it through periodic_expiry().
  bool restart(const std::optional<Schedule>& periodic, timers::Nanos now) noexcept;
  // A one-shot program's single edge (modes 0 and 4): sent as it is, no policy.
  void one_shot_edge() noexcept;
  // The owner's periodic timer fired for `deadline` (its list has already moved it one period
  // on) at `now`. Returns the grid's new next point when kDiscard skipped missed periods: the
  // owner re-arms its periodic timer there.
  std::optional<timers::Nanos> periodic_expiry(timers::Nanos deadline,
                                               timers::Nanos now) noexcept;
  // Whether this object's own timer delivers the ticks for a held train right now.
  bool falling_back() const;

  // What a snapshot keeps (i8254_state.cc): the ticks owed and the counters, so that the run
  // report of a restored guest counts its whole life (the audit's and the train's counts too,
  // carried over as a base their fresh objects add to). The train and the fallback start fresh.
  struct Saved {
    std::uint64_t owed_ticks = 0;
    Stats stats;  // this object's own counters (stats_)
    std::uint64_t merged = 0, audits = 0, train_delivered = 0;
    bool abandoned = false;
  };
  // `due_ticks`: periodic ticks whose time has come that the owner's timer has not run yet
  // (kDelay's late grid points): the record owes them too, since the restored grid starts
  // after now.
  void save_state(StateWriter& out, std::uint64_t due_ticks) const;
  // `now`: vm_clock at the load. Every count is bounded by what a PIT could have counted by
  // then (one edge per input clock tick at most), so nothing loaded overflows what it feeds.
  static Saved read_state(StateReader& in, timers::Nanos now);
  // After restart() gave the restored program its schedule: takes `saved` over and, if ticks
  // are owed, arms the retry that delivers them. `periodic` must be true if any are owed.
  void restore(const Saved& saved, timers::Nanos now) noexcept;

  LostTickPolicy policy() const noexcept { return policy_; }
  PulseTrain* train() const noexcept { return train_; }
  Stats stats() const;

 private:
  std::optional<timers::Nanos> periodic_expiry_locked(timers::Nanos deadline,
                                                      timers::Nanos now) noexcept;
  void deliver_periodic_tick_locked(bool late, timers::Nanos now) noexcept;
  // At an audit of a running train: holds it if enough more went missing or merged since the
  // last audit (kFallbackTroubleEdges, kFallbackTroubleShare).
  void check_train_locked(timers::Nanos now) noexcept;
  void fall_back_locked(timers::Nanos now) noexcept;
  void end_fallback_locked() noexcept;
  void on_fallback_timer(const timers::Timer::Expiry& expiry) noexcept;
  // Sends one owed tick if the line is free, else backs the retry off; re-arms the retry.
  void deliver_owed_locked(timers::Nanos now) noexcept;
  // Whether an owed tick may go out now (the audit's view of the line).
  bool line_free_for_owed_locked(timers::Nanos now) noexcept;
  // Reads the guest's acknowledgement count, then delivers what is owed.
  void audit_locked(timers::Nanos now) noexcept;
  // The train's newly missed edges, made owed (kDelay, periodic program) or lost.
  void collect_missed_locked() noexcept;
  // Ticks of the periodic program that never reached the guest: owed (kDelay) or lost.
  void owe_or_lose_locked(std::uint64_t ticks) noexcept;
  // The reading alone, with the merged edges it found made owed (kDelay) or lost.
  std::optional<AckAudit::Resolution> resolve_locked() noexcept;
  // A train edge came less than a quarter period ago, and may be the one still pending.
  bool newest_train_edge_recent_locked(timers::Nanos now) const noexcept;
  void cap_owed_locked() noexcept;
  void on_retry_timer(const timers::Timer::Expiry& expiry) noexcept;
  // The train's wakeup (its thread, no lock held): the audit, when one is due.
  void on_train_turn(timers::Nanos now) noexcept;
  void pulse_locked() noexcept;
  timers::Nanos base_retry_delay() const noexcept;

  IrqLine& irq_;
  const LostTickPolicy policy_;
  PulseTrain* const train_;

  // Guards everything below.
  mutable std::mutex mu_;
  AckAudit audit_;
  timers::Nanos period_{0};        // the periodic program's period; 0 = none (one-shot)
  bool train_running_ = false;     // the periodic program is the train's, not the timer's
  timers::Nanos train_first_{0};   // the running train's first edge: its grid's origin
  timers::Nanos last_train_audit_{0};  // when the train's turn hook last audited
  std::uint64_t owed_ticks_ = 0;   // kDelay: ticks due but not yet accepted by the controller
  std::uint64_t train_missed_seen_ = 0;  // PulseTrain::missed() at the last collection
  std::uint64_t trouble_seen_ = 0;       // merged at the last check_train_locked()
  std::uint64_t missed_checked_ = 0;     // ticks_missed at the last check_train_locked()
  timers::Nanos trouble_checked_{0};     // ...and when
  bool trouble_counts_ = false;          // past the guest's first acknowledgement: merges are
                                         // the host's doing, not interrupts still off
  bool falling_back_ = false;            // the train is held; fallback_timer_ delivers
  bool direct_ = false;                  // pulses go out through pulse_now() (falling back)
  timers::Nanos fallback_until_{0};      // when the train is tried again
  timers::Nanos fallback_hold_ = kFirstFallbackHold;  // the next fallback's hold
  timers::Nanos train_since_{0};         // when the running train started
  std::uint64_t ticks_since_audit_ = 0;
  timers::Nanos retry_delay_{0};
  // ticks_injected counts this object's own edges here; stats() adds the train's.
  Stats stats_;
  // Counts of the audit and the train before a restore (their objects start from 0).
  std::uint64_t carried_merged_ = 0, carried_audits_ = 0, carried_delivered_ = 0;
  bool carried_abandoned_ = false;

  // Last members: destroyed (and so cancelled) first, before the state their callbacks use.
  timers::Timer fallback_timer_;
  timers::Timer retry_timer_;
};

}  // namespace minivmm::devices
