#include "devices/host/console_input.h"

#include <termios.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <system_error>

#include "devices/log/log.h"
#include "devices/pc/uart_rx_port.h"
#include "loop/poller.h"

namespace minivmm::devices {
namespace {

// The settings to restore, written once before g_saved_fd publishes them so that a signal
// handler sees either nothing or a complete copy. Process-wide because a terminal is.
termios g_saved_termios{};
termios g_raw_termios{};
std::atomic<int> g_saved_fd{-1};
static_assert(std::atomic<int>::is_always_lock_free, "restore_terminal must be signal-safe");

}  // namespace

ConsoleInput::ConsoleInput(loop::EventLoop& loop, Uart16550& uart, std::function<void()> on_quit,
                           ConsoleInputOptions options)
    : ConsoleInput(loop, std::make_unique<UartRxPort>(uart), nullptr, std::move(on_quit),
                   options) {}

ConsoleInput::ConsoleInput(loop::EventLoop& loop, ConsoleRxPort& port,
                           std::function<void()> on_quit, ConsoleInputOptions options)
    : ConsoleInput(loop, nullptr, &port, std::move(on_quit), options) {}

ConsoleInput::ConsoleInput(loop::EventLoop& loop, std::unique_ptr<ConsoleRxPort> owned,
                           ConsoleRxPort* port, std::function<void()> on_quit,
                           ConsoleInputOptions options)
    : loop_(loop),
      owned_port_(std::move(owned)),
      uart_(port != nullptr ? *port : *owned_port_),
      on_quit_(std::move(on_quit)),
      options_(options),
      self_(std::make_shared<ConsoleInput*>(this)) {
  if (options_.interactive && ::isatty(options_.fd) == 1) enter_raw_mode();
  // The hook runs on a vCPU thread: it must not touch this object, only ask the loop.
  uart_.set_on_rx_space([&loop = loop_, weak = std::weak_ptr<ConsoleInput*>(self_)] {
    loop.schedule([weak] {
      if (auto self = weak.lock()) (*self)->on_space();
    });
  });
  start_watching();
}

ConsoleInput::~ConsoleInput() {
  uart_.set_on_rx_space(nullptr);
  stop_watching();
  if (raw_) {
    restore_terminal();
    g_saved_fd.store(-1, std::memory_order_release);  // left for good: no reapply, no restore
  }
}

void ConsoleInput::enter_raw_mode() {
  termios saved{};
  if (::tcgetattr(options_.fd, &saved) != 0) {
    log::warn("console: tcgetattr failed ({}); leaving the terminal as it is", errno);
    return;
  }
  termios raw = saved;
  raw.c_iflag &=
      ~static_cast<tcflag_t>(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
  raw.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
  raw.c_cflag &= ~static_cast<tcflag_t>(CSIZE | PARENB);
  raw.c_cflag |= CS8;
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  g_saved_termios = saved;
  g_raw_termios = raw;
  g_saved_fd.store(options_.fd, std::memory_order_release);
  if (::tcsetattr(options_.fd, TCSANOW, &raw) != 0) {
    log::warn("console: tcsetattr failed ({}); leaving the terminal as it is", errno);
    g_saved_fd.store(-1, std::memory_order_release);
    return;
  }
  raw_ = true;
}

void ConsoleInput::restore_terminal() noexcept {
  const int fd = g_saved_fd.load(std::memory_order_acquire);
  if (fd < 0) return;
  ::tcsetattr(fd, TCSANOW, &g_saved_termios);
}

void ConsoleInput::reapply_raw_mode() noexcept {
  const int fd = g_saved_fd.load(std::memory_order_acquire);
  if (fd < 0) return;
  ::tcsetattr(fd, TCSANOW, &g_raw_termios);
}

void ConsoleInput::start_watching() {
  if (watching_ || eof_) return;
  watching_ = true;
  if (!read_from_bottom_halves_) {
    try {
      // Hang-up (writer closed a pipe, terminal gone) still leaves data to read: same handler.
      loop_.watch(options_.fd, loop::kReadable,
                  loop::FdHandlers{[this] { on_readable(); }, nullptr, [this] { on_readable(); }});
      return;
    } catch (const std::system_error& e) {
      if (e.code().value() != EPERM) {
        log::warn("console: cannot watch input fd {} ({}); input disabled", options_.fd,
                  e.what());
        watching_ = false;
        eof_ = true;
        return;
      }
      // epoll refuses regular files and /dev/null (stdin redirected from a file, or CI's
      // empty input). They are always readable, so bottom halves can drive the reads instead.
      read_from_bottom_halves_ = true;
    }
  }
  schedule_read();
}

void ConsoleInput::schedule_read() {
  if (read_scheduled_) return;
  read_scheduled_ = true;
  loop_.schedule([weak = std::weak_ptr<ConsoleInput*>(self_)] {
    auto self = weak.lock();
    if (!self) return;
    ConsoleInput& input = **self;
    input.read_scheduled_ = false;
    if (input.watching_) input.on_readable();
  });
}

void ConsoleInput::stop_watching() {
  if (!watching_) return;
  watching_ = false;
  if (!read_from_bottom_halves_) loop_.unwatch(options_.fd);
}

void ConsoleInput::on_readable() {
  if (!pending_.empty() && !deliver()) {
    stop_watching();
    ++stats_.pauses;
    return;
  }
  const std::size_t space = uart_.rx_space();
  if (space == 0) {
    stop_watching();
    ++stats_.pauses;
    return;
  }
  std::array<std::uint8_t, Uart16550::kFifoSize> buf{};
  const ssize_t n = ::read(options_.fd, buf.data(), std::min(space, buf.size()));
  ++stats_.reads;
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
      if (read_from_bottom_halves_) schedule_read();
      return;
    }
    log::warn("console: reading input failed ({}); input stops", errno);
    eof_ = true;
    stop_watching();
    return;
  }
  if (n == 0) {
    // EOF: stop watching for good, or a pipe's writer end being closed would spin the loop.
    eof_ = true;
    stop_watching();
    return;
  }
  stats_.bytes += static_cast<std::uint64_t>(n);
  translate(std::span<const std::uint8_t>(buf.data(), static_cast<std::size_t>(n)));
  if (!deliver() || uart_.rx_space() == 0) {
    stop_watching();
    ++stats_.pauses;
    return;
  }
  if (read_from_bottom_halves_) schedule_read();
}

void ConsoleInput::on_space() {
  if (!pending_.empty() && !deliver()) return;  // still full: the hook fires again later
  if (eof_ || watching_ || uart_.rx_space() == 0) return;
  ++stats_.resumes;
  start_watching();
}

bool ConsoleInput::deliver() {
  if (pending_.empty()) return true;
  const std::size_t taken = uart_.receive(pending_);
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(taken));
  return pending_.empty();
}

void ConsoleInput::translate(std::span<const std::uint8_t> in) {
  for (std::uint8_t byte : in) {
    if (!options_.escape) {
      pending_.push_back(byte);
      continue;
    }
    if (!saw_escape_) {
      if (byte == kEscape) {
        saw_escape_ = true;
      } else {
        pending_.push_back(byte);
      }
      continue;
    }
    saw_escape_ = false;
    if (byte == kQuitKey) {
      if (on_quit_) on_quit_();
    } else if (byte == kEscape) {
      pending_.push_back(kEscape);
    } else {
      pending_.push_back(kEscape);
      pending_.push_back(byte);
    }
  }
}

}  // namespace minivmm::devices
