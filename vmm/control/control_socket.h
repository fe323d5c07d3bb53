// `--api-socket PATH`: a UNIX stream socket that takes one JSON object per line and answers
// each with one JSON object per line. Commands:
//   {"cmd":"stats"}  -> {"ok":true,"stats":{...}}        (whatever the stats handler returns)
//   {"cmd":"pause"}  -> {"ok":true,"state":"paused","changed":true|false}
//   {"cmd":"resume"} -> {"ok":true,"state":"running","changed":true|false}
//   {"cmd":"wake"}   -> {"ok":true,"changed":true,"state":"running"}: a guest asleep in ACPI S3
//                       resumes at its waking vector; "changed":false when it was not asleep
//   {"cmd":"quit"}   -> {"ok":true}, written before the quit handler runs
//   {"cmd":"snapshot","path":P,"resume":true|false} -> {"ok":true,"state":...,...}: the VM
//                       paused, written to P (docs/snapshot.md), then resumed (the default) or not
//   {"cmd":"reset"}  -> {"ok":true,"reset_ms":...,"pages_dropped":...,...}: a restored guest back
//                       at its snapshot, in place (running or paused as it was)
//   {"cmd":"mailbox","offset":N,"read":LEN} -> {"ok":true,"hex":"..."}
//   {"cmd":"mailbox","offset":N,"write":"HEX"} -> {"ok":true,"written":BYTES}: --mailbox's bytes
// A request's "id" (any JSON value) is copied into its reply. Anything else gets
// {"ok":false,"error":"..."} and the connection stays open: bad JSON (including numbers no
// double holds and nesting deeper than 64), a non-object, a missing or unknown "cmd", a handler
// that throws (anything). No exception leaves a callback of this class for the event loop: one
// that escapes a request's own handling is logged and costs only that client.
//
// Limits, so that no client (buggy, stuck or hostile, but of our uid) can take the socket or
// the loop from the others:
// - A line over `max_line` bytes gets an error reply and the connection is closed; nesting
//   deeper than `max_depth` is refused before the parse (see JsonLineChannel).
// - Per client, at most `max_lines_per_turn` requests are handled per loop iteration; the rest
//   wait for the next ones. A client that does not read lets at most `max_output` bytes of
//   replies pile up, then is dropped.
// - A client that completes no request (or bad line) for `idle_timeout` gets
//   {"ok":false,"error":"idle for 30 s; closing"} and is closed. Each client keeps the rt_clock
//   time of its accept or last request (one clock read per request, a vDSO call); one
//   rt_clock timer sweeps the clients every tenth of the timeout while any are connected, so
//   a request arms no timer and a client goes between the timeout and a tenth more after its
//   last request. rt_clock, not vm_clock: the timeout runs while the guest is paused.
// - `max_clients` at once. A newcomer to a full table evicts the client idle longest, if that
//   one has been idle for at least a tenth of the timeout (3 s of the default 30 s) by the
//   clock at the moment the newcomer is accepted, and has nothing buffered either way (no
//   request half read, no reply half written); it gets
//   {"ok":false,"error":"idle while the client table was full; closing"}. (Idleness was once
//   counted in sweeps, so a client had to be idle 3 to 6 s depending on the sweep's phase:
//   issue 31.) If none may go, the newcomer gets {"ok":false,"error":"too many clients"} and
//   is closed, as are clients of another uid (SO_PEERCRED, on top of the 0600 file mode), who
//   evict nobody.
// - The listen backlog is kListenBacklog (the kernel caps it at net.core.somaxconn), not
//   max_clients: a UNIX socket's non-blocking connect past the backlog fails with EAGAIN, so
//   with a backlog of 16, a 17th connect in flight failed before the VMM could refuse it with
//   a reply. Every connect the backlog holds is accepted and served or refused with a line.
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

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "loop/event_loop.h"
#include "loop/json_line_channel.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

