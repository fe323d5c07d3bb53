#include "vmm/boot/elf_segment_loader.h"

#include <algorithm>
#include <limits>
#include <string>

#include "vmm/boot/boot_error.h"
#include "vmm/boot/boot_layout.h"

namespace minivmm::vmm {

LoadedSegments load_elf_segments(const devices::GuestMemory& mem, const ElfFile& elf,
                                 std::span<const ReservedRange> reserved) {
  LoadedSegments loaded{std::numeric_limits<std::uint64_t>::max(), 0};
  const auto& segments = elf.segments();
  // Check every segment before writing any, so a rejected image leaves RAM untouched.
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const ElfSegment& seg = segments[i];
    if (seg.type != kElfPtLoad || seg.memsz == 0) continue;
    if (!mem.contains(seg.paddr, seg.memsz)) {
      throw BootError("ELF segment " + std::to_string(i) + " at p_paddr " + to_hex(seg.paddr) +
                          " with p_memsz " + to_hex(seg.memsz) + " lies outside guest RAM of " +
                          to_hex(mem.size()) + " bytes",
                      ram_cause(seg.paddr, seg.memsz));
    }
    for (const ReservedRange& r : reserved) {
      if (seg.paddr < r.end && r.start < seg.paddr + seg.memsz) {
        throw BootError("ELF segment " + std::to_string(i) + " at p_paddr " + to_hex(seg.paddr) +
                        " overlaps " + r.what + " at " + to_hex(r.start) + "-" + to_hex(r.end));
      }
    }
    loaded.start = std::min(loaded.start, seg.paddr);
    loaded.end = std::max(loaded.end, seg.paddr + seg.memsz);
  }
  if (loaded.end == 0) throw BootError("ELF image has no PT_LOAD segment");

  for (const ElfSegment& seg : segments) {
    if (seg.type != kElfPtLoad || seg.memsz == 0) continue;
    mem.store(seg.paddr, elf.contents(seg));
    mem.fill(seg.paddr + seg.filesz, seg.memsz - seg.filesz, std::byte{0});
  }
  return loaded;
}

}  // namespace minivmm::vmm
