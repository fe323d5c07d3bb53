#include "devices/host/block_file.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <climits>
#include <string_view>
#include <utility>
#include <vector>

#include "devices/host/iov_advance.h"

namespace minivmm::devices {
namespace {

// What /proc says the descriptor is (the kernel's own resolution: absolute, no symlinks), or
// the given path made absolute where /proc is missing or the file was already unlinked.
std::string resolve_open_path(int fd, const std::string& given) {
  char buf[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n > 0 && buf[0] == '/') {
    std::string p(buf, static_cast<std::size_t>(n));
    constexpr std::string_view kDeleted = " (deleted)";
    if (!p.ends_with(kDeleted)) return p;
  }
  if (char* real = ::realpath(given.c_str(), nullptr)) {
    std::string p(real);
    std::free(real);
    return p;
  }
  return given;
}

}  // namespace

BlockFile BlockFile::open(const std::string& path, bool read_only) {
  // O_NONBLOCK: a FIFO (or a device that waits for carrier) would block open() until a writer
  // came, and the VMM has its stop signals blocked while it sets up: nothing could end it but
  // SIGKILL. The type is judged on the open fd, then the flag is dropped for the disk's I/O.
  const int fd = ::open(path.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    // A socket (ENXIO) or a directory opened for writing (EISDIR) says why badly: name the type.
    struct stat what {};
    if (::stat(path.c_str(), &what) == 0 && !S_ISREG(what.st_mode) && !S_ISBLK(what.st_mode)) {
      throw BlockFileError("drive " + path + ": not a regular file or block device");
    }
    throw BlockFileError("drive " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw BlockFileError("drive " + path + ": " + std::strerror(err));
  }
  if ((S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) &&
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    throw BlockFileError("drive " + path + ": " + std::strerror(err));
  }
  std::uint64_t size = 0;
  if (S_ISREG(st.st_mode)) {
    size = static_cast<std::uint64_t>(st.st_size);
  } else if (S_ISBLK(st.st_mode)) {
    if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
      const int err = errno;
      ::close(fd);
      throw BlockFileError("drive " + path + ": cannot read its size: " + std::strerror(err));
    }
  } else {
    ::close(fd);
    throw BlockFileError("drive " + path + ": not a regular file or block device");
  }
  // One writer or any number of readers, across this VMM's own drives and other processes
  // (QEMU takes such locks too): two read-write drives of one file would corrupt it. flock()
  // locks belong to the open file, so a second --drive of the same file in this process
  // conflicts as another process's would. A file system without locks is let be.
  if (::flock(fd, (read_only ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0 && errno != ENOLCK &&
      errno != EOPNOTSUPP) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      throw BlockFileError("drive " + path + ": in use: another --drive of this VMM or another " +
                           "process has it open" + (read_only ? " for writing" : "") +
                           " (a read-write drive is used by one VMM at a time)");
    }
    throw BlockFileError("drive " + path + ": cannot lock it: " + std::strerror(err));
  }
  BlockFile file(fd, path, read_only, size);
  file.resolved_path_ = resolve_open_path(fd, path);
  return file;
}

BlockFile::BlockFile(BlockFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      resolved_path_(std::move(other.resolved_path_)),
      read_only_(other.read_only_),
      size_(other.size_) {}

BlockFile::~BlockFile() {
  if (fd_ >= 0) ::close(fd_);
}

void BlockFile::unlock() noexcept {
  // A flock() lock belongs to the open file, so LOCK_UN here releases it for every reference
  // to that file, the ring's among them.
  if (fd_ >= 0) ::flock(fd_, LOCK_UN);
}

bool BlockFile::transfer(bool is_write, std::uint64_t offset, std::span<const iovec> iov) noexcept {
  // A private copy: a short transfer advances through it.
  std::vector<iovec> rest(iov.begin(), iov.end());
  std::size_t first = advance_iov(rest, 0, 0);
  while (first < rest.size()) {
    const int count = static_cast<int>(std::min<std::size_t>(rest.size() - first, IOV_MAX));
    const ssize_t n = is_write ? ::pwritev(fd_, &rest[first], count, static_cast<off_t>(offset))
                               : ::preadv(fd_, &rest[first], count, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = EIO;  // end of file inside the disk: the file shrank under us
      return false;
    }
    offset += static_cast<std::uint64_t>(n);
    first = advance_iov(rest, first, static_cast<std::size_t>(n));
  }
  return true;
}

bool BlockFile::read(std::uint64_t offset, std::span<const iovec> iov) noexcept {
  return transfer(false, offset, iov);
}

bool BlockFile::write(std::uint64_t offset, std::span<const iovec> iov) noexcept {
  if (read_only_) {
    errno = EROFS;
    return false;
  }
  return transfer(true, offset, iov);
}

bool BlockFile::flush() noexcept {
  while (::fdatasync(fd_) != 0) {
    if (errno != EINTR) return false;
  }
  return true;
}

bool BlockFile::discard(std::uint64_t offset, std::uint64_t len) noexcept {
  if (read_only_) {
    errno = EROFS;
    return false;
  }
  return ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                     static_cast<off_t>(len)) == 0;
}

}  // namespace minivmm::devices
