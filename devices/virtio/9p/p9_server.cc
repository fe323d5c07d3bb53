// P9Server: the 9P2000.L requests against the host folder (p9_server.h has the rules).
#include "devices/virtio/9p/p9_server.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>
#include <vector>

namespace minivmm::devices::p9 {

namespace {

// 9P2000.L's Tlopen/Tlcreate flags are Linux's (x86) open flags; we pass on only these: the
// access mode and what changes the file or the descriptor's I/O. O_DIRECT is dropped (guest
// buffers are not aligned for the host's device), O_NOFOLLOW/O_CLOEXEC are always ours.
constexpr int kPassedOpenFlags = O_ACCMODE | O_TRUNC | O_APPEND | O_EXCL | O_DSYNC | O_SYNC |
                                 O_NOATIME;
constexpr int kDotlCreate = 0100, kDotlDirectory = 0200000;
constexpr std::uint32_t kAtRemoveDir = 0x200;  // Tunlinkat's flag

// Tsetattr's valid bits.
constexpr std::uint32_t kSetMode = 0x1, kSetUid = 0x2, kSetGid = 0x4, kSetSize = 0x8,
                        kSetAtime = 0x10, kSetMtime = 0x20, kSetAtimeSet = 0x80,
                        kSetMtimeSet = 0x100;
constexpr std::uint64_t kGetattrBasic = 0x7ff;
constexpr std::uint8_t kLockRead = 0, kLockWrite = 1, kLockUnlock = 2;
constexpr std::uint8_t kLockSuccess = 0, kLockBlocked = 1, kLockError = 2;
constexpr std::size_t kMaxName = 255;

}  // namespace

// Outside the anonymous namespace: P9Server::Fid (external linkage) holds two of them.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  ~Fd() { reset(); }
  int get() const noexcept { return fd_; }
  int release() noexcept {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

namespace {

std::string proc_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// One component of a path: not empty, no '/', no NUL (a string on the wire may hold one), at
// most NAME_MAX. "." and ".." are walk's business, never a name to create or remove.
int check_name(const std::string& name, bool allow_dots) noexcept {
  if (name.empty() || name.size() > kMaxName) return name.empty() ? EINVAL : ENAMETOOLONG;
  if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos) return EINVAL;
  if (!allow_dots && (name == "." || name == "..")) return EINVAL;
  return 0;
}

bool g_no_openat2 = false;  // the kernel has no openat2 (before 5.6): the fallback below

// Opens one component beneath `dirfd` as O_PATH, never following a symlink or leaving dirfd.
int open_beneath(int dirfd, const char* path, int extra_flags) noexcept {
  if (!g_no_openat2) {
    open_how how{};
    how.flags = static_cast<__u64>(static_cast<unsigned>(O_PATH | O_NOFOLLOW | O_CLOEXEC | extra_flags));
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const long fd = ::syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
    g_no_openat2 = true;
  }
  // Without openat2: one component (callers never pass more, nor "..") opened O_NOFOLLOW is the
  // same rule: no intermediate component to follow, and the last one is not followed.
  if (std::strchr(path, '/') != nullptr || std::strcmp(path, "..") == 0) {
    errno = EXDEV;
    return -1;
  }
  return ::openat(dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC | extra_flags);
}

}  // namespace

struct P9Server::Fid {
  Fd path;           // O_PATH (or, after lcreate, the open descriptor's duplicate)
  Fd open;           // after lopen/lcreate
  std::string rel;   // path from the share's root ("" is the root), for ".." and Trename
  mode_t type = 0;   // S_IFDIR, S_IFREG, S_IFLNK...
  std::uint64_t dir_offset = 0;  // where the open directory's position is (readdir)
};

std::string_view op_name(Op op) noexcept {
  static constexpr std::array<std::string_view, static_cast<std::size_t>(Op::kCount)> kNames = {
      "version", "attach",   "walk",     "getattr", "setattr", "lopen",   "lcreate",
      "read",    "write",    "readdir",  "clunk",   "statfs",  "flush",   "readlink",
      "mkdir",   "unlinkat", "renameat", "rename",  "symlink", "link",    "fsync",
      "lock",    "getlock",  "xattr",    "mknod",   "other"};
  return kNames[static_cast<std::size_t>(op)];
}

std::string_view message_name(std::uint8_t type) noexcept {
  switch (type) {
    case kTversion: return "version";
    case kTattach: return "attach";
    case kTwalk: return "walk";
    case kTgetattr: return "getattr";
    case kTsetattr: return "setattr";
    case kTlopen: return "lopen";
    case kTlcreate: return "lcreate";
    case kTread: return "read";
    case kTwrite: return "write";
    case kTreaddir: return "readdir";
    case kTclunk: return "clunk";
    case kTremove: return "remove";
    case kTstatfs: return "statfs";
    case kTflush: return "flush";
    case kTreadlink: return "readlink";
    case kTmkdir: return "mkdir";
    case kTunlinkat: return "unlinkat";
    case kTrenameat: return "renameat";
    case kTrename: return "rename";
    case kTsymlink: return "symlink";
    case kTlink: return "link";
    case kTfsync: return "fsync";
    case kTlock: return "lock";
    case kTgetlock: return "getlock";
    case kTxattrwalk: return "xattrwalk";
    case kTxattrcreate: return "xattrcreate";
    case kTmknod: return "mknod";
    case kTauth: return "auth";
    default: return "unknown";
  }
}

namespace {
Op op_of(std::uint8_t type) noexcept {
  switch (type) {
    case kTversion: return Op::kVersion;
    case kTattach: return Op::kAttach;
    case kTwalk: return Op::kWalk;
    case kTgetattr: return Op::kGetattr;
    case kTsetattr: return Op::kSetattr;
    case kTlopen: return Op::kLopen;
    case kTlcreate: return Op::kLcreate;
    case kTread: return Op::kRead;
    case kTwrite: return Op::kWrite;
    case kTreaddir: return Op::kReaddir;
    case kTclunk: case kTremove: return Op::kClunk;
    case kTstatfs: return Op::kStatfs;
    case kTflush: return Op::kFlush;
    case kTreadlink: return Op::kReadlink;
    case kTmkdir: return Op::kMkdir;
    case kTunlinkat: return Op::kUnlinkat;
    case kTrenameat: return Op::kRenameat;
    case kTrename: return Op::kRename;
    case kTsymlink: return Op::kSymlink;
    case kTlink: return Op::kLink;
    case kTfsync: return Op::kFsync;
    case kTlock: return Op::kLock;
    case kTgetlock: return Op::kGetlock;
    case kTxattrwalk: case kTxattrcreate: return Op::kXattr;
    case kTmknod: return Op::kMknod;
    default: return Op::kOther;
  }
}
}  // namespace

std::unique_ptr<P9Server> P9Server::open(const std::string& dir, bool read_only,
                                         std::string& why) {
  // The share itself is the user's choice: resolved (symlinks included) once, here.
  const int fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    why = "'" + dir + "': " +
          (errno == ENOTDIR ? std::string("not a directory") : std::string(std::strerror(errno)));
    return nullptr;
  }
  return std::unique_ptr<P9Server>(new P9Server(fd, read_only));
}

