// I8042's (and its keyboard's) snapshot record. Everything here is a register or a queue the
// guest can read back, so each value is checked against what the controller's and the
// keyboard's own logic can produce.
#include <algorithm>

#include "devices/pc/i8042.h"

namespace minivmm::devices {
namespace {

constexpr std::uint8_t kI8042StateVersion = 1;

bool valid_pending_command(std::uint8_t c) noexcept {
  return c == 0 || c == I8042::kCmdWriteCtr || c == I8042::kCmdWriteOutputPort ||
         c == I8042::kCmdWriteKbdOutput || c == I8042::kCmdWriteAuxOutput ||
         c == I8042::kCmdWriteAux;
}

}  // namespace

void Ps2Keyboard::save_state(StateWriter& out) const {
  std::array<std::uint8_t, kQueueSize> queued{};
  for (std::size_t i = 0; i < count_; ++i) queued[i] = queue_[(head_ + i) % kQueueSize];
  out.bytes(std::span(queued.data(), count_));
  out.u8(last_sent_);
  out.u8(pending_);
  out.boolean(scanning_);
  out.u8(scan_set_);
  out.u8(leds_);
  out.u8(typematic_);
  out.u64(stats_.commands);
  out.u64(stats_.unknown_commands);
  out.u64(stats_.queue_overruns);
}

void Ps2Keyboard::load_state(StateReader& in) {
  const std::vector<std::uint8_t> queued = in.bytes(kQueueSize);
  const std::uint8_t last_sent = in.u8();
  const std::uint8_t pending = in.u8();
  const bool scanning = in.boolean();
  const std::uint8_t scan_set = in.u8();
  const std::uint8_t leds = in.u8();
  const std::uint8_t typematic = in.u8();
  Stats stats;
  stats.commands = in.u64();
  stats.unknown_commands = in.u64();
  stats.queue_overruns = in.u64();
  if (pending != 0 && pending != kCmdSetLeds && pending != kCmdScanCodeSet &&
      pending != kCmdTypematic) {
    in.fail("keyboard waits for a parameter of 0x" + std::to_string(pending));
  }
  if (scan_set < 1 || scan_set > 3) in.fail("scan code set " + std::to_string(scan_set));
  if (leds > 0x07) in.fail("keyboard LEDs " + std::to_string(leds));
  if (typematic > 0x7f) in.fail("typematic byte with bit 7 set");
  queue_ = {};
  std::copy(queued.begin(), queued.end(), queue_.begin());
  head_ = 0;
  count_ = queued.size();
  last_sent_ = last_sent;
  pending_ = pending;
  scanning_ = scanning;
  scan_set_ = scan_set;
  leds_ = leds;
  typematic_ = typematic;
  stats_ = stats;
}

void I8042::save_state(StateWriter& out) const {
  std::lock_guard lock(mu_);
  write_version(out, kI8042StateVersion);
  out.u8(ctr_);
  out.u8(status_);
  out.u8(output_);
  out.u8(output_port_);
  out.u8(pending_command_);
  keyboard_.save_state(out);
  out.u64(stats_.reads);
  out.u64(stats_.writes);
  out.u64(stats_.bad_accesses);
  out.u64(stats_.unknown_commands);
  out.u64(stats_.reset_requests);
  out.u64(stats_.device_bytes_dropped);
  out.u64(stats_.keyboard_bytes);
}

void I8042::load_state(StateReader& in) {
  std::lock_guard lock(mu_);
  read_version(in, kI8042StateVersion);
  const std::uint8_t ctr = in.u8();
  const std::uint8_t status = in.u8();
  const std::uint8_t output = in.u8();
  const std::uint8_t output_port = in.u8();
  const std::uint8_t pending_command = in.u8();
  keyboard_.load_state(in);
  Stats stats;
  stats.reads = in.u64();
  stats.writes = in.u64();
  stats.bad_accesses = in.u64();
  stats.unknown_commands = in.u64();
  stats.reset_requests = in.u64();
  stats.device_bytes_dropped = in.u64();
  stats.keyboard_bytes = in.u64();
  in.expect_end();

  // Status bits the controller never sets (input is taken at once, no parity errors), the
  // inhibit switch that is always off, and an auxiliary byte that is always a full buffer's.
  if ((status & (kStatusInputFull | kStatusParityError)) != 0 || (status & kStatusUnlocked) == 0) {
    in.fail("status 0x" + std::to_string(status) + " the controller never shows");
  }
  if ((status & kStatusAuxOutputFull) != 0 && (status & kStatusOutputFull) == 0) {
    in.fail("an auxiliary byte in an empty output buffer");
  }
  if ((output_port & kOutPortResetN) == 0) in.fail("the output port holds the CPU in reset");
  if (!valid_pending_command(pending_command)) {
    in.fail("controller waits for a byte of command 0x" + std::to_string(pending_command));
  }
  ctr_ = ctr;
  status_ = status;
  output_ = output;
  output_port_ = output_port;
  pending_command_ = pending_command;
  stats_ = stats;
  // Drives the lines from the loaded buffer; a byte the keyboard had queued moves in only if
  // the buffer is empty, as it would have at the guest's next access.
  update_locked();
}

}  // namespace minivmm::devices
