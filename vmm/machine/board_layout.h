// Where everything sits on the PC minivmm builds: every I/O port window, MMIO window and GSI,
// in one place. The devices know only offsets within their windows (devices/bus/io_bus.h);
// the board (pc_board.cc) mounts each at its place here, and the tests check that no two
// windows overlap and no two devices share a line unless this table says they do.
//
// The legacy addresses are the ones every PC OS probes; the GSIs are ISA IRQ numbers, which
// KVM's default routing sends to both the 8259 pair and the IOAPIC (GSIs 16-23: the IOAPIC
// only).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace minivmm::vmm::board {

struct Ports {
  std::uint16_t base;
  std::uint16_t count;
  constexpr std::uint32_t end() const { return std::uint32_t{base} + count; }
};

struct Window {
  std::uint64_t base;
  std::uint64_t size;
  constexpr std::uint64_t end() const { return base + size; }
};

// --- The legacy devices (devices/pc/, devices/pc/i8254/).
inline constexpr Ports kPit{0x40, 4};
inline constexpr Ports kI8042Data{0x60, 1};
inline constexpr Ports kSpeaker{0x61, 1};  // port B: the PIT's gate 2 and speaker
inline constexpr Ports kI8042Command{0x64, 1};
inline constexpr Ports kRtc{0x70, 2};
inline constexpr Ports kPostPort{0x80, 1};
inline constexpr Ports kDebugExit{0xf4, 4};  // QEMU's isa-debug-exit at iobase=0xf4, iosize=4
inline constexpr Ports kCom1{0x3f8, 8};

inline constexpr std::uint32_t kPitGsi = 0;
inline constexpr std::uint32_t kKeyboardGsi = 1;
inline constexpr std::uint32_t kCom1Gsi = 4;
inline constexpr std::uint32_t kRtcGsi = 8;
inline constexpr std::uint32_t kMouseGsi = 12;

// --- kvm-unit-tests' devices, only with --testdev (devices/testdev/), at QEMU's places.
inline constexpr Ports kTestdevEcho{0xe0, 4};
inline constexpr Ports kTestdevFlushPage{0xe4, 4};
inline constexpr Ports kTestdevEchoBytes{0xe8, 4};  // the echo port again, byte-wide
inline constexpr Ports kFwCfg{0x510, 2};
inline constexpr Ports kTestdevIrq{0x2000, 24};  // line n drives GSI n: GSIs 0-23, PIT's included
// Above the largest guest's RAM (3 GiB), so every access exits to the MMIO bus.
inline constexpr Window kTestdevIomem{0xff000000, 0x10000};

// --- virtio-mmio (devices/virtio/): device i has window kVirtioFirst + i * kVirtioFirst.size
// (RAM ends at 3 GiB at most; the IOAPIC and LAPIC sit at 0xfec00000 and 0xfee00000) and the
// i-th GSI below, the ISA inputs no other device uses (the ACPI SCI is 9). Linux finds each
// through `virtio_mmio.device=4K@0xd0000000:5` on its command line.
inline constexpr Window kVirtioFirst{0xd0000000, 0x1000};
inline constexpr std::array<std::uint32_t, 5> kVirtioGsis{5, 6, 7, 10, 11};

constexpr Window virtio_window(std::size_t i) {
  return {kVirtioFirst.base + i * kVirtioFirst.size, kVirtioFirst.size};
}

// Every port window, for the overlap check and the docs.
struct NamedPorts {
  std::string_view name;
  Ports ports;
  bool testdev;
};
inline constexpr std::array kAllPorts{
    NamedPorts{"pit", kPit, false},
    NamedPorts{"i8042 data", kI8042Data, false},
    NamedPorts{"speaker", kSpeaker, false},
    NamedPorts{"i8042 command", kI8042Command, false},
    NamedPorts{"rtc", kRtc, false},
    NamedPorts{"post", kPostPort, false},
    NamedPorts{"debug exit", kDebugExit, false},
    NamedPorts{"com1", kCom1, false},
    NamedPorts{"testdev echo", kTestdevEcho, true},
    NamedPorts{"testdev flush", kTestdevFlushPage, true},
    NamedPorts{"testdev echo bytes", kTestdevEchoBytes, true},
    NamedPorts{"fw_cfg", kFwCfg, true},
    NamedPorts{"testdev irq", kTestdevIrq, true},
};

}  // namespace minivmm::vmm::board
