// A PulseTrain that "delivers" every edge of its schedule up to a fake clock's now, for the
// PIT's and TickDelivery's tests. Edges reach an IrqLine only when the test says so
// (pulse_new_edges(): KVM's irqfd), so a test decides when the guest can see them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "devices/bus/irq_line.h"
#include "devices/pc/i8254/pulse_train.h"
#include "tests/support/fake_clock.h"

namespace minivmm::testing {

class FakePulseTrain final : public devices::PulseTrain {
 public:
  struct Start {
    Nanos first;
    Nanos period;
  };
  bool start(Nanos first, Nanos period) noexcept override {
    settle();
    starts.push_back(Start{first, period});
    running_ = accept;
    first_ = first;
    period_ = period;
    return accept;
  }
  void stop() noexcept override {
    settle();
    ++stops;
  }
  std::uint64_t delivered() noexcept override {
    update();
    return delivered_;
  }
  std::uint64_t missed() noexcept override {
    update();
    return missed_;
  }
  // The next `n` edges of the schedule fire with nothing to carry them to the line
  // (HostKernelPulseTrain: no poll armed): they are counted missed, not delivered.
  void miss_next(std::uint64_t n) {
    update();
    miss_next_ += n;
  }
  void set_turn_hook(TurnHook hook) noexcept override { hook_ = std::move(hook); }
  void report(devices::ReportWriter& out) const override {
    out.count("starts", starts.size());
    out.count("stops", static_cast<std::uint64_t>(stops));
  }
  // Pulses `line` once for every edge delivered since the last call: the edges reaching the
  // interrupt controller (KVM's irqfd), for tests that model it. Then, like HostKernelPulseTrain's
  // refill, calls the turn hook every `turn_every` periods.
  void pulse_new_edges(devices::IrqLine& line) {
    const std::uint64_t now = delivered();
    for (; pulsed_ < now; ++pulsed_) line.pulse();
    if (!running_ || !hook_ || clock->now() < next_turn_) return;
    next_turn_ = clock->now() + period_ * turn_every;
    ++turns;
    hook_(clock->now());
  }
  bool has_turn_hook() const { return static_cast<bool>(hook_); }

  const FakeClock* clock = nullptr;
  bool accept = true;
  std::vector<Start> starts;
  int stops = 0;
  std::int64_t turn_every = 32;  // HostKernelPulseTrain at 1 kHz: depth 64, a refill every 32
  int turns = 0;

 private:
  std::uint64_t edges_so_far() const {
    if (!running_ || clock->now() < first_) return 0;
    return static_cast<std::uint64_t>((clock->now() - first_) / period_) + 1;
  }
  // Sorts the edges that came since the last look into delivered and missed.
  void update() {
    for (const std::uint64_t total = done_ + edges_so_far(); seen_ < total; ++seen_) {
      if (miss_next_ > 0) {
        --miss_next_;
        ++missed_;
      } else {
        ++delivered_;
      }
    }
  }
  void settle() {
    update();
    miss_next_ = 0;  // a miss belongs to the schedule that was running
    done_ += edges_so_far();
    running_ = false;
  }
  bool running_ = false;
  Nanos first_{0};
  Nanos period_{1};
  std::uint64_t done_ = 0;
  std::uint64_t seen_ = 0;  // edges sorted by update()
  std::uint64_t delivered_ = 0;
  std::uint64_t missed_ = 0;
  std::uint64_t miss_next_ = 0;
  std::uint64_t pulsed_ = 0;
  TurnHook hook_;
  Nanos next_turn_{0};
};

}  // namespace minivmm::testing
