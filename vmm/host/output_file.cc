#include "vmm/host/output_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

std::optional<std::string> real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return std::nullopt;
  return std::string(buf);
}

// "dir/name" -> {"dir", "name"}; "name" -> {".", "name"}; "/name" -> {"/", "name"}.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// Whether the real path `path` is `root` (real too) or under it.
bool is_under(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root ||
         (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

// Where `path` would be once resolved: its real path if it exists, else its folder's real path
// and its own name; nullopt if neither resolves.
std::optional<std::string> resolved_name(const std::string& path) {
  if (auto real = real_path(path)) return real;
  const auto [dir, name] = split_path(path);
  const auto real_dir = real_path(dir);
  if (!real_dir || name.empty()) return std::nullopt;
  return (*real_dir == "/" ? "" : *real_dir) + "/" + name;
}

// /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N: another name for a
// file descriptor a process already has. Renaming onto what they resolve to would replace that
// file (the console, if stdout is a file); they are written to in place, appending. Only these
// names: any path under /dev/ once counted, so a regular file in /dev/shm was appended to
// (an old report with a new one after it) instead of replaced.
bool is_fd_alias(const std::string& path) {
  if (path == "/dev/stdout" || path == "/dev/stderr" || path.rfind("/dev/fd/", 0) == 0 ||
      path.rfind("/proc/self/fd/", 0) == 0 || path.rfind("/proc/thread-self/fd/", 0) == 0) {
    return true;
  }
  if (path.rfind("/proc/", 0) != 0) return false;
  const auto digits_end = path.find_first_not_of("0123456789", 6);
  return digits_end > 6 && digits_end != std::string::npos &&
         path.compare(digits_end, 4, "/fd/") == 0;
}

bool write_fd(int fd, std::string_view text, std::chrono::milliseconds timeout,
              std::string& error) noexcept {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLOUT, 0};
      if (left.count() > 0 && ::poll(&p, 1, static_cast<int>(left.count())) > 0) continue;
      error = "its reader took nothing for " + std::to_string(timeout.count()) + " ms";
      return false;
    }
    error = n == 0 ? std::string("wrote nothing") : std::string(std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : option_(std::move(other.option_)),
      path_(std::move(other.path_)),
      resolved_(std::move(other.resolved_)),
      kind_(std::exchange(other.kind_, Kind::kNone)),
      fd_(std::exchange(other.fd_, -1)),
      write_timeout_(other.write_timeout_) {}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    option_ = std::move(other.option_);
    path_ = std::move(other.path_);
    resolved_ = std::move(other.resolved_);
    kind_ = std::exchange(other.kind_, Kind::kNone);
    fd_ = std::exchange(other.fd_, -1);
    write_timeout_ = other.write_timeout_;
  }
  return *this;
}

OutputFile OutputFile::check(std::string option, std::string path,
                             const std::vector<InputFile>& inputs) {
  OutputFile out;
  out.option_ = std::move(option);
  out.path_ = std::move(path);
  const auto fail = [&](const std::string& why) -> VmmError {
    return VmmError(ExitCode::kUsage, out.option_ + ": '" + out.path_ + "' " + why);
  };
  if (out.path_.empty()) throw VmmError(ExitCode::kUsage, out.option_ + ": the path is empty");
  if (out.path_ == "-") {
    out.kind_ = Kind::kStdout;
    return out;
  }

  struct stat st {};
  const bool exists = ::stat(out.path_.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) throw fail(std::string("cannot be used: ") + std::strerror(errno));
  if (!exists) {
    struct stat link {};
    if (::lstat(out.path_.c_str(), &link) == 0) throw fail("is a symbolic link to nothing");
  }
  const auto resolved = resolved_name(out.path_);
  if (!resolved) {
    throw fail("is in a folder that does not exist" + std::string(out.path_.back() == '/' ? " or names a folder" : ""));
  }

  // Never one of the run's inputs, under whatever name: same inode, or the same resolved path
  // (an input that does not exist yet, such as the control socket's file).
  for (const InputFile& in : inputs) {
    if (in.folder) {
      const auto root = real_path(in.path);
      if (root && is_under(*resolved, *root)) {
        throw fail("is in the folder given to " + in.option + " ('" + in.path +
                   "'), whose files the run reads; an output never lands among inputs");
      }
      continue;
    }
    struct stat ist {};
    const bool same_inode = exists && ::stat(in.path.c_str(), &ist) == 0 &&
                            ist.st_dev == st.st_dev && ist.st_ino == st.st_ino;
    if (same_inode || resolved_name(in.path) == resolved) {
      throw fail("is the file given to " + in.option + " ('" + in.path +
                 "'); an output never overwrites an input");
    }
  }

  if (exists) {
    if (S_ISDIR(st.st_mode)) throw fail("is a directory");
    if (S_ISSOCK(st.st_mode)) throw fail("is a socket");
    if (S_ISBLK(st.st_mode)) throw fail("is a block device");
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || is_fd_alias(out.path_)) {
      if (::access(out.path_.c_str(), W_OK) != 0) {
        throw fail(std::string("cannot be written: ") + std::strerror(errno));
      }
      out.kind_ = Kind::kDirect;
      return out;
    }
    if (!S_ISREG(st.st_mode)) throw fail("is not a regular file, FIFO or character device");
    if (::access(out.path_.c_str(), W_OK) != 0) {
      throw fail(std::string("cannot be written: ") + std::strerror(errno));
    }
  }
  // The report is written beside the target and renamed onto it: its folder must take a file.
  const std::string dir = split_path(*resolved).first;
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw fail("is in a folder that cannot be written (" + dir + ": " + std::strerror(errno) + ")");
  }
  out.resolved_ = *resolved;
  out.kind_ = Kind::kRegular;
  return out;
}

