// The real-mode interrupt vector table a PC BIOS leaves at address 0, for kernels that start
// from (or drop back to) real mode without firmware of their own, such as kvm-unit-tests'
// realmode.flat. Every one of the 256 vectors points at one IRET in the BIOS ROM area, so a
// stray interrupt or `int n` in real mode returns instead of running whatever bytes happen to
// be at 0000:0000. No BIOS services are provided: `int 0x10` and friends return doing nothing.
//
// The one exception is IRQ0 (vector 0x08), the BIOS timer: a PC BIOS leaves the PIT running at
// 18.2 Hz with IRQ0 unmasked, and real-mode code relies on it — kvm-unit-tests' realmode.flat
// ends its `sti; hlt` test on that tick (under QEMU, SeaBIOS's). Its handler sits where the
// IBM PC/AT BIOS keeps INT 08h (F000:FEA5): it counts the tick in the BIOS data area's
// 0040:006C, as every BIOS does, and acknowledges the 8259 (non-specific EOI).
#pragma once

#include <cstdint>

#include "devices/bus/guest_memory.h"

namespace minivmm::vmm {

inline constexpr std::uint64_t kIvtAddr = 0;
inline constexpr std::uint64_t kIvtBytes = 256 * 4;  // 256 far pointers (offset, segment)
// F000:FF53, where the IBM PC/AT BIOS (and SeaBIOS, for its dummy handler) keeps an IRET.
inline constexpr std::uint16_t kBiosIretSegment = 0xf000;
inline constexpr std::uint16_t kBiosIretOffset = 0xff53;
inline constexpr std::uint64_t kBiosIretAddr = 0xfff53;
inline constexpr std::uint8_t kIretOpcode = 0xcf;
// F000:FEA5: the IBM PC/AT BIOS's INT 08h (timer) entry point.
inline constexpr std::uint16_t kBiosTimerOffset = 0xfea5;
inline constexpr std::uint64_t kBiosTimerAddr = 0xffea5;
inline constexpr std::uint8_t kBiosTimerVector = 0x08;
// The BIOS data area's timer tick count (dword at 0040:006C).
inline constexpr std::uint64_t kBdaTickCountAddr = 0x46c;

// Writes the table, the IRET and the timer handler. Throws BootError when RAM ends below 1 MiB.
void write_bios_ivt(const devices::GuestMemory& mem);

}  // namespace minivmm::vmm
