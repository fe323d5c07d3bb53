#include "devices/host/stdout_sink.h"

#include <poll.h>

#include <cerrno>

namespace minivmm::devices {

void StdoutSink::write(std::span<const std::uint8_t> bytes) noexcept {
  std::size_t done = 0;
  if (gone_.load(std::memory_order_relaxed)) {
    dropped_.fetch_add(bytes.size(), std::memory_order_relaxed);
    return;
  }
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    writes_.fetch_add(1, std::memory_order_relaxed);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      bytes_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Someone made our stdout non-blocking (a shared terminal or pipe): wait a bounded time
      // for room rather than spinning or blocking the vCPU forever.
      pollfd p{fd_, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(kMaxWait.count()));
      if (ready > 0 && (p.revents & POLLOUT)) continue;
    }
    if (n < 0 && errno == EPIPE) gone_.store(true, std::memory_order_relaxed);
    errors_.fetch_add(1, std::memory_order_relaxed);
    break;
  }
  if (done < bytes.size()) {
    dropped_.fetch_add(bytes.size() - done, std::memory_order_relaxed);
  }
}

StdoutSinkStats StdoutSink::stats() const noexcept {
  return StdoutSinkStats{
      writes_.load(std::memory_order_relaxed), bytes_.load(std::memory_order_relaxed),
      dropped_.load(std::memory_order_relaxed), errors_.load(std::memory_order_relaxed),
      gone_.load(std::memory_order_relaxed)};
}

void StdoutSink::report(ReportWriter& out) const {
  const StdoutSinkStats s = stats();
  out.count("writes", s.writes);
  out.count("bytes", s.bytes);
  out.count("dropped_bytes", s.dropped_bytes);
  out.count("errors", s.errors);
  out.flag("gone", s.gone);
}

}  // namespace minivmm::devices
