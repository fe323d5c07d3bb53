#include "vmm/control/control_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "devices/log/log.h"

namespace minivmm::vmm {
namespace {

using nlohmann::json;

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

sockaddr_un make_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Checked by the caller: path.size() < sizeof sun_path, so the copy stays NUL-terminated.
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// Leaves `path` free for bind(): absent, or a socket nobody listens on (unlinked here).
void clear_stale_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw_errno(errno, "api socket: stat " + path);
  }
  if (!S_ISSOCK(st.st_mode)) {
    throw std::invalid_argument("api socket: " + path + " exists and is not a socket");
  }
  // A live VMM answers a connect; a stale file from one that died refuses it.
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (probe < 0) throw_errno(errno, "api socket: socket");
  const sockaddr_un addr = make_address(path);
  const int rc = ::connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  ::close(probe);
  if (rc == 0 || err == EAGAIN || err == EINPROGRESS) {
    throw std::invalid_argument("api socket: " + path + " is in use by a running process");
  }
  if (err != ECONNREFUSED) throw_errno(err, "api socket: probing " + path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw_errno(errno, "api socket: unlink stale " + path);
  }
}

// "30 s", "250 ms": the idle timeout as its error line says it.
std::string describe(timers::Nanos d) {
  using namespace std::chrono;
  if ((d % seconds{1}).count() == 0) {
    return std::to_string(duration_cast<seconds>(d).count()) + " s";
  }
  if ((d % milliseconds{1}).count() == 0) {
    return std::to_string(duration_cast<milliseconds>(d).count()) + " ms";
  }
  return std::to_string(d.count()) + " ns";
}

}  // namespace

template <typename Fn>
void ControlSocket::guarded(std::uint64_t id, Fn&& fn) noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    failed(id, e.what());
  } catch (...) {
    failed(id, "unknown exception");
  }
}

void ControlSocket::failed(std::uint64_t id, const char* what) noexcept {
  ++stats_.internal_errors;
  if (id == kNoClient) {
    log::warn("api socket: {}", what);
    return;
  }
  log::warn("api socket: client {}: {}; dropping it", id, what);
  // Whatever threw left the client half served: drop it (its destructor closes the fd
  // without calling back) rather than guess what it was told.
  clients_.erase(id);
}

ControlSocket::ControlSocket(loop::EventLoop& loop, timers::TimerList& rt_timers,
                             std::string path, ControlHandlers handlers,
                             ControlSocketOptions options)
    : loop_(loop),
      clock_(rt_timers.clock()),
      path_(std::move(path)),
      handlers_(std::move(handlers)),
      options_(options),
      idle_timer_(rt_timers, "api-socket-idle", [this](const timers::Timer::Expiry& e) {
        guarded(kNoClient, [&] { sweep(e.now); });
      }) {
  if (rt_timers.type() != timers::ClockType::kRt) {
    // vm_clock stands still while the guest is paused, and so would the idle timeout.
    throw std::invalid_argument("api socket: the idle timer needs the rt clock's list");
  }
  if (path_.empty() || path_.size() >= sizeof(sockaddr_un::sun_path)) {
    throw std::invalid_argument("api socket: path must be 1 to " +
                                std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  }
  clear_stale_socket(path_);

  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw_errno(errno, "api socket: socket");
  reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);

  const sockaddr_un addr = make_address(path_);
  // The file is born 0600. The umask is process-wide, hence the constructor's thread contract.
  const mode_t old_mask = ::umask(0177);
  const int rc = ::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int bind_err = errno;
  ::umask(old_mask);
  auto fail = [&](int err, const std::string& what, bool unlink) {
    if (unlink) ::unlink(path_.c_str());
    ::close(listen_fd_);
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
    throw_errno(err, "api socket: " + what);
  };
  if (rc != 0) fail(bind_err, "bind " + path_, false);

  // A default ACL on the directory overrides the umask: check, and fix before anyone can
  // connect (connect() is refused until listen()).
  struct stat st {};
  if (::lstat(path_.c_str(), &st) != 0) fail(errno, "stat " + path_, true);
  if ((st.st_mode & 07777) != 0600 && ::chmod(path_.c_str(), 0600) != 0) {
    fail(errno, "chmod " + path_, true);
  }
  dev_ = st.st_dev;
  ino_ = st.st_ino;

  if (::listen(listen_fd_, std::max(kListenBacklog, static_cast<int>(std::min<std::size_t>(
                                                        options_.max_clients, INT_MAX)))) != 0) {
    fail(errno, "listen", true);
  }
  try {
    loop_.watch(listen_fd_, loop::kReadable,
                loop::FdHandlers{[this] { guarded(kNoClient, [this] { on_accept(); }); }, {}, {}});
  } catch (const std::system_error& e) {
    fail(e.code().value(), "watch", true);
  }
}

