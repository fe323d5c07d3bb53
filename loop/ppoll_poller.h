// ppoll(2): the whole fd array is passed on every wait, so the cost is linear in the fd count,
// but it takes a nanosecond timespec timeout and needs no extra fd. Best at a handful of fds.
#pragma once

#include <poll.h>

#include <unordered_map>
#include <vector>

#include "loop/poller.h"

namespace minivmm::loop {

class PpollPoller final : public Poller {
 public:
  PollerKind kind() const noexcept override { return PollerKind::kPpoll; }
  bool add(int fd, std::uint32_t interest, bool edge) override;
  bool modify(int fd, std::uint32_t interest) override;
  void remove(int fd) override;
  bool edge_supported() const noexcept override { return false; }
  int wait(std::optional<Nanos> timeout, std::vector<PollEvent>& ready) override;
  std::size_t size() const noexcept override { return fds_.size(); }

 private:
  std::vector<pollfd> fds_;
  std::unordered_map<int, std::size_t> index_;  // fd -> position in fds_
};

}  // namespace minivmm::loop
