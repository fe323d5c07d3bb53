// Host input for the serial console: reads a host fd (stdin by default) from the event loop and
// feeds a ConsoleRxPort (the UART's RX FIFO, or virtio-console's receive buffer), with back-pressure instead of overruns (Firecracker's serial stops
// watching stdin while the FIFO is full and resumes on a "buffer ready" event):
//  - on readable it reads at most what the FIFO can take;
//  - when the FIFO is full it stops watching the fd (unwatch, not just interest 0: a hung-up
//    pipe reports POLLHUP whatever the interest, which would spin the loop) until the UART's
//    on_rx_space hook schedules a bottom half that resumes it;
//  - on EOF (read returns 0) or a read error it stops watching for good;
//  - an fd that epoll refuses (a regular file, /dev/null) is read from bottom halves instead,
//    and one that cannot be watched at all (closed stdin) just gives no input.
//
// The terminal is put into raw mode only when the console is interactive *and* the fd is a TTY
// (cloud-hypervisor#5343: touching a terminal that is not ours breaks scripts). Raw here means no
// echo, no line editing and no signals (Ctrl-C goes to the guest); output processing is kept,
// so the host still turns "\n" into "\r\n" for guests that send bare newlines. The saved
// settings are restored by the destructor and, from a signal handler or an exit path, by
// restore_terminal(), which is async-signal-safe.
//
// Escape (only with `escape`): Ctrl-A x calls on_quit; Ctrl-A Ctrl-A sends one Ctrl-A; Ctrl-A
// followed by anything else sends both bytes.
//
// Threads: construct, destroy and run on the loop thread. The UART's hook (vCPU thread) only
// schedules a bottom half. The loop and the UART must outlive this object; bottom halves that
// run after it is gone do nothing.
#pragma once

#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "devices/bus/console_rx_port.h"
#include "devices/pc/uart_16550.h"
#include "loop/event_loop.h"

namespace minivmm::devices {

struct ConsoleInputOptions {
  int fd = STDIN_FILENO;     // not owned
  bool interactive = false;  // raw mode if `fd` is a TTY
  bool escape = true;        // Ctrl-A commands
};

struct ConsoleInputStats {
  std::uint64_t reads = 0;   // read(2) calls
  std::uint64_t bytes = 0;   // bytes read from the fd
  std::uint64_t pauses = 0;  // times reading stopped on a full FIFO
  std::uint64_t resumes = 0;
};

class ConsoleInput {
 public:
  static constexpr std::uint8_t kEscape = 0x01;  // Ctrl-A
  static constexpr std::uint8_t kQuitKey = 'x';

  // Starts watching `options.fd` at once. `on_quit` runs on the loop thread.
  ConsoleInput(loop::EventLoop& loop, ConsoleRxPort& port, std::function<void()> on_quit,
               ConsoleInputOptions options = {});
  // The serial console: input into the UART's RX FIFO.
  ConsoleInput(loop::EventLoop& loop, Uart16550& uart, std::function<void()> on_quit,
               ConsoleInputOptions options = {});
  ~ConsoleInput();
  ConsoleInput(const ConsoleInput&) = delete;
  ConsoleInput& operator=(const ConsoleInput&) = delete;

  // Puts back the terminal settings saved when raw mode was entered, if any. Async-signal-safe
  // (tcsetattr on a copy saved beforehand); safe to call more than once.
  static void restore_terminal() noexcept;
  // Puts the raw settings back after restore_terminal() (SIGCONT after a job-control stop: the
  // shell had the terminal meanwhile). Async-signal-safe; a no-op if raw mode was never entered
  // or has been left for good (destructor).
  static void reapply_raw_mode() noexcept;

  bool watching() const noexcept { return watching_; }
  bool at_eof() const noexcept { return eof_; }
  bool raw_mode() const noexcept { return raw_; }
  const ConsoleInputStats& stats() const noexcept { return stats_; }

 private:
  void on_readable();
  void on_space();
  // Hands pending_ to the UART; returns true if all of it went in.
  bool deliver();
  void translate(std::span<const std::uint8_t> in);
  void start_watching();
  void stop_watching();
  void schedule_read();
  void enter_raw_mode();

  ConsoleInput(loop::EventLoop& loop, std::unique_ptr<ConsoleRxPort> owned, ConsoleRxPort* port,
               std::function<void()> on_quit, ConsoleInputOptions options);

  loop::EventLoop& loop_;
  std::unique_ptr<ConsoleRxPort> owned_port_;  // the UART's adapter, when built from a UART
  ConsoleRxPort& uart_;                        // the receiver (named for its first user)
  const std::function<void()> on_quit_;
  const ConsoleInputOptions options_;

  // Bytes already translated but not yet taken by the UART (at most a couple: reads are sized
  // to the FIFO's free space, and an escape can turn one input byte into two).
  std::vector<std::uint8_t> pending_;
  bool saw_escape_ = false;
  bool watching_ = false;  // reading is on (by fd watch, or by bottom halves)
  // The fd cannot be polled (epoll and a regular file or /dev/null): read from bottom halves.
  bool read_from_bottom_halves_ = false;
  bool read_scheduled_ = false;
  bool eof_ = false;
  bool raw_ = false;
  // Bottom halves hold a weak_ptr to this: they outlive the object only as no-ops.
  std::shared_ptr<ConsoleInput*> self_;
  ConsoleInputStats stats_;
};

}  // namespace minivmm::devices