namespace minivmm::vmm {

struct ControlHandlers {
  std::function<nlohmann::json()> stats;
  std::function<bool()> pause;   // true if this call paused the VM (false: it already was)
  std::function<bool()> resume;  // true if this call resumed it
  std::function<bool()> wake;    // true if this call woke a guest asleep in S3
  std::function<void()> quit;
  // {"cmd":"snapshot","path":P,"resume":true|false}: the VM paused, written to P, resumed or
  // left paused. Returns the reply's fields (the files, the sizes, the time it took); throws
  // with a one-line reason on failure (the VM is then as it was).
  std::function<nlohmann::json(const std::string& path, bool resume)> snapshot;
  // {"cmd":"reset"}: back to the snapshot this guest was restored from. Returns the reply's
  // fields; throws with a one-line reason when it cannot (nothing changed then).
  std::function<nlohmann::json()> reset;
  // {"cmd":"mailbox",...}: the request itself; returns the reply's fields, throws on a bad one.
  std::function<nlohmann::json(const nlohmann::json& request)> mailbox;
};

struct ControlSocketOptions {
  std::size_t max_clients = 16;
  // max_line 4 KiB, max_output 256 KiB, 8 lines per client per loop iteration, depth 64.
  loop::JsonLineLimits limits{};
  bool check_peer_uid = true;
  // A client that completes no request for this long is closed; zero: never, and then no
  // client is ever evicted either.
  timers::Nanos idle_timeout = std::chrono::seconds(30);
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
  std::uint64_t idle_closed = 0;  // closed after idle_timeout without a request
  std::uint64_t evicted = 0;      // closed to make room for a new client
};

class ControlSocket {
 public:
  // Binds and listens on `path`, watched by `loop`; the idle sweep runs on `rt_timers`, a list
  // of the rt clock that `loop`'s Dynticks runs. Throws std::invalid_argument for a list of
  // another clock, an empty or too long path (sun_path holds 107 bytes) or a PATH that exists
  // and is not a stale socket, std::system_error when the host refuses (socket, bind, listen).
  ControlSocket(loop::EventLoop& loop, timers::TimerList& rt_timers, std::string path,
                ControlHandlers handlers, ControlSocketOptions options = {});
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
  // A complete request (or bad line) from `id`: it is not idle.
  void touch(std::uint64_t id);
  timers::Nanos sweep_period() const;
  void sweep(timers::Nanos now);
  // How long a client must be idle for a newcomer to a full table to evict it.
  timers::Nanos eviction_idle() const;
  // Closes the longest-idle client that may be evicted at `now`; false if none may.
  bool evict_one(timers::Nanos now);
  // Sends `why` as an error line, then closes (best effort: a full socket drops the line).
  void close_client(std::uint64_t id, const std::string& why);
  void on_message(std::uint64_t id, nlohmann::json request);
  void reply_error(std::uint64_t id, const nlohmann::json* request, const std::string& error);
  void reply(std::uint64_t id, nlohmann::json response);

  static constexpr std::uint64_t kNoClient = UINT64_MAX;
  // Idle sweeps per idle_timeout: a client is closed between the timeout and a tenth more.
  static constexpr unsigned kSweepsPerTimeout = 10;
 public:
  // Connects in flight that the kernel holds for accept().
  static constexpr int kListenBacklog = 4096;

 private:
  struct Client {
    std::unique_ptr<loop::JsonLineChannel> channel;
    // activity_ at its accept or its last request: orders clients idle since the same instant.
    std::uint64_t last_active = 0;
    timers::Nanos last_active_at{0};  // the rt clock's time then
  };

  loop::EventLoop& loop_;
  const timers::Clock& clock_;  // rt_timers' clock
  const std::string path_;
  const ControlHandlers handlers_;
  const ControlSocketOptions options_;
  int listen_fd_ = -1;
  int reserve_fd_ = -1;  // spent to refuse a connection when the process is out of fds
  dev_t dev_ = 0;  // the socket file's identity, so the destructor unlinks only our own
  ino_t ino_ = 0;
  std::uint64_t next_client_ = 0;
  std::uint64_t activity_ = 0;  // counts accepts and requests: orders clients by idleness
  std::unordered_map<std::uint64_t, Client> clients_;
  // Sweeps the clients every sweep_period() while there are any: no timer arm per request.
  timers::Timer idle_timer_;
  ControlSocketStats stats_;
};

}  // namespace minivmm::vmm
