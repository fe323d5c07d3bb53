#include "vmm/boot/bzimage_loader.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "vmm/boot/boot_error.h"
#include "vmm/boot/boot_layout.h"
#include "vmm/boot/boot_params.h"
#include "vmm/boot/boot_placement.h"
#include "vmm/boot/e820.h"
#include "vmm/boot/x86_descriptors.h"
#include "vmm/boot/x86_long_mode.h"

namespace minivmm::vmm {
namespace {

// 2.12 introduced xloadflags, the only way to know the kernel has a 64-bit entry point.
constexpr std::uint16_t kMinProtocol = 0x020c;
constexpr std::uint16_t kRsdpAddrProtocol = 0x020e;  // boot_params.acpi_rsdp_addr, 2.14
constexpr std::uint64_t kSectorSize = 512;
constexpr std::uint8_t kDefaultSetupSects = 4;  // boot.rst: "If this field is 0, the real value is 4"
constexpr std::uint64_t k64BitEntryOffset = 0x200;
// The setup heap ends where the real-mode segment's 64 KiB end, minus the 0x200 boot.rst
// subtracts. Only the 16-bit setup code reads it, and we skip that code, but boot.rst asks
// every loader to set CAN_USE_HEAP with a sane value for protocol 2.01+.
constexpr std::uint16_t kHeapEndPtr = 0xfe00;

std::string protocol_string(std::uint16_t version) {
  return std::to_string(version >> 8) + "." + std::to_string(version & 0xff);
}

SetupHeader read_setup_header(std::span<const std::byte> image) {
  constexpr std::size_t kHeaderEnd = kSetupHeaderOffset + sizeof(SetupHeader);
  if (image.size() < kHeaderEnd) {
    throw BootError("bzImage of " + std::to_string(image.size()) +
                    " bytes is too small to hold a setup header (need at least " +
                    to_hex(kHeaderEnd) + " bytes)");
  }
  SetupHeader hdr;
  std::memcpy(&hdr, image.data() + kSetupHeaderOffset, sizeof hdr);
  return hdr;
}

void validate_setup_header(const SetupHeader& hdr) {
  if (hdr.boot_flag != kBootFlagMagic) {
    throw BootError("bzImage boot_flag is " + to_hex(hdr.boot_flag) + ", expected " +
                    to_hex(kBootFlagMagic) + ": not a Linux kernel image");
  }
  if (hdr.header != kHdrSMagic) {
    throw BootError("bzImage setup header magic is " + to_hex(hdr.header) +
                    ", expected \"HdrS\" (" + to_hex(kHdrSMagic) + "): not a bzImage");
  }
  if (hdr.version < kMinProtocol) {
    throw BootError("bzImage boot protocol version " + to_hex(hdr.version) + " (" +
                    protocol_string(hdr.version) +
                    ") is too old: need 2.12 (0x20c) or later for the 64-bit entry point");
  }
  if ((hdr.loadflags & kLoadedHigh) == 0) {
    throw BootError("bzImage loadflags " + to_hex(hdr.loadflags) +
                    " lack LOADED_HIGH: low-loaded zImage kernels are not supported");
  }
  if ((hdr.xloadflags & kXlfKernel64) == 0) {
    throw BootError("bzImage xloadflags " + to_hex(hdr.xloadflags) +
                    " lack XLF_KERNEL_64: the kernel has no 64-bit entry point");
  }
  const std::uint32_t align = hdr.kernel_alignment;
  if (align == 0 || (align & (align - 1)) != 0) {
    throw BootError("bzImage kernel_alignment " + to_hex(align) + " is not a power of two");
  }
}

struct Placement {
  std::uint64_t load_addr;
  std::uint64_t kernel_end;  // end of the loaded payload or of the init_size area, whichever is higher
};

// Where the protected-mode kernel goes, per boot.rst ("relocatable_kernel", "pref_address",
// "init_size"): a relocatable kernel is loaded at pref_address when that is aligned and fits,
// else at 1 MiB; either way it decompresses to runtime_start, which must have init_size bytes.
Placement place_kernel(const devices::GuestMemory& mem, const SetupHeader& hdr,
                       std::uint64_t payload_size) {
  const std::uint64_t align = hdr.kernel_alignment;
  const std::uint64_t pref = hdr.pref_address;
  const std::uint64_t init_size = hdr.init_size;
  std::uint64_t load_addr = kHighMemStart;
  std::uint64_t runtime_base = load_addr;
  if (hdr.relocatable_kernel != 0) {
    if (pref >= kHighMemStart && pref % align == 0 &&
        mem.contains(pref, std::max(payload_size, init_size))) {
      load_addr = pref;
    }
    runtime_base = std::max(load_addr, pref);
    // align_up(runtime_base) cannot wrap once runtime_base is inside RAM.
    if (runtime_base <= mem.size()) runtime_base = align_up(runtime_base, align);
  } else {
    if (hdr.code32_start != kHighMemStart) {
      throw BootError("non-relocatable bzImage has code32_start " + to_hex(hdr.code32_start) +
                      "; only " + to_hex(kHighMemStart) + " is supported");
    }
    if (pref != 0) runtime_base = pref;  // a non-relocatable kernel moves itself there
  }
  if (!mem.contains(load_addr, payload_size)) {
    throw BootError("bzImage protected-mode kernel of " + to_hex(payload_size) + " bytes at " +
                        to_hex(load_addr) + " does not fit in guest RAM of " +
                        to_hex(mem.size()) + " bytes",
                    ram_cause(load_addr, payload_size));
  }
  if (!mem.contains(runtime_base, init_size)) {
    throw BootError("bzImage init_size " + to_hex(init_size) + " at runtime address " +
                        to_hex(runtime_base) + " does not fit in guest RAM of " +
                        to_hex(mem.size()) + " bytes",
                    ram_cause(runtime_base, init_size));
  }
  return {load_addr, std::max(load_addr + payload_size, runtime_base + init_size)};
}

// The zero page and command line are caller-placed; make sure neither lands on the fixed boot
// structures or on each other, since a silent overlap would corrupt the boot.
void check_low_placement(std::uint64_t zero_page, std::uint64_t cmdline, std::uint64_t cmdline_len) {
  struct Region {
    const char* name;
    std::uint64_t start;
    std::uint64_t end;
  };
  const std::array<Region, 3> fixed = {{
      {"the boot GDT/TSS", kGdtAddr, kTssAddr + kTssLimit + 1},
      {"the boot stack", kBootStackBase, kBootStackTop},
      {"the boot page tables", kPml4Addr, kPageTablesEnd},
  }};
  const std::array<Region, 2> placed = {{
      {"zero page", zero_page, zero_page + sizeof(BootParams)},
      {"command line", cmdline, cmdline + cmdline_len + 1},
  }};
  for (const Region& p : placed) {
    if (p.start < kPageSize || p.end > kEbdaStart || p.end < p.start) {
      throw BootError(std::string(p.name) + " at " + to_hex(p.start) + " must lie within [" +
                      to_hex(kPageSize) + ", " + to_hex(kEbdaStart) + ")");
    }
    for (const Region& f : fixed) {
      if (p.start < f.end && f.start < p.end) {
        throw BootError(std::string(p.name) + " at " + to_hex(p.start) + " overlaps " + f.name +
                        " at " + to_hex(f.start));
      }
    }
  }
  if (placed[0].start < placed[1].end && placed[1].start < placed[0].end) {
    throw BootError("zero page at " + to_hex(zero_page) + " overlaps the command line at " +
                    to_hex(cmdline));
  }
}

void fill_e820(BootParams& params, std::uint64_t ram_size) {
  const auto map = build_e820_map(ram_size);
  static_assert(kZeroPageE820Max >= 3);
  for (std::size_t i = 0; i < map.size(); ++i) {
    params.e820_table[i] = BootE820Entry{map[i].addr, map[i].size,
                                         static_cast<std::uint32_t>(map[i].type)};
  }
  params.e820_entries = static_cast<std::uint8_t>(map.size());
}

}  // namespace

LoadedKernel load_bzimage(const devices::GuestMemory& mem, std::span<const std::byte> image,
                          const BzImageOptions& opts) {
  const SetupHeader hdr = read_setup_header(image);
  validate_setup_header(hdr);

  const std::uint64_t setup_sects = hdr.setup_sects == 0 ? kDefaultSetupSects : hdr.setup_sects;
  const std::uint64_t setup_size = (setup_sects + 1) * kSectorSize;
  if (setup_size >= image.size()) {
    throw BootError("bzImage setup_sects " + std::to_string(hdr.setup_sects) + " (" +
                    to_hex(setup_size) + " bytes of setup code) leaves no protected-mode " +
                    "kernel in the " + to_hex(image.size()) + "-byte image");
  }
  const std::uint64_t payload_size = std::uint64_t{hdr.syssize} * 16;
  if (payload_size == 0 || payload_size > image.size() - setup_size) {
    throw BootError("bzImage syssize " + to_hex(hdr.syssize) + " (" + to_hex(payload_size) +
                    " bytes) does not match the " + to_hex(image.size() - setup_size) +
                    " bytes after the setup code: image truncated or corrupt");
  }
  if (opts.cmdline.size() > hdr.cmdline_size) {
    throw BootError("kernel command line of " + std::to_string(opts.cmdline.size()) +
                        " bytes exceeds the kernel's cmdline_size of " +
                        std::to_string(hdr.cmdline_size) + " bytes",
                    BootError::Cause::kCmdlineTooLong);
  }
  check_low_placement(opts.zero_page_addr, opts.cmdline_addr, opts.cmdline.size());

  BootParams params{};
  fill_e820(params, mem.size());  // first: rejects unsupported RAM sizes before any write
  const Placement placement = place_kernel(mem, hdr, payload_size);

  // Copy the setup header as the image defines it: from 0x1f1 to 0x202 + the byte at 0x201
  // (boot.rst "Loading The Rest of The Kernel"), capped at the fields this loader knows.
  const std::size_t header_end =
      std::min<std::size_t>(kSetupHeaderJumpEnd + std::to_integer<std::size_t>(image[0x201]),
                            kSetupHeaderOffset + sizeof(SetupHeader));
  std::memcpy(&params.hdr, image.data() + kSetupHeaderOffset, header_end - kSetupHeaderOffset);

  mem.store(placement.load_addr, image.subspan(setup_size, payload_size));
  write_cmdline(mem, opts.cmdline_addr, opts.cmdline);
  const std::uint64_t initrd_limit =
      std::min(std::uint64_t{hdr.initrd_addr_max} + 1, k4GiB);  // initrd_addr_max is inclusive
  const std::uint64_t initrd_addr =
      place_initrd_high(mem, opts.initrd, align_up(placement.kernel_end, kPageSize), initrd_limit);

  params.hdr.type_of_loader = kTypeOfLoaderUndefined;
  params.hdr.loadflags = static_cast<std::uint8_t>(hdr.loadflags | kCanUseHeap);
  params.hdr.heap_end_ptr = kHeapEndPtr;
  params.hdr.code32_start = static_cast<std::uint32_t>(placement.load_addr);
  params.hdr.cmd_line_ptr = static_cast<std::uint32_t>(opts.cmdline_addr);
  params.hdr.ramdisk_image = static_cast<std::uint32_t>(initrd_addr);
  params.hdr.ramdisk_size = static_cast<std::uint32_t>(opts.initrd.size());
  params.hdr.hardware_subarch = 0;  // X86_SUBARCH_PC
  if (opts.acpi_rsdp_addr && hdr.version >= kRsdpAddrProtocol) {
    params.acpi_rsdp_addr = *opts.acpi_rsdp_addr;
  }
  mem.store_obj(opts.zero_page_addr, params);

  LoadedKernel loaded;
  loaded.boot_state = setup_long_mode(mem);
  loaded.boot_state.rip = placement.load_addr + k64BitEntryOffset;
  loaded.boot_state.rsi = opts.zero_page_addr;
  loaded.load_addr = placement.load_addr;
  loaded.load_end = placement.kernel_end;
  loaded.entry_addr = loaded.boot_state.rip;
  loaded.boot_info_addr = opts.zero_page_addr;
  loaded.cmdline_addr = opts.cmdline_addr;
  loaded.initrd_addr = initrd_addr;
  loaded.initrd_size = opts.initrd.size();
  loaded.protocol_version = hdr.version;
  return loaded;
}

}  // namespace minivmm::vmm