P9Server::P9Server(int root_fd, bool read_only) : root_fd_(root_fd), read_only_(read_only) {
  struct stat st{};
  if (::fstat(root_fd_, &st) == 0) root_dev_ = st.st_dev;
}

P9Server::~P9Server() {
  fids_.clear();
  ::close(root_fd_);
}

void P9Server::reset() {
  fids_.clear();
  msize_ = kMaxMsize;
  std::lock_guard s(stats_mu_);
  stats_.fids_open = 0;
}

P9Stats P9Server::stats() const {
  std::lock_guard s(stats_mu_);
  return stats_;
}

P9Server::Fid* P9Server::find(std::uint32_t fid) noexcept {
  const auto it = fids_.find(fid);
  return it == fids_.end() ? nullptr : it->second.get();
}

void P9Server::add_fid(std::uint32_t id, std::unique_ptr<Fid> f) {
  fids_[id] = std::move(f);
  std::lock_guard s(stats_mu_);
  stats_.fids_open = fids_.size();
}

int P9Server::refuse_read_only() noexcept {
  std::lock_guard s(stats_mu_);
  ++stats_.read_only_refused;
  return EROFS;
}

Qid P9Server::qid_from(const struct ::stat& st) const noexcept {
  Qid q;
  q.type = S_ISDIR(st.st_mode) ? kQtDir : S_ISLNK(st.st_mode) ? kQtSymlink : kQtFile;
  // The guest uses qid.path as the inode number: a file on another file system mounted inside
  // the share gets its device mixed into the top bits, so two files do not share one.
  q.path = st.st_ino;
  if (st.st_dev != root_dev_) q.path ^= (static_cast<std::uint64_t>(st.st_dev) * 0x9e3779b9ull) << 40;
  return q;
}

int P9Server::qid_of(int fd, Qid& q) const noexcept {
  struct stat st{};
  if (::fstat(fd, &st) != 0) return errno;
  q = qid_from(st);
  return 0;
}

int P9Server::qid_at(int dirfd, const std::string& name, Qid& q) const noexcept {
  struct stat st{};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
  q = qid_from(st);
  return 0;
}

