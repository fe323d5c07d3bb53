// SIGINT, SIGTERM, SIGHUP and the job-control SIGTSTP/SIGCONT turned into a callback, on a
// thread of their own that sleeps in sigwaitinfo(). Not a signalfd on the loop: every signalfd of a process shares one wait queue
// that any signal to any thread wakes, so with --pit-tick vcpu the vCPU's timer signal would
// wake the loop thread on every guest tick (each wakeup finding nothing to read). (The one
// signalfd left is the loop's own `--alarm dynticks`; combined with --pit-tick vcpu it has that
// cost, which is why the vCPU delivery is measured with the ppoll alarm.) Not an async handler
// either: its EINTR would look like an early poll timeout to the loop.
//
// Threads: block() on the main thread before any other thread exists (every thread created
// later inherits the mask); construct later, on the main thread; `on_signal` runs on the
// signal thread.
#pragma once

#include <functional>
#include <thread>

namespace minivmm::vmm {

class StopSignals {
 public:
  // Blocks the signals in the calling thread: from here on they wait, pending, for the thread
  // the constructor starts. Throws std::system_error when the host refuses.
  static void block();

  // Blocks them (again) and starts the waiting thread, which first runs `on_start` (its
  // seccomp filter) and ends at once if that returns false. Throws std::system_error.
  explicit StopSignals(std::function<void(int signo)> on_signal,
                       std::function<bool()> on_start = nullptr);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The real-time signal the destructor sends to end the wait; blocked in every thread, like
  // the others. Public so that crash_signals.cc leaves it alone.
  static int quit_signal() noexcept;

 private:
  void thread_main();

  std::function<void(int)> on_signal_;
  std::function<bool()> on_start_;
  std::thread thread_;
};

}  // namespace minivmm::vmm
