// epoll: registration lives in the kernel, so a wait costs the same at 1 or 1024 fds.
// Timeouts: epoll_pwait2 takes a timespec (Linux >= 5.11); where it is missing we fall back to
// epoll_wait's milliseconds, rounded up so we never wake before a deadline. With
// `timerfd_timeout`, a timerfd carries the timeout instead (the 2014 qemu_poll design).
#pragma once

#include <sys/epoll.h>

#include <unordered_map>
#include <vector>

#include "loop/poller.h"

namespace minivmm::loop {

class EpollPoller final : public Poller {
 public:
  explicit EpollPoller(bool timerfd_timeout);
  ~EpollPoller() override;
  EpollPoller(const EpollPoller&) = delete;
  EpollPoller& operator=(const EpollPoller&) = delete;

  PollerKind kind() const noexcept override {
    return timerfd_ ? PollerKind::kTimerfdEpoll : PollerKind::kEpoll;
  }
  bool add(int fd, std::uint32_t interest, bool edge) override;
  bool modify(int fd, std::uint32_t interest) override;
  void remove(int fd) override;
  bool edge_supported() const noexcept override { return true; }
  int wait(std::optional<Nanos> timeout, std::vector<PollEvent>& ready) override;
  std::size_t size() const noexcept override { return edge_.size(); }

  bool has_pwait2() const noexcept { return pwait2_; }

 private:
  int wait_timerfd(std::optional<Nanos> timeout);

  int epfd_ = -1;
  int timerfd_ = -1;               // only for the timerfd-epoll flavour
  bool timerfd_armed_ = false;
  bool pwait2_ = true;             // cleared on the first ENOSYS
  std::unordered_map<int, bool> edge_;  // registered fds -> edge-triggered
  std::vector<epoll_event> events_;
};

}  // namespace minivmm::loop
