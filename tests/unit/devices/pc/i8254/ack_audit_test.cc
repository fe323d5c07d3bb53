// AckAudit on its own: edges sent against a fake line's acknowledgement count (KVM's irqfd
// resampler), the guest's part played by hand (take, EOI). Each test is one rule of the audit.
#include "devices/pc/i8254/ack_audit.h"

#include <gtest/gtest.h>

#include <chrono>

#include "tests/support/fake_clock.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_pulse_train.h"

namespace {

using namespace std::chrono_literals;
using minivmm::devices::AckAudit;
using minivmm::timers::Nanos;
namespace mt = minivmm::testing;
using Doubt = AckAudit::Doubt;

struct AuditRig {
  explicit AuditRig(bool model_controller = true, mt::FakePulseTrain* train = nullptr)
      : line(model_controller), audit(line, train) {}

  // One of the device's own edges.
  void send() {
    line.pulse();
    audit.count_edge();
  }
  // `n` edges, each taken and acknowledged by the guest before the next.
  void send_taken(int n) {
    for (int i = 0; i < n; ++i) {
      send();
      line.service();
    }
  }
  // An edge that merged with one still in service: the one EOI that follows leaves
  // sent - acknowledged = 1 with nothing pending.
  void merge_unseen() {
    send();
    line.take();
    send();
    line.eoi();
  }

  mt::FakeIrqLine line;
  AckAudit audit;
};

void expect_resolution(const std::optional<AckAudit::Resolution>& r, std::uint64_t unresolved,
                       std::uint64_t merged) {
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->unresolved, unresolved);
  EXPECT_EQ(r->merged, merged);
}

TEST(AckAuditTest, ALineThatCannotCountIsNeverAudited) {
  AuditRig rig(/*model_controller=*/false);
  EXPECT_FALSE(rig.audit.active());
  EXPECT_FALSE(rig.audit.resolve(false).has_value());
  EXPECT_EQ(rig.audit.audits(), 0u);
  EXPECT_FALSE(rig.audit.abandoned()) << "never started, so not abandoned";
}

TEST(AckAuditTest, NothingIsConcludedBeforeTheFirstAcknowledgement) {
  AuditRig rig;
  for (int i = 0; i < 10; ++i) rig.send();  // interrupts still off in the guest
  EXPECT_FALSE(rig.audit.resolve(false).has_value());
  EXPECT_TRUE(rig.audit.active());
  EXPECT_EQ(rig.audit.audits(), 1u);
  EXPECT_EQ(rig.audit.edges_merged(), 0u);
}

TEST(AckAuditTest, AllUnacknowledgedEdgesButOneMerged) {
  AuditRig rig;
  rig.send_taken(3);
  expect_resolution(rig.audit.resolve(false), 0, 0);
  for (int i = 0; i < 5; ++i) rig.send();  // a stall: the vCPU is not run
  expect_resolution(rig.audit.resolve(false), 1, 4);
  EXPECT_EQ(rig.audit.edges_merged(), 4u);
  EXPECT_EQ(rig.line.merged(), 4) << "what the controller really did";
  rig.line.service();  // the pending one
  expect_resolution(rig.audit.resolve(false), 0, 0);
  EXPECT_EQ(rig.audit.edges_merged(), 4u) << "found once";
}

TEST(AckAuditTest, AcknowledgementsBeyondEveryEdgeSentAreForeign) {
  AuditRig rig;
  rig.send_taken(2);
  for (int i = 0; i < 3; ++i) rig.line.foreign_ack();  // another source on the same line
  expect_resolution(rig.audit.resolve(false), 0, 0);
  // Taken for ours, the three would hide the next three merged edges.
  for (int i = 0; i < 4; ++i) rig.send();
  expect_resolution(rig.audit.resolve(false), 1, 3);
  EXPECT_EQ(rig.line.merged(), 3);
}

TEST(AckAuditTest, ATrainsEdgesCountAsSent) {
  mt::FakeClock clock;
  mt::FakePulseTrain train;
  train.clock = &clock;
  AuditRig rig(/*model_controller=*/true, &train);
  ASSERT_TRUE(train.start(clock.now() + 1ms, 1ms));
  clock.advance(1ms);
  train.pulse_new_edges(rig.line);
  rig.line.service();
  clock.advance(4ms);  // four more edges, none taken
  train.pulse_new_edges(rig.line);
  expect_resolution(rig.audit.resolve(true), 1, 3);
}