ControlSocket::~ControlSocket() {
  idle_timer_.cancel();
  clients_.clear();  // each channel unwatches and closes its fd; no handler runs
  loop_.unwatch(listen_fd_);
  ::close(listen_fd_);
  if (reserve_fd_ >= 0) ::close(reserve_fd_);
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    ::unlink(path_.c_str());
  }
}

void ControlSocket::on_accept() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if ((errno == EMFILE || errno == ENFILE) && reserve_fd_ >= 0) {
        // Out of fds: the pending connection would keep the listening fd readable and the
        // loop spinning. Free the reserve fd, take the connection, and refuse it (libuv's trick).
        ::close(reserve_fd_);
        const int victim = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (victim >= 0) refuse(victim, "out of file descriptors");
        reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      log::warn("api socket: accept: {}", std::strerror(errno));
      return;
    }
    // The uid first: a stranger must not evict anyone.
    if (options_.check_peer_uid) {
      ucred cred{};
      socklen_t len = sizeof cred;
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
        log::warn("api socket: refused a client of uid {}", cred.uid);
        refuse(fd, "permission denied");
        continue;
      }
    }
    // Idleness by the clock now, as the newcomer arrives (not by the last sweep).
    if (clients_.size() >= options_.max_clients && !evict_one(clock_.now())) {
      refuse(fd, "too many clients");
      continue;
    }
    const std::uint64_t id = next_client_++;
    loop::JsonLineChannel::Handlers h;
    h.message = [this, id](json request) {
      guarded(id, [&] {
        touch(id);
        on_message(id, std::move(request));
      });
    };
    h.bad_line = [this, id](std::string_view error) {
      guarded(id, [&] {
        touch(id);
        ++stats_.requests;
        reply_error(id, nullptr, "bad JSON: " + std::string(error));
      });
    };
    h.overlong = [this, id](std::size_t limit) {
      guarded(id, [&] {
        ++stats_.dropped;
        reply_error(id, nullptr,
                    "request longer than " + std::to_string(limit) + " bytes; closing");
      });
    };
    h.deferred = [this] { ++stats_.deferred; };
    h.closed = [this, id](loop::ChannelClose why) {
      guarded(id, [&] {
        if (why == loop::ChannelClose::kOutputOverflow) ++stats_.dropped;
        if (why != loop::ChannelClose::kPeerClosed) {
          log::debug("api socket: client {} closed: {}", id, loop::channel_close_name(why));
        }
        clients_.erase(id);  // destroys the channel from inside its handler: it allows that
      });
    };
    try {
      clients_.emplace(id, Client{std::make_unique<loop::JsonLineChannel>(
                                      loop_, fd, options_.limits, std::move(h)),
                                  ++activity_, clock_.now()});
    } catch (const std::system_error& e) {  // the channel closed fd
      log::warn("api socket: cannot watch a client: {}", e.what());
      continue;
    }
    ++stats_.accepted;
    // Only the first client after a quiet spell arms (and reads the clock); the sweep re-arms
    // itself while clients are connected.
    if (options_.idle_timeout > timers::Nanos{0} && !idle_timer_.pending()) {
      idle_timer_.arm_after(sweep_period());
    }
  }
}

void ControlSocket::touch(std::uint64_t id) {
  const auto it = clients_.find(id);
  if (it == clients_.end()) return;
  it->second.last_active = ++activity_;
  it->second.last_active_at = clock_.now();
}

timers::Nanos ControlSocket::sweep_period() const {
  return std::max(options_.idle_timeout / kSweepsPerTimeout, timers::Nanos{1});
}

timers::Nanos ControlSocket::eviction_idle() const {
  return std::max(options_.idle_timeout / kSweepsPerTimeout, timers::Nanos{1});
}

void ControlSocket::sweep(timers::Nanos now) {
  // By each client's time, so a client goes at the first sweep at or after its timeout (within
  // a period more if the loop was on time).
  std::vector<std::uint64_t> idle;
  for (auto& [id, client] : clients_) {
    if (now - client.last_active_at >= options_.idle_timeout) idle.push_back(id);
  }
  // Re-armed first, so that nothing below can stop the sweeps; if every client goes now, the
  // next sweep finds none and stops.
  if (!clients_.empty()) idle_timer_.arm_at(now + sweep_period());
  const std::string why = "idle for " + describe(options_.idle_timeout) + "; closing";
  for (const std::uint64_t id : idle) {
    ++stats_.idle_closed;
    guarded(id, [&] { close_client(id, why); });
  }
}

