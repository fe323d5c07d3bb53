#include "loop/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "timers/syscall_counters.h"

namespace minivmm::loop {

using timers::thread_syscalls;
using timers::Syscall;

EventLoop::EventLoop(std::unique_ptr<Poller> poller, timers::Dynticks& dynticks)
    : poller_(std::move(poller)), dynticks_(dynticks) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  if (!poller_->add(wake_fd_, kReadable, false)) {
    const int err = errno;
    close(wake_fd_);
    throw std::system_error(err, std::generic_category(), "poll add(wake eventfd)");
  }
  timers::AlarmTimer& alarm = dynticks_.alarm();
  alarm_fd_ = alarm.fd();
  if (alarm_fd_ >= 0) {
    alarm_edge_ = poller_->edge_supported() && alarm.edge_triggered_without_read();
    if (!poller_->add(alarm_fd_, kReadable, alarm_edge_)) {
      const int err = errno;
      close(wake_fd_);
      throw std::system_error(err, std::generic_category(), "poll add(alarm fd)");
    }
  }
  dynticks_.set_wake([this] { wake(); });
}

EventLoop::~EventLoop() {
  dynticks_.set_wake(nullptr);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void EventLoop::watch(int fd, std::uint32_t interest, FdHandlers handlers) {
  if (fd == wake_fd_ || (fd == alarm_fd_ && fd >= 0)) {
    throw std::system_error(EBUSY, std::generic_category(), "watch: fd is the loop's own");
  }
  auto w = std::make_shared<Watch>(Watch{interest, std::move(handlers)});
  auto it = watches_.find(fd);
  if (it != watches_.end()) {
    if (!poller_->modify(fd, interest | kHangup)) {
      throw std::system_error(errno, std::generic_category(), "poll modify");
    }
    it->second = std::move(w);
    return;
  }
  if (!poller_->add(fd, interest | kHangup, false)) {
    throw std::system_error(errno, std::generic_category(), "poll add");
  }
  watches_.emplace(fd, std::move(w));
}

void EventLoop::set_interest(int fd, std::uint32_t interest) {
  auto it = watches_.find(fd);
  if (it == watches_.end() || it->second->interest == interest) return;
  it->second->interest = interest;
  poller_->modify(fd, interest | kHangup);
}

void EventLoop::unwatch(int fd) {
  if (watches_.erase(fd) == 0) return;
  poller_->remove(fd);
}

void EventLoop::schedule(std::function<void()> fn) {
  {
    std::lock_guard lock(bh_mu_);
    bottom_halves_.push_back(std::move(fn));
  }
  bh_pending_.store(true, std::memory_order_release);
  wake();
}

void EventLoop::wake() {
  const std::uint64_t one = 1;
  // Charged to the calling thread: a vCPU-thread arm that moves a deadline earlier costs this.
  thread_syscalls().add(Syscall::kWrite);
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void EventLoop::stop() {
  stop_.store(true, std::memory_order_release);
  wake();
}

void EventLoop::drain_wake_fd() {
  std::uint64_t value = 0;
  thread_syscalls().add(Syscall::kRead);
  [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &value, sizeof value);
}

bool EventLoop::run_bottom_halves() {
  if (!bh_pending_.exchange(false, std::memory_order_acq_rel)) return false;
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard lock(bh_mu_);
    batch.swap(bottom_halves_);
  }
  for (auto& fn : batch) {
    fn();
    ++stats_.bottom_halves;
  }
  return !batch.empty();
}

bool EventLoop::run_once() {
  // A loop-thread arm since the last pass moved a deadline: fix the alarm before sleeping.
  if (dynticks_.stale() && !dynticks_.rearm()) return false;

  std::optional<Nanos> timeout;
  if (bh_pending_.load(std::memory_order_acquire) || stopping()) {
    timeout = Nanos{0};
  } else if (alarm_fd_ < 0) {
    timeout = dynticks_.poll_timeout();
  }

  const int n = poller_->wait(timeout, ready_);
  ++stats_.iterations;
  if (n < 0) {
    ++stats_.wait_errors;
    return false;
  }

  bool alarm_fired = false;
  bool woken = false;
  if (n == 0 && timeout && *timeout > Nanos{0}) {
    ++stats_.timeouts;
    alarm_fired = alarm_fd_ < 0;  // the poll timeout is the alarm
  }
  for (const PollEvent& ev : ready_) {
    if (ev.fd == alarm_fd_) {
      alarm_fired = true;
      if (!dynticks_.alarm().consume(alarm_edge_)) return false;
      continue;
    }
    if (ev.fd == wake_fd_) {
      woken = true;
      ++stats_.wake_events;
      drain_wake_fd();
      continue;
    }
    auto it = watches_.find(ev.fd);
    if (it == watches_.end()) continue;  // unwatched by an earlier callback in this batch
    std::shared_ptr<Watch> w = it->second;  // keeps the handlers alive if unwatched inside
    ++stats_.fd_dispatches;
    if ((ev.events & (kHangup | kError)) && w->handlers.hangup) {
      w->handlers.hangup();
      continue;
    }
    if ((ev.events & kReadable) && (w->interest & kReadable) && w->handlers.readable) {
      w->handlers.readable();
    }
    if ((ev.events & kWritable) && (w->interest & kWritable) && w->handlers.writable) {
      // Re-check: the readable callback may have unwatched or replaced this fd.
      auto again = watches_.find(ev.fd);
      if (again != watches_.end() && again->second == w) w->handlers.writable();
    }
  }

  run_bottom_halves();

  // The poll-timeout alarm fires only when a wait times out; a wait that fd events ended early
  // must check the deadline itself (one clock read), or events arriving more often than the
  // timeout would keep pushing it back: the refill of --pit-tick kernel starved that way under
  // a control client polling every 50 ms.
  if (!alarm_fired && alarm_fd_ < 0 && n > 0 && dynticks_.deadline_passed()) alarm_fired = true;

  // Timers only when something can be due: the alarm fired, or another thread moved a deadline
  // earlier (it woke us), or a callback on this thread did. With a host timer alarm an fd event
  // alone reads no clock.
  if (alarm_fired || woken || dynticks_.stale()) {
    if (!dynticks_.run_timers(alarm_fired)) return false;
  }
  return true;
}

bool EventLoop::run() {
  while (!stopping()) {
    if (!run_once()) return false;
  }
  // Bottom halves scheduled right before stop() still run (e.g. a final console flush).
  run_bottom_halves();
  return true;
}

}  // namespace minivmm::loop
