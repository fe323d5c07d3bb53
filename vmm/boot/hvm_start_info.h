// The PVH boot ABI's start-of-day structures, as laid out in Xen's public header
// xen/include/public/arch-x86/hvm/start_info.h (version 1 adds the memory map). All fields
// little-endian; an address of 0 means "not present".
#pragma once

#include <cstddef>
#include <cstdint>

namespace minivmm::vmm {

inline constexpr std::uint32_t kHvmStartMagic = 0x336ec578;  // "xEn3" with 0x80 set in 'E'
inline constexpr std::uint32_t kHvmStartInfoVersion = 1;      // has memmap_paddr/entries
inline constexpr std::uint32_t kXenElfNotePhys32Entry = 18;   // xen/include/public/elfnote.h

struct HvmStartInfo {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint32_t flags;
  std::uint32_t nr_modules;
  std::uint64_t modlist_paddr;
  std::uint64_t cmdline_paddr;
  std::uint64_t rsdp_paddr;
  std::uint64_t memmap_paddr;   // version 1+
  std::uint32_t memmap_entries; // version 1+
  std::uint32_t reserved;
};

struct HvmModlistEntry {
  std::uint64_t paddr;
  std::uint64_t size;
  std::uint64_t cmdline_paddr;
  std::uint64_t reserved;
};

struct HvmMemmapTableEntry {
  std::uint64_t addr;
  std::uint64_t size;
  std::uint32_t type;  // e820 type values
  std::uint32_t reserved;
};

static_assert(sizeof(HvmStartInfo) == 56);
static_assert(offsetof(HvmStartInfo, modlist_paddr) == 16);
static_assert(offsetof(HvmStartInfo, cmdline_paddr) == 24);
static_assert(offsetof(HvmStartInfo, rsdp_paddr) == 32);
static_assert(offsetof(HvmStartInfo, memmap_paddr) == 40);
static_assert(offsetof(HvmStartInfo, memmap_entries) == 48);
static_assert(sizeof(HvmModlistEntry) == 32);
static_assert(sizeof(HvmMemmapTableEntry) == 24);

}  // namespace minivmm::vmm
