// How a run ends, and when it began. The first request to stop wins, from whichever thread
// makes it (a vCPU's debug-exit, reset or triple fault; the signal thread; the loop's
// --duration or control socket); later ones are ignored. The Machine then stops the vCPUs and
// the loop.
//
// Threads: claim(), stopping(), status() and reason() from any thread; start() and the
// duration timer on the loop thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "timers/timer.h"
#include "vmm/machine/machine_loop.h"

namespace minivmm::vmm {

class RunControl {
 public:
  // `on_duration` runs (loop thread) when --duration expires.
  RunControl(MachineLoop& loop, std::function<void()> on_duration);

  // True for the first call only, which records the exit status and why.
  bool claim(int status, const std::string& why);
  // After the run: the host's own failure outranks whatever the guest did because of it (a
  // triple fault after its memory was taken away). Sets the status and reason whether or not
  // a claim came first.
  void overrule(int status, const std::string& why);
  bool stopping() const noexcept { return claimed_.load(std::memory_order_acquire); }
  int status() const;
  std::string reason() const;

  // The run begins (loop thread): the clocks' readings the report measures from, the thread
  // the loop runs on, and --duration armed.
  void start(std::optional<double> duration_s);
  timers::Nanos start_mono() const noexcept { return start_mono_; }
  timers::Nanos start_vm() const noexcept { return start_vm_; }
  pid_t loop_tid() const noexcept { return loop_tid_.load(std::memory_order_acquire); }

 private:
  MachineLoop& loop_;
  timers::Timer duration_;
  std::atomic<bool> claimed_{false};
  mutable std::mutex mu_;
  int status_ = 0;        // guarded by mu_
  std::string reason_;    // guarded by mu_
  timers::Nanos start_mono_{0};
  timers::Nanos start_vm_{0};
  std::atomic<pid_t> loop_tid_{0};
};

}  // namespace minivmm::vmm
