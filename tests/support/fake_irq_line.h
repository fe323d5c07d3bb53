// Records every level change and pulse of an IRQ line, for device tests.
#pragma once

#include <mutex>
#include <vector>

#include "devices/irq_line.h"

namespace minivmm::testing {

class FakeIrqLine final : public devices::IrqLine {
 public:
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
  }
  bool pulse_checked() noexcept override {
    std::lock_guard lock(mu_);
    if (coalesce_next_ > 0) {
      --coalesce_next_;
      ++coalesced_;
      return false;
    }
    ++pulses_;
    ++rising_edges_;
    return true;
  }

  bool level() const { std::lock_guard lock(mu_); return level_; }
  int pulses() const { std::lock_guard lock(mu_); return pulses_; }
  // Rising edges from either pulses or set_level(false -> true).
  int rising_edges() const { std::lock_guard lock(mu_); return rising_edges_; }
  std::vector<bool> levels() const { std::lock_guard lock(mu_); return levels_; }
  // Makes the next `n` pulse_checked() calls report coalescing.
  void coalesce_next(int n) { std::lock_guard lock(mu_); coalesce_next_ = n; }
  int coalesced() const { std::lock_guard lock(mu_); return coalesced_; }

 private:
  mutable std::mutex mu_;
  bool level_ = false;
  int pulses_ = 0;
  int rising_edges_ = 0;
  int coalesce_next_ = 0;
  int coalesced_ = 0;
  std::vector<bool> levels_;
};

}  // namespace minivmm::testing
