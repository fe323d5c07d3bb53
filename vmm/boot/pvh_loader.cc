#include "vmm/boot/pvh_loader.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "vmm/boot/boot_error.h"
#include "vmm/boot/boot_layout.h"
#include "vmm/boot/boot_placement.h"
#include "vmm/boot/e820.h"
#include "vmm/boot/elf_file.h"
#include "vmm/boot/elf_segment_loader.h"
#include "vmm/boot/hvm_start_info.h"
#include "vmm/boot/x86_protected_mode.h"

namespace minivmm::vmm {
namespace {

// Start info, module list and memory map share the boot-info page (boot_layout.h).
constexpr std::uint64_t kStartInfoAddr = kBootInfoAddr;
constexpr std::uint64_t kModlistAddr = kBootInfoAddr + 0x40;
constexpr std::uint64_t kMemmapAddr = kBootInfoAddr + 0x80;
constexpr std::uint64_t kMaxMemmapEntries = (kPageSize - 0x80) / sizeof(HvmMemmapTableEntry);

// Linux emits the entry with .long (4 bytes) or, in older trees, _ASM_PTR (8 bytes on x86-64).
std::uint64_t read_pvh_entry(const ElfFile& elf) {
  const auto desc = elf.find_note("Xen", kXenElfNotePhys32Entry);
  if (!desc) throw BootError("not a PVH kernel: no XEN_ELFNOTE_PHYS32_ENTRY note");
  std::uint64_t entry = 0;
  if (desc->size() == 4) {
    std::uint32_t entry32 = 0;
    std::memcpy(&entry32, desc->data(), 4);
    entry = entry32;
  } else if (desc->size() == 8) {
    std::memcpy(&entry, desc->data(), 8);
  } else {
    throw BootError("XEN_ELFNOTE_PHYS32_ENTRY note has a " + std::to_string(desc->size()) +
                    "-byte descriptor, expected 4 or 8");
  }
  if (entry >= k4GiB) {
    throw BootError("PVH entry point " + to_hex(entry) + " is not a 32-bit physical address");
  }
  return entry;
}

}  // namespace

LoadedKernel load_pvh_kernel(const devices::GuestMemory& mem, std::span<const std::byte> image,
                             const PvhOptions& opts) {
  const ElfFile elf = ElfFile::parse(image);
  if (elf.elf_class() != ElfClass::k64) {
    throw BootError("PVH kernel must be ELF64, got an ELF32 image");
  }
  if (elf.machine() != kElfMachineX86_64) {
    throw BootError("PVH kernel e_machine is " + std::to_string(elf.machine()) +
                    ", expected EM_X86_64 (62)");
  }
  const std::uint64_t entry = read_pvh_entry(elf);
  const auto memmap = build_e820_map(mem.size());
  static_assert(kMaxMemmapEntries >= 3);

  const LoadedSegments segments = load_elf_segments(mem, elf);
  if (entry < segments.start || entry >= segments.end) {
    throw BootError("PVH entry point " + to_hex(entry) + " lies outside the loaded segments [" +
                    to_hex(segments.start) + ", " + to_hex(segments.end) + ")");
  }
  write_cmdline(mem, kCmdlineAddr, opts.cmdline);
  const std::uint64_t initrd_addr =
      place_initrd_high(mem, opts.initrd, align_up(segments.end, kPageSize), k4GiB);

  HvmStartInfo info{};
  info.magic = kHvmStartMagic;
  info.version = kHvmStartInfoVersion;
  info.cmdline_paddr = kCmdlineAddr;
  info.rsdp_paddr = opts.acpi_rsdp_addr.value_or(0);
  info.memmap_paddr = kMemmapAddr;
  info.memmap_entries = static_cast<std::uint32_t>(memmap.size());
  for (std::size_t i = 0; i < memmap.size(); ++i) {
    const HvmMemmapTableEntry e{memmap[i].addr, memmap[i].size,
                                static_cast<std::uint32_t>(memmap[i].type), 0};
    mem.store_obj(kMemmapAddr + i * sizeof e, e);
  }
  if (initrd_addr != 0) {
    info.nr_modules = 1;
    info.modlist_paddr = kModlistAddr;
    mem.store_obj(kModlistAddr, HvmModlistEntry{initrd_addr, opts.initrd.size(), 0, 0});
  }
  mem.store_obj(kStartInfoAddr, info);

  LoadedKernel loaded;
  loaded.boot_state = setup_protected_mode(mem);
  loaded.boot_state.rip = entry;
  loaded.boot_state.rbx = kStartInfoAddr;
  loaded.load_addr = segments.start;
  loaded.load_end = segments.end;
  loaded.entry_addr = entry;
  loaded.boot_info_addr = kStartInfoAddr;
  loaded.cmdline_addr = kCmdlineAddr;
  loaded.initrd_addr = initrd_addr;
  loaded.initrd_size = opts.initrd.size();
  return loaded;
}

}  // namespace minivmm::vmm
