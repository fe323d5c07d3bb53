// What every fuzz target shares: fake clocks and timer lists driven like the VMM's loop, a bound
// on the work one input may cause, and recording fakes (IRQ line, byte sink) that check the
// device's side of their contract as it happens.
//
// Time. `mono` stands in for CLOCK_MONOTONIC; vm_clock derives from it (and can be paused),
// rt_clock is it. Advances go through the unit tests' time driver (tests/support/time_driver.h)
// in chunks of kChunk, so every timer fires at its deadline; "late" advances jump the clock and
// then run passes the way Dynticks::run_timers does after a descheduled loop thread.
//
// Bounds. A device may run at most `timer_rate_hz()` expiries per simulated second (the sum of
// what each device documents: the PIT's 10 kHz IRQ0 floor and its 25 us retry floor, the RTC's
// 8192 Hz, ...). More is a timer storm, reported as a bug. Separately each input gets a budget
// (kMaxSimulated, kMaxTimerRuns) so that a legitimate 10 kHz tick over hours of guest time does
// not make one input take seconds: once it is spent the rest of the input is skipped.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>

#include "devices/bus/byte_sink.h"
#include "devices/bus/irq_line.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_ops.h"
#include "tests/support/fake_clock.h"
#include "tests/support/time_driver.h"
#include "timers/timer_list.h"
#include "timers/vm_clock.h"

namespace minivmm::fuzz {

// Who is calling into the devices right now. Devices must touch their IRQ line and sink only
// from inside one of their own entry points.
enum class Phase : unsigned {
  kIdle = 0,
  kGuestAccess = 1u << 0,  // PortIoDevice::read/write
  kHostCall = 1u << 1,     // the VMM side: UART receive()/flush(), ...
  kTimers = 1u << 2,       // timer callbacks run by the time driver
};

inline constexpr unsigned operator|(Phase a, Phase b) noexcept {
  return static_cast<unsigned>(a) | static_cast<unsigned>(b);
}
inline constexpr unsigned bits(Phase p) noexcept { return static_cast<unsigned>(p); }

inline const char* phase_name(Phase p) noexcept {
  switch (p) {
    case Phase::kIdle:
      return "idle (no device call in progress)";
    case Phase::kGuestAccess:
      return "a guest port access";
    case Phase::kHostCall:
      return "a host call";
    case Phase::kTimers:
      return "a timer callback";
  }
  return "?";
}

class Env {
 public:
  // Simulated time per input: with 10 s per record an input of 512 records (libFuzzer's default
  // -max_len of 4096 bytes) covers at most 85 minutes, so this rarely binds.
  static constexpr Nanos kMaxSimulated = std::chrono::hours{4};
  // Expiries per input: 2.5 s of the fastest legal PIT tick (10 kHz), 3 s of the RTC's 8192 Hz,
  // hours of a 1 Hz update interrupt. Keeps a slow input in the milliseconds (x2 for the twins):
  // libFuzzer learns more from many short inputs than from a few long ones.
  static constexpr std::size_t kMaxTimerRuns = 25'000;
  // Advance granularity: the storm check and the budget are applied per chunk.
  static constexpr Nanos kChunk = std::chrono::milliseconds{10};
  // A late advance jumps at most this far (a loop thread descheduled for a second is already
  // extreme; kDelay then owes up to 10'000 PIT ticks).
  static constexpr Nanos kMaxLateAdvance = std::chrono::seconds{1};
  // Expiries allowed on top of rate x time: each timer may fire once more than the rate when a
  // span starts right on a deadline, plus guest reprogramming between spans.
  static constexpr std::size_t kSlackRuns = 32;

  // Any positive start works; one far from 0 keeps "now - something" from going negative.
  Env() : mono_(std::chrono::seconds{1'000'000}) {}
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  testing::FakeClock& mono() noexcept { return mono_; }
  timers::VmClock& vm() noexcept { return vm_; }
  timers::TimerList& vm_timers() noexcept { return vm_timers_; }
  timers::TimerList& rt_timers() noexcept { return rt_timers_; }

  Phase phase() const noexcept { return phase_; }

  // Each device declares the most expiries per simulated second it may legally cause.
  void add_timer_rate(double hz) noexcept { timer_rate_hz_ += hz; }
  double timer_rate_hz() const noexcept { return timer_rate_hz_; }

  class PhaseScope {
   public:
    PhaseScope(Env& env, Phase p) noexcept : env_(env), prev_(env.phase_) { env_.phase_ = p; }
    ~PhaseScope() { env_.phase_ = prev_; }
    PhaseScope(const PhaseScope&) = delete;
    PhaseScope& operator=(const PhaseScope&) = delete;

   private:
    Env& env_;
    Phase prev_;
  };

  // Each returns false once the input's budget is spent: the caller stops reading records.
  bool advance(Nanos by) {
    while (by > Nanos{0}) {
      const Nanos step = std::min(by, kChunk);
      std::size_t ran = 0;
      {
        PhaseScope scope(*this, Phase::kTimers);
        ran = testing::advance(mono_, {&vm_timers_, &rt_timers_}, step);
      }
      FUZZ_CHECK(ran <= max_runs(step), "timer storm: %zu expiries in %lld ns (bound %zu)", ran,
                 static_cast<long long>(step.count()), max_runs(step));
      by -= step;
      if (!charge(step, ran)) return false;
    }
    return true;
  }