bool ControlSocket::evict_one(timers::Nanos now) {
  if (options_.idle_timeout <= timers::Nanos{0}) return false;  // no timeout: nobody is idle
  std::uint64_t victim = kNoClient;
  const Client* oldest = nullptr;
  for (const auto& [id, client] : clients_) {
    // Nothing buffered either way: no request half read, no reply half written.
    if (client.channel->buffered_input() > 0 || client.channel->pending_output() > 0) continue;
    const bool older = !oldest || client.last_active_at < oldest->last_active_at ||
                       (client.last_active_at == oldest->last_active_at &&
                        client.last_active < oldest->last_active);
    if (older) {
      oldest = &client;
      victim = id;
    }
  }
  // Only the one idle longest is considered: if it has not been idle long enough, nobody has.
  // Idle for at least eviction_idle(), so a burst of connects does not evict its own members.
  if (!oldest || now - oldest->last_active_at < eviction_idle()) return false;
  ++stats_.evicted;
  // Guarded here: on_accept holds the newcomer's fd, which an exception would leak.
  guarded(victim, [&] { close_client(victim, "idle while the client table was full; closing"); });
  return true;
}

void ControlSocket::close_client(std::uint64_t id, const std::string& why) {
  reply_error(id, nullptr, why);  // best effort: a full socket buffer drops it
  const auto it = clients_.find(id);
  if (it != clients_.end()) it->second.channel->close();  // its closed handler erases it
}

void ControlSocket::refuse(int fd, const char* why) {
  ++stats_.refused;
  const std::string line = json{{"ok", false}, {"error", why}}.dump() + "\n";
  [[maybe_unused]] const ssize_t n =
      ::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(fd);
}

void ControlSocket::on_message(std::uint64_t id, json request) {
  ++stats_.requests;
  if (!request.is_object()) {
    reply_error(id, nullptr, "a request must be a JSON object");
    return;
  }
  const auto cmd_it = request.find("cmd");
  if (cmd_it == request.end() || !cmd_it->is_string()) {
    reply_error(id, &request, "missing \"cmd\" (a string)");
    return;
  }
  const std::string cmd = cmd_it->get<std::string>();
  json response{{"ok", true}};
  if (const auto it = request.find("id"); it != request.end()) response["id"] = *it;
  try {
    if (cmd == "stats" && handlers_.stats) {
      response["stats"] = handlers_.stats();
    } else if (cmd == "pause" && handlers_.pause) {
      response["changed"] = handlers_.pause();
      response["state"] = "paused";
    } else if (cmd == "resume" && handlers_.resume) {
      response["changed"] = handlers_.resume();
      response["state"] = "running";
    } else if (cmd == "wake" && handlers_.wake) {
      const bool woke = handlers_.wake();
      response["changed"] = woke;
      if (woke) response["state"] = "running";
    } else if (cmd == "snapshot" && handlers_.snapshot) {
      const auto path = request.find("path");
      const auto resume = request.find("resume");
      if (path == request.end() || !path->is_string() || path->get<std::string>().empty()) {
        reply_error(id, &request, "snapshot needs \"path\" (a file name)");
        return;
      }
      if (resume != request.end() && !resume->is_boolean()) {
        reply_error(id, &request, "snapshot's \"resume\" is true or false");
        return;
      }
      const bool go_on = resume == request.end() || resume->get<bool>();
      response.update(handlers_.snapshot(path->get<std::string>(), go_on));
      response["state"] = go_on ? "running" : "paused";
    } else if (cmd == "reset" && handlers_.reset) {
      response.update(handlers_.reset());
    } else if (cmd == "mailbox" && handlers_.mailbox) {
      response.update(handlers_.mailbox(request));
    } else if (cmd == "quit" && handlers_.quit) {
      reply(id, std::move(response));  // written before the VMM starts to go away
      handlers_.quit();
      return;
    } else {
      reply_error(id, &request, "unknown cmd \"" + cmd + "\"");
      return;
    }
  } catch (const std::exception& e) {
    reply_error(id, &request, cmd + " failed: " + e.what());
    return;
  } catch (...) {
    reply_error(id, &request, cmd + " failed: unknown exception");
    return;
  }
  reply(id, std::move(response));
}

void ControlSocket::reply_error(std::uint64_t id, const json* request, const std::string& error) {
  ++stats_.errors;
  json response{{"ok", false}, {"error", error}};
  if (request && request->is_object()) {
    if (const auto it = request->find("id"); it != request->end()) response["id"] = *it;
  }
  reply(id, std::move(response));
}

void ControlSocket::reply(std::uint64_t id, json response) {
  const auto it = clients_.find(id);
  if (it == clients_.end()) return;
  // May close and destroy the channel: nothing touches it after.
  it->second.channel->send(response);
}

nlohmann::json ControlSocket::stats_json() const {
  return json{{"clients", clients_.size()},  {"accepted", stats_.accepted},
              {"refused", stats_.refused},   {"requests", stats_.requests},
              {"errors", stats_.errors},     {"dropped", stats_.dropped},
              {"internal_errors", stats_.internal_errors}, {"deferred", stats_.deferred},
              {"idle_closed", stats_.idle_closed},  {"evicted", stats_.evicted}};
}

}  // namespace minivmm::vmm