std::size_t P9Server::handle(std::span<const std::byte> request, std::span<std::byte> out) {
  if (out.size() < kIoHeaderSize) return 0;
  P9Reader hr(request);
  const std::uint32_t size = hr.u32();
  const std::uint8_t type = hr.u8();
  const std::uint16_t tag = hr.ok() ? hr.u16() : kNoTag;
  // The answer goes into at most msize bytes, whatever room the transport has beyond.
  if (out.size() > msize_) out = out.first(msize_);
  P9Writer w(out);
  w.u32(0);  // size, patched below
  w.u8(static_cast<std::uint8_t>(type + 1));
  w.u16(tag);
  int err = 0;
  if (!hr.ok() || size < kHeaderSize || size > request.size() || size > msize_) {
    err = EPROTO;
  } else {
    P9Reader r(request.subspan(kHeaderSize, size - kHeaderSize));
    {
      std::lock_guard s(stats_mu_);
      ++stats_.requests[static_cast<std::size_t>(op_of(type))];
    }
    err = dispatch(type, tag, r, w);
    if (err == 0 && !w.ok()) err = EMSGSIZE;  // an answer that did not fit the room
  }
  if (err != 0) {
    P9Writer e(out);
    e.u32(kIoHeaderSize);
    e.u8(kRlerror);
    e.u16(tag);
    e.u32(static_cast<std::uint32_t>(err));
    std::lock_guard s(stats_mu_);
    ++stats_.errors;
    if (err == EPROTO) ++stats_.protocol_errors;
    return kIoHeaderSize;
  }
  w.patch_u32(0, static_cast<std::uint32_t>(w.size()));
  return w.size();
}

int P9Server::dispatch(std::uint8_t type, std::uint16_t /*tag*/, P9Reader& r, P9Writer& w) {
  switch (type) {
    case kTversion: return t_version(r, w);
    case kTattach: return t_attach(r, w);
    case kTwalk: return t_walk(r, w);
    case kTgetattr: return t_getattr(r, w);
    case kTsetattr: return t_setattr(r, w);
    case kTlopen: return t_lopen(r, w);
    case kTlcreate: return t_lcreate(r, w);
    case kTread: return t_read(r, w);
    case kTwrite: return t_write(r, w);
    case kTreaddir: return t_readdir(r, w);
    case kTclunk: return t_clunk(r, false);
    case kTremove: return t_clunk(r, true);
    case kTstatfs: return t_statfs(r, w);
    case kTflush:
      // Requests are answered in order, one at a time: the one to flush is already answered.
      r.u16();
      return r.ok() ? 0 : EPROTO;
    case kTreadlink: return t_readlink(r, w);
    case kTmkdir: return t_mkdir(r, w);
    case kTsymlink: return t_symlink(r, w);
    case kTlink: return t_link(r);
    case kTunlinkat: return t_unlinkat(r);
    case kTrenameat: return t_renameat(r);
    case kTrename: return t_rename(r);
    case kTfsync: return t_fsync(r);
    case kTlock: return t_lock(r, w);
    case kTgetlock: return t_getlock(r, w);
    case kTxattrwalk: case kTxattrcreate: return EOPNOTSUPP;
    case kTmknod: return read_only_ ? refuse_read_only() : EPERM;
    case kTauth: return EOPNOTSUPP;  // no authentication: attach with afid NOFID
    default: return EOPNOTSUPP;
  }
}

int P9Server::t_version(P9Reader& r, P9Writer& w) {
  const std::uint32_t msize = r.u32();
  const std::string version = r.str();
  if (!r.ok()) return EPROTO;
  // A new session: every fid of the old one goes (9P: Tversion aborts all outstanding I/O).
  reset();
  if (msize < 64) return EINVAL;
  msize_ = std::min(msize, kMaxMsize);
  w.u32(msize_);
  w.str(version.starts_with("9P2000.L") ? "9P2000.L" : "unknown");
  return 0;
}

int P9Server::t_attach(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  r.u32();  // afid: no authentication
  r.str();  // uname
  r.str();  // aname: one share per server, whatever the guest names
  r.u32();  // n_uname
  if (!r.ok()) return EPROTO;
  if (find(fid) != nullptr) return EBADF;
  if (fids_.size() >= kMaxFids) return EMFILE;
  auto f = std::make_unique<Fid>();
  f->path.reset(::fcntl(root_fd_, F_DUPFD_CLOEXEC, 0));
  if (!f->path) return errno;
  f->type = S_IFDIR;
  Qid q;
  if (const int e = qid_of(f->path.get(), q)) return e;
  add_fid(fid, std::move(f));
  w.qid(q);
  return 0;
}