// A train whose edge is on the line before the train counts it (HostKernelPulseTrain counts an edge
// when it reaps the poll's completion): it shows up in delivered() between the audit's count of
// the edges sent and its reading of the acknowledgements, by which time the guest took it.
class RacingTrain final : public minivmm::devices::PulseTrain {
 public:
  explicit RacingTrain(mt::FakeIrqLine& line) : line_(line) {}
  bool start(Nanos, Nanos) noexcept override { return true; }
  void stop() noexcept override {}
  std::uint64_t delivered() noexcept override {
    const std::uint64_t counted = delivered_;
    if (race_next) {
      race_next = false;
      ++delivered_;
      line_.service();  // KVM's worker raised it, the guest took it
    }
    return counted;
  }
  void set_turn_hook(TurnHook) noexcept override {}
  void report(minivmm::devices::ReportWriter&) const override {}
  // An edge on the line, not yet counted.
  void prime() {
    line_.pulse();
    race_next = true;
  }
  bool race_next = false;

 private:
  mt::FakeIrqLine& line_;
  std::uint64_t delivered_ = 0;
};

TEST(AckAuditTest, ATrainEdgeAcknowledgedDuringTheReadingIsNotForeign) {
  mt::FakeIrqLine line(/*model_controller=*/true);
  RacingTrain train(line);
  AckAudit audit(line, &train);
  line.pulse();
  audit.count_edge();
  line.service();
  expect_resolution(audit.resolve(true), 0, 0);
  train.prime();
  // One acknowledgement more than the edges counted: the train's, not another source's.
  expect_resolution(audit.resolve(true), 0, 0);
  for (int i = 0; i < 4; ++i) {
    line.pulse();
    audit.count_edge();
  }
  // Set aside as foreign, that acknowledgement would make one pending edge pass for merged.
  expect_resolution(audit.resolve(true), 1, 3);
  EXPECT_EQ(line.merged(), 3);
}

TEST(AckAuditTest, AnEdgeInDoubtIsWaitedOnThenProbed) {
  AuditRig rig;
  rig.merge_unseen();
  expect_resolution(rig.audit.resolve(false), 1, 0);
  EXPECT_EQ(rig.audit.judge_doubt(false), Doubt::kWait) << "the doubt begins";
  for (std::uint64_t i = 0; i < AckAudit::kMaxDoubtfulRetries; ++i) {
    expect_resolution(rig.audit.resolve(false), 1, 0);
    EXPECT_EQ(rig.audit.judge_doubt(false), Doubt::kWait) << "look " << i + 2;
  }
  // No interrupt taken all that time: maybe a guest idling for a tick that merged unseen.
  expect_resolution(rig.audit.resolve(false), 1, 0);
  EXPECT_EQ(rig.audit.judge_doubt(false), Doubt::kProbe);
  EXPECT_EQ(rig.audit.edges_merged(), 0u) << "a probe concludes nothing";
}

TEST(AckAuditTest, ACountThatMovedMeansTheEdgeInDoubtMerged) {
  AuditRig rig;
  rig.merge_unseen();
  expect_resolution(rig.audit.resolve(false), 1, 0);
  ASSERT_EQ(rig.audit.judge_doubt(false), Doubt::kWait);
  rig.send_taken(1);  // the guest took an interrupt since: nothing of ours is pending
  expect_resolution(rig.audit.resolve(false), 1, 0);
  EXPECT_EQ(rig.audit.judge_doubt(false), Doubt::kMerged);
  EXPECT_EQ(rig.audit.edges_merged(), 1u);
  expect_resolution(rig.audit.resolve(false), 0, 0);
}

TEST(AckAuditTest, ANewTrainEdgeThatMayBePendingIsNotTakenForMerged) {
  AuditRig rig;
  rig.merge_unseen();
  expect_resolution(rig.audit.resolve(false), 1, 0);
  ASSERT_EQ(rig.audit.judge_doubt(true), Doubt::kWait);
  rig.send_taken(1);
  expect_resolution(rig.audit.resolve(true), 1, 0);
  // The count moved, but the one unresolved may be the train's newest edge, still pending.
  EXPECT_EQ(rig.audit.judge_doubt(true), Doubt::kWait);
  EXPECT_EQ(rig.audit.edges_merged(), 0u);
}

