#include "vmm/boot/multiboot_loader.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "vmm/boot/boot_error.h"
#include "vmm/boot/boot_layout.h"
#include "vmm/boot/boot_placement.h"
#include "vmm/boot/e820.h"
#include "vmm/boot/elf_file.h"
#include "vmm/boot/elf_segment_loader.h"
#include "vmm/boot/multiboot_info.h"
#include "vmm/boot/x86_protected_mode.h"

namespace minivmm::vmm {
namespace {

namespace mb = multiboot;

// The boot-info page (boot_layout.h): info block, module list, memory map, strings.
constexpr std::uint64_t kInfoAddr = kBootInfoAddr;
constexpr std::uint64_t kModuleAddr = kBootInfoAddr + 0x80;
constexpr std::uint64_t kMmapAddr = kBootInfoAddr + 0x100;
constexpr std::uint64_t kLoaderNameAddr = kBootInfoAddr + 0x200;
constexpr std::uint64_t kModuleStringAddr = kBootInfoAddr + 0x210;
constexpr char kLoaderName[] = "minivmm";
static_assert(sizeof(mb::Info) <= kModuleAddr - kInfoAddr);
static_assert(sizeof(kLoaderName) <= kModuleStringAddr - kLoaderNameAddr);

constexpr std::uint32_t kSupportedRequirements = mb::kHeaderPageAlignModules | mb::kHeaderMemoryInfo;

std::optional<mb::Header> find_header(std::span<const std::byte> image) {
  const std::size_t limit = std::min(image.size(), mb::kHeaderSearchBytes);
  for (std::size_t off = 0; off + sizeof(mb::Header) <= limit; off += mb::kHeaderAlign) {
    mb::Header hdr;
    std::memcpy(&hdr, image.data() + off, sizeof hdr);
    if (hdr.magic != mb::kHeaderMagic) continue;
    if (static_cast<std::uint32_t>(hdr.magic + hdr.flags + hdr.checksum) != 0) {
      throw BootError("multiboot header at offset " + to_hex(off) + " has checksum " +
                      to_hex(hdr.checksum) + ": magic + flags + checksum must be 0");
    }
    return hdr;
  }
  return std::nullopt;
}

void check_header_flags(std::uint32_t flags) {
  if ((flags & mb::kHeaderAoutKludge) != 0) {
    throw BootError("multiboot header flags " + to_hex(flags) +
                    " request the a.out kludge (bit 16), which is not supported; use ELF");
  }
  const std::uint32_t unsupported = flags & mb::kHeaderRequiredMask & ~kSupportedRequirements;
  if (unsupported != 0) {
    throw BootError("multiboot header flags " + to_hex(flags) +
                    " require unsupported features (bits " + to_hex(unsupported) +
                    (unsupported & mb::kHeaderVideoMode ? ", video mode)" : ")"));
  }
}

// GRUB's convention: e_entry is a virtual address, translated through the segment holding it.
std::uint64_t physical_entry(const ElfFile& elf) {
  for (const ElfSegment& seg : elf.segments()) {
    if (seg.type == kElfPtLoad && elf.entry() >= seg.vaddr &&
        elf.entry() - seg.vaddr < seg.memsz) {
      return elf.entry() - seg.vaddr + seg.paddr;
    }
  }
  throw BootError("ELF entry point " + to_hex(elf.entry()) + " is not inside any PT_LOAD segment");
}

}  // namespace

LoadedKernel load_multiboot_kernel(const devices::GuestMemory& mem, std::span<const std::byte> image,
                                   const MultibootOptions& opts) {
  const auto header = find_header(image);
  if (!header) {
    throw BootError("no multiboot header (magic 0x1badb002) in the first 8 KiB of the image");
  }
  check_header_flags(header->flags);
  const ElfFile elf = ElfFile::parse(image);
  if (elf.elf_class() != ElfClass::k32) {
    throw BootError("multiboot kernel must be ELF32, got an ELF64 image");
  }
  if (elf.machine() != kElfMachine386) {
    throw BootError("multiboot kernel e_machine is " + std::to_string(elf.machine()) +
                    ", expected EM_386 (3)");
  }
  const auto map = build_e820_map(mem.size());
  // Multiboot kernels may load below 1 MiB (kvm-unit-tests' realmode.flat is linked at
  // 32 KiB): only what this loader writes there is off limits. The initrd goes after the image.
  const ReservedRange reserved[] = {
      {kGdtAddr, kGdtAddr + kPageSize, "the boot GDT and TSS"},
      {kBootInfoAddr, kBootInfoAddr + kPageSize, "the multiboot info page"},
      {kCmdlineAddr, kCmdlineAddr + opts.cmdline.size() + 1, "the command line"},
  };
  const LoadedSegments segments = load_elf_segments(mem, elf, reserved);
  const std::uint64_t entry = physical_entry(elf);
  write_cmdline(mem, kCmdlineAddr, opts.cmdline);

  mb::Info info{};
  info.flags = mb::kInfoMemory | mb::kInfoCmdline | mb::kInfoMemMap | mb::kInfoBootLoaderName;
  // mem_lower/mem_upper in KiB, from the same map the mmap entries describe.
  info.mem_lower = static_cast<std::uint32_t>(map.front().size / 1024);
  info.mem_upper = static_cast<std::uint32_t>(map.back().size / 1024);
  info.cmdline = static_cast<std::uint32_t>(kCmdlineAddr);
  info.boot_loader_name = static_cast<std::uint32_t>(kLoaderNameAddr);
  mem.store(kLoaderNameAddr, std::as_bytes(std::span(kLoaderName)));

  for (std::size_t i = 0; i < map.size(); ++i) {
    const mb::MmapEntry e{sizeof(mb::MmapEntry) - sizeof(std::uint32_t), map[i].addr,
                          map[i].size, static_cast<std::uint32_t>(map[i].type)};
    mem.store_obj(kMmapAddr + i * sizeof e, e);
  }
  info.mmap_addr = static_cast<std::uint32_t>(kMmapAddr);
  info.mmap_length = static_cast<std::uint32_t>(map.size() * sizeof(mb::MmapEntry));

  std::uint64_t initrd_addr = 0;
  if (!opts.initrd.empty()) {
    // Page-aligned, directly after the image (spec 3.1.2 bit 0; kvm-unit-tests finds it there).
    initrd_addr = align_up(segments.end, kPageSize);
    if (!mem.contains(initrd_addr, opts.initrd.size())) {
      throw BootError("initrd of " + to_hex(opts.initrd.size()) + " bytes at " +
                          to_hex(initrd_addr) + " does not fit in guest RAM of " +
                          to_hex(mem.size()) + " bytes",
                      ram_cause(initrd_addr, opts.initrd.size()));
    }
    mem.store(initrd_addr, opts.initrd);
    mem.store_obj(kModuleStringAddr, char{0});
    mem.store_obj(kModuleAddr,
                  mb::Module{static_cast<std::uint32_t>(initrd_addr),
                             static_cast<std::uint32_t>(initrd_addr + opts.initrd.size()),
                             static_cast<std::uint32_t>(kModuleStringAddr), 0});
    info.flags |= mb::kInfoMods;
    info.mods_count = 1;
    info.mods_addr = static_cast<std::uint32_t>(kModuleAddr);
  }
  mem.store_obj(kInfoAddr, info);

  LoadedKernel loaded;
  loaded.boot_state = setup_protected_mode(mem);
  loaded.boot_state.rip = entry;
  loaded.boot_state.rax = mb::kBootloaderMagic;
  loaded.boot_state.rbx = kInfoAddr;
  loaded.load_addr = segments.start;
  loaded.load_end = segments.end;
  loaded.entry_addr = entry;
  loaded.boot_info_addr = kInfoAddr;
  loaded.cmdline_addr = kCmdlineAddr;
  loaded.initrd_addr = initrd_addr;
  loaded.initrd_size = opts.initrd.size();
  return loaded;
}

}  // namespace minivmm::vmm
