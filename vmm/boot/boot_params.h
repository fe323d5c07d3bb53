// The Linux x86 "zero page" (struct boot_params) and the setup header embedded in it, as laid
// out by the boot protocol (Documentation/arch/x86/boot.rst, "The Real-Mode Kernel Header";
// arch/x86/include/uapi/asm/bootparam.h). Fields we never touch are left as opaque padding;
// every field we do use has its offset pinned by a static_assert against boot.rst's table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace minivmm::vmm {

// Setup header magic and flag values (boot.rst "Details of Header Fields").
inline constexpr std::uint16_t kBootFlagMagic = 0xaa55;
inline constexpr std::uint32_t kHdrSMagic = 0x53726448;  // "HdrS" little-endian
inline constexpr std::uint8_t kLoadedHigh = 0x01;         // loadflags bit 0: loaded at 1 MiB
inline constexpr std::uint8_t kCanUseHeap = 0x80;         // loadflags bit 7: heap_end_ptr valid
inline constexpr std::uint16_t kXlfKernel64 = 0x0001;     // xloadflags bit 0: 64-bit entry at +0x200
inline constexpr std::uint8_t kTypeOfLoaderUndefined = 0xff;  // "no assigned loader id"

struct [[gnu::packed]] SetupHeader {
  std::uint8_t setup_sects;           // 0x1f1
  std::uint16_t root_flags;           // 0x1f2
  std::uint32_t syssize;              // 0x1f4, protected-mode size in 16-byte paragraphs
  std::uint16_t ram_size;             // 0x1f8
  std::uint16_t vid_mode;             // 0x1fa
  std::uint16_t root_dev;             // 0x1fc
  std::uint16_t boot_flag;            // 0x1fe
  std::uint16_t jump;                 // 0x200, second byte = header length - 0x202 + 0x200
  std::uint32_t header;               // 0x202
  std::uint16_t version;              // 0x206
  std::uint32_t realmode_swtch;       // 0x208
  std::uint16_t start_sys_seg;        // 0x20c
  std::uint16_t kernel_version;       // 0x20e
  std::uint8_t type_of_loader;        // 0x210
  std::uint8_t loadflags;             // 0x211
  std::uint16_t setup_move_size;      // 0x212
  std::uint32_t code32_start;         // 0x214
  std::uint32_t ramdisk_image;        // 0x218
  std::uint32_t ramdisk_size;         // 0x21c
  std::uint32_t bootsect_kludge;      // 0x220
  std::uint16_t heap_end_ptr;         // 0x224
  std::uint8_t ext_loader_ver;        // 0x226
  std::uint8_t ext_loader_type;       // 0x227
  std::uint32_t cmd_line_ptr;         // 0x228
  std::uint32_t initrd_addr_max;      // 0x22c, highest byte address the initrd may occupy
  std::uint32_t kernel_alignment;     // 0x230
  std::uint8_t relocatable_kernel;    // 0x234
  std::uint8_t min_alignment;         // 0x235
  std::uint16_t xloadflags;           // 0x236
  std::uint32_t cmdline_size;         // 0x238, max length excluding the NUL
  std::uint32_t hardware_subarch;     // 0x23c
  std::uint64_t hardware_subarch_data;  // 0x240
  std::uint32_t payload_offset;       // 0x248
  std::uint32_t payload_length;       // 0x24c
  std::uint64_t setup_data;           // 0x250
  std::uint64_t pref_address;         // 0x258
  std::uint32_t init_size;            // 0x260
  std::uint32_t handover_offset;      // 0x264
  std::uint32_t kernel_info_offset;   // 0x268
};

struct [[gnu::packed]] BootE820Entry {
  std::uint64_t addr;
  std::uint64_t size;
  std::uint32_t type;
};

inline constexpr std::size_t kZeroPageE820Max = 128;

struct [[gnu::packed]] BootParams {
  std::uint8_t pad_screen_to_ist[0x070];   // screen_info, apm_bios_info, tboot, ist_info
  std::uint64_t acpi_rsdp_addr;            // 0x070, protocol 2.14+
  std::uint8_t pad_to_e820_entries[0x1e8 - 0x078];
  std::uint8_t e820_entries;               // 0x1e8
  std::uint8_t eddbuf_entries;             // 0x1e9
  std::uint8_t edd_mbr_sig_buf_entries;    // 0x1ea
  std::uint8_t kbd_status;                 // 0x1eb
  std::uint8_t secure_boot;                // 0x1ec
  std::uint8_t pad5[2];                    // 0x1ed
  std::uint8_t sentinel;                   // 0x1ef, must stay 0 (boot.rst "sentinel")
  std::uint8_t pad6;                       // 0x1f0
  SetupHeader hdr;                         // 0x1f1
  std::uint8_t pad_to_e820_table[0x2d0 - 0x1f1 - sizeof(SetupHeader)];
  BootE820Entry e820_table[kZeroPageE820Max];  // 0x2d0
  std::uint8_t pad_to_end[0x1000 - 0x2d0 - kZeroPageE820Max * sizeof(BootE820Entry)];
};

// Offsets in the image file / zero page: the setup header occupies the same bytes in both.
inline constexpr std::size_t kSetupHeaderOffset = 0x1f1;
inline constexpr std::size_t kSetupHeaderJumpEnd = 0x202;  // header length byte is relative to this

static_assert(sizeof(BootE820Entry) == 20);
static_assert(sizeof(SetupHeader) == 0x26c - 0x1f1);
static_assert(sizeof(BootParams) == 0x1000);
static_assert(offsetof(BootParams, acpi_rsdp_addr) == 0x070);
static_assert(offsetof(BootParams, e820_entries) == 0x1e8);
static_assert(offsetof(BootParams, sentinel) == 0x1ef);
static_assert(offsetof(BootParams, hdr) == kSetupHeaderOffset);
static_assert(offsetof(BootParams, e820_table) == 0x2d0);
// Setup header fields, as boot.rst lists them (offset from the start of the zero page).
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, setup_sects) == 0x1f1);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, syssize) == 0x1f4);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, boot_flag) == 0x1fe);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, jump) == 0x200);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, header) == 0x202);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, version) == 0x206);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, type_of_loader) == 0x210);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, loadflags) == 0x211);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, code32_start) == 0x214);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, ramdisk_image) == 0x218);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, ramdisk_size) == 0x21c);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, heap_end_ptr) == 0x224);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, cmd_line_ptr) == 0x228);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, initrd_addr_max) == 0x22c);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, kernel_alignment) == 0x230);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, relocatable_kernel) == 0x234);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, xloadflags) == 0x236);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, cmdline_size) == 0x238);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, hardware_subarch) == 0x23c);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, pref_address) == 0x258);
static_assert(kSetupHeaderOffset + offsetof(SetupHeader, init_size) == 0x260);

}  // namespace minivmm::vmm
