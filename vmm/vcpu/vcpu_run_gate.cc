#include "vmm/vcpu/vcpu_run_gate.h"

namespace minivmm::vmm {

void VcpuRunGate::pause(const std::function<void()>& kick) {
  std::unique_lock lock(mu_);
  want_ = Want::kPause;
  pause_hint_.store(true, std::memory_order_release);
  cv_.notify_all();  // a vCPU in wait_for_pause()
  if (state_ != State::kRunning) return;  // parked, finished, or parks before it first runs
  if (kick) kick();
  cv_.wait(lock, [&] { return state_ != State::kRunning; });
}

void VcpuRunGate::resume() {
  std::unique_lock lock(mu_);
  want_ = Want::kRun;
  pause_hint_.store(false, std::memory_order_release);
  cv_.notify_all();
  cv_.wait(lock, [&] { return state_ != State::kPaused; });
}

void VcpuRunGate::wait_parked() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] {
    return state_ == State::kPaused || state_ == State::kFinished || stop_requested();
  });
}

void VcpuRunGate::started() {
  std::lock_guard lock(mu_);
  if (state_ == State::kCreated) state_ = State::kRunning;
  cv_.notify_all();
}

bool VcpuRunGate::park(const std::function<bool()>& before, const std::function<bool()>& after) {
  // Outside the lock: disarming the vCPU's timers is a syscall, and the loop may be waiting
  // for the lock to ask for the park in the first place.
  if (before && !before()) return false;
  {
    std::unique_lock lock(mu_);
    // The request may have been withdrawn since the hint was read: then this is no park.
    if (want_ == Want::kPause && !stop_.load(std::memory_order_acquire)) {
      state_ = State::kPaused;
      cv_.notify_all();
      cv_.wait(lock, [&] { return want_ == Want::kRun || stop_.load(std::memory_order_acquire); });
      state_ = State::kRunning;
      cv_.notify_all();
    }
  }
  return !after || after();
}

void VcpuRunGate::wait_for_pause() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return want_ == Want::kPause || stop_.load(std::memory_order_acquire); });
}

void VcpuRunGate::finished() {
  std::lock_guard lock(mu_);
  state_ = State::kFinished;
  cv_.notify_all();
}

void VcpuRunGate::request_stop() noexcept {
  stop_.store(true, std::memory_order_release);
  // Taking the lock orders the store before any waiter's next look at its condition.
  std::lock_guard lock(mu_);
  cv_.notify_all();
}

VcpuRunGate::State VcpuRunGate::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

}  // namespace minivmm::vmm
