// The tests' AF_UNIX stream sockets, made one way: a client of a control socket, a listener
// that makes a path "a live socket", a bound file nobody listens on (a killed VMM's leftover).
// Each returns the descriptor, or -1 with errno set; the caller closes it.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace minivmm::testing {

// false (ENAMETOOLONG) for a path that does not fit sun_path with its NUL.
inline bool unix_address(const std::string& path, sockaddr_un& out) {
  out = sockaddr_un{};
  out.sun_family = AF_UNIX;
  if (path.size() >= sizeof out.sun_path) {
    errno = ENAMETOOLONG;
    return false;
  }
  std::memcpy(out.sun_path, path.data(), path.size());
  return true;
}

// `flags`: SOCK_NONBLOCK for a client that polls. A non-blocking connect to a listener whose
// backlog is full fails with EAGAIN rather than wait.
inline int unix_connect(const std::string& path, int flags = 0) {
  sockaddr_un a;
  if (!unix_address(path, a)) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// Bound to `path`; listening with `backlog` > 0, else only bound (a stale socket file once
// closed).
inline int unix_bind(const std::string& path, int backlog) {
  sockaddr_un a;
  if (!unix_address(path, a)) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 ||
      (backlog > 0 && ::listen(fd, backlog) != 0)) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

}  // namespace minivmm::testing