void OutputFile::open() {
  if (kind_ != Kind::kDirect || fd_ >= 0) return;
  // Non-blocking: a FIFO nobody reads answers ENXIO at once instead of blocking the start.
  fd_ = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_APPEND);
  if (fd_ < 0) {
    const int err = errno;
    if (err == ENXIO) {
      throw VmmError(ExitCode::kUsage, option_ + ": '" + path_ + "' is a FIFO that nobody reads");
    }
    throw VmmError(ExitCode::kUsage,
                   option_ + ": cannot open '" + path_ + "': " + std::strerror(err));
  }
}

int open_streamed_log(const std::string& path, std::string& error) noexcept {
  // Judged before it is opened: opening a FIFO would wait for its reader, opening a device can
  // do what the device does on open (a tape rewinds), and O_TRUNC follows a symbolic link.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      error = "'" + path + "' is a symbolic link; a log is a regular file of the logs folder";
      return -1;
    }
    if (!S_ISREG(st.st_mode)) {
      error = "'" + path + "' is " + (S_ISFIFO(st.st_mode)  ? "a FIFO"
                                      : S_ISDIR(st.st_mode) ? "a directory"
                                      : S_ISCHR(st.st_mode) ? "a character device"
                                      : S_ISBLK(st.st_mode) ? "a block device"
                                      : S_ISSOCK(st.st_mode) ? "a socket"
                                                             : "not a regular file") +
              "; a log is a regular file of the logs folder";
      return -1;
    }
  } else if (errno != ENOENT) {
    error = "'" + path + "': " + std::strerror(errno);
    return -1;
  }
  // O_NOFOLLOW and O_NONBLOCK again for what changed since the lstat; fstat has the last word.
  constexpr int kFlags =
      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK;
  const int fd = ::open(path.c_str(), kFlags, 0644);
  if (fd < 0) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return -1;
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    error = "'" + path + "' is not a regular file; a log is a regular file of the logs folder";
    return -1;
  }
  // Blocking again: a regular file never blocks anyway, and the child that inherits it (the
  // console of a `minivmm test` run) must not meet EAGAIN.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

bool OutputFile::write(std::string_view text, std::string& error) noexcept {
  switch (kind_) {
    case Kind::kNone:
      return true;
    case Kind::kStdout:
      return write_fd(STDOUT_FILENO, text, write_timeout_, error);
    case Kind::kDirect:
      if (fd_ < 0) {
        error = "not open";
        return false;
      }
      return write_fd(fd_, text, write_timeout_, error);
    case Kind::kRegular:
      return write_regular(text, error);
  }
  return false;
}

bool OutputFile::write_regular(std::string_view text, std::string& error) noexcept {
  const auto [dir, name] = split_path(resolved_);
  // Hidden beside the target, so the rename stays within one file system; O_EXCL never
  // opens a file that is already there (a leftover of a run killed while writing, or not ours).
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temp = dir + "/." + name + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(attempt);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    error = "cannot create '" + temp + "': " + std::strerror(errno);
    return false;
  }
  std::string why;
  bool ok = write_fd(fd, text, write_timeout_, why);
  if (!ok) error = "cannot write '" + temp + "': " + why;
  if (::close(fd) != 0 && ok) {
    ok = false;
    error = "cannot write '" + temp + "': " + std::strerror(errno);
  }
  if (ok && ::rename(temp.c_str(), resolved_.c_str()) != 0) {
    ok = false;
    error = "cannot rename '" + temp + "' onto '" + resolved_ + "': " + std::strerror(errno);
  }
  if (!ok) ::unlink(temp.c_str());
  return ok;
}

}  // namespace minivmm::vmm
