#include "devices/host/block_uring.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#if MINIVMM_HAVE_LIBURING
#include <liburing.h>
#endif

namespace minivmm::devices {

#if MINIVMM_HAVE_LIBURING

namespace {

std::string failed(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

}  // namespace

std::unique_ptr<BlockUring> BlockUring::create(int fd, unsigned entries, std::string& why) {
  std::unique_ptr<BlockUring> u(new BlockUring());
  u->ring_ = std::make_unique<io_uring>();
  // Disabled until locked down: restrictions can only be registered before the ring runs.
  if (int r = io_uring_queue_init(entries, u->ring_.get(), IORING_SETUP_R_DISABLED); r < 0) {
    why = failed("io_uring_setup", -r);
    return nullptr;
  }
  u->ring_ready_ = true;
  if (int r = io_uring_register_files(u->ring_.get(), &fd, 1); r < 0) {
    why = failed("io_uring_register(files)", -r);
    return nullptr;
  }
  u->event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (u->event_fd_ < 0) {
    why = failed("eventfd", errno);
    return nullptr;
  }
  // Every completion signals, also those posted inline or from task work on the submitting
  // thread (the _async variant would leave those unsignalled, and the loop asleep).
  if (int r = io_uring_register_eventfd(u->ring_.get(), u->event_fd_); r < 0) {
    why = failed("io_uring_register(eventfd)", -r);
    return nullptr;
  }
  io_uring_restriction res[7]{};
  const std::uint8_t ops[] = {IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_FSYNC,
                              IORING_OP_FALLOCATE};
  std::size_t n = 0;
  for (std::uint8_t op : ops) {
    res[n].opcode = IORING_RESTRICTION_SQE_OP;
    res[n++].sqe_op = op;
  }
  res[n].opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
  res[n++].sqe_flags = IOSQE_FIXED_FILE;
  res[n].opcode = IORING_RESTRICTION_SQE_FLAGS_REQUIRED;
  res[n++].sqe_flags = IOSQE_FIXED_FILE;
  // No IORING_RESTRICTION_REGISTER_OP: once enabled, io_uring_register refuses everything.
  if (int r = io_uring_register_restrictions(u->ring_.get(), res, static_cast<unsigned>(n));
      r < 0) {
    why = failed("io_uring_register(restrictions)", -r);
    return nullptr;
  }
  if (int r = io_uring_enable_rings(u->ring_.get()); r < 0) {
    why = failed("io_uring_register(enable)", -r);
    return nullptr;
  }
  return u;
}

BlockUring::~BlockUring() {
  if (ring_ready_) io_uring_queue_exit(ring_.get());
  if (event_fd_ >= 0) ::close(event_fd_);
}

int BlockUring::ring_fd() const noexcept { return ring_->ring_fd; }

void BlockUring::drain_event_fd() noexcept {
  std::uint64_t count = 0;
  // EAGAIN: nothing signalled since the last drain.
  [[maybe_unused]] const ssize_t n = ::read(event_fd_, &count, sizeof count);
}

bool BlockUring::queue(std::uint8_t opcode, std::uint64_t tag, std::uint64_t offset,
                       std::uint64_t addr, std::uint32_t len, std::uint32_t op_flags) noexcept {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (sqe == nullptr) return false;
  // Fixed file 0 is the disk (the ring knows no other).
  io_uring_prep_rw(opcode, sqe, 0, reinterpret_cast<const void*>(addr), len, offset);
  sqe->flags |= IOSQE_FIXED_FILE;
  sqe->fsync_flags = op_flags;  // the union of per-op flags; 0 for reads and writes
  io_uring_sqe_set_data64(sqe, tag);
  return true;
}

bool BlockUring::queue_readv(std::uint64_t tag, std::uint64_t offset,
                             std::span<const iovec> iov) noexcept {
  return queue(IORING_OP_READV, tag, offset, reinterpret_cast<std::uintptr_t>(iov.data()),
               static_cast<std::uint32_t>(std::min<std::size_t>(iov.size(), IOV_MAX)), 0);
}

bool BlockUring::queue_writev(std::uint64_t tag, std::uint64_t offset,
                              std::span<const iovec> iov) noexcept {
  return queue(IORING_OP_WRITEV, tag, offset, reinterpret_cast<std::uintptr_t>(iov.data()),
               static_cast<std::uint32_t>(std::min<std::size_t>(iov.size(), IOV_MAX)), 0);
}

bool BlockUring::queue_fdatasync(std::uint64_t tag) noexcept {
  return queue(IORING_OP_FSYNC, tag, 0, 0, 0, IORING_FSYNC_DATASYNC);
}

bool BlockUring::queue_punch_hole(std::uint64_t tag, std::uint64_t offset,
                                  std::uint64_t len) noexcept {
  // IORING_OP_FALLOCATE: the mode travels in len, the length in addr (io_uring_prep_fallocate).
  return queue(IORING_OP_FALLOCATE, tag, offset, len,
               static_cast<std::uint32_t>(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE), 0);
}

int BlockUring::submit() noexcept {
  for (;;) {
    const int r = io_uring_submit(ring_.get());
    if (r != -EINTR) return r;
  }
}

std::size_t BlockUring::take(std::span<Completion> out) noexcept {
  std::size_t n = 0;
  io_uring_cqe* cqe = nullptr;
  while (n < out.size() && io_uring_peek_cqe(ring_.get(), &cqe) == 0 && cqe != nullptr) {
    out[n++] = Completion{io_uring_cqe_get_data64(cqe), cqe->res};
    io_uring_cqe_seen(ring_.get(), cqe);
  }
  return n;
}

bool BlockUring::wait(Completion& out) noexcept {
  io_uring_cqe* cqe = nullptr;
  for (;;) {
    const int r = io_uring_submit_and_wait(ring_.get(), 1);
    if (r == -EINTR) continue;
    if (r < 0) {
      errno = -r;
      return false;
    }
    if (io_uring_peek_cqe(ring_.get(), &cqe) == 0 && cqe != nullptr) break;
  }
  out = Completion{io_uring_cqe_get_data64(cqe), cqe->res};
  io_uring_cqe_seen(ring_.get(), cqe);
  return true;
}

#else  // !MINIVMM_HAVE_LIBURING: the worker thread serves disks (scripts/setup.sh installs it)

std::unique_ptr<BlockUring> BlockUring::create(int, unsigned, std::string& why) {
  why = "minivmm was built without liburing (liburing-dev)";
  return nullptr;
}

BlockUring::~BlockUring() = default;
int BlockUring::ring_fd() const noexcept { return -1; }
void BlockUring::drain_event_fd() noexcept {}
bool BlockUring::queue(std::uint8_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint32_t,
                       std::uint32_t) noexcept {
  return false;
}
bool BlockUring::queue_readv(std::uint64_t, std::uint64_t, std::span<const iovec>) noexcept {
  return false;
}
bool BlockUring::queue_writev(std::uint64_t, std::uint64_t, std::span<const iovec>) noexcept {
  return false;
}
bool BlockUring::queue_fdatasync(std::uint64_t) noexcept { return false; }
bool BlockUring::queue_punch_hole(std::uint64_t, std::uint64_t, std::uint64_t) noexcept {
  return false;
}
int BlockUring::submit() noexcept { return -ENOSYS; }
std::size_t BlockUring::take(std::span<Completion>) noexcept { return 0; }
bool BlockUring::wait(Completion&) noexcept {
  errno = ENOSYS;
  return false;
}

#endif

}  // namespace minivmm::devices
