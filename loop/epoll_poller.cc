#include "loop/epoll_poller.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "timers/syscall_counters.h"

namespace minivmm::loop {
namespace {

using timers::thread_syscalls;
using timers::Syscall;

std::uint32_t to_epoll(std::uint32_t interest, bool edge) {
  std::uint32_t ev = 0;
  if (interest & kReadable) ev |= EPOLLIN;
  if (interest & kWritable) ev |= EPOLLOUT;
  if (interest & kHangup) ev |= EPOLLRDHUP;
  if (edge) ev |= EPOLLET;
  return ev;
}

std::uint32_t from_epoll(std::uint32_t revents) {
  std::uint32_t ev = 0;
  if (revents & (EPOLLIN | EPOLLPRI)) ev |= kReadable;
  if (revents & EPOLLOUT) ev |= kWritable;
  if (revents & (EPOLLHUP | EPOLLRDHUP)) ev |= kHangup;
  if (revents & EPOLLERR) ev |= kError;
  return ev;
}

timespec to_timespec(Nanos n) {
  const auto ns = std::max<std::int64_t>(n.count(), 0);
  return timespec{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

}  // namespace

EpollPoller::EpollPoller(bool timerfd_timeout) : events_(64) {
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  if (timerfd_timeout) {
    timerfd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timerfd_ < 0) {
      const int err = errno;
      close(epfd_);
      throw std::system_error(err, std::generic_category(), "timerfd_create");
    }
    // Edge-triggered: each expiry is reported once without reading the timerfd.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.fd = timerfd_;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, timerfd_, &ev) != 0) {
      const int err = errno;
      close(timerfd_);
      close(epfd_);
      throw std::system_error(err, std::generic_category(), "epoll_ctl(timerfd)");
    }
  }
}

EpollPoller::~EpollPoller() {
  if (timerfd_ >= 0) close(timerfd_);
  if (epfd_ >= 0) close(epfd_);
}

bool EpollPoller::add(int fd, std::uint32_t interest, bool edge) {
  if (fd < 0 || edge_.count(fd)) {
    errno = EEXIST;
    return false;
  }
  epoll_event ev{};
  ev.events = to_epoll(interest, edge);
  ev.data.fd = fd;
  thread_syscalls().add(Syscall::kEpollCtl);
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) return false;
  edge_[fd] = edge;
  if (events_.size() < edge_.size() + 1) events_.resize(edge_.size() + 1);
  return true;
}

bool EpollPoller::modify(int fd, std::uint32_t interest) {
  auto it = edge_.find(fd);
  if (it == edge_.end()) {
    errno = ENOENT;
    return false;
  }
  epoll_event ev{};
  ev.events = to_epoll(interest, it->second);
  ev.data.fd = fd;
  thread_syscalls().add(Syscall::kEpollCtl);
  return epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev) == 0;
}

void EpollPoller::remove(int fd) {
  if (edge_.erase(fd) == 0) return;
  thread_syscalls().add(Syscall::kEpollCtl);
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
}

int EpollPoller::wait_timerfd(std::optional<Nanos> timeout) {
  // Zero and "forever" need no timer: epoll_wait's own 0 and -1 express them.
  if (!timeout || *timeout <= Nanos{0}) {
    if (timerfd_armed_) {
      itimerspec off{};
      thread_syscalls().add(Syscall::kTimerfdSettime);
      timerfd_settime(timerfd_, 0, &off, nullptr);
      timerfd_armed_ = false;
    }
    return timeout ? 0 : -1;
  }
  itimerspec spec{};
  spec.it_value = to_timespec(*timeout);
  thread_syscalls().add(Syscall::kTimerfdSettime);
  timerfd_settime(timerfd_, 0, &spec, nullptr);
  timerfd_armed_ = true;
  return -1;
}

int EpollPoller::wait(std::optional<Nanos> timeout, std::vector<PollEvent>& ready) {
  ready.clear();
  const int max = static_cast<int>(events_.size());
  int n = 0;
  if (timerfd_ >= 0) {
    const int ms = wait_timerfd(timeout);
    thread_syscalls().add(Syscall::kEpollWait);
    n = epoll_wait(epfd_, events_.data(), max, ms);
  } else if (pwait2_) {
    timespec ts{};
    if (timeout) ts = to_timespec(*timeout);
    thread_syscalls().add(Syscall::kEpollPwait2);
    n = epoll_pwait2(epfd_, events_.data(), max, timeout ? &ts : nullptr, nullptr);
    if (n < 0 && errno == ENOSYS) {
      pwait2_ = false;
      return wait(timeout, ready);
    }
  } else {
    int ms = -1;
    if (timeout) {
      // Round up: waking a little late is harmless, waking early is a false wakeup.
      const auto ns = std::max<std::int64_t>(timeout->count(), 0);
      ms = static_cast<int>(std::min<std::int64_t>((ns + 999'999) / 1'000'000, 1 << 30));
    }
    thread_syscalls().add(Syscall::kEpollWait);
    n = epoll_wait(epfd_, events_.data(), max, ms);
  }
  if (n < 0) return errno == EINTR ? 0 : -1;
  for (int i = 0; i < n; ++i) {
    const epoll_event& e = events_[static_cast<std::size_t>(i)];
    if (e.data.fd == timerfd_) {
      timerfd_armed_ = false;  // one-shot: it fired
      continue;
    }
    ready.push_back(PollEvent{e.data.fd, from_epoll(e.events)});
  }
  return static_cast<int>(ready.size());
}

}  // namespace minivmm::loop
