#include "vmm/machine/run_control.h"

#include <unistd.h>

namespace minivmm::vmm {

RunControl::RunControl(MachineLoop& loop, std::function<void()> on_duration)
    : loop_(loop),
      duration_(loop.loop_rt_timers, "duration",
                [cb = std::move(on_duration)](const timers::Timer::Expiry&) { cb(); }) {}

bool RunControl::claim(int status, const std::string& why) {
  std::lock_guard lock(mu_);
  if (claimed_.exchange(true, std::memory_order_acq_rel)) return false;
  status_ = status;
  reason_ = why;
  return true;
}

void RunControl::overrule(int status, const std::string& why) {
  std::lock_guard lock(mu_);
  claimed_.store(true, std::memory_order_release);
  status_ = status;
  reason_ = why;
}

int RunControl::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

std::string RunControl::reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

void RunControl::start(std::optional<double> duration_s) {
  loop_tid_.store(::gettid(), std::memory_order_release);
  start_mono_ = loop_.mono.now();
  start_vm_ = loop_.vm_clock.now();
  if (duration_s) {
    duration_.arm_at(start_mono_ + timers::Nanos{static_cast<std::int64_t>(*duration_s * 1e9)});
  }
}

}  // namespace minivmm::vmm
