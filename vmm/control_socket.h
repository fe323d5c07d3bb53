// `--api-socket PATH`: a UNIX stream socket that takes one JSON object per line and answers
// each with one JSON object per line. Commands:
//   {"cmd":"stats"}  -> {"ok":true,"stats":{...}}        (whatever the stats handler returns)
//   {"cmd":"pause"}  -> {"ok":true,"state":"paused","changed":true|false}
//   {"cmd":"resume"} -> {"ok":true,"state":"running","changed":true|false}
//   {"cmd":"quit"}   -> {"ok":true}, written before the quit handler runs
// A request's "id" (any JSON value) is copied into its reply. Anything else gets
// {"ok":false,"error":"..."} and the connection stays open: bad JSON (including numbers no
// double holds and nesting deeper than 64), a non-object, a missing or unknown "cmd", a handler
// that throws (anything). No exception leaves a callback of this class for the event loop. A line over `max_line` bytes gets an error reply and the
// connection is closed (see JsonLineChannel). Clients beyond `max_clients`, and clients of
// another uid (SO_PEERCRED, on top of the 0600 file mode), get one error line and are closed.
//
// The socket file: created with mode 0600 (umask around bind, checked and chmod'ed before
// listen(), and nobody can connect before listen()). An existing file at PATH is replaced only
// if it is a socket nobody listens on (a stale one from a VMM that died); anything else, or a
// live socket, is an error. The destructor unlinks PATH if it is still this socket.
//
// Threads: loop thread only. Handlers run on the loop thread, from inside the loop's dispatch;
// the umask change in the constructor is process-wide, so construct it before other threads
// create files (Machine's constructor runs before the vCPU thread starts).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "loop/event_loop.h"
#include "loop/json_line_channel.h"

namespace minivmm::vmm {

struct ControlHandlers {
  std::function<nlohmann::json()> stats;
  std::function<bool()> pause;   // true if this call paused the VM (false: it already was)
  std::function<bool()> resume;  // true if this call resumed it
  std::function<void()> quit;
};

struct ControlSocketOptions {
  std::size_t max_clients = 16;
  loop::JsonLineLimits limits{};  // max_line 4 KiB, max_output 256 KiB
  bool check_peer_uid = true;
};

struct ControlSocketStats {
  std::uint64_t accepted = 0;
  std::uint64_t refused = 0;  // over max_clients or another uid
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;   // error replies
  std::uint64_t dropped = 0;  // closed for an overlong line or an output overflow
  std::uint64_t internal_errors = 0;  // exceptions outside a request's handler (client dropped)
  // Turns that spent a client's line budget with requests read and left for the next turn.
  std::uint64_t deferred = 0;
};

class ControlSocket {
 public:
  // Binds and listens on `path`, watched by `loop`. Throws std::invalid_argument for an empty
  // or too long path (sun_path holds 107 bytes) or a PATH that exists and is not a stale socket,
  // std::system_error when the host refuses (socket, bind, listen).
  ControlSocket(loop::EventLoop& loop, std::string path, ControlHandlers handlers,
                ControlSocketOptions options = {});
  ~ControlSocket();
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  const std::string& path() const noexcept { return path_; }
  std::size_t clients() const noexcept { return clients_.size(); }
  const ControlSocketStats& stats() const noexcept { return stats_; }
  nlohmann::json stats_json() const;

 private:
  // Every callback the loop runs for this socket goes through here: an exception that reached
  // the loop would end the VMM, so one that escapes a request's own handling (out of memory
  // while replying, say) is logged, counted and costs only the client `id` (kNoClient: none).
  template <typename Fn>
  void guarded(std::uint64_t id, Fn&& fn) noexcept;
  void failed(std::uint64_t id, const char* what) noexcept;
  void on_accept();
  void refuse(int fd, const char* why);
  void on_message(std::uint64_t id, nlohmann::json request);
  void reply_error(std::uint64_t id, const nlohmann::json* request, const std::string& error);
  void reply(std::uint64_t id, nlohmann::json response);

  static constexpr std::uint64_t kNoClient = UINT64_MAX;

  loop::EventLoop& loop_;
  const std::string path_;
  const ControlHandlers handlers_;
  const ControlSocketOptions options_;
  int listen_fd_ = -1;
  int reserve_fd_ = -1;  // spent to refuse a connection when the process is out of fds
  dev_t dev_ = 0;  // the socket file's identity, so the destructor unlinks only our own
  ino_t ino_ = 0;
  std::uint64_t next_client_ = 0;
  std::unordered_map<std::uint64_t, std::unique_ptr<loop::JsonLineChannel>> clients_;
  ControlSocketStats stats_;
};

}  // namespace minivmm::vmm
