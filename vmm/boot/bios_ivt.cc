#include "vmm/boot/bios_ivt.h"

#include <array>

#include "vmm/boot/boot_error.h"

namespace minivmm::vmm {

void write_bios_ivt(const devices::GuestMemory& mem) {
  if (!mem.contains(kBiosIretAddr, 1)) {
    throw BootError("guest RAM of " + to_hex(mem.size()) +
                        " bytes has no BIOS area for the real-mode IVT's handler",
                    BootError::Cause::kRamTooSmall);
  }
  const std::uint32_t vector =
      (std::uint32_t{kBiosIretSegment} << 16) | std::uint32_t{kBiosIretOffset};
  for (std::uint64_t i = 0; i < kIvtBytes / 4; ++i) mem.store_obj(kIvtAddr + i * 4, vector);
  mem.store_obj(kBiosIretAddr, kIretOpcode);

  // INT 08h, 16-bit real-mode code. Registers and DS are preserved.
  static constexpr std::array<std::uint8_t, 26> kTimerHandler = {
      0x50,                    // push ax
      0x1e,                    // push ds
      0x31, 0xc0,              // xor ax, ax
      0x8e, 0xd8,              // mov ds, ax
      0xff, 0x06, 0x6c, 0x04,  // inc word [0x046c]   ticks since midnight, low word
      0x75, 0x04,              // jnz +4
      0xff, 0x06, 0x6e, 0x04,  // inc word [0x046e]   and its carry into the high word
      0xb0, 0x20,              // mov al, 0x20
      0xe6, 0x20,              // out 0x20, al        non-specific EOI to the master 8259
      0x1f,                    // pop ds
      0x58,                    // pop ax
      0xcf,                    // iret
      0x90, 0x90, 0x90,        // (padding)
  };
  for (std::size_t i = 0; i < kTimerHandler.size(); ++i) {
    mem.store_obj(kBiosTimerAddr + i, kTimerHandler[i]);
  }
  mem.store_obj(kIvtAddr + kBiosTimerVector * 4u,
                (std::uint32_t{kBiosIretSegment} << 16) | std::uint32_t{kBiosTimerOffset});
}

}  // namespace minivmm::vmm