int P9Server::walk_one(const Fid& from, const std::string& name, Fid& to) {
  if (!S_ISDIR(from.type)) return ENOTDIR;
  if (const int e = check_name(name, true)) return e;
  if (name == ".") {
    to.path.reset(::fcntl(from.path.get(), F_DUPFD_CLOEXEC, 0));
    if (!to.path) return errno;
    to.rel = from.rel;
    to.type = S_IFDIR;
    return 0;
  }
  int fd = -1;
  if (name == "..") {
    // The parent, found again from the root by the fid's path: beneath the root by
    // construction, and the root's own `..` is the root.
    const auto slash = from.rel.rfind('/');
    to.rel = slash == std::string::npos ? "" : from.rel.substr(0, slash);
    fd = to.rel.empty() ? ::fcntl(root_fd_, F_DUPFD_CLOEXEC, 0)
                        : open_beneath(root_fd_, to.rel.c_str(), O_DIRECTORY);
  } else {
    fd = open_beneath(from.path.get(), name.c_str(), 0);
    to.rel = from.rel.empty() ? name : from.rel + "/" + name;
  }
  if (fd < 0) {
    const int e = errno;
    // A symlink met (ELOOP; ENOTDIR for one where `..` needs a directory) or a way out (EXDEV).
    if (e == ELOOP || e == EXDEV || (name == ".." && e == ENOTDIR)) {
      std::lock_guard s(stats_mu_);
      ++stats_.escapes_refused;
    }
    return e;
  }
  to.path.reset(fd);
  struct stat st{};
  if (::fstat(fd, &st) != 0) return errno;
  to.type = st.st_mode & S_IFMT;
  return 0;
}

int P9Server::t_walk(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  const std::uint32_t newfid = r.u32();
  const std::uint16_t n = r.u16();
  if (!r.ok()) return EPROTO;
  if (n > kMaxWalkNames) return EINVAL;
  std::vector<std::string> names;
  for (std::uint16_t i = 0; i < n; ++i) names.push_back(r.str());
  if (!r.ok()) return EPROTO;
  Fid* from = find(fid);
  if (from == nullptr) return EBADF;
  if (newfid != fid && find(newfid) != nullptr) return EBADF;
  if (newfid != fid && fids_.size() >= kMaxFids) return EMFILE;
  auto cur = std::make_unique<Fid>();
  cur->path.reset(::fcntl(from->path.get(), F_DUPFD_CLOEXEC, 0));
  if (!cur->path) return errno;
  cur->rel = from->rel;
  cur->type = from->type;
  std::vector<Qid> qids;
  for (const std::string& name : names) {
    auto next = std::make_unique<Fid>();
    const int e = walk_one(*cur, name, *next);
    if (e != 0) {
      // The first name failing is an error; a later one answers the qids walked, and newfid
      // is not made (9P walk semantics).
      if (qids.empty()) return e;
      break;
    }
    Qid q;
    if (const int qe = qid_of(next->path.get(), q)) return qe;
    qids.push_back(q);
    cur = std::move(next);
  }
  w.u16(static_cast<std::uint16_t>(qids.size()));
  for (const Qid& q : qids) w.qid(q);
  if (qids.size() == names.size()) {
    if (newfid == fid) {
      fids_.erase(fid);  // the fid moves; it was not open (Linux walks only unopened fids)
    }
    add_fid(newfid, std::move(cur));
  }
  return 0;
}

int P9Server::t_getattr(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  r.u64();  // request_mask: the basic set is always answered
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  struct stat st{};
  // The fid's own descriptor: an open-then-unlinked file still answers.
  if (::fstat(f->open ? f->open.get() : f->path.get(), &st) != 0) return errno;
  w.u64(kGetattrBasic);
  w.qid(qid_from(st));
  w.u32(st.st_mode);
  w.u32(st.st_uid);
  w.u32(st.st_gid);
  w.u64(st.st_nlink);
  w.u64(st.st_rdev);
  w.u64(static_cast<std::uint64_t>(st.st_size));
  w.u64(static_cast<std::uint64_t>(st.st_blksize));
  w.u64(static_cast<std::uint64_t>(st.st_blocks));
  w.u64(static_cast<std::uint64_t>(st.st_atim.tv_sec));
  w.u64(static_cast<std::uint64_t>(st.st_atim.tv_nsec));
  w.u64(static_cast<std::uint64_t>(st.st_mtim.tv_sec));
  w.u64(static_cast<std::uint64_t>(st.st_mtim.tv_nsec));
  w.u64(static_cast<std::uint64_t>(st.st_ctim.tv_sec));
  w.u64(static_cast<std::uint64_t>(st.st_ctim.tv_nsec));
  for (int i = 0; i < 4; ++i) w.u64(0);  // btime (2), gen, data_version
  return 0;
}

