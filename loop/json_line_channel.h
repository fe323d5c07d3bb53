// One JSON value per line, in both directions, over a connected non-blocking stream socket
// watched by the EventLoop: the framing of the control socket (and of anything else that speaks
// JSON lines), apart from what the messages mean.
//
// Input: bytes are split at '\n' (a trailing '\r' is dropped, blank lines are skipped); each
// line is parsed and handed to `message`, or to `bad_line` if it is not JSON (a line with a NUL
// byte never is), holds a number no double can hold (1e309: the parser's out_of_range) or nests
// arrays and objects deeper than `max_depth` (judged before the parse). A line longer than
// `max_line` bytes (not counting the newline) gets no parse: `overlong` is told, and the channel
// closes (a client that sends 4 KiB without a newline is not speaking this protocol, and
// discarding the rest of an unbounded line would mean reading it all).
// Fairness: at most `max_lines_per_turn` lines are handled per loop iteration (in a readable
// event, or in the bottom half that picks up lines left over); the rest wait, buffered or still
// in the socket, while other fds and the timers run. A client that pipelines thousands of
// requests gets them answered at that pace instead of holding the loop thread, and while lines
// wait the channel reads no more, so it buffers at most one read beyond a turn's worth.
// Output: send() appends one line and writes at once, without blocking; what the socket does
// not take is buffered and written when the fd turns writable. A peer that lets more than
// `max_output` bytes pile up is dropped rather than allowed to grow the VMM's memory.
// Writes use MSG_NOSIGNAL: a peer that went away is an error return, never a SIGPIPE.
//
// Closing: on end of file (also mid-line: the partial line is dropped), an I/O error, an overlong
// line, an output overflow or close(), the channel unwatches and closes its fd, then calls
// `closed` once, last. Any handler may destroy the channel; it touches nothing after that.
//
// Threads: loop thread only (constructor, destructor, send, close and every handler).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "loop/event_loop.h"

namespace minivmm::loop {

struct JsonLineLimits {
  std::size_t max_line = 4096;
  std::size_t max_output = 256 * 1024;
  std::size_t max_read_per_event = 64 * 1024;  // then let other fds run; the rest comes next turn
  std::size_t max_lines_per_turn = 8;          // likewise, in lines handled (at least 1)
  // The parser is iterative, but copying and dumping a value recurse once per level: this, not
  // max_line, bounds the stack a message can take (2000 levels overflowed 8 MiB under ASan).
  std::size_t max_depth = 64;
};

enum class ChannelClose {
  kPeerClosed,      // end of file (a partial last line is dropped)
  kLineTooLong,
  kOutputOverflow,  // the peer does not read its replies
  kIoError,
  kLocal,           // close() was called
};

std::string_view channel_close_name(ChannelClose why) noexcept;

class JsonLineChannel {
 public:
  struct Handlers {
    std::function<void(nlohmann::json message)> message;
    std::function<void(std::string_view error)> bad_line;  // not JSON; the channel stays open
    std::function<void(std::size_t limit)> overlong;       // before the close; send() still works
    std::function<void(ChannelClose why)> closed;
    // A turn spent its budget (max_lines_per_turn) with lines read and left for a bottom half
    // (lines still in the socket wait for the next readable event unannounced): for stats.
    std::function<void()> deferred;
  };

  // Takes ownership of `fd` (a connected stream socket, made non-blocking here) and watches it.
  // Throws std::system_error if the loop refuses the fd; the fd is closed then.
  JsonLineChannel(EventLoop& loop, int fd, JsonLineLimits limits, Handlers handlers);
  ~JsonLineChannel();
  JsonLineChannel(const JsonLineChannel&) = delete;
  JsonLineChannel& operator=(const JsonLineChannel&) = delete;

  // Appends `message` as one line (invalid UTF-8 in strings is replaced, never thrown on) and
  // writes what the socket takes now. May close the channel (overflow, I/O error), which calls
  // `closed` before send() returns. No-op once closed.
  void send(const nlohmann::json& message);
  // Unwatches and closes now; pending output is dropped. Calls `closed` (kLocal) if still open.
  void close();

  bool open() const noexcept { return fd_ >= 0; }
  int fd() const noexcept { return fd_; }
  std::size_t pending_output() const noexcept { return out_.size() - out_pos_; }
  // Bytes read but not yet handled: a partial line, or lines waiting for a later turn.
  std::size_t buffered_input() const noexcept { return in_.size(); }

 private:
  void on_readable();
  void on_writable();
  // Handles complete lines of in_ while `budget` (decremented) lasts, then hangs up on an
  // overlong one. Returns false if the channel closed (or was destroyed) meanwhile.
  bool handle_lines(std::size_t& budget);
  // Returns false if the channel closed (or was destroyed) while handling `line`.
  bool handle_line(std::string_view line);
  // A spent budget left lines in in_: schedules their continuation and tells `deferred`.
  void defer();
  void schedule_continuation();
  // The continuation's turn: the next `max_lines_per_turn` lines of in_.
  void continue_lines();
  std::size_t turn_budget() const noexcept {
    return std::max<std::size_t>(limits_.max_lines_per_turn, 1);
  }
  bool flush();  // false: closed on error
  void update_interest();
  void shut(ChannelClose why);

  EventLoop& loop_;
  int fd_ = -1;
  const JsonLineLimits limits_;
  Handlers handlers_;
  std::string in_;
  std::string out_;
  std::size_t out_pos_ = 0;  // bytes of out_ already written
  bool want_write_ = false;
  bool continuation_pending_ = false;  // defer()'s bottom half is scheduled
  std::uint64_t last_turn_ = UINT64_MAX;  // the loop iteration of this channel's last turn
  // Expires when the channel is destroyed: a handler that destroyed it is detected after return.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace minivmm::loop
