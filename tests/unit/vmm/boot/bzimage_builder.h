// Builds minimal synthetic bzImages: a setup area with a chosen setup header followed by a
// patterned protected-mode payload. Offsets are written from boot.rst's table directly, not
// through the loader's struct, so a wrong struct offset shows up as a test failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tests/unit/vmm/boot/test_ram.h"

namespace minivmm::vmm::testing {

struct BzImageSpec {
  std::uint8_t setup_sects = 4;
  std::uint16_t boot_flag = 0xaa55;
  std::uint32_t header_magic = 0x53726448;  // "HdrS"
  std::uint16_t version = 0x020f;
  std::uint8_t loadflags = 0x01;     // LOADED_HIGH
  std::uint16_t xloadflags = 0x0001;  // XLF_KERNEL_64
  std::uint8_t relocatable = 1;
  std::uint32_t kernel_alignment = 0x200000;
  std::uint64_t pref_address = 0x1000000;
  std::uint32_t init_size = 0x800000;
  std::uint32_t cmdline_size = 2047;
  std::uint32_t initrd_addr_max = 0x7fffffff;
  std::uint32_t code32_start = 0x100000;
  std::uint8_t header_len_byte = 0x66;  // header ends at 0x202 + 0x66 = 0x268 (protocol 2.12-2.14)
  std::size_t payload_size = 0x3000;  // multiple of 16
};

inline constexpr std::size_t kSetupSectorSize = 512;

inline std::size_t setup_size_of(const BzImageSpec& spec) {
  return (static_cast<std::size_t>(spec.setup_sects == 0 ? 4 : spec.setup_sects) + 1) *
         kSetupSectorSize;
}

inline std::vector<std::byte> make_payload(const BzImageSpec& spec) {
  return pattern_bytes(spec.payload_size, 0x31);
}

inline std::vector<std::byte> make_bzimage(const BzImageSpec& spec) {
  std::vector<std::byte> img(setup_size_of(spec), std::byte{0});
  put<std::uint8_t>(img, 0x1f1, spec.setup_sects);
  put<std::uint32_t>(img, 0x1f4, static_cast<std::uint32_t>(spec.payload_size / 16));
  put<std::uint16_t>(img, 0x1fa, 0xffff);  // vid_mode "normal": must survive the copy
  put<std::uint16_t>(img, 0x1fe, spec.boot_flag);
  put<std::uint8_t>(img, 0x200, 0xeb);     // short jmp
  put<std::uint8_t>(img, 0x201, spec.header_len_byte);
  put<std::uint32_t>(img, 0x202, spec.header_magic);
  put<std::uint16_t>(img, 0x206, spec.version);
  put<std::uint16_t>(img, 0x20e, 0x1234);  // kernel_version pointer: must survive the copy
  put<std::uint8_t>(img, 0x211, spec.loadflags);
  put<std::uint32_t>(img, 0x214, spec.code32_start);
  put<std::uint32_t>(img, 0x22c, spec.initrd_addr_max);
  put<std::uint32_t>(img, 0x230, spec.kernel_alignment);
  put<std::uint8_t>(img, 0x234, spec.relocatable);
  put<std::uint16_t>(img, 0x236, spec.xloadflags);
  put<std::uint32_t>(img, 0x238, spec.cmdline_size);
  put<std::uint64_t>(img, 0x258, spec.pref_address);
  put<std::uint32_t>(img, 0x260, spec.init_size);
  put<std::uint32_t>(img, 0x264, 0x190);   // handover_offset: must survive the copy
  put<std::uint32_t>(img, 0x268, 0xabababab);  // beyond a 0x268-long header: must not be copied
  const auto payload = make_payload(spec);
  img.insert(img.end(), payload.begin(), payload.end());
  return img;
}

}  // namespace minivmm::vmm::testing
