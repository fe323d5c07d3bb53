#include "loop/ppoll_poller.h"

#include <cerrno>

#include "timers/syscall_counters.h"

namespace minivmm::loop {
namespace {

short to_poll(std::uint32_t interest) {
  short ev = 0;
  if (interest & kReadable) ev |= POLLIN;
  if (interest & kWritable) ev |= POLLOUT;
  if (interest & kHangup) ev |= POLLRDHUP;
  return ev;
}

std::uint32_t from_poll(short revents) {
  std::uint32_t ev = 0;
  if (revents & (POLLIN | POLLPRI)) ev |= kReadable;
  if (revents & POLLOUT) ev |= kWritable;
  if (revents & (POLLHUP | POLLRDHUP)) ev |= kHangup;
  if (revents & (POLLERR | POLLNVAL)) ev |= kError;
  return ev;
}

}  // namespace

bool PpollPoller::add(int fd, std::uint32_t interest, bool /*edge*/) {
  if (fd < 0 || index_.count(fd)) {
    errno = EEXIST;
    return false;
  }
  index_[fd] = fds_.size();
  fds_.push_back(pollfd{fd, to_poll(interest), 0});
  return true;
}

bool PpollPoller::modify(int fd, std::uint32_t interest) {
  auto it = index_.find(fd);
  if (it == index_.end()) {
    errno = ENOENT;
    return false;
  }
  fds_[it->second].events = to_poll(interest);
  return true;
}

void PpollPoller::remove(int fd) {
  auto it = index_.find(fd);
  if (it == index_.end()) return;
  const std::size_t pos = it->second;
  index_.erase(it);
  // Swap-remove keeps removal O(1); order of fds in a poll set carries no meaning.
  if (pos != fds_.size() - 1) {
    fds_[pos] = fds_.back();
    index_[fds_[pos].fd] = pos;
  }
  fds_.pop_back();
}

int PpollPoller::wait(std::optional<Nanos> timeout, std::vector<PollEvent>& ready) {
  ready.clear();
  timespec ts{};
  if (timeout) {
    const auto ns = std::max<std::int64_t>(timeout->count(), 0);
    ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  }
  timers::thread_syscalls().add(timers::Syscall::kPpoll);
  const int n = ppoll(fds_.data(), fds_.size(), timeout ? &ts : nullptr, nullptr);
  if (n < 0) return errno == EINTR ? 0 : -1;
  for (const pollfd& p : fds_) {
    if (p.revents != 0) ready.push_back(PollEvent{p.fd, from_poll(p.revents)});
    if (ready.size() == static_cast<std::size_t>(n)) break;
  }
  return static_cast<int>(ready.size());
}

}  // namespace minivmm::loop
