// The shared body of the three kernel loader fuzz targets. Input: byte 0 is the command line
// length / 4, byte 1 the initrd size in 4 KiB units, the rest is the kernel image. What is
// checked: a loader either returns a placement inside guest RAM or throws BootError (or
// std::out_of_range from devices::GuestMemory, which the VMM maps to the same exit code); anything else —
// a crash, an ASan/UBSan report, another exception — is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "vmm/boot/boot_error.h"
#include "vmm/boot/loaded_kernel.h"
#include "vmm/kvm/guest_ram_mapping.h"

namespace minivmm::fuzz {

struct LoaderInput {
  std::string cmdline;
  std::vector<std::byte> initrd;
  std::span<const std::byte> image;
};

inline bool split_loader_input(const std::uint8_t* data, std::size_t size, LoaderInput& in) {
  if (size < 2) return false;
  in.cmdline.assign(static_cast<std::size_t>(data[0]) * 4, 'c');
  in.initrd.assign(static_cast<std::size_t>(data[1]) * 4096, std::byte{0x5a});
  in.image = std::span<const std::byte>(reinterpret_cast<const std::byte*>(data) + 2, size - 2);
  return true;
}

// One 64 MiB guest, reused: MAP_NORESERVE, so only the pages loaders touch cost memory.
inline const vmm::GuestRamMapping& fuzz_ram() {
  static const vmm::GuestRamMapping ram(64ull << 20);
  return ram;
}

[[noreturn]] inline void loader_finding(const char* what) {
  std::fprintf(stderr, "kernel loader fuzz: %s\n", what);
  std::abort();
}

template <typename Load>
void run_loader(const std::uint8_t* data, std::size_t size, Load load) {
  LoaderInput in;
  if (!split_loader_input(data, size, in)) return;
  const devices::GuestMemory mem = fuzz_ram().memory();
  try {
    const vmm::LoadedKernel k = load(mem, in);
    if (k.load_end < k.load_addr || !mem.contains(k.load_addr, k.load_end - k.load_addr)) {
      loader_finding("the kernel's placement is outside guest RAM");
    }
    if (k.entry_addr != k.boot_state.rip) loader_finding("entry_addr differs from rip");
    if (k.initrd_size != 0 && !mem.contains(k.initrd_addr, k.initrd_size)) {
      loader_finding("the initrd's placement is outside guest RAM");
    }
  } catch (const vmm::BootError&) {
  } catch (const std::out_of_range&) {
  }
}

}  // namespace minivmm::fuzz
