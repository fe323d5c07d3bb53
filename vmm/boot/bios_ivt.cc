#include "vmm/boot/bios_ivt.h"

#include "vmm/boot/boot_error.h"

namespace minivmm::vmm {

void write_bios_ivt(const GuestMemory& mem) {
  if (!mem.contains(kBiosIretAddr, 1)) {
    throw BootError("guest RAM of " + to_hex(mem.size()) +
                    " bytes has no BIOS area for the real-mode IVT's handler");
  }
  const std::uint32_t vector =
      (std::uint32_t{kBiosIretSegment} << 16) | std::uint32_t{kBiosIretOffset};
  for (std::uint64_t i = 0; i < kIvtBytes / 4; ++i) mem.write_obj(kIvtAddr + i * 4, vector);
  mem.write_obj(kBiosIretAddr, kIretOpcode);
}

}  // namespace minivmm::vmm