  bool advance_late(Nanos by) {
    by = std::min(by, kMaxLateAdvance);
    mono_.advance(by);
    const std::size_t bound = max_runs(by);
    std::size_t ran = 0;
    for (;;) {
      std::size_t pass = 0;
      {
        PhaseScope scope(*this, Phase::kTimers);
        for (timers::TimerList* l : {&vm_timers_, &rt_timers_}) {
          pass += l->run_expired(l->clock().from_monotonic(mono_.now()));
        }
      }
      if (pass == 0) break;
      ran += pass;
      FUZZ_CHECK(ran <= bound, "timer storm after a %lld ns late jump: %zu expiries (bound %zu)",
                 static_cast<long long>(by.count()), ran, bound);
    }
    return charge(by, ran);
  }

  void toggle_pause() noexcept {
    if (vm_.paused()) {
      vm_.resume();
    } else {
      vm_.pause();
    }
  }

 private:
  std::size_t max_runs(Nanos span) const noexcept {
    const double seconds = std::chrono::duration<double>(span).count();
    return static_cast<std::size_t>(seconds * timer_rate_hz_) + 1 + kSlackRuns;
  }

  bool charge(Nanos t, std::size_t runs) noexcept {
    simulated_ += t;
    timer_runs_ += runs;
    return simulated_ < kMaxSimulated && timer_runs_ < kMaxTimerRuns;
  }

  testing::FakeClock mono_;
  timers::VmClock vm_{mono_};
  timers::TimerList vm_timers_{timers::ClockType::kVm, vm_};
  timers::TimerList rt_timers_{timers::ClockType::kRt, mono_};
  Phase phase_ = Phase::kIdle;
  double timer_rate_hz_ = 0;
  Nanos simulated_{0};
  std::size_t timer_runs_ = 0;
};

// An IRQ line that checks how its device drives it.
//  kEdge (PIT IRQ0, RTC IRQ8): the device sends edges; it may use pulse(), pulse_checked() or a
//    set_level pair, but must never leave the line held after a call returns.
//  kLevel (UART IRQ4): set_level() only, and only on a change (one place owns the level).
// Every event must come from a phase in `allowed`; pulse_checked() rejects (as a PIC with the
// interrupt still pending would) according to a fuzzer-chosen 32-bit pattern.
class CheckedIrqLine final : public devices::IrqLine {
 public:
  enum class Kind { kEdge, kLevel };

  CheckedIrqLine(const Env& env, const char* name, Kind kind, unsigned allowed) noexcept
      : env_(env), name_(name), kind_(kind), allowed_(allowed) {}

  void set_level(bool asserted) noexcept override {
    check_phase("set_level");
    if (kind_ == Kind::kLevel) {
      FUZZ_CHECK(asserted != level_, "%s: set_level(%d) with the line already there", name_,
                 asserted ? 1 : 0);
    }
    if (asserted && !level_) ++rises_;
    level_ = asserted;
  }
  void pulse() noexcept override {
    check_phase("pulse");
    FUZZ_CHECK(kind_ == Kind::kEdge, "%s: pulse() on a level-driven line", name_);
    FUZZ_CHECK(!level_, "%s: pulse() while the level is held", name_);
    ++pulses_;
    ++rises_;
  }
  bool pulse_checked() noexcept override {
    check_phase("pulse_checked");
    FUZZ_CHECK(kind_ == Kind::kEdge, "%s: pulse_checked() on a level-driven line", name_);
    const bool reject = ((reject_mask_ >> reject_bit_) & 1u) != 0;
    reject_bit_ = (reject_bit_ + 1) % 32;
    if (reject) {
      ++rejected_;
      return false;
    }
    ++accepted_;
    ++rises_;
    return true;
  }

  // Called by the rig after every device call.
  void check_idle() const noexcept {
    if (kind_ == Kind::kEdge) FUZZ_CHECK(!level_, "%s: edge line left asserted", name_);
  }

  void set_reject_mask(std::uint32_t mask) noexcept {
    reject_mask_ = mask;
    reject_bit_ = 0;
  }

  bool level() const noexcept { return level_; }
  std::uint64_t pulses() const noexcept { return pulses_; }
  std::uint64_t accepted() const noexcept { return accepted_; }
  std::uint64_t rejected() const noexcept { return rejected_; }
  std::uint64_t rises() const noexcept { return rises_; }

 private:
  void check_phase(const char* what) const noexcept {
    FUZZ_CHECK((bits(env_.phase()) & allowed_) != 0, "%s: %s during %s", name_, what,
               phase_name(env_.phase()));
  }

  const Env& env_;
  const char* const name_;
  const Kind kind_;
  const unsigned allowed_;
  bool level_ = false;
  std::uint64_t pulses_ = 0;
  std::uint64_t accepted_ = 0;
  std::uint64_t rejected_ = 0;
  std::uint64_t rises_ = 0;
  std::uint32_t reject_mask_ = 0;
  unsigned reject_bit_ = 0;
};

// Counts output instead of keeping it (a long input must not grow memory), and checks that each
// write is non-empty, at most `max_write` bytes, and made from inside a device call.
class CountingSink final : public devices::ByteSink {
 public:
  CountingSink(const Env& env, std::size_t max_write) noexcept : env_(env), max_write_(max_write) {}

  void write(std::span<const std::uint8_t> bytes) noexcept override {
    FUZZ_CHECK(env_.phase() != Phase::kIdle, "sink written outside any device call");
    FUZZ_CHECK(!bytes.empty() && bytes.size() <= max_write_, "sink write of %zu bytes (max %zu)",
               bytes.size(), max_write_);
    total_ += bytes.size();
    ++writes_;
  }

  std::uint64_t total() const noexcept { return total_; }
  std::uint64_t writes() const noexcept { return writes_; }

 private:
  const Env& env_;
  const std::size_t max_write_;
  std::uint64_t total_ = 0;
  std::uint64_t writes_ = 0;
};

}  // namespace minivmm::fuzz
