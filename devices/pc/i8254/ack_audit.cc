#include "devices/pc/i8254/ack_audit.h"

#include <algorithm>

#include "devices/log/log.h"

namespace minivmm::devices {

AckAudit::AckAudit(IrqLine& line, PulseTrain* train) noexcept
    : line_(line), train_(train), unavailable_(!line.acknowledgements().has_value()) {}

std::uint64_t AckAudit::edges_sent() noexcept {
  return edges_sent_ + (train_ ? train_->delivered() : 0);
}

std::optional<AckAudit::Resolution> AckAudit::resolve(bool train_running) noexcept {
  // The edges are counted before the acknowledgements are read: an edge the train delivers in
  // between may be acknowledged already or still on its way through KVM's irqfd worker, and
  // counted as sent but not acknowledged it would pass for one that merged. (The device's own
  // pulses cannot race: its owner's lock is held. One just sent and still in KVM's worker
  // counts as the one that may be pending.)
  const std::uint64_t sent = edges_sent();
  const auto acks = line_.acknowledgements();
  if (!acks) {
    unavailable_ = true;
    return std::nullopt;
  }
  ++audits_;
  if (acks_seen_) check_stuck(*acks, sent);
  last_acks_ = *acks;
  if (!acknowledged_yet(*acks, sent)) return std::nullopt;
  const std::uint64_t ours = *acks - std::min(*acks, acks_foreign_);
  const std::uint64_t resolved = ours + edges_merged_;
  if (resolved > sent) {
    // More acknowledgements than edges counted before them: edges the train delivered since,
    // something else that raised the line (a test device on the same GSI), or an edge declared
    // merged in doubt that was in fact pending. Only what exceeds every edge sent by now is
    // not ours.
    const std::uint64_t sent_now = train_running ? edges_sent() : sent;
    if (resolved > sent_now) acks_foreign_ += resolved - sent_now;
    return Resolution{};
  }
  const std::uint64_t unresolved = sent - resolved;
  if (unresolved == 0) in_doubt_ = false;
  if (unresolved < 2) return Resolution{unresolved, 0};  // one may still be pending
  const std::uint64_t merged = unresolved - 1;
  edges_merged_ += merged;
  return Resolution{1, merged};
}

bool AckAudit::acknowledged_yet(std::uint64_t acks, std::uint64_t sent) noexcept {
  if (acks_seen_) return true;
  if (acks != 0) {
    acks_seen_ = true;
    acks_moved_sent_ = sent;
    return true;
  }
  // Nothing is concluded before the guest's first acknowledgement: until then it may simply
  // not have enabled interrupts, or take the IRQ through a path that never reports one.
  if (sent >= kAcklessEdgesLimit) {
    log::info("pit: no acknowledgement of IRQ0 in {} edges; ticks go out unchecked", sent);
    unavailable_ = true;
    abandoned_ = true;
    line_.stop_acknowledgements();
  }
  return false;
}

void AckAudit::check_stuck(std::uint64_t acks, std::uint64_t sent) noexcept {
  if (acks != last_acks_ || sent < acks_moved_sent_) {
    acks_moved_sent_ = sent;
    return;
  }
  if (sent - acks_moved_sent_ < kStuckEdgesLimit) return;
  acks_moved_sent_ = sent;  // the next release, if it is still stuck, after as many again
  if (!line_.release_held_level()) return;
  ++level_releases_;
  log::info("pit: IRQ0 unacknowledged for {} edges; released the level its wire held",
            kStuckEdgesLimit);
}

AckAudit::Doubt AckAudit::judge_doubt(bool newest_edge_may_be_pending) noexcept {
  // One edge unresolved: pending, or merged unseen (it came while the previous one was pending
  // or in service, and that one's EOI was counted). Nothing tells which at one look.
  if (!in_doubt_) {
    in_doubt_ = true;
    doubt_acks_ = last_acks_;
    doubtful_retries_ = 0;
    return Doubt::kWait;
  }
  if (last_acks_ != doubt_acks_ && !newest_edge_may_be_pending) {
    // The guest took an interrupt since: the edge in doubt is not pending, so it merged.
    // While a train runs its edges keep coming, so the one unresolved now may instead be its
    // newest, still pending: that is believed only when the newest edge came less than a
    // quarter period ago (a running guest takes one in far less). Otherwise owing it would
    // hand the guest a tick twice; waiting for the probe instead made a guest catching up on
    // 87 owed ticks take over a second (CI, ctest -j2).
    ++edges_merged_;
    in_doubt_ = false;
    return Doubt::kMerged;
  }
  if (++doubtful_retries_ > kMaxDoubtfulRetries) {
    // No interrupt taken for several looks: a guest with interrupts off, or one idling for a
    // tick that merged unseen. Waiting would stall the second for ever, so probe with it: if
    // the first edge was pending the probe merges and the next reading finds it; if not, the
    // guest takes it and the doubt resolves as above.
    doubtful_retries_ = 0;
    return Doubt::kProbe;
  }
  return Doubt::kWait;
}

}  // namespace minivmm::devices
