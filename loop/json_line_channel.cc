#include "loop/json_line_channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace minivmm::loop {
namespace {

// Whether arrays and objects in `text` nest deeper than `limit`. Brackets inside strings are
// text; the parser judges everything else, so invalid JSON may pass here and fail there.
bool nests_deeper_than(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace

std::string_view channel_close_name(ChannelClose why) noexcept {
  switch (why) {
    case ChannelClose::kPeerClosed: return "peer closed";
    case ChannelClose::kLineTooLong: return "line too long";
    case ChannelClose::kOutputOverflow: return "output overflow";
    case ChannelClose::kIoError: return "I/O error";
    case ChannelClose::kLocal: return "closed locally";
  }
  return "?";
}

JsonLineChannel::JsonLineChannel(EventLoop& loop, int fd, JsonLineLimits limits,
                                 Handlers handlers)
    : loop_(loop), fd_(fd), limits_(limits), handlers_(std::move(handlers)) {
  const int flags = fcntl(fd_, F_GETFL);
  if (flags < 0 || fcntl(fd_, F_SETFL, flags | O_NONBLOCK) < 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::system_error(err, std::generic_category(), "fcntl(O_NONBLOCK)");
  }
  try {
    // A hang-up may arrive together with the last requests: read them before closing.
    loop_.watch(fd_, kReadable,
                FdHandlers{[this] { on_readable(); }, [this] { on_writable(); },
                           [this] { on_readable(); }});
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

JsonLineChannel::~JsonLineChannel() {
  if (fd_ >= 0) {
    loop_.unwatch(fd_);
    ::close(fd_);
  }
}

void JsonLineChannel::close() { shut(ChannelClose::kLocal); }

void JsonLineChannel::shut(ChannelClose why) {
  if (fd_ < 0) return;
  loop_.unwatch(fd_);
  ::close(fd_);
  fd_ = -1;
  in_.clear();
  out_.clear();
  out_pos_ = 0;
  if (handlers_.closed) handlers_.closed(why);  // last: it may destroy this channel
}

void JsonLineChannel::on_readable() {
  // Lines left over from a spent budget are the continuation's, in order and one turn per loop
  // iteration; what is in the socket stays there until they are done. Without a continuation
  // pending, in_ holds at most a partial line.
  if (continuation_pending_) return;
  last_turn_ = loop_.stats().iterations;
  std::size_t budget = turn_budget();
  char buf[4096];
  std::size_t total = 0;
  // Reads only while the budget lasts: what stays in the socket keeps the fd readable for the
  // next turn, and in_ never holds more than one read beyond what a turn can handle.
  while (fd_ >= 0 && budget > 0 && total < limits_.max_read_per_event) {
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      shut(ChannelClose::kIoError);
      return;
    }
    if (n == 0) {
      // Every complete line was handled (the budget lasted): only a partial one is dropped.
      // Replies the socket would not take now can never be read after our close: one last try.
      if (!flush()) return;  // closed (and maybe destroyed) on a write error
      shut(ChannelClose::kPeerClosed);
      return;
    }
    total += static_cast<std::size_t>(n);
    in_.append(buf, static_cast<std::size_t>(n));
    if (!handle_lines(budget)) return;
  }
  if (fd_ >= 0 && budget == 0 && in_.find('\n') != std::string::npos) defer();
}

void JsonLineChannel::defer() {
  schedule_continuation();
  if (handlers_.deferred) handlers_.deferred();  // last: it may destroy this channel
}

void JsonLineChannel::schedule_continuation() {
  continuation_pending_ = true;
  // The socket may hold nothing more, so no readable event would come for the lines already
  // buffered: a bottom half (one eventfd write) brings them back.
  std::weak_ptr<bool> alive = alive_;
  loop_.schedule([this, alive] {
    if (alive.expired()) return;
    continuation_pending_ = false;
    if (fd_ >= 0) continue_lines();
  });
}

void JsonLineChannel::continue_lines() {
  // The loop runs bottom halves after the fds: one scheduled by this iteration's readable
  // event would give the client a second turn in the same iteration.
  const std::uint64_t turn = loop_.stats().iterations;
  if (turn == last_turn_) {
    schedule_continuation();
    return;
  }
  last_turn_ = turn;
  std::size_t budget = turn_budget();
  if (!handle_lines(budget)) return;
  if (budget == 0 && in_.find('\n') != std::string::npos) defer();
}

bool JsonLineChannel::handle_lines(std::size_t& budget) {
  std::weak_ptr<bool> alive = alive_;
  std::size_t start = 0;
  bool overlong = false;
  for (std::size_t nl; budget > 0 && (nl = in_.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    if (nl - start > limits_.max_line) {  // overlong, even though it ended
      overlong = true;
      break;
    }
    // Copy out: a handler may destroy this channel, and in_ with it.
    const std::string line = in_.substr(start, nl - start);
    --budget;
    if (!handle_line(line)) return false;
  }
  in_.erase(0, start);
  // An unfinished line is judged once no complete line is left before it; reading stops while
  // one is, so it cannot grow meanwhile.
  if (overlong || (in_.size() > limits_.max_line && in_.find('\n') == std::string::npos)) {
    // An overlong line: say so (best effort) and hang up.
    if (handlers_.overlong) handlers_.overlong(limits_.max_line);
    if (alive.expired()) return false;
    shut(ChannelClose::kLineTooLong);
    return false;
  }
  return true;
}

bool JsonLineChannel::handle_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == std::string_view::npos) return true;
  std::weak_ptr<bool> alive = alive_;
  nlohmann::json parsed;
  std::string error;
  try {
    // JSON text has no raw NUL, and the parser stops at one: without this check "{...}\0junk"
    // would run {...}.
    if (line.find('\0') != std::string_view::npos) {
      error = "a NUL byte in the line";
    } else if (nests_deeper_than(line, limits_.max_depth)) {
      error = "nested deeper than " + std::to_string(limits_.max_depth) + " levels";
    } else {
      parsed = nlohmann::json::parse(line);
    }
  } catch (const nlohmann::json::exception& e) {
    // The base class: a number too big for a double ("1e309", 400 digits) is out_of_range,
    // not parse_error, and must not cross the event loop (issue 20).
    error = e.what();
  }
  if (error.empty()) {
    if (handlers_.message) handlers_.message(std::move(parsed));
  } else if (handlers_.bad_line) {
    handlers_.bad_line(error);
  }
  return !alive.expired() && fd_ >= 0;
}

void JsonLineChannel::send(const nlohmann::json& message) {
  if (fd_ < 0) return;
  out_ += message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out_ += '\n';
  if (pending_output() > limits_.max_output) {
    shut(ChannelClose::kOutputOverflow);
    return;
  }
  if (flush()) update_interest();
}

bool JsonLineChannel::flush() {
  while (out_pos_ < out_.size()) {
    const ssize_t n = ::send(fd_, out_.data() + out_pos_, out_.size() - out_pos_,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      shut(ChannelClose::kIoError);
      return false;
    }
    out_pos_ += static_cast<std::size_t>(n);
  }
  if (out_pos_ == out_.size()) {
    out_.clear();
    out_pos_ = 0;
  } else if (out_pos_ > limits_.max_output) {
    out_.erase(0, out_pos_);  // keep the buffer from creeping: compact now and then
    out_pos_ = 0;
  }
  return true;
}

void JsonLineChannel::on_writable() {
  if (fd_ < 0) return;
  if (flush()) update_interest();
}

void JsonLineChannel::update_interest() {
  const bool want = pending_output() > 0;
  if (want == want_write_) return;
  want_write_ = want;
  loop_.set_interest(fd_, want ? (kReadable | kWritable) : kReadable);
}

}  // namespace minivmm::loop
