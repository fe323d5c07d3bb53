// HostKernelPulseTrain against the real host kernel (timerfds, AIO polls, eventfds), without KVM:
// the binding records the eventfd it would bind to the GSI, and the test reads that eventfd to
// see the edges arrive. The loop's part (the refill timer) is pumped by hand.
//
// Real time, on a host that may be busy (CI runs this beside two other tests on two cores, under
// ASan): this thread can be descheduled for tens of milliseconds anywhere, and the kernel's own
// completion of a poll can come late. So no verdict here depends on how long anything took.
// Each bound is one of:
// - an upper bound from the schedule itself: edges fire only at grid points (first + k period),
//   so what was delivered (plus what was counted missed) by vm_clock time T is at most the grid
//   points up to T, read *after* the count: no extra edge, no replay of a paused or held span;
// - progress, waited for (`eventually`, seconds for what takes milliseconds): the schedule goes
//   on without us, and a descheduled thread only delays when the condition is seen;
// - exact counts that no timing changes (polls submitted, generations, what arrives after a
//   stop, which closes the generation: its late completions are ignored by design).
#include "vmm/kvm/host_kernel_pulse_train.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/support/map_report_writer.h"
#include "timers/monotonic_clock.h"
#include "timers/timer_list.h"
#include "timers/vm_clock.h"

