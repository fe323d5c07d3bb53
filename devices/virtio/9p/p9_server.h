// A 9P2000.L file server for one host folder (the share): it takes one request message and
// writes its answer, holding the fids between requests. Used by the virtio-9p device (on its
// worker thread), the fd-transport test server (tests/support/ninep_fd_server.cc) and the fuzzer.
//
// The host side (docs/9p.md, "Path rules"):
//  * every fid holds one O_PATH descriptor of its own file; getattr, statfs, readlink, chown and
//    the reopen of lopen go through it, so a file that was opened and then unlinked still
//    answers (a server that stats by path breaks apt and git);
//  * a walk goes one component at a time with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//    RESOLVE_NO_MAGICLINKS) from the fid's own descriptor: a name is one component (no '/', no
//    NUL), a host symlink is never followed (the walk reaches the link itself, which the guest
//    may readlink; its target is resolved by the guest, inside the guest's own tree), and
//    nothing outside the share is reachable. `..` is resolved from the fid's path relative to
//    the share, so `..` at the root stays at the root;
//  * only regular files and directories are opened (a FIFO or a device node in the share would
//    block or reach the host's devices): lopen and lcreate refuse anything else;
//  * a read-only share refuses every change with EROFS on the host side, whatever the guest's
//    mount options say;
//  * mknod is refused (EPERM); xattrs are not served (EOPNOTSUPP); identities are not mapped:
//    everything runs as the VMM's user, so a chown to another user fails as it would for it.
//
// Hostile messages: every field is bounds-checked (P9Reader); a short or oversized message, a
// bad count or string, or an unknown fid is answered Rlerror (EPROTO, EINVAL, EBADF), never
// more. Threads: one caller at a time for handle() and reset(); stats() from any thread.
#pragma once

#include <sys/stat.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

#include "devices/virtio/9p/p9_wire.h"

namespace minivmm::devices::p9 {

// The operations a report counts, one counter each; anything else counts as kOther.
enum class Op : std::size_t {
  kVersion, kAttach, kWalk, kGetattr, kSetattr, kLopen, kLcreate, kRead, kWrite, kReaddir,
  kClunk, kStatfs, kFlush, kReadlink, kMkdir, kUnlinkat, kRenameat, kRename, kSymlink, kLink,
  kFsync, kLock, kGetlock, kXattr, kMknod, kOther, kCount,
};
std::string_view op_name(Op op) noexcept;

struct P9Stats {
  std::array<std::uint64_t, static_cast<std::size_t>(Op::kCount)> requests{};
  std::uint64_t errors = 0;           // answered Rlerror (any reason)
  std::uint64_t protocol_errors = 0;  // of which malformed: EPROTO (a field past the end, a size)
  std::uint64_t escapes_refused = 0;  // walks that met a symlink or `..` past the root (ELOOP, EXDEV)
  std::uint64_t read_only_refused = 0;  // changes refused EROFS on a read-only share
  std::uint64_t bytes_read = 0, bytes_written = 0;
  std::uint64_t fids_open = 0;
};

class P9Server {
 public:
  // The largest msize we agree to: a 9p message that fits in 1 MiB plus the I/O header.
  static constexpr std::uint32_t kMaxMsize = (1u << 20) + 4096;
  // Fids one session may hold (each is a host descriptor): the answer beyond is EMFILE.
  static constexpr std::size_t kMaxFids = 1u << 16;

  // Opens the share: `dir` must be a directory. A `dir` that is itself a symlink is resolved
  // once here (the user named it on the command line) and the directory it names is served;
  // symlinks inside it are never followed. Returns null with `why` set (one line).
  static std::unique_ptr<P9Server> open(const std::string& dir, bool read_only, std::string& why);
  ~P9Server();
  P9Server(const P9Server&) = delete;
  P9Server& operator=(const P9Server&) = delete;

  // Answers one request (its bytes as the transport gathered them) into `out` and returns the
  // answer's length: a whole message, Rlerror for a refused one. `out` is the room the
  // transport has for the answer; fewer than 11 bytes cannot hold even Rlerror: returns 0.
  std::size_t handle(std::span<const std::byte> request, std::span<std::byte> out);
  // Clunks every fid (device reset, a new Tversion).
  void reset();

  std::uint32_t msize() const noexcept { return msize_; }
  bool read_only() const noexcept { return read_only_; }
  P9Stats stats() const;

 private:
  struct Fid;
  P9Server(int root_fd, bool read_only);

  int dispatch(std::uint8_t type, std::uint16_t tag, P9Reader& r, P9Writer& w);
  int t_version(P9Reader& r, P9Writer& w);
  int t_attach(P9Reader& r, P9Writer& w);
  int t_walk(P9Reader& r, P9Writer& w);
  int t_getattr(P9Reader& r, P9Writer& w);
  int t_setattr(P9Reader& r, P9Writer& w);
  int t_lopen(P9Reader& r, P9Writer& w);
  int t_lcreate(P9Reader& r, P9Writer& w);
  int t_read(P9Reader& r, P9Writer& w);
  int t_write(P9Reader& r, P9Writer& w);
  int t_readdir(P9Reader& r, P9Writer& w);
  int t_clunk(P9Reader& r, bool remove);
  int t_statfs(P9Reader& r, P9Writer& w);
  int t_readlink(P9Reader& r, P9Writer& w);
  int t_mkdir(P9Reader& r, P9Writer& w);
  int t_symlink(P9Reader& r, P9Writer& w);
  int t_link(P9Reader& r);
  int t_unlinkat(P9Reader& r);
  int t_renameat(P9Reader& r);
  int t_rename(P9Reader& r);
  int t_fsync(P9Reader& r);
  int t_lock(P9Reader& r, P9Writer& w);
  int t_getlock(P9Reader& r, P9Writer& w);

  Fid* find(std::uint32_t fid) noexcept;
  // The fid's directory for a *at call on `name`: checks both (one component, a directory).
  int dir_and_name(std::uint32_t dfid, const std::string& name, Fid*& dir) noexcept;
  int walk_one(const Fid& from, const std::string& name, Fid& to);
  int qid_of(int fd, Qid& q) const noexcept;
  int qid_at(int dirfd, const std::string& name, Qid& q) const noexcept;
  Qid qid_from(const struct ::stat& st) const noexcept;
  int refuse_read_only() noexcept;
  void add_fid(std::uint32_t id, std::unique_ptr<Fid> f);

  int root_fd_;
  std::uint64_t root_dev_ = 0;
  const bool read_only_;
  std::uint32_t msize_ = kMaxMsize;
  std::unordered_map<std::uint32_t, std::unique_ptr<Fid>> fids_;

  mutable std::mutex stats_mu_;
  P9Stats stats_;  // guarded by stats_mu_
};

}  // namespace minivmm::devices::p9