int P9Server::t_setattr(P9Reader& r, P9Writer& /*w*/) {
  const std::uint32_t fid = r.u32();
  const std::uint32_t valid = r.u32();
  const std::uint32_t mode = r.u32();
  const std::uint32_t uid = r.u32();
  const std::uint32_t gid = r.u32();
  const std::uint64_t size = r.u64();
  timespec times[2]{};
  times[0].tv_sec = static_cast<time_t>(r.u64());
  times[0].tv_nsec = static_cast<long>(r.u64());
  times[1].tv_sec = static_cast<time_t>(r.u64());
  times[1].tv_nsec = static_cast<long>(r.u64());
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  constexpr std::uint32_t kChanges =
      kSetMode | kSetUid | kSetGid | kSetSize | kSetAtime | kSetMtime;
  if ((valid & kChanges) == 0) return 0;  // ctime alone: the host sets it with any change
  if (read_only_) return refuse_read_only();
  const bool link = S_ISLNK(f->type);
  const bool other = !S_ISREG(f->type) && !S_ISDIR(f->type) && !link;
  // The /proc/self/fd path reaches exactly the fid's file (unlinked or not); it is used only
  // for regular files and directories, never to follow a symlink.
  const std::string self = proc_path(f->path.get());
  if (valid & kSetMode) {
    if (link || other) return EOPNOTSUPP;
    if (::fchmodat(AT_FDCWD, self.c_str(), mode & 07777, 0) != 0) return errno;
  }
  if (valid & (kSetUid | kSetGid)) {
    const uid_t u = (valid & kSetUid) ? uid : static_cast<uid_t>(-1);
    const gid_t g = (valid & kSetGid) ? gid : static_cast<gid_t>(-1);
    if (::fchownat(f->path.get(), "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
      return errno;
    }
  }
  if (valid & kSetSize) {
    if (!S_ISREG(f->type)) return S_ISDIR(f->type) ? EISDIR : EINVAL;
    if (size > static_cast<std::uint64_t>(INT64_MAX)) return EFBIG;
    const int rc = f->open && (::fcntl(f->open.get(), F_GETFL) & O_ACCMODE) != O_RDONLY
                       ? ::ftruncate(f->open.get(), static_cast<off_t>(size))
                       : ::truncate(self.c_str(), static_cast<off_t>(size));
    if (rc != 0) return errno;
  }
  if ((valid & (kSetAtime | kSetMtime)) && !link && !other) {
    if (!(valid & kSetAtime)) {
      times[0].tv_nsec = UTIME_OMIT;
    } else if (!(valid & kSetAtimeSet)) {
      times[0].tv_nsec = UTIME_NOW;
    }
    if (!(valid & kSetMtime)) {
      times[1].tv_nsec = UTIME_OMIT;
    } else if (!(valid & kSetMtimeSet)) {
      times[1].tv_nsec = UTIME_NOW;
    }
    if (::utimensat(AT_FDCWD, self.c_str(), times, 0) != 0) return errno;
  }
  return 0;
}

int P9Server::t_lopen(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  const std::uint32_t flags = r.u32();
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  if (f->open) return EBADF;  // opened once per fid
  int oflags = static_cast<int>(flags) & kPassedOpenFlags;
  const bool writes = (oflags & O_ACCMODE) != O_RDONLY || (oflags & O_TRUNC) != 0;
  int fd = -1;
  if (S_ISDIR(f->type)) {
    if (writes) return EISDIR;
    fd = ::openat(f->path.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } else if (S_ISREG(f->type)) {
    if ((flags & kDotlDirectory) != 0) return ENOTDIR;
    if (writes && read_only_) return refuse_read_only();
    fd = ::open(proc_path(f->path.get()).c_str(), oflags | O_CLOEXEC);
  } else {
    // A symlink is the guest's to resolve; FIFOs, sockets and device nodes are not served.
    return S_ISLNK(f->type) ? ELOOP : EOPNOTSUPP;
  }
  if (fd < 0) return errno;
  f->open.reset(fd);
  f->dir_offset = 0;
  Qid q;
  if (const int e = qid_of(fd, q)) return e;
  w.qid(q);
  w.u32(0);  // iounit: the client's msize decides
  return 0;
}

int P9Server::dir_and_name(std::uint32_t dfid, const std::string& name, Fid*& dir) noexcept {
  dir = find(dfid);
  if (dir == nullptr) return EBADF;
  if (!S_ISDIR(dir->type)) return ENOTDIR;
  return check_name(name, false);
}

int P9Server::t_lcreate(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  const std::string name = r.str();
  const std::uint32_t flags = r.u32();
  const std::uint32_t mode = r.u32();
  r.u32();  // gid: files are the VMM user's
  if (!r.ok()) return EPROTO;
  Fid* dir = nullptr;
  if (const int e = dir_and_name(fid, name, dir)) return e;
  if (dir->open) return EBADF;
  if (read_only_) return refuse_read_only();
  // O_NONBLOCK: an existing FIFO of that name must not block the worker (it is refused below).
  const int oflags = (static_cast<int>(flags) & kPassedOpenFlags) | O_CREAT | O_NOFOLLOW |
                     O_CLOEXEC | O_NONBLOCK;
  Fd fd(::openat(dir->path.get(), name.c_str(), oflags, mode & 07777));
  if (!fd) return errno;
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return errno;
  if (!S_ISREG(st.st_mode)) return EOPNOTSUPP;
  // Regular files ignore O_NONBLOCK; clear it anyway so that the descriptor is what was asked.
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  // The fid now names the new file (9P: lcreate turns the directory fid into the file's).
  Fd path(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
  if (!path) return errno;
  dir->rel = dir->rel.empty() ? name : dir->rel + "/" + name;
  dir->path = std::move(path);
  dir->open = std::move(fd);
  dir->type = S_IFREG;
  w.qid(qid_from(st));
  w.u32(0);
  (void)kDotlCreate;
  return 0;
}

int P9Server::t_read(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  const std::uint64_t offset = r.u64();
  std::uint32_t count = r.u32();
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  if (!f->open) return EBADF;
  if (offset > static_cast<std::uint64_t>(INT64_MAX)) return EINVAL;
  // As much as the answer's room holds (msize and the driver's buffers).
  if (w.room() < 4) return EMSGSIZE;
  count = static_cast<std::uint32_t>(std::min<std::size_t>(count, w.room() - 4));
  const std::size_t at = w.size();
  w.u32(0);
  std::span<std::byte> buf = w.reserve(count);
  const ssize_t n = ::pread(f->open.get(), buf.data(), count, static_cast<off_t>(offset));
  if (n < 0) return errno;
  w.shrink(count - static_cast<std::size_t>(n));
  w.patch_u32(at, static_cast<std::uint32_t>(n));
  std::lock_guard s(stats_mu_);
  stats_.bytes_read += static_cast<std::uint64_t>(n);
  return 0;
}

int P9Server::t_write(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  const std::uint64_t offset = r.u64();
  const std::uint32_t count = r.u32();
  const std::span<const std::byte> data = r.bytes(count);
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  if (read_only_) return refuse_read_only();
  if (!f->open) return EBADF;
  if (offset > static_cast<std::uint64_t>(INT64_MAX)) return EINVAL;
  const ssize_t n = ::pwrite(f->open.get(), data.data(), data.size(), static_cast<off_t>(offset));
  if (n < 0) return errno;
  w.u32(static_cast<std::uint32_t>(n));
  std::lock_guard s(stats_mu_);
  stats_.bytes_written += static_cast<std::uint64_t>(n);
  return 0;
}

int P9Server::t_readdir(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  const std::uint64_t offset = r.u64();
  const std::uint32_t count = r.u32();
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  if (!f->open || !S_ISDIR(f->type)) return f->open ? ENOTDIR : EBADF;
  if (w.room() < 4) return EMSGSIZE;
  const std::size_t room = std::min<std::size_t>(count, w.room() - 4);
  const int fd = f->open.get();
  // The offsets are the host's own directory cookies (d_off), so a seek to any offset the
  // guest was given lands on the next entry.
  if (offset != f->dir_offset || offset == 0) {
    if (::lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0) return errno;
    f->dir_offset = offset;
  }
  const std::size_t at = w.size();
  w.u32(0);
  std::size_t used = 0;
  alignas(8) std::array<char, 8192> buf;
  bool full = false;
  while (!full) {
    const long n = ::syscall(SYS_getdents64, fd, buf.data(), buf.size());
    if (n < 0) return errno;
    if (n == 0) break;
    for (long pos = 0; pos < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf.data() + pos);
      const std::string_view name(d->d_name);
      const std::size_t entry = 13 + 8 + 1 + 2 + name.size();
      if (used + entry > room) {
        full = true;
        break;
      }
      Qid q;
      q.type = d->d_type == DT_DIR ? kQtDir : d->d_type == DT_LNK ? kQtSymlink : kQtFile;
      q.path = d->d_ino;
      w.qid(q);
      w.u64(static_cast<std::uint64_t>(d->d_off));
      w.u8(d->d_type);
      w.str(name);
      used += entry;
      f->dir_offset = static_cast<std::uint64_t>(d->d_off);
      pos += d->d_reclen;
    }
    if (full) {
      // Entries read past the room: the next call starts after the last one answered.
      if (::lseek(fd, static_cast<off_t>(f->dir_offset), SEEK_SET) < 0) return errno;
    }
  }
  if (used == 0 && full) return EMSGSIZE;  // not one entry fits the guest's count
  w.patch_u32(at, static_cast<std::uint32_t>(used));
  return 0;
}

int P9Server::t_clunk(P9Reader& r, bool remove) {
  const std::uint32_t fid = r.u32();
  if (!r.ok()) return EPROTO;
  if (find(fid) == nullptr) return EBADF;
  fids_.erase(fid);
  {
    std::lock_guard s(stats_mu_);
    stats_.fids_open = fids_.size();
  }
  // Tremove by fid needs the file's name: 9P2000.L clients use Tunlinkat (Linux falls back to
  // Tremove only when unlinkat is refused). The fid is clunked either way, as 9P says.
  return remove ? EOPNOTSUPP : 0;
}

int P9Server::t_statfs(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  struct statfs st{};
  if (::fstatfs(f->path.get(), &st) != 0) return errno;
  w.u32(static_cast<std::uint32_t>(st.f_type));
  w.u32(static_cast<std::uint32_t>(st.f_bsize));
  w.u64(st.f_blocks);
  w.u64(st.f_bfree);
  w.u64(st.f_bavail);
  w.u64(st.f_files);
  w.u64(st.f_ffree);
  std::uint64_t fsid = 0;
  std::memcpy(&fsid, &st.f_fsid, std::min(sizeof fsid, sizeof st.f_fsid));
  w.u64(fsid);
  w.u32(static_cast<std::uint32_t>(st.f_namelen));
  return 0;
}

int P9Server::t_readlink(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  if (!S_ISLNK(f->type)) return EINVAL;
  std::array<char, PATH_MAX> buf;
  const ssize_t n = ::readlinkat(f->path.get(), "", buf.data(), buf.size());
  if (n < 0) return errno;
  w.str(std::string_view(buf.data(), static_cast<std::size_t>(n)));
  return 0;
}

int P9Server::t_mkdir(P9Reader& r, P9Writer& w) {
  const std::uint32_t dfid = r.u32();
  const std::string name = r.str();
  const std::uint32_t mode = r.u32();
  r.u32();  // gid
  if (!r.ok()) return EPROTO;
  Fid* dir = nullptr;
  if (const int e = dir_and_name(dfid, name, dir)) return e;
  if (read_only_) return refuse_read_only();
  if (::mkdirat(dir->path.get(), name.c_str(), mode & 07777) != 0) return errno;
  Qid q;
  if (const int e = qid_at(dir->path.get(), name, q)) return e;
  w.qid(q);
  return 0;
}

int P9Server::t_symlink(P9Reader& r, P9Writer& w) {
  const std::uint32_t dfid = r.u32();
  const std::string name = r.str();
  const std::string target = r.str();
  r.u32();  // gid
  if (!r.ok()) return EPROTO;
  Fid* dir = nullptr;
  if (const int e = dir_and_name(dfid, name, dir)) return e;
  if (target.empty() || target.find('\0') != std::string::npos) return EINVAL;
  if (read_only_) return refuse_read_only();
  // Any target is fine: the server never follows a link, so one pointing out of the share
  // leads nowhere on the host.
  if (::symlinkat(target.c_str(), dir->path.get(), name.c_str()) != 0) return errno;
  Qid q;
  if (const int e = qid_at(dir->path.get(), name, q)) return e;
  w.qid(q);
  return 0;
}

int P9Server::t_link(P9Reader& r) {
  const std::uint32_t dfid = r.u32();
  const std::uint32_t fid = r.u32();
  const std::string name = r.str();
  if (!r.ok()) return EPROTO;
  Fid* dir = nullptr;
  if (const int e = dir_and_name(dfid, name, dir)) return e;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  if (read_only_) return refuse_read_only();
  if (S_ISDIR(f->type)) return EPERM;
  if (!S_ISREG(f->type)) return EOPNOTSUPP;
  // linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc path of the fid's descriptor
  // names the same inode without it.
  if (::linkat(AT_FDCWD, proc_path(f->path.get()).c_str(), dir->path.get(), name.c_str(),
               AT_SYMLINK_FOLLOW) != 0) {
    return errno;
  }
  return 0;
}

int P9Server::t_unlinkat(P9Reader& r) {
  const std::uint32_t dfid = r.u32();
  const std::string name = r.str();
  const std::uint32_t flags = r.u32();
  if (!r.ok()) return EPROTO;
  Fid* dir = nullptr;
  if (const int e = dir_and_name(dfid, name, dir)) return e;
  if (read_only_) return refuse_read_only();
  if (::unlinkat(dir->path.get(), name.c_str(), (flags & kAtRemoveDir) ? AT_REMOVEDIR : 0) != 0) {
    return errno;
  }
  return 0;
}

int P9Server::t_renameat(P9Reader& r) {
  const std::uint32_t odfid = r.u32();
  const std::string oname = r.str();
  const std::uint32_t ndfid = r.u32();
  const std::string nname = r.str();
  if (!r.ok()) return EPROTO;
  Fid* odir = nullptr;
  Fid* ndir = nullptr;
  if (const int e = dir_and_name(odfid, oname, odir)) return e;
  if (const int e = dir_and_name(ndfid, nname, ndir)) return e;
  if (read_only_) return refuse_read_only();
  if (::renameat(odir->path.get(), oname.c_str(), ndir->path.get(), nname.c_str()) != 0) {
    return errno;
  }
  return 0;
}

int P9Server::t_rename(P9Reader& r) {
  const std::uint32_t fid = r.u32();
  const std::uint32_t dfid = r.u32();
  const std::string name = r.str();
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  Fid* dir = nullptr;
  if (const int e = dir_and_name(dfid, name, dir)) return e;
  if (read_only_) return refuse_read_only();
  if (f->rel.empty()) return EBUSY;  // the share's root
  // The fid's old name, from its path in the share; its parent found again beneath the root.
  const auto slash = f->rel.rfind('/');
  const std::string parent = slash == std::string::npos ? "" : f->rel.substr(0, slash);
  const std::string old = slash == std::string::npos ? f->rel : f->rel.substr(slash + 1);
  Fd pfd(parent.empty() ? ::fcntl(root_fd_, F_DUPFD_CLOEXEC, 0)
                        : open_beneath(root_fd_, parent.c_str(), O_DIRECTORY));
  if (!pfd) return errno;
  if (::renameat(pfd.get(), old.c_str(), dir->path.get(), name.c_str()) != 0) return errno;
  f->rel = dir->rel.empty() ? name : dir->rel + "/" + name;
  return 0;
}

int P9Server::t_fsync(P9Reader& r) {
  const std::uint32_t fid = r.u32();
  const std::uint32_t datasync = r.u32();
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  if (!f->open) return EBADF;
  if ((datasync ? ::fdatasync(f->open.get()) : ::fsync(f->open.get())) != 0) return errno;
  return 0;
}

namespace {
short lock_type(std::uint8_t t) noexcept {
  return t == kLockRead ? F_RDLCK : t == kLockWrite ? F_WRLCK : F_UNLCK;
}
}  // namespace

int P9Server::t_lock(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  const std::uint8_t type = r.u8();
  r.u32();  // flags: a blocking lock is retried by the client on BLOCKED
  const std::uint64_t start = r.u64();
  const std::uint64_t length = r.u64();
  r.u32();  // proc_id
  r.str();  // client_id
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  if (type > kLockUnlock) return EINVAL;
  if (!f->open) return EBADF;
  // Open-file-description locks: the fid's own, never blocking the worker.
  struct flock fl{};
  fl.l_type = lock_type(type);
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(std::min<std::uint64_t>(start, INT64_MAX));
  fl.l_len = static_cast<off_t>(std::min<std::uint64_t>(length, INT64_MAX));
  std::uint8_t status = kLockSuccess;
  if (::fcntl(f->open.get(), F_OFD_SETLK, &fl) != 0) {
    status = (errno == EAGAIN || errno == EACCES) ? kLockBlocked : kLockError;
  }
  w.u8(status);
  return 0;
}

int P9Server::t_getlock(P9Reader& r, P9Writer& w) {
  const std::uint32_t fid = r.u32();
  const std::uint8_t type = r.u8();
  const std::uint64_t start = r.u64();
  const std::uint64_t length = r.u64();
  const std::uint32_t proc_id = r.u32();
  const std::string client = r.str();
  if (!r.ok()) return EPROTO;
  Fid* f = find(fid);
  if (f == nullptr) return EBADF;
  if (type > kLockUnlock) return EINVAL;
  if (!f->open) return EBADF;
  struct flock fl{};
  fl.l_type = lock_type(type);
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(std::min<std::uint64_t>(start, INT64_MAX));
  fl.l_len = static_cast<off_t>(std::min<std::uint64_t>(length, INT64_MAX));
  if (::fcntl(f->open.get(), F_OFD_GETLK, &fl) != 0) return errno;
  w.u8(fl.l_type == F_RDLCK ? kLockRead : fl.l_type == F_WRLCK ? kLockWrite : kLockUnlock);
  w.u64(static_cast<std::uint64_t>(fl.l_start));
  w.u64(static_cast<std::uint64_t>(fl.l_len));
  w.u32(fl.l_type == F_UNLCK ? proc_id : static_cast<std::uint32_t>(fl.l_pid));
  w.str(client);
  return 0;
}

}  // namespace minivmm::devices::p9
