// The host side of a virtio-blk disk: a regular file or a block device opened once, with the
// positional vectored I/O the worker needs. No caching, no locking of its own: the caller
// serializes (one worker thread).
//
// open() checks everything a user can get wrong before any VM exists — missing file, a
// directory, no permission, a size that is not a whole number of sectors (the tail is ignored,
// and said so) — and throws BlockFileError with a one-line message.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

namespace minivmm::devices {

class BlockFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class BlockFile {
 public:
  static BlockFile open(const std::string& path, bool read_only);

  BlockFile(BlockFile&& other) noexcept;
  BlockFile& operator=(BlockFile&&) = delete;
  BlockFile(const BlockFile&) = delete;
  ~BlockFile();

  const std::string& path() const noexcept { return path_; }
  // The file this drive opened, as an absolute path with every symlink resolved (what a
  // snapshot records, so that a restore in another folder opens the same file).
  const std::string& resolved_path() const noexcept { return resolved_path_; }
  bool read_only() const noexcept { return read_only_; }
  std::uint64_t size_bytes() const noexcept { return size_; }
  // For an io_uring that registers the file (BlockUring): the descriptor stays this object's.
  int fd() const noexcept { return fd_; }
  // Gives up the drive's lock (open() takes it) now, for a VMM whose I/O on it is over: the
  // next VMM can take the drive at once. Closing the descriptor is not enough where an io_uring
  // registered the file: the ring keeps the open file, and with it the lock, until a kernel
  // worker frees the ring after the process exited (a VMM started right after was refused
  // "in use" in 20 of 20 tries on 2026-12-04).
  void unlock() noexcept;

  // Whole transfers: short transfers are continued, EINTR retried. Return false on an error or
  // an unexpected end of file (errno set).
  bool read(std::uint64_t offset, std::span<const iovec> iov) noexcept;
  bool write(std::uint64_t offset, std::span<const iovec> iov) noexcept;
  bool flush() noexcept;  // fdatasync
  // Punches a hole; false with errno EOPNOTSUPP where the file system cannot.
  bool discard(std::uint64_t offset, std::uint64_t len) noexcept;

 private:
  BlockFile(int fd, std::string path, bool read_only, std::uint64_t size) noexcept
      : fd_(fd), path_(std::move(path)), read_only_(read_only), size_(size) {}
  bool transfer(bool is_write, std::uint64_t offset, std::span<const iovec> iov) noexcept;

  int fd_ = -1;
  std::string path_;
  std::string resolved_path_;
  bool read_only_ = false;
  std::uint64_t size_ = 0;
};

}  // namespace minivmm::devices
