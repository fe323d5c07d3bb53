#include "devices/pc/i8042.h"

#include <algorithm>

#include "devices/log/log.h"

namespace minivmm::devices {
namespace {

// Enough to see what a guest probes without letting it flood the log.
constexpr std::uint64_t kMaxUnknownCommandLogs = 16;

}  // namespace

I8042::I8042(std::function<void()> on_reset, IrqLine* kbd_irq, IrqLine* aux_irq)
    : on_reset_(std::move(on_reset)), kbd_irq_(kbd_irq), aux_irq_(aux_irq) {}

void I8042::read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept {
  std::fill(data.begin(), data.end(), std::uint8_t{0xff});
  std::lock_guard lock(mu_);
  if (data.size() != 1 || (offset != kDataOffset && offset != kCommandOffset)) {
    ++stats_.bad_accesses;
    return;
  }
  ++stats_.reads;
  if (offset == kCommandOffset) {
    data[0] = status_;
    return;
  }
  data[0] = output_;
  status_ &= static_cast<std::uint8_t>(~(kStatusOutputFull | kStatusAuxOutputFull));
  update_locked();
}

void I8042::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  bool reset = false;
  {
    std::lock_guard lock(mu_);
    if (data.size() != 1 || (offset != kDataOffset && offset != kCommandOffset)) {
      ++stats_.bad_accesses;
      return;
    }
    ++stats_.writes;
    reset = offset == kCommandOffset ? write_command_locked(data[0]) : write_data_locked(data[0]);
    if (reset) ++stats_.reset_requests;
    update_locked();
  }
  if (reset) {
    log::info("guest: i8042 CPU reset requested");
    if (on_reset_) on_reset_();
  }
}

I8042::Stats I8042::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.keyboard_unknown = keyboard_.stats().unknown_commands;
  s.keyboard_overruns = keyboard_.stats().queue_overruns;
  return s;
}

void I8042::report(ReportWriter& out) const {
  const Stats s = stats();
  out.count("reads", s.reads);
  out.count("writes", s.writes);
  out.count("reset_requests", s.reset_requests);
  out.count("unknown_commands", s.unknown_commands);
  out.count("keyboard_bytes", s.keyboard_bytes);
  out.count("keyboard_unknown", s.keyboard_unknown);
  out.count("keyboard_overruns", s.keyboard_overruns);
  out.count("mouse_bytes_dropped", s.device_bytes_dropped);
  out.count("bad_accesses", s.bad_accesses);
}

bool I8042::write_command_locked(std::uint8_t command) noexcept {
  status_ |= kStatusCommand;
  status_ &= static_cast<std::uint8_t>(~kStatusTimeout);
  pending_command_ = 0;  // a new command abandons one still waiting for its byte

  if ((command & kCmdPulseOutputPort) == kCmdPulseOutputPort) {
    // Pulse output port bits 0-3 low for ~6 us where the command's low nibble has a 0. Only
    // bit 0 (CPU reset, active low) does anything; 0xFE is the command everyone uses.
    return (command & kOutPortResetN) == 0;
  }
  switch (command) {
    case kCmdReadCtr:
      put_output_locked(ctr_, false);
      return false;
    case kCmdWriteCtr:
    case kCmdWriteOutputPort:
    case kCmdWriteKbdOutput:
    case kCmdWriteAuxOutput:
    case kCmdWriteAux:
      pending_command_ = command;
      return false;
    case kCmdAuxDisable:
      ctr_ |= kCtrAuxDisable;
      return false;
    case kCmdAuxEnable:
      ctr_ &= static_cast<std::uint8_t>(~kCtrAuxDisable);
      return false;
    case kCmdKbdDisable:
      ctr_ |= kCtrKbdDisable;
      return false;
    case kCmdKbdEnable:
      ctr_ &= static_cast<std::uint8_t>(~kCtrKbdDisable);
      return false;
    case kCmdSelfTest:
      ctr_ |= kCtrSystemFlag;
      status_ |= kStatusSystemFlag;
      put_output_locked(kSelfTestPassed, false);
      return false;
    case kCmdKbdTest:
    case kCmdAuxTest:
      // The interface lines test fine; nothing being attached shows up later, as timeouts.
      put_output_locked(kInterfaceTestPassed, false);
      return false;
    case kCmdReadInputPort:
      put_output_locked(kInputPortValue, false);
      return false;
    case kCmdReadOutputPort:
      put_output_locked(output_port_, false);
      return false;
    case kCmdDisableA20:
      output_port_ &= static_cast<std::uint8_t>(~kOutPortA20);
      return false;
    case kCmdEnableA20:
      output_port_ |= kOutPortA20;
      return false;
    default:
      if (++stats_.unknown_commands <= kMaxUnknownCommandLogs) {
        log::debug("guest: i8042 unknown command 0x{:02x}", command);
      }
      return false;
  }
}

