// Emulates the Intel 8042 keyboard controller of a PC/AT ("8042 Universal Peripheral Interface
// 8-bit Slave Microcontroller"; command set as in the IBM PC/AT Technical Reference and the PS/2
// "Keyboard and Auxiliary Device Controller" chapter) with a keyboard that answers commands but
// has no keys (Ps2Keyboard) and no mouse: enough to shut down the machine (Firecracker
// i8042.rs) and for a guest's keyboard driver to find its keyboard without timeouts.
//
// Subset: status register; command byte read/write (0x20/0x60); controller self-test (0xAA ->
// 0x55); interface tests (0xAB, 0xA9 -> 0x00, "no error", as QEMU answers); enable/disable of
// the keyboard and auxiliary interfaces (0xAD/0xAE, 0xA7/0xA8, reflected in the command byte,
// which Linux checks); read/write output port (0xD0/0xD1; clearing bit 0 resets the CPU); the
// internal loopbacks 0xD2/0xD3 (Linux's AUX_LOOP probe); A20 (0xDD/0xDF, stored only); read
// input port (0xC0); pulse output port (0xF0-0xFF; 0xFE pulses bit 0 = CPU reset).
//
// Keyboard: a byte written to port 0x60 with no controller command pending goes to the keyboard
// (and, as on the chip and in QEMU, re-enables a keyboard interface disabled by 0xAD); its
// answers enter the output buffer one at a time, each when the previous one was read, while
// the keyboard interface is enabled. IRQ1 follows "output buffer full with a keyboard-side
// byte" and command byte bit 0; IRQ12 follows an auxiliary byte (0xD3 loopback) and bit 1
// (QEMU kbd_update_irq). Missing, on purpose: the mouse. Bytes for it (after 0xD4) are dropped
// with the status TIMEOUT bit set, as a controller with nothing plugged in reports; pass
// `i8042.noaux` to a Linux guest to skip its AUX probe. The controller's scratch RAM
// (0x21-0x3F, 0x61-0x7F) and password/test commands are unknown commands: ignored, counted.
//
// Bad guest input: only byte accesses are defined; wider ones are ignored (reads 0xff) and
// counted, like Firecracker. The output buffer is one byte, as on the chip: a new response
// overwrites an unread one; reading port 0x60 with nothing new returns the last byte again (QEMU
// returns the last byte; Firecracker 0).
//
// Mapping: the data port (0x60 on a PC) and the status/command port (0x64) are offsets 0 and
// 4 of one device (a window of 5) when nothing else sits between them. On a PC, port 0x61
// belongs to I8254SpeakerPort, so the board attaches data_port() and command_port() (one port
// each) instead; both views share this device's state.
//
// Threads: read()/write() on vCPU threads, under mu_. `on_reset` runs on the writing vCPU thread
// after mu_ is released, so it may call back into this device. The IRQ lines are driven with mu_
// held (lock order: mu_ -> the line's own; a line never calls back).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string_view>

#include "devices/bus/irq_line.h"
#include "devices/bus/port_io_device.h"
#include "devices/bus/report_writer.h"
#include "devices/pc/ps2_keyboard.h"

namespace minivmm::devices {

class I8042 final : public PortIoDevice, public ReportingDevice, public StatefulDevice {
 public:
  static constexpr std::uint16_t kPortCount = 5;
  static constexpr std::uint16_t kDataOffset = 0;
  static constexpr std::uint16_t kCommandOffset = 4;  // status register when read

  // Status register.
  static constexpr std::uint8_t kStatusOutputFull = 0x01;
  static constexpr std::uint8_t kStatusInputFull = 0x02;  // always 0: input is taken at once
  static constexpr std::uint8_t kStatusSystemFlag = 0x04;
  static constexpr std::uint8_t kStatusCommand = 0x08;   // last write went to port 0x64
  static constexpr std::uint8_t kStatusUnlocked = 0x10;  // keyboard inhibit switch off
  static constexpr std::uint8_t kStatusAuxOutputFull = 0x20;
  static constexpr std::uint8_t kStatusTimeout = 0x40;
  static constexpr std::uint8_t kStatusParityError = 0x80;

  // Command byte (controller configuration).
  static constexpr std::uint8_t kCtrKbdInt = 0x01;
  static constexpr std::uint8_t kCtrAuxInt = 0x02;
  static constexpr std::uint8_t kCtrSystemFlag = 0x04;
  static constexpr std::uint8_t kCtrKbdDisable = 0x10;
  static constexpr std::uint8_t kCtrAuxDisable = 0x20;
  static constexpr std::uint8_t kCtrTranslate = 0x40;

  // Output port.
  static constexpr std::uint8_t kOutPortResetN = 0x01;  // active low: 0 resets the CPU
  static constexpr std::uint8_t kOutPortA20 = 0x02;