namespace minivmm::vmm {
namespace {

using namespace std::chrono_literals;
using timers::Nanos;

// Grid points first + k * period (k >= 0) at or before `t`: how many edges can have fired.
std::uint64_t grid_points(Nanos first, Nanos period, Nanos t) {
  return t < first ? 0 : static_cast<std::uint64_t>((t - first) / period) + 1;
}

// Polls `done` until it holds or `limit` of real time passed: for progress only, so the limit is
// generous (the conditions take milliseconds on an idle host).
template <typename Pred>
bool eventually(Pred done, std::chrono::milliseconds limit = std::chrono::milliseconds(10'000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  return true;
}

struct PulseTrainRig {
  explicit PulseTrainRig(bool aio_reads = true) : train{list, binding(), 64, aio_reads} {}
  timers::MonotonicClock host;
  timers::VmClock vm{host};
  timers::TimerList list{timers::ClockType::kVm, vm};
  std::vector<int> attached;
  std::vector<int> detached;
  bool refuse = false;
  std::vector<std::string> failures;
  HostKernelPulseTrain train;

  HostKernelPulseTrain::Binding binding() {
    HostKernelPulseTrain::Binding b;
    b.attach = [this](int fd) {
      if (refuse) throw std::runtime_error("KVM_IRQFD: refused");
      attached.push_back(fd);
    };
    b.detach = [this](int fd) { detached.push_back(fd); };
    b.failed = [this](const std::string& why) { failures.push_back(why); };
    return b;
  }

  // Runs the loop's side (refills) for `d` of real time.
  void pump(std::chrono::milliseconds d) {
    const auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) {
      list.run_expired(vm.now());
      std::this_thread::sleep_for(300us);
    }
  }

  // Runs the loop's side until `done` holds (false if it never did within the limit).
  template <typename Pred>
  bool pump_until(Pred done) {
    return eventually([&] {
      list.run_expired(vm.now());
      return done();
    });
  }

  // Edges signalled on the current generation's eventfd since the last read.
  std::uint64_t take_edges() {
    std::uint64_t n = 0;
    if (attached.empty()) return 0;
    if (::read(attached.back(), &n, sizeof n) != sizeof n) return 0;
    return n;
  }
};

TEST(HostKernelPulseTrainTest, DeliversEveryEdgeWithoutAnyThreadOfOurs) {
  PulseTrainRig r;
  const Nanos period = 1ms, first = r.vm.now() + period;
  ASSERT_TRUE(r.train.start(first, period));
  ASSERT_EQ(r.attached.size(), 1u);
  // Nothing pumped: the 64 slots polled once cover 64 ms, and the kernel fires them alone. Each
  // poll signals the eventfd (what KVM would inject) once: exactly 64, however late we look.
  std::uint64_t edges = 0;
  ASSERT_TRUE(eventually([&] {
    edges += r.take_edges();
    return edges >= 64;
  })) << edges << " edges";
  const Nanos seen = r.vm.now();
  EXPECT_EQ(edges, 64u) << "more edges than polls";
  EXPECT_LE(edges, grid_points(first, period, seen)) << "an edge before its grid point";
  ASSERT_TRUE(eventually([&] { return r.train.delivered() == 64; }));
  const auto s = r.train.stats();
  EXPECT_EQ(s.generations, 1u);
  EXPECT_EQ(s.refills, 1u);
  EXPECT_EQ(s.polls_submitted, 64u);
  EXPECT_EQ(s.missed, 0u) << "no refill has read a slot yet";
  EXPECT_EQ(s.failures, 0u);
}

TEST(HostKernelPulseTrainTest, RefillsKeepTheScheduleGoing) {
  PulseTrainRig r;
  const Nanos period = 1ms, first = r.vm.now() + period;
  ASSERT_TRUE(r.train.start(first, period));
  // Past two rounds of 64: only refills can get there.
  ASSERT_TRUE(r.pump_until([&] { return r.train.delivered() >= 150; }));
  const auto s = r.train.stats();
  const Nanos seen = r.vm.now();
  EXPECT_LE(s.delivered + s.missed, grid_points(first, period, seen));
  EXPECT_GE(s.refills, 3u);
  // A slot is polled again only once its last poll completed: at most one round in flight.
  EXPECT_LE(s.polls_submitted, s.delivered + 64) << "more polls than delivered plus one round";
  EXPECT_TRUE(r.failures.empty());
}

TEST(HostKernelPulseTrainTest, TheTurnHookRunsAfterEachRefillHalfwayBetweenEdges) {
  PulseTrainRig r;
  const Nanos period = 1ms;
  std::vector<Nanos> turns;
  std::vector<Nanos> armed;  // the next refill's deadline, as each turn left it
  // The hook may call back into the train (the PIT reads delivered() from it): no lock held.
  std::uint64_t seen = 0;
  r.train.set_turn_hook([&](Nanos now) {
    turns.push_back(now);
    seen = r.train.delivered();
    if (const auto next = r.list.next_deadline()) armed.push_back(*next);
  });
  const Nanos first = r.vm.now() + period;
  ASSERT_TRUE(r.train.start(first, period));
  ASSERT_TRUE(r.pump_until([&] { return turns.size() >= 3; }));
  const auto s = r.train.stats();
  // start()'s own refill calls no hook: the device is inside start(), under its lock.
  ASSERT_EQ(turns.size(), s.refills - 1);
  EXPECT_GT(seen, 0u);
  // Each refill is armed for the middle of a period, after now. When it runs depends on the
  // pump and on the host (ASan at ctest -j3 ran three of five in the first half), so the
  // deadlines are checked, not the run times.
  ASSERT_EQ(armed.size(), turns.size()) << "a turn left no refill armed";
  for (std::size_t i = 0; i < armed.size(); ++i) {
    EXPECT_EQ((armed[i] - first) % period, period / 2) << "refill " << i << " not mid-period";
    EXPECT_GT(armed[i], turns[i]) << "refill " << i << " armed in the past";
  }
}

TEST(HostKernelPulseTrainTest, StopUnbindsAndNothingArrivesAfterwards) {
  PulseTrainRig r;
  ASSERT_TRUE(r.train.start(r.vm.now() + 1ms, 1ms));
  ASSERT_TRUE(eventually([&] { return r.train.delivered() >= 5; }));
  r.train.stop();
  ASSERT_EQ(r.detached, r.attached) << "the eventfd was not unbound from the GSI";
  // The generation is closed: even a completion the kernel posts late is not its edge.
  const std::uint64_t at_stop = r.train.delivered();
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(r.train.delivered(), at_stop);
  // A new program gets a fresh eventfd and binding.
  ASSERT_TRUE(r.train.start(r.vm.now() + 1ms, 2ms));
  EXPECT_EQ(r.attached.size(), 2u);
  EXPECT_EQ(r.train.stats().generations, 2u);
}

TEST(HostKernelPulseTrainTest, SuspendedWhileVmClockIsPausedAndResumedOnTheGrid) {
  PulseTrainRig r;
  const Nanos period = 1ms, first = r.vm.now() + period;
  ASSERT_TRUE(r.train.start(first, period));
  ASSERT_TRUE(eventually([&] { return r.train.delivered() >= 5; }));
  r.vm.pause();
  r.train.suspend();
  const std::uint64_t at_pause = r.train.delivered();
  EXPECT_EQ(r.detached.size(), 1u);
  std::this_thread::sleep_for(20ms);
  r.pump(1ms);  // the refill timer is on vm_clock: nothing may run
  EXPECT_EQ(r.train.delivered(), at_pause) << "ticks while paused";
  r.vm.resume();
  r.train.resume();
  EXPECT_EQ(r.attached.size(), 2u);
  ASSERT_TRUE(eventually([&] { return r.train.delivered() >= at_pause + 5; }));
  const auto s = r.train.stats();
  // vm_clock did not count the paused 20 ms: edges replayed for them would outnumber the grid.
  EXPECT_LE(s.delivered + s.missed, grid_points(first, period, r.vm.now()))
      << "the paused 20 ms were replayed";
}

// The device gives up on a train whose edges come late (TickDelivery's fallback): hold() must
// stop the edges without unbinding (unbinding waits for KVM's injection worker, the very thing
// that is late), and a start() on the same schedule afterwards re-arms the same generation.
TEST(HostKernelPulseTrainTest, HoldStopsTheEdgesWithoutUnbindingAndStartReArmsTheSameGeneration) {
  PulseTrainRig r;
  const Nanos period = 1ms, first = r.vm.now() + period;
  ASSERT_TRUE(r.train.start(first, period));
  ASSERT_TRUE(eventually([&] { return r.train.delivered() >= 5; }));
  r.train.hold();
  const Nanos held_at = r.vm.now();
  EXPECT_TRUE(r.detached.empty()) << "hold() unbound the eventfd";
  EXPECT_FALSE(r.list.next_deadline().has_value()) << "a refill is still armed";
  // The held span. An edge that fired before the hold may complete its poll in it (late
  // completions are the kernel's business), but no grid point after the hold may fire.
  std::this_thread::sleep_for(20ms);
  const auto h = r.train.stats();
  EXPECT_LE(h.delivered + h.missed, grid_points(first, period, held_at)) << "edges after the hold";
  const Nanos first2 = r.vm.now() + period;
  ASSERT_TRUE(r.train.start(first2, period));
  ASSERT_TRUE(eventually([&] { return r.train.delivered() >= h.delivered + 5; }));
  const auto s = r.train.stats();
  const Nanos seen = r.vm.now();
  EXPECT_EQ(r.attached.size(), 1u) << "a new generation was bound";
  EXPECT_TRUE(r.detached.empty());
  EXPECT_EQ(s.holds, 1u);
  EXPECT_EQ(s.releases, 1u);
  EXPECT_EQ(s.generations, 1u);
  // The grid up to the hold, then the new one from its start: nothing for the span between.
  EXPECT_LE(s.delivered + s.missed,
            grid_points(first, period, held_at) + grid_points(first2, period, seen))
      << "the held 20 ms were replayed";
  r.train.stop();
  EXPECT_EQ(r.detached, r.attached);
}

TEST(HostKernelPulseTrainTest, RefusedBindingMeansStartFails) {
  PulseTrainRig r;
  r.refuse = true;
  EXPECT_FALSE(r.train.start(r.vm.now() + 1ms, 1ms));
  EXPECT_EQ(r.train.stats().failures, 1u);
  EXPECT_EQ(r.train.delivered(), 0u);
  EXPECT_FALSE(r.list.next_deadline().has_value()) << "a refill timer was left armed";
}

TEST(HostKernelPulseTrainTest, NonPositivePeriodIsRefused) {
  PulseTrainRig r;
  EXPECT_FALSE(r.train.start(r.vm.now() + 1ms, Nanos{0}));
  EXPECT_TRUE(r.attached.empty());
}

TEST(HostKernelPulseTrainTest, DepthFollowsTheLookahead) {
  PulseTrainRig r;
  // 100 ms period: 256 ms of lookahead is two edges, not 64 timerfds.
  ASSERT_TRUE(r.train.start(r.vm.now() + 100ms, 100ms));
  EXPECT_EQ(r.train.stats().polls_submitted, 2u);
}

TEST(HostKernelPulseTrainTest, ReportsItsCountersUnderTheRunReportsKeys) {
  PulseTrainRig r;
  ASSERT_TRUE(r.train.start(r.vm.now() + 100ms, 100ms));  // no edge before the stop
  r.train.stop();
  r.refuse = true;
  EXPECT_FALSE(r.train.start(r.vm.now() + 100ms, 100ms));
  const auto s = r.train.stats();
  minivmm::testing::MapReportWriter out;
  r.train.report(out);
  // devices.pit.kernel_train in the --stats JSON, as before the devices reported themselves.
  const std::map<std::string, minivmm::testing::MapReportWriter::Value> expected = {
      {"delivered", s.delivered}, {"generations", s.generations},
      {"refills", s.refills},     {"polls_submitted", s.polls_submitted},
      {"missed", s.missed},       {"failures", s.failures},
      {"holds", s.holds},         {"releases", s.releases}};
  EXPECT_EQ(out.values(), expected);
  EXPECT_EQ(out.counter("generations"), 1u);
  EXPECT_EQ(out.counter("polls_submitted"), 2u);
  EXPECT_EQ(out.counter("failures"), 1u);
}

TEST(HostKernelPulseTrainTest, ALateRefillCountsTheEdgesThatFoundNoPoll) {
  PulseTrainRig r;
  const Nanos period = 1ms, first = r.vm.now() + period;
  ASSERT_TRUE(r.train.start(first, period));
  // No refill for 100 ms of edges: each of the 64 slots delivers once, then keeps firing
  // unwatched.
  ASSERT_TRUE(eventually([&] { return r.train.delivered() == 64u; }));
  ASSERT_TRUE(eventually([&] { return r.vm.now() >= first + 100ms; }));
  const Nanos before = r.vm.now();
  // The refill reads each fired slot's expiration count, which holds every firing since its poll
  // was armed. It runs at least 2 ms after `before`: a hrtimer that late is not this test's.
  std::this_thread::sleep_for(2ms);
  ASSERT_TRUE(r.pump_until([&] { return r.train.stats().refills >= 2; }));
  const auto s = r.train.stats();
  const Nanos after = r.vm.now();
  EXPECT_GE(s.missed + 64, grid_points(first, period, before)) << "unwatched edges not counted";
  EXPECT_LE(s.delivered + s.missed, grid_points(first, period, after));
}

TEST(HostKernelPulseTrainTest, Read2ClearsTheTimerfdsWhereAioReadsAreMissing) {
  // Kernels before 6.10 cannot AIO-read a timerfd; the refill then reads each fired slot itself.
  PulseTrainRig r(false);
  const Nanos period = 1ms, first = r.vm.now() + period;
  ASSERT_TRUE(r.train.start(first, period));
  ASSERT_TRUE(r.pump_until([&] { return r.train.delivered() >= 150; }));
  const auto s = r.train.stats();
  EXPECT_LE(s.delivered + s.missed, grid_points(first, period, r.vm.now()));
  EXPECT_GE(s.refills, 3u);
  EXPECT_TRUE(r.failures.empty());
}

}  // namespace
}  // namespace minivmm::vmm
