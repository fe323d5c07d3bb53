// The console's ByteSink: writes to a host fd (stdout by default), retrying short writes and
// EINTR, and waiting (bounded) when the fd is non-blocking and full. It never throws and never
// blocks forever: a console that cannot take output must not wedge the vCPU that holds the UART
// lock, so bytes that still do not fit after kMaxWait are dropped and counted. EPIPE (SIGPIPE is
// ignored by main) means the console is gone for good: later output is dropped at once, counted.
//
// Threads: write() is called with the owning device's lock held, so at most one thread writes
// at a time per device; stats() from any thread.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>

#include "devices/bus/byte_sink.h"
#include "devices/bus/report_writer.h"

namespace minivmm::devices {

struct StdoutSinkStats {
  std::uint64_t writes = 0;         // write(2) calls
  std::uint64_t bytes = 0;          // bytes written
  std::uint64_t dropped_bytes = 0;  // bytes given up on (error, or the fd stayed full)
  std::uint64_t errors = 0;
  // The reader went away (EPIPE: `minivmm ... | head`): from then on output is dropped without
  // a syscall, and the guest runs on.
  bool gone = false;
};

class StdoutSink final : public ByteSink, public ReportingDevice {
 public:
  static constexpr std::chrono::milliseconds kMaxWait{1000};

  // Does not take ownership of `fd`.
  explicit StdoutSink(int fd = STDOUT_FILENO) noexcept : fd_(fd) {}

  void write(std::span<const std::uint8_t> bytes) noexcept override;

  StdoutSinkStats stats() const noexcept;

  // ReportingDevice: stats() under "console" (gone as a flag).
  std::string_view report_key() const noexcept override { return "console"; }
  void report(ReportWriter& out) const override;

 private:
  const int fd_;
  std::atomic<std::uint64_t> writes_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<bool> gone_{false};
};

}  // namespace minivmm::devices
