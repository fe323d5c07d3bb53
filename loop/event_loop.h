// The main loop: waits on fds and the host alarm, dispatches fd callbacks and bottom halves,
// then lets Dynticks run the expired timers of every clock and rearm once (libuv uv_run order:
// wait, then update time once, then run timers).
//
// Threads: wake(), schedule() and stop() are thread-safe. Everything else — watch(),
// unwatch(), run(), run_once(), stats() — is loop-thread only (the thread that constructed
// the loop). Fd callbacks and bottom halves run on the loop thread and may call any loop-thread
// method, including watch()/unwatch() of any fd, their own included.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "loop/poller.h"
#include "timers/dynticks.h"

namespace minivmm::loop {

struct FdHandlers {
  std::function<void()> readable;
  std::function<void()> writable;
  std::function<void()> hangup;  // also called on error
};

struct LoopStats {
  std::uint64_t iterations = 0;   // waits performed
  std::uint64_t timeouts = 0;     // waits that ended by timeout
  std::uint64_t fd_dispatches = 0;
  std::uint64_t wake_events = 0;  // cross-thread wakes that woke a wait
  std::uint64_t bottom_halves = 0;
  std::uint64_t wait_errors = 0;
};

class EventLoop {
 public:
  // Construct on the loop thread. Registers the alarm's fd (if any) and its own wake eventfd.
  EventLoop(std::unique_ptr<Poller> poller, timers::Dynticks& dynticks);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Loop thread. Calls `handlers` when `fd` is ready for `interest` (kReadable/kWritable; hang-up
  // and errors are always reported). Replaces an existing registration of the same fd. Throws
  // std::system_error if the poller refuses the fd.
  void watch(int fd, std::uint32_t interest, FdHandlers handlers);
  void set_interest(int fd, std::uint32_t interest);
  void unwatch(int fd);

  // Any thread. Runs `fn` once on the loop thread, soon.
  void schedule(std::function<void()> fn);
  // Any thread. Makes a blocked wait return (eventfd write).
  void wake();
  // Any thread. run() returns after the current iteration.
  void stop();
  bool stopping() const noexcept { return stop_.load(std::memory_order_acquire); }

  // Loop thread. One iteration: wait, dispatch, bottom halves, timers. Returns false if a host
  // failure (poll error, alarm failure) means the loop cannot go on.
  bool run_once();
  // Loop thread. Iterates until stop() or a host failure; returns false on failure.
  bool run();

  const LoopStats& stats() const noexcept { return stats_; }
  Poller& poller() noexcept { return *poller_; }
  timers::Dynticks& dynticks() noexcept { return dynticks_; }
  int wake_fd() const noexcept { return wake_fd_; }

 private:
  struct Watch {
    std::uint32_t interest;
    FdHandlers handlers;
  };

  bool run_bottom_halves();
  void drain_wake_fd();

  std::unique_ptr<Poller> poller_;
  timers::Dynticks& dynticks_;
  int wake_fd_ = -1;
  int alarm_fd_ = -1;
  bool alarm_edge_ = false;  // alarm fd registered edge-triggered

  std::unordered_map<int, std::shared_ptr<Watch>> watches_;
  std::vector<PollEvent> ready_;

  std::mutex bh_mu_;
  std::vector<std::function<void()>> bottom_halves_;  // guarded by bh_mu_
  std::atomic<bool> bh_pending_{false};
  std::atomic<bool> stop_{false};

  LoopStats stats_;
};

}  // namespace minivmm::loop