bool I8042::write_data_locked(std::uint8_t value) noexcept {
  status_ &= static_cast<std::uint8_t>(~kStatusCommand);
  const std::uint8_t command = pending_command_;
  pending_command_ = 0;
  switch (command) {
    case kCmdWriteCtr:
      ctr_ = value;
      // The status register's system flag follows command byte bit 2.
      status_ &= static_cast<std::uint8_t>(~kStatusSystemFlag);
      if ((value & kCtrSystemFlag) != 0) status_ |= kStatusSystemFlag;
      return false;
    case kCmdWriteOutputPort:
      return write_output_port_locked(value);
    case kCmdWriteKbdOutput:
      put_output_locked(value, false);
      return false;
    case kCmdWriteAuxOutput:
      put_output_locked(value, true);
      return false;
    case kCmdWriteAux:
      // A byte for the mouse: nobody is there to clock it in.
      ++stats_.device_bytes_dropped;
      status_ |= kStatusTimeout;
      return false;
    default:
      // A byte for the keyboard. Sending it re-enables the keyboard interface (QEMU
      // kbd_write_data does the same), so a driver that disabled the port to probe it hears
      // the answer.
      ++stats_.keyboard_bytes;
      ctr_ &= static_cast<std::uint8_t>(~kCtrKbdDisable);
      keyboard_.receive(value, (ctr_ & kCtrTranslate) != 0);
      return false;
  }
}

bool I8042::write_output_port_locked(std::uint8_t value) noexcept {
  output_port_ = value;
  if ((value & kOutPortResetN) != 0) return false;
  // The reset line is asserted; once the CPU resets, the controller comes back with it high.
  output_port_ |= kOutPortResetN;
  return true;
}

void I8042::put_output_locked(std::uint8_t value, bool aux) noexcept {
  output_ = value;
  status_ |= kStatusOutputFull;
  if (aux) {
    status_ |= kStatusAuxOutputFull;
  } else {
    status_ &= static_cast<std::uint8_t>(~kStatusAuxOutputFull);
  }
}

void I8042::update_locked() noexcept {
  drive_lines_locked();
  if (!(status_ & kStatusOutputFull) && keyboard_.has_output() && !(ctr_ & kCtrKbdDisable)) {
    // The lines were just driven from the empty buffer, so each byte that moves in is a fresh
    // edge: an edge-triggered IRQ1 interrupts once per byte, and a guest's handler reads one
    // byte per interrupt (QEMU ps2_read_data lowers and raises the line the same way).
    put_output_locked(keyboard_.pop_output(), false);
    drive_lines_locked();
  }
}

void I8042::drive_lines_locked() noexcept {
  const bool full = (status_ & kStatusOutputFull) != 0;
  const bool aux = (status_ & kStatusAuxOutputFull) != 0;
  const bool kbd_level = full && !aux && (ctr_ & kCtrKbdInt) != 0;
  const bool aux_level = full && aux && (ctr_ & kCtrAuxInt) != 0;
  if (kbd_level != kbd_level_) {
    kbd_level_ = kbd_level;
    if (kbd_irq_ != nullptr) kbd_irq_->set_level(kbd_level);
  }
  if (aux_level != aux_level_) {
    aux_level_ = aux_level;
    if (aux_irq_ != nullptr) aux_irq_->set_level(aux_level);
  }
}

void I8042::PortView::read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept {
  device_.read(static_cast<std::uint16_t>(offset_ + offset), data);
}

void I8042::PortView::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  device_.write(static_cast<std::uint16_t>(offset_ + offset), data);
}

}  // namespace minivmm::devices
