// An io_uring bound to one BlockFile: how virtio-blk serves a disk from the event loop without
// blocking it and without a thread of its own (docs/virtio.md). The thread that took the guest's
// notification queues the requests and submits them in one io_uring_enter; the kernel does the
// preadv/pwritev/fdatasync/fallocate (inline when the page cache has the data, else in its own
// io-wq workers), and each completion signals event_fd(), which the loop watches.
//
// The ring is set up locked down (IORING_SETUP_R_DISABLED, then IORING_REGISTER_RESTRICTIONS):
// the only file it can touch is the disk (registered as fixed file 0, and IOSQE_FIXED_FILE is
// required), the only operations are the four above, and no io_uring_register call works once it
// is enabled. io_uring operations do not pass through the process's seccomp filter, so this is
// what keeps a ring from being more than the disk's I/O path.
//
// Not thread-safe: the owner serializes every call (VirtioBlk's mutex). Needs Linux 5.10
// (restrictions, disabled rings); create() says why when the kernel refuses.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

struct io_uring;

namespace minivmm::devices {

class BlockUring {
 public:
  struct Completion {
    std::uint64_t tag = 0;
    std::int32_t result = 0;  // bytes transferred, 0, or -errno, as the syscall would say
  };

  // A ring for `fd` with room for `entries` requests in flight (a power of two up to 4096).
  // Returns nullptr and sets `why` (one line) when io_uring is unavailable here: disabled by
  // sysctl, older than 5.10, or refused by a seccomp filter.
  static std::unique_ptr<BlockUring> create(int fd, unsigned entries, std::string& why);
  ~BlockUring();
  BlockUring(const BlockUring&) = delete;
  BlockUring& operator=(const BlockUring&) = delete;

  // Readable when completions are ready: the counter is cleared by drain_event_fd().
  int event_fd() const noexcept { return event_fd_; }
  // The ring's own descriptor (tests check the lockdown through it).
  int ring_fd() const noexcept;
  void drain_event_fd() noexcept;

  // Queue one request (not yet submitted); false when the submission queue is full.
  bool queue_readv(std::uint64_t tag, std::uint64_t offset, std::span<const iovec> iov) noexcept;
  bool queue_writev(std::uint64_t tag, std::uint64_t offset, std::span<const iovec> iov) noexcept;
  bool queue_fdatasync(std::uint64_t tag) noexcept;
  bool queue_punch_hole(std::uint64_t tag, std::uint64_t offset, std::uint64_t len) noexcept;
  // Hands everything queued to the kernel: the number submitted, or -errno.
  int submit() noexcept;

  // Completions ready now, at most out.size(), without a syscall. Returns how many were filled.
  std::size_t take(std::span<Completion> out) noexcept;
  // Blocks until one completion is ready (queued requests are submitted first). False on an
  // error of the wait itself (errno set).
  bool wait(Completion& out) noexcept;

 private:
  BlockUring() = default;
  bool queue(std::uint8_t opcode, std::uint64_t tag, std::uint64_t offset, std::uint64_t addr,
             std::uint32_t len, std::uint32_t op_flags) noexcept;

  std::unique_ptr<io_uring> ring_;
  bool ring_ready_ = false;  // io_uring_queue_init succeeded: the destructor must exit it
  int event_fd_ = -1;
};

}  // namespace minivmm::devices
