// A real EventLoop for the back-end tests, and a NetPeer that records what a back-end hands it.
// The loop waits on real descriptors; a 5 ms rt_clock tick bounds each wait so that
// spin_until() can give up after its deadline (2 s by default) instead of hanging a broken test.
// A passing test spins only until its condition holds: no fixed sleeps.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "devices/host/net_backend.h"
#include "loop/event_loop.h"
#include "timers/dynticks.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

namespace minivmm::testing {

class NetTestLoop {
 public:
  explicit NetTestLoop(loop::PollerKind kind = loop::PollerKind::kEpoll)
      : loop_(loop::make_poller(kind), dynticks_) {}

  loop::EventLoop& loop() { return loop_; }
  timers::TimerList& rt() { return rt_; }
  const timers::MonotonicClock& clock() const { return clock_; }

  // Runs the loop until `done` (called once per iteration; it may consume what it checks) or
  // `timeout`; returns whether `done` said so.
  bool spin_until(const std::function<bool()>& done,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
    const timers::Nanos end = clock_.now() + timeout;
    tick_.arm_periodic(clock_.now() + kTick, kTick);
    bool ok = done();
    while (!ok && clock_.now() < end && loop_.run_once()) ok = done();
    tick_.cancel();
    return ok;
  }
  // `n` iterations (each bounded by the tick): for "nothing happens" checks.
  void spin(int n) {
    tick_.arm_periodic(clock_.now() + kTick, kTick);
    for (int i = 0; i < n; ++i) loop_.run_once();
    tick_.cancel();
  }

 private:
  static constexpr timers::Nanos kTick{5'000'000};

  timers::MonotonicClock clock_;
  timers::TimerList rt_{timers::ClockType::kRt, clock_};
  timers::PollTimeoutAlarm alarm_;
  timers::Dynticks dynticks_{alarm_, clock_, {&rt_}};
  loop::EventLoop loop_;
  timers::Timer tick_{rt_, "test-tick", [](const timers::Timer::Expiry&) {}};
};

class RecordingPeer final : public devices::NetPeer {
 public:
  bool offer_frame(std::span<const std::uint8_t> frame) noexcept override {
    ++offers;
    if (!accept) return false;
    frames.emplace_back(frame.begin(), frame.end());
    return true;
  }
  void tx_ready() noexcept override { ++tx_ready_calls; }

  bool accept = true;
  int offers = 0;
  int tx_ready_calls = 0;
  std::vector<std::vector<std::uint8_t>> frames;
};

}  // namespace minivmm::testing
