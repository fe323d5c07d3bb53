// Which of a timer's IRQ edges the guest actually saw, from the guest's acknowledgement count
// (IrqLine::acknowledgements(): KVM's irqfd resampler counts the EOIs). Every edge that reached
// the controller (the device's own, counted by count_edge(), plus a pulse train's) ends
// acknowledged by the guest, merged with one still pending, or pending — and at most one can
// be pending — so sent - acknowledged - merged >= 2 means all but one of those merged. A vCPU
// the host does not run for a while (many guests on few CPUs) leaves the IRQ pending while
// on-time edges keep coming: without this they vanish silently.
//
// What the count cannot say, and the rules for it:
// - Nothing is concluded before the guest's first acknowledgement (it may not have enabled
//   interrupts yet). A count still 0 after kAcklessEdgesLimit edges means the controller path
//   the guest uses reports none: the audit stops for good and the wire goes back to plain
//   edges (IrqLine::stop_acknowledgements()).
// - Acknowledgements beyond every edge sent are not ours (another source on the line): they
//   are set aside as foreign, so they neither hide a merged edge nor pass for a tick.
// - One edge unresolved is either pending or merged unseen; judge_doubt() decides, over
//   several looks, which to believe.
//
// Not thread-safe: its owner (TickDelivery) calls it under its own lock.
#pragma once

#include <cstdint>
#include <optional>

#include "devices/bus/irq_line.h"
#include "devices/pc/i8254/pulse_train.h"
#include "timers/clock.h"

namespace minivmm::devices {

class AckAudit {
 public:
  // Edges after which a count that never moved from 0 means the controller path the guest uses
  // reports no acknowledgements: the audit stops and the line goes back to plain edges.
  static constexpr std::uint64_t kAcklessEdgesLimit = 512;
  // Edges with the count standing still, after the guest has acknowledged before, at which the
  // line is taken for stuck and its held level released (IrqLine::release_held_level()). Seen
  // on a nested host under a storm of pauses: KVM's resampler kept IRQ0 raised with no EOI to
  // come, every later edge merged, and the guest never ticked again. A guest that merely keeps
  // interrupts off this long loses nothing by it: an edge the controller latched stays latched.
  static constexpr std::uint64_t kStuckEdgesLimit = 512;
  // Looks at one edge in doubt, with no interrupt taken meanwhile, before probing with a tick.
  static constexpr std::uint64_t kMaxDoubtfulRetries = 4;

  // Asks `line` once whether it counts acknowledgements at all: a wire that cannot (a test
  // fake, another VMM's line) is never asked again. `train` (may be null) delivers edges on
  // the same line; its delivered() count is part of what was sent.
  AckAudit(IrqLine& line, PulseTrain* train) noexcept;

  // Whether the count is read (false: the line cannot count, or the audit was abandoned).
  bool active() const noexcept { return !unavailable_; }
  // One of the device's own edges reached the controller.
  void count_edge() noexcept { ++edges_sent_; }

  struct Resolution {
    std::uint64_t unresolved = 0;  // 0: the line is free; 1: one edge pending, or in doubt
    std::uint64_t merged = 0;      // edges this reading found merged (all but the last one)
  };
  // Reads the count and accounts for every edge sent so far. nullopt when there is no usable
  // count: the line cannot count (active() turns false), or no acknowledgement has come yet.
  // `train_running`: the train may deliver more edges while this runs.
  std::optional<Resolution> resolve(bool train_running) noexcept;

  enum class Doubt {
    kWait,    // the edge may be pending: do not send, try later
    kMerged,  // it merged unseen; now counted merged (the caller owes its tick)
    kProbe,   // no way to tell for too long: send anyway
  };
  // After resolve() left one edge unresolved, at an attempt to send another. A change in the
  // count since the doubt began means the guest took an interrupt, so the edge is not pending —
  // unless `newest_edge_may_be_pending` (a train's edge came less than a quarter period ago).
  Doubt judge_doubt(bool newest_edge_may_be_pending) noexcept;
  // Whether the newest edge of a train's grid (first, first + period, ...) came less than a
  // quarter period before `now`: a running guest takes an interrupt in far less, so until then
  // that edge may be the one still pending.
  static constexpr bool edge_may_be_pending(timers::Nanos now, timers::Nanos first,
                                            timers::Nanos period) noexcept {
    return now >= first && (now - first) % period < period / 4;
  }

  std::uint64_t edges_merged() const noexcept { return edges_merged_; }
  // The guest has acknowledged at least once: merges counted from here on are the host's doing
  // (the first reading finds the edges sent before the guest enabled interrupts merged too).
  bool acknowledged_once() const noexcept { return acks_seen_; }
  std::uint64_t audits() const noexcept { return audits_; }  // reads of the count
  bool abandoned() const noexcept { return abandoned_; }
  std::uint64_t level_releases() const noexcept { return level_releases_; }

 private:
  // Edges that reached the controller: ours and the train's.
  std::uint64_t edges_sent() noexcept;
  // Whether the guest has acknowledged anything yet, given this reading; abandons the audit
  // when `sent` reached kAcklessEdgesLimit without.
  bool acknowledged_yet(std::uint64_t acks, std::uint64_t sent) noexcept;
  // Releases the line's held level when kStuckEdgesLimit edges went by with the count still.
  void check_stuck(std::uint64_t acks, std::uint64_t sent) noexcept;

  IrqLine& line_;
  PulseTrain* const train_;

  std::uint64_t edges_sent_ = 0;     // the device's own edges that the controller took
  std::uint64_t edges_merged_ = 0;   // found merged so far
  std::uint64_t acks_foreign_ = 0;   // acknowledgements of edges not ours (another source)
  std::uint64_t audits_ = 0;
  std::uint64_t level_releases_ = 0;  // stuck lines released (kStuckEdgesLimit)
  std::uint64_t acks_moved_sent_ = 0;  // edges sent when the count last moved
  bool unavailable_ = false;  // the line cannot count acknowledgements: no more readings
  bool abandoned_ = false;    // none came in kAcklessEdgesLimit edges
  bool acks_seen_ = false;    // the guest has acknowledged at least once
  // An edge unresolved at an attempt to send (in_doubt_), the count when that was first seen
  // (the last reading is last_acks_), and the looks since without any acknowledgement.
  bool in_doubt_ = false;
  std::uint64_t doubtful_retries_ = 0;
  std::uint64_t doubt_acks_ = 0;
  std::uint64_t last_acks_ = 0;
};

}  // namespace minivmm::devices