TEST(AckAuditTest, ATrainEdgeMayBePendingOnlyInTheFirstQuarterPeriod) {
  constexpr Nanos first = 10ms;
  constexpr Nanos period = 1ms;
  static_assert(!AckAudit::edge_may_be_pending(9ms, first, period), "before the first edge");
  static_assert(AckAudit::edge_may_be_pending(10ms, first, period));
  static_assert(AckAudit::edge_may_be_pending(10ms + 249'999ns, first, period));
  static_assert(!AckAudit::edge_may_be_pending(10ms + 250us, first, period));
  static_assert(!AckAudit::edge_may_be_pending(12ms + 999us, first, period));
  static_assert(AckAudit::edge_may_be_pending(13ms + 100us, first, period));
  SUCCEED();
}

TEST(AckAuditTest, ACountThatNeverMovesIsAbandonedAtTheLimit) {
  AuditRig rig;
  rig.line.silence_acks();  // the guest takes every edge; no EOI is reported
  rig.send_taken(static_cast<int>(AckAudit::kAcklessEdgesLimit) - 1);
  EXPECT_FALSE(rig.audit.resolve(false).has_value());
  EXPECT_TRUE(rig.audit.active());
  rig.send_taken(1);
  EXPECT_FALSE(rig.audit.resolve(false).has_value());
  EXPECT_FALSE(rig.audit.active());
  EXPECT_TRUE(rig.audit.abandoned());
  EXPECT_TRUE(rig.line.acks_stopped()) << "the wire must go back to plain edges";
  EXPECT_EQ(rig.audit.edges_merged(), 0u);
}

TEST(AckAuditTest, ALineStuckRaisedIsReleasedAfterTheLimitAndTheCountMovesAgain) {
  AuditRig rig;
  rig.send_taken(10);
  expect_resolution(rig.audit.resolve(false), 0, 0);
  rig.line.stick();
  for (std::uint64_t i = 0; i + 1 < AckAudit::kStuckEdgesLimit; ++i) rig.send_taken(1);
  ASSERT_TRUE(rig.audit.resolve(false).has_value());
  EXPECT_EQ(rig.line.releases(), 0) << "one edge short of the limit";
  rig.send_taken(1);
  ASSERT_TRUE(rig.audit.resolve(false).has_value());
  EXPECT_EQ(rig.line.releases(), 1);
  EXPECT_EQ(rig.audit.level_releases(), 1u);
  EXPECT_TRUE(rig.audit.active()) << "the count goes on: nothing is abandoned";
  rig.send_taken(5);
  // The edge the stuck level held was never acknowledged: it stays the one unresolved, for
  // judge_doubt() to find merged and owe once the count has moved.
  expect_resolution(rig.audit.resolve(false), 1, 0);
  EXPECT_EQ(rig.audit.judge_doubt(false), Doubt::kWait);
  EXPECT_EQ(rig.audit.judge_doubt(false), Doubt::kWait);
  // As many again with the count moving: no second release.
  rig.send_taken(static_cast<int>(AckAudit::kStuckEdgesLimit));
  rig.audit.resolve(false);
  EXPECT_EQ(rig.line.releases(), 1);
}

TEST(AckAuditTest, OneAcknowledgementIsEnoughNeverToAbandon) {
  AuditRig rig;
  rig.send_taken(1);
  expect_resolution(rig.audit.resolve(false), 0, 0);
  rig.line.silence_acks();
  for (int i = 0; i < 2 * static_cast<int>(AckAudit::kAcklessEdgesLimit); ++i) rig.send();
  const auto r = rig.audit.resolve(false);
  ASSERT_TRUE(r.has_value()) << "a count that moved once is trusted";
  EXPECT_FALSE(rig.audit.abandoned());
  EXPECT_EQ(r->merged, 2 * AckAudit::kAcklessEdgesLimit - 1);
}

}  // namespace
