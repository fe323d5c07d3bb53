// The pause protocol between the loop and a vCPU thread (vmm/vcpu/vcpu_run_gate.h), without KVM: a
// stand-in vCPU thread "runs the guest" by counting steps between its checks of the gate, as
// the real one makes a KVM_RUN between them. Issue 20's deadlock was a pause right after a
// resume that found the vCPU still asleep in the old wait; back-to-back cycles flushed it out
// in a few hundred iterations on the real VMM.
#include "vmm/vcpu/vcpu_run_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace minivmm::vmm {
namespace {

using namespace std::chrono_literals;
using State = VcpuRunGate::State;

// A vCPU thread's run loop in miniature: check stop, park if asked, "run" one step.
class FakeVcpu {
 public:
  explicit FakeVcpu(VcpuRunGate& gate) : gate_(gate) {}
  // A failed assertion may leave the thread parked: stop it rather than hang in join().
  ~FakeVcpu() {
    gate_.request_stop();
    join();
  }

  void start() {
    thread_ = std::thread([this] {
      gate_.started();
      while (!gate_.stop_requested()) {
        if (gate_.pause_requested()) {
          gate_.park([this] { parks_.fetch_add(1); return true; },
                     [this] { unparks_.fetch_add(1); return true; });
          continue;
        }
        steps_.fetch_add(1, std::memory_order_relaxed);
        // A kick ends a KVM_RUN early; the step itself is short anyway.
        if (kicked_.exchange(false)) continue;
        std::this_thread::yield();
      }
      gate_.finished();
    });
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  void kick() { kicked_ = true; }
  // Until the thread has called started(), a pause() returns at once (I1 holds by the park
  // before the first step); the tests that check a park in progress wait for this first.
  void wait_running() {
    while (steps() == 0) std::this_thread::yield();
  }

  std::uint64_t steps() const { return steps_.load(); }
  std::uint64_t parks() const { return parks_.load(); }
  std::uint64_t unparks() const { return unparks_.load(); }

 private:
  VcpuRunGate& gate_;
  std::thread thread_;
  std::atomic<std::uint64_t> steps_{0};
  std::atomic<std::uint64_t> parks_{0};
  std::atomic<std::uint64_t> unparks_{0};
  std::atomic<bool> kicked_{false};
};

// Runs `fn` on another thread and says whether it finished within `limit`. On a deadlock it
// asks `gate` to stop, which ends every wait (I4), so the test fails instead of hanging.
template <typename Fn>
bool finishes_within(VcpuRunGate& gate, std::chrono::milliseconds limit, Fn fn) {
  auto done = std::async(std::launch::async, fn);
  if (done.wait_for(limit) == std::future_status::ready) return true;
  gate.request_stop();
  return false;
}

TEST(VcpuRunGateTest, PauseReturnsOnlyOnceTheVcpuIsParkedAndNothingRunsUntilResume) {
  VcpuRunGate gate;
  FakeVcpu vcpu(gate);
  vcpu.start();
  vcpu.wait_running();

  gate.pause([&] { vcpu.kick(); });
  EXPECT_EQ(gate.state(), State::kPaused);
  const std::uint64_t frozen = vcpu.steps();
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(vcpu.steps(), frozen) << "I1: a guest step ran while paused";

  gate.resume();
  EXPECT_NE(gate.state(), State::kPaused) << "I2: resume returned with the vCPU still parked";
  while (vcpu.steps() == frozen) std::this_thread::yield();
  gate.request_stop();
  vcpu.join();
  EXPECT_EQ(gate.state(), State::kFinished);
}

// The regression test of issue 20's deadlock: thousands of pause/resume cycles back to back,
// each sent the moment the previous one returned, with a check of I1 in every paused window.
TEST(VcpuRunGateTest, BackToBackPauseResumeCyclesNeverDeadlock) {
  VcpuRunGate gate;
  FakeVcpu vcpu(gate);
  vcpu.start();
  vcpu.wait_running();
  constexpr int kCycles = 20'000;
  std::uint64_t steps_while_paused = 0;
  const bool finished = finishes_within(gate, 20s, [&] {
    for (int i = 0; i < kCycles; ++i) {
      gate.pause([&] { vcpu.kick(); });
      const std::uint64_t before = vcpu.steps();
      if (i % 64 == 0) std::this_thread::yield();  // give a wrongly running vCPU a chance
      steps_while_paused += vcpu.steps() - before;
      gate.resume();
    }
  });
  ASSERT_TRUE(finished) << "pause/resume deadlocked";
  EXPECT_EQ(steps_while_paused, 0u);
  EXPECT_EQ(vcpu.parks(), static_cast<std::uint64_t>(kCycles));
  gate.request_stop();
  vcpu.join();
  EXPECT_EQ(vcpu.unparks(), vcpu.parks());
}

TEST(VcpuRunGateTest, AVcpuPausedBeforeItStartsParksBeforeItsFirstStep) {
  VcpuRunGate gate;
  FakeVcpu vcpu(gate);
  gate.pause([&] { vcpu.kick(); });  // returns at once: nothing runs yet
  EXPECT_EQ(gate.state(), State::kCreated);
  vcpu.start();
  while (vcpu.parks() == 0) std::this_thread::yield();
  std::this_thread::sleep_for(2ms);
  EXPECT_EQ(vcpu.steps(), 0u);
  gate.resume();
  while (vcpu.steps() == 0) std::this_thread::yield();
  gate.request_stop();
  vcpu.join();
}

// A restore: paused before start, started, then wait_parked() returns only once the vCPU has
// parked (its set-up done), so the resume that follows always finds it in its park and the
// vCPU's after-park step (re-arming its timers) runs.
TEST(VcpuRunGateTest, WaitParkedReturnsOnceAVcpuPausedBeforeItStartedHasParked) {
  VcpuRunGate gate;
  FakeVcpu vcpu(gate);
  gate.pause([&] { vcpu.kick(); });
  vcpu.start();
  ASSERT_TRUE(finishes_within(gate, 5000ms, [&] { gate.wait_parked(); }));
  EXPECT_EQ(gate.state(), State::kPaused);
  EXPECT_EQ(vcpu.parks(), 1u);
  EXPECT_EQ(vcpu.steps(), 0u);
  gate.resume();
  while (vcpu.steps() == 0) std::this_thread::yield();
  EXPECT_EQ(vcpu.unparks(), 1u);
  // A stop ends the wait too, parked or not.
  VcpuRunGate other;
  other.pause(nullptr);
  other.request_stop();
  EXPECT_TRUE(finishes_within(other, 5000ms, [&] { other.wait_parked(); }));
}

TEST(VcpuRunGateTest, AStopEndsAParkedVcpuAndAPauseWaitingForOne) {
  VcpuRunGate gate;
  FakeVcpu vcpu(gate);
  vcpu.start();
  vcpu.wait_running();
  gate.pause([&] { vcpu.kick(); });
  ASSERT_EQ(gate.state(), State::kPaused);
  gate.request_stop();  // I4: the parked vCPU leaves and finishes
  vcpu.join();
  EXPECT_EQ(gate.state(), State::kFinished);
  // Once finished, neither side waits.
  EXPECT_TRUE(finishes_within(gate, 5s, [&] {
    gate.pause(nullptr);
    gate.resume();
  }));
}

TEST(VcpuRunGateTest, AResumeWithoutAPauseAndARepeatedPauseReturnAtOnce) {
  VcpuRunGate gate;
  FakeVcpu vcpu(gate);
  vcpu.start();
  vcpu.wait_running();
  EXPECT_TRUE(finishes_within(gate, 5s, [&] {
    gate.resume();
    gate.pause([&] { vcpu.kick(); });
    gate.pause([&] { vcpu.kick(); });
    gate.resume();
    gate.resume();
  }));
  EXPECT_EQ(vcpu.parks(), 1u);
  gate.request_stop();
  vcpu.join();
}

// ACPI S3 (docs/acpi-pm.md): a vCPU that the guest's own write holds waits in
// wait_for_pause() without running; the loop's pause() ends that wait and the vCPU parks, so
// pause() returns with nothing run after the hold.
TEST(VcpuRunGateTest, AHeldVcpuRunsNothingAndParksAtTheLoopsPause) {
  VcpuRunGate gate;
  std::atomic<bool> held{false};
  std::atomic<std::uint64_t> steps_after_hold{0};
  std::thread vcpu([&] {
    gate.started();
    bool hold_once = true;
    while (!gate.stop_requested()) {
      if (gate.pause_requested()) {
        gate.park(nullptr, nullptr);
        continue;
      }
      if (hold_once) {  // the guest's SLP_EN: hold until the loop asks for the pause
        hold_once = false;
        held = true;
        gate.wait_for_pause();
        continue;
      }
      if (held) steps_after_hold.fetch_add(1);
      std::this_thread::yield();
    }
    gate.finished();
  });
  while (!held) std::this_thread::yield();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(steps_after_hold.load(), 0u) << "a held vCPU ran";
  EXPECT_TRUE(finishes_within(gate, 5s, [&] { gate.pause([] {}); }));
  EXPECT_EQ(gate.state(), State::kPaused);
  EXPECT_EQ(steps_after_hold.load(), 0u);
  gate.resume();
  while (steps_after_hold.load() == 0) std::this_thread::yield();
  gate.request_stop();
  vcpu.join();
}

TEST(VcpuRunGateTest, AStopEndsAHeldVcpusWait) {
  VcpuRunGate gate;
  std::thread vcpu([&] {
    gate.started();
    gate.wait_for_pause();
    gate.finished();
  });
  std::this_thread::sleep_for(10ms);
  gate.request_stop();
  vcpu.join();
  EXPECT_EQ(gate.state(), State::kFinished);
}

}  // namespace
}  // namespace minivmm::vmm