  // Controller commands (written to port 0x64).
  static constexpr std::uint8_t kCmdReadCtr = 0x20;
  static constexpr std::uint8_t kCmdWriteCtr = 0x60;
  static constexpr std::uint8_t kCmdAuxDisable = 0xa7;
  static constexpr std::uint8_t kCmdAuxEnable = 0xa8;
  static constexpr std::uint8_t kCmdAuxTest = 0xa9;
  static constexpr std::uint8_t kCmdSelfTest = 0xaa;
  static constexpr std::uint8_t kCmdKbdTest = 0xab;
  static constexpr std::uint8_t kCmdKbdDisable = 0xad;
  static constexpr std::uint8_t kCmdKbdEnable = 0xae;
  static constexpr std::uint8_t kCmdReadInputPort = 0xc0;
  static constexpr std::uint8_t kCmdReadOutputPort = 0xd0;
  static constexpr std::uint8_t kCmdWriteOutputPort = 0xd1;
  static constexpr std::uint8_t kCmdWriteKbdOutput = 0xd2;
  static constexpr std::uint8_t kCmdWriteAuxOutput = 0xd3;
  static constexpr std::uint8_t kCmdWriteAux = 0xd4;
  static constexpr std::uint8_t kCmdDisableA20 = 0xdd;
  static constexpr std::uint8_t kCmdEnableA20 = 0xdf;
  static constexpr std::uint8_t kCmdPulseOutputPort = 0xf0;  // 0xf0-0xff, low nibble = mask
  static constexpr std::uint8_t kCmdResetCpu = 0xfe;         // pulse bit 0 only

  // Responses.
  static constexpr std::uint8_t kSelfTestPassed = 0x55;
  static constexpr std::uint8_t kInterfaceTestPassed = 0x00;
  // Input port: bit 7 = keyboard not inhibited (QEMU answers the same).
  static constexpr std::uint8_t kInputPortValue = 0x80;

  struct Stats {
    std::uint64_t reads = 0;                 // byte reads of 0x60/0x64
    std::uint64_t writes = 0;                // byte writes of 0x60/0x64
    std::uint64_t bad_accesses = 0;          // wrong width or an offset that is not 0 or 4
    std::uint64_t unknown_commands = 0;      // controller commands not emulated
    std::uint64_t reset_requests = 0;        // CPU resets requested (0xFE, 0xD1 with bit 0 clear)
    std::uint64_t device_bytes_dropped = 0;  // bytes for the absent mouse
    std::uint64_t keyboard_bytes = 0;        // bytes sent to the keyboard
    std::uint64_t keyboard_unknown = 0;      // of those, answered 0xFE (not understood)
    std::uint64_t keyboard_overruns = 0;     // keyboard answers dropped: nobody read them
  };

  // `on_reset` is called for each CPU reset the guest requests (typically the VMM stops or
  // restarts the VM). May be empty. `kbd_irq` (IRQ1) and `aux_irq` (IRQ12) may be null: that
  // interrupt is then not wired (the guest can still poll the status register).
  explicit I8042(std::function<void()> on_reset, IrqLine* kbd_irq = nullptr,
                 IrqLine* aux_irq = nullptr);
  I8042(const I8042&) = delete;
  I8042& operator=(const I8042&) = delete;

  std::string_view name() const noexcept override { return report_key(); }

  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  // One-port views for the split mapping (0x60 and 0x64 with port 0x61 taken).
  PortIoDevice& data_port() noexcept { return data_view_; }
  PortIoDevice& command_port() noexcept { return command_view_; }

  Stats stats() const;

  // ReportingDevice: stats() under "i8042"; device_bytes_dropped is reported as
  // mouse_bytes_dropped (the only auxiliary device a PC has, and the report's name for it).
  std::string_view report_key() const noexcept override { return "i8042"; }
  void report(ReportWriter& out) const override;

  // StatefulDevice (i8042_state.cc): the controller's registers, the pending command, the
  // keyboard's state and its queued answers, the counters. IRQ1/IRQ12 are driven again from the
  // loaded state (a fresh board's lines are low).
  std::string_view state_key() const noexcept override { return report_key(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  // Forwards a one-port mapping to the device at a fixed offset.
  class PortView final : public PortIoDevice {
   public:
    PortView(I8042& device, std::uint16_t offset, std::string_view name) noexcept
        : device_(device), offset_(offset), name_(name) {}
    std::string_view name() const noexcept override { return name_; }
    void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
    void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

   private:
    I8042& device_;
    const std::uint16_t offset_;
    const std::string_view name_;
  };

  // Each returns true when the write requests a CPU reset.
  bool write_command_locked(std::uint8_t command) noexcept;
  bool write_data_locked(std::uint8_t value) noexcept;
  bool write_output_port_locked(std::uint8_t value) noexcept;
  void put_output_locked(std::uint8_t value, bool aux) noexcept;
  // Drives IRQ1/IRQ12 from the output buffer and the command byte, then moves the keyboard's
  // next answer into an empty output buffer and drives them again. Called after every access.
  void update_locked() noexcept;
  // The one place that changes the lines; set_level only on a change.
  void drive_lines_locked() noexcept;

  const std::function<void()> on_reset_;
  IrqLine* const kbd_irq_;
  IrqLine* const aux_irq_;

  mutable std::mutex mu_;  // guards everything below; a leaf lock
  // Linux's default after the BIOS: keyboard interrupt on, translation on, system flag set (the
  // guest starts "after POST"; there is no BIOS here).
  std::uint8_t ctr_ = kCtrKbdInt | kCtrSystemFlag | kCtrTranslate;
  std::uint8_t status_ = kStatusSystemFlag | kStatusUnlocked;
  std::uint8_t output_ = 0;  // the output buffer; kept after a read, as on the chip
  std::uint8_t output_port_ = kOutPortResetN | kOutPortA20;
  std::uint8_t pending_command_ = 0;  // a command waiting for its byte on port 0x60; 0 = none
  Ps2Keyboard keyboard_;
  bool kbd_level_ = false;
  bool aux_level_ = false;
  Stats stats_;

  PortView data_view_{*this, kDataOffset, "i8042-data"};
  PortView command_view_{*this, kCommandOffset, "i8042-command"};
};

}  // namespace minivmm::devices
