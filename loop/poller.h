// A wait primitive behind one interface (QEMU 2014 qemu_poll): ppoll, epoll (epoll_pwait2 for
// nanosecond timeouts), or epoll plus a timerfd that carries the timeout.
//
// Threads: loop thread only, every method.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "timers/clock.h"

namespace minivmm::loop {

using timers::Nanos;

// Interest and readiness bits (the poll(2) meanings).
enum : std::uint32_t {
  kReadable = 1u << 0,
  kWritable = 1u << 1,
  kHangup = 1u << 2,  // peer closed (POLLHUP/POLLRDHUP)
  kError = 1u << 3,
};

struct PollEvent {
  int fd;
  std::uint32_t events;
};

enum class PollerKind { kPpoll, kEpoll, kTimerfdEpoll, kAuto };

std::string_view poller_kind_name(PollerKind kind) noexcept;
std::optional<PollerKind> parse_poller_kind(std::string_view name) noexcept;

class Poller {
 public:
  virtual ~Poller() = default;

  virtual PollerKind kind() const noexcept = 0;

  // Registers `fd` (not yet registered) for `interest`. `edge` asks for edge-triggered reports
  // where the backend can (epoll's EPOLLET): used for fds that announce each event again
  // without being read (a timerfd). Returns false on failure (errno set).
  virtual bool add(int fd, std::uint32_t interest, bool edge) = 0;
  virtual bool modify(int fd, std::uint32_t interest) = 0;
  virtual void remove(int fd) = 0;
  virtual bool edge_supported() const noexcept = 0;

  // Blocks until at least one fd is ready or `timeout` passes (nullopt: no timeout; zero: do not
  // block). Replaces `ready`'s contents. Returns the number of ready fds, 0 on timeout, -1 on
  // error other than EINTR (EINTR returns 0).
  virtual int wait(std::optional<Nanos> timeout, std::vector<PollEvent>& ready) = 0;

  virtual std::size_t size() const noexcept = 0;
};

// Throws std::system_error if the host refuses (epoll_create1, timerfd_create).
std::unique_ptr<Poller> make_poller(PollerKind kind);

}  // namespace minivmm::loop
