// Records every level change and pulse of an IRQ line, for device tests.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "devices/bus/irq_line.h"

namespace minivmm::testing {

class FakeIrqLine final : public devices::IrqLine {
 public:
  // With `model_controller` the line models the controller's one request bit and the guest's
  // acknowledgements (KVM's irqfd resampler): a pulse while a request is pending merges with it
  // (pulse_checked says so); service() is the guest taking and acknowledging the interrupt.
  explicit FakeIrqLine(bool model_controller = false) : model_(model_controller) {}

  void set_level(bool asserted) noexcept override {
    std::lock_guard lock(mu_);
    if (asserted && !level_) ++rising_edges_;
    level_ = asserted;
    levels_.push_back(asserted);
  }
  void pulse() noexcept override {
    std::lock_guard lock(mu_);
    ++pulses_;
    ++rising_edges_;
    level_ = false;
    if (model_) {
      // KVM's resampler holds the line up until the EOI, so an edge while the previous one is
      // pending or still in service merges.
      if (pending_ || in_service_) {
        ++merged_;
      } else {
        pending_ = true;
      }
    }
  }
  // The calling thread's own edge (KVM_IRQ_LINE): the same edge, counted apart.
  void pulse_now() noexcept override {
    {
      std::lock_guard lock(mu_);
      ++pulses_now_;
    }
    pulse();
  }
  int pulses_now() const { std::lock_guard lock(mu_); return pulses_now_; }
  bool pulse_checked() noexcept override {
    std::lock_guard lock(mu_);
    ++checked_;
    if (model_) {
      if (pending_ || in_service_) {
        ++coalesced_;
        return false;
      }
      pending_ = true;
      ++pulses_;
      ++rising_edges_;
      return true;
    }
    if (coalesce_next_ > 0) {
      --coalesce_next_;
      ++coalesced_;
      return false;
    }
    ++pulses_;
    ++rising_edges_;
    return true;
  }

  std::optional<std::uint64_t> acknowledgements() noexcept override {
    std::lock_guard lock(mu_);
    if (!model_ || acks_stopped_) return std::nullopt;
    ++ack_reads_;
    return acks_;
  }

  void service() {
    take();
    eoi();
  }
  // The two halves of service(): the CPU accepts the interrupt (the handler starts)...
  void take() {
    std::lock_guard lock(mu_);
    if (!pending_ || stuck_) return;
    pending_ = false;
    in_service_ = true;
    ++serviced_;
  }
  // ...and the handler's EOI, which KVM's resampler counts.
  void eoi() {
    std::lock_guard lock(mu_);
    if (!in_service_) return;
    in_service_ = false;
    if (!silent_) ++acks_;
  }
  void stop_acknowledgements() noexcept override {
    std::lock_guard lock(mu_);
    acks_stopped_ = true;
  }
  bool acks_stopped() const { std::lock_guard lock(mu_); return acks_stopped_; }
  // The wire keeps the line raised with no EOI to come (what KVM's resampler was seen to do):
  // the request stays pending and is never taken, every later edge merges, until
  // release_held_level().
  void stick() { std::lock_guard lock(mu_); stuck_ = true; pending_ = true; }
  bool release_held_level() noexcept override {
    std::lock_guard lock(mu_);
    ++releases_;
    stuck_ = false;
    pending_ = false;
    return true;
  }
  int releases() const { std::lock_guard lock(mu_); return releases_; }
  // The guest's EOIs stop being counted (a controller path that reports none).
  void silence_acks() { std::lock_guard lock(mu_); silent_ = true; }
  // An acknowledgement of an interrupt some other source raised on the same line.
  void foreign_ack() { std::lock_guard lock(mu_); ++acks_; }
  int serviced() const { std::lock_guard lock(mu_); return serviced_; }
  int merged() const { std::lock_guard lock(mu_); return merged_; }
  int ack_reads() const { std::lock_guard lock(mu_); return ack_reads_; }

  bool level() const { std::lock_guard lock(mu_); return level_; }
  int pulses() const { std::lock_guard lock(mu_); return pulses_; }
  // Rising edges from either pulses or set_level(false -> true).
  int rising_edges() const { std::lock_guard lock(mu_); return rising_edges_; }
  std::vector<bool> levels() const { std::lock_guard lock(mu_); return levels_; }
  // Makes the next `n` pulse_checked() calls report coalescing.
  void coalesce_next(int n) { std::lock_guard lock(mu_); coalesce_next_ = n; }
  int coalesced() const { std::lock_guard lock(mu_); return coalesced_; }
  // pulse_checked() calls, accepted or not: the catch-up path, not the plain tick.
  int checked() const { std::lock_guard lock(mu_); return checked_; }

 private:
  mutable std::mutex mu_;
  bool level_ = false;
  int pulses_ = 0;
  int pulses_now_ = 0;
  int rising_edges_ = 0;
  int coalesce_next_ = 0;
  int coalesced_ = 0;
  int checked_ = 0;
  std::vector<bool> levels_;
  bool model_ = false;
  bool pending_ = false;
  bool in_service_ = false;
  bool acks_stopped_ = false;
  bool silent_ = false;
  bool stuck_ = false;
  int releases_ = 0;
  std::uint64_t acks_ = 0;
  int serviced_ = 0;
  int merged_ = 0;
  int ack_reads_ = 0;
};

}  // namespace minivmm::testing
