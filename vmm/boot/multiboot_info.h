// Multiboot v1 structures (Multiboot Specification 0.6.96, sections 3.1 "OS image format" and
// 3.3 "Boot information format"). Little-endian, 32-bit physical addresses.
#pragma once

#include <cstddef>
#include <cstdint>

namespace minivmm::vmm::multiboot {

inline constexpr std::uint32_t kHeaderMagic = 0x1badb002;
inline constexpr std::uint32_t kBootloaderMagic = 0x2badb002;  // passed in EAX
inline constexpr std::size_t kHeaderSearchBytes = 8192;        // header within the first 8 KiB
inline constexpr std::size_t kHeaderAlign = 4;

// Header flags (3.1.2). Bits 0-15 are requirements a loader must refuse if it cannot meet.
inline constexpr std::uint32_t kHeaderPageAlignModules = 1u << 0;
inline constexpr std::uint32_t kHeaderMemoryInfo = 1u << 1;
inline constexpr std::uint32_t kHeaderVideoMode = 1u << 2;
inline constexpr std::uint32_t kHeaderAoutKludge = 1u << 16;
inline constexpr std::uint32_t kHeaderRequiredMask = 0xffff;

// Info flags (3.3): which fields of Info are valid.
inline constexpr std::uint32_t kInfoMemory = 1u << 0;
inline constexpr std::uint32_t kInfoCmdline = 1u << 2;
inline constexpr std::uint32_t kInfoMods = 1u << 3;
inline constexpr std::uint32_t kInfoMemMap = 1u << 6;
inline constexpr std::uint32_t kInfoBootLoaderName = 1u << 9;

struct Header {
  std::uint32_t magic;
  std::uint32_t flags;
  std::uint32_t checksum;  // magic + flags + checksum == 0 (mod 2^32)
};

struct [[gnu::packed]] Info {  // packed: the spec ends it at 116, not a multiple of 8
  std::uint32_t flags;
  std::uint32_t mem_lower;  // KiB below 1 MiB
  std::uint32_t mem_upper;  // KiB from 1 MiB to the first hole
  std::uint32_t boot_device;
  std::uint32_t cmdline;
  std::uint32_t mods_count;
  std::uint32_t mods_addr;
  std::uint32_t syms[4];
  std::uint32_t mmap_length;  // bytes
  std::uint32_t mmap_addr;
  std::uint32_t drives_length;
  std::uint32_t drives_addr;
  std::uint32_t config_table;
  std::uint32_t boot_loader_name;
  std::uint32_t apm_table;
  std::uint32_t vbe_control_info;
  std::uint32_t vbe_mode_info;
  std::uint16_t vbe_mode;
  std::uint16_t vbe_interface_seg;
  std::uint16_t vbe_interface_off;
  std::uint16_t vbe_interface_len;
  std::uint64_t framebuffer_addr;
  std::uint32_t framebuffer_pitch;
  std::uint32_t framebuffer_width;
  std::uint32_t framebuffer_height;
  std::uint8_t framebuffer_bpp;
  std::uint8_t framebuffer_type;
  std::uint8_t color_info[6];
};
static_assert(sizeof(Info) == 116);
static_assert(offsetof(Info, cmdline) == 16);
static_assert(offsetof(Info, mods_count) == 20);
static_assert(offsetof(Info, mmap_length) == 44);
static_assert(offsetof(Info, boot_loader_name) == 64);
static_assert(offsetof(Info, framebuffer_addr) == 88);

struct Module {
  std::uint32_t mod_start;
  std::uint32_t mod_end;  // one past the last byte
  std::uint32_t string;
  std::uint32_t reserved;
};
static_assert(sizeof(Module) == 16);

// `size` counts the bytes after itself, so consumers step by size + 4.
struct [[gnu::packed]] MmapEntry {
  std::uint32_t size;
  std::uint64_t addr;
  std::uint64_t len;
  std::uint32_t type;
};
static_assert(sizeof(MmapEntry) == 24);

}  // namespace minivmm::vmm::multiboot
