// The pause protocol between the loop thread and one vCPU thread, as a small state machine with
// its invariants written down (Firecracker's VcpuRunState, with an acknowledgement each way).
//
//   want_  (written by the loop thread only):  kRun | kPause
//   state_ (written by the vCPU thread only):  kCreated -> kRunning <-> kPaused ... -> kFinished
//
// Invariants, all under mu_:
//  I1. pause() returns only when state_ is kCreated, kPaused or kFinished: no guest instruction
//      runs from then until resume() (a vCPU that has not started parks before its first one).
//  I2. resume() returns only when state_ is not kPaused: the vCPU has left its parked wait.
//      Without this acknowledgement a pause right after a resume could find the vCPU still
//      asleep in the old wait, whose condition had turned false again, while pause() waited for
//      a park that never came: both threads slept on one condition variable for good (issue 20,
//      reproduced by back-to-back pause/resume requests on the control socket).
//  I3. The vCPU parks only while want_ is kPause and no stop was asked for; it writes kPaused
//      before its wait and kRunning after it, and notifies each time.
//  I4. request_stop() ends every wait on either side: a parked vCPU leaves (to finish), and a
//      pause() or resume() waiting for a vCPU that finishes returns.
//
// Threads: pause()/resume() from one thread (the loop); started()/park()/finished() from the
// vCPU thread; request_stop()/pause_requested()/stop_requested() from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace minivmm::vmm {

class VcpuRunGate {
 public:
  enum class State { kCreated, kRunning, kPaused, kFinished };

  // Loop thread. Asks the vCPU to park and waits until it has (I1); `kick` makes a running
  // vCPU leave KVM_RUN and is called with the request already visible. Returns at once for a
  // vCPU that is parked, finished or not started yet.
  void pause(const std::function<void()>& kick);
  // Loop thread. Lets a parked vCPU run again and waits until it has left its wait (I2).
  void resume();
  // Loop thread, after a pause() that found the vCPU not started, and its start: waits until
  // it has parked (its set-up done, nothing run) or finished, or a stop was asked for.
  void wait_parked();

  // vCPU thread: it is about to run (kCreated -> kRunning).
  void started();
  // vCPU thread, between KVM_RUNs: if a pause is requested, parks until resume() or a stop.
  // `before` runs before it parks (disarming its timers), `after` once it runs again; both
  // outside the lock. Returns false if it parked and `before`/`after` failed.
  bool park(const std::function<bool()>& before, const std::function<bool()>& after);
  // vCPU thread: waits until the loop asks for a pause, or a stop. The guest itself asked to be
  // stopped (ACPI S3) and must run no further instruction before the loop parks it.
  void wait_for_pause();
  // vCPU thread, last: kFinished, and every waiter is told.
  void finished();

  // Any thread.
  void request_stop() noexcept;
  bool stop_requested() const noexcept { return stop_.load(std::memory_order_acquire); }
  // A hint the vCPU reads without the lock before each KVM_RUN; park() decides under it.
  bool pause_requested() const noexcept { return pause_hint_.load(std::memory_order_acquire); }

  State state() const;

 private:
  enum class Want { kRun, kPause };

  mutable std::mutex mu_;
  std::condition_variable cv_;
  Want want_ = Want::kRun;            // guarded by mu_; the loop thread's
  State state_ = State::kCreated;     // guarded by mu_; the vCPU thread's
  std::atomic<bool> pause_hint_{false};  // mirrors want_ == kPause
  std::atomic<bool> stop_{false};
};

}  // namespace minivmm::vmm
