// SIGINT and SIGTERM turned into a callback, on a thread of their own that sleeps in
// sigwaitinfo(). Not a signalfd on the loop: every signalfd of a process shares one wait queue
// that any signal to any thread wakes, so with --pit-tick vcpu the vCPU's timer signal would
// wake the loop thread on every guest tick (each wakeup finding nothing to read). Not an async
// handler either: its EINTR would look like an early poll timeout to the loop.
//
// Threads: construct on the main thread before any other thread exists (it blocks the signals
// there, and every thread created later inherits that); `on_signal` runs on the signal thread.
#pragma once

#include <functional>
#include <thread>

namespace minivmm::vmm {

class StopSignals {
 public:
  // Throws std::system_error when the host refuses.
  explicit StopSignals(std::function<void(int signo)> on_signal);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  void thread_main();

  std::function<void(int)> on_signal_;
  std::thread thread_;
};

}  // namespace minivmm::vmm
