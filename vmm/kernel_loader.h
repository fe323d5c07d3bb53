// Picks the loader for a kernel file by its contents: an ELF with a PVH note (vmlinux), else a
// Linux bzImage. Throws VmmError(kBadKernel) with the loader's one-line reason.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "vmm/boot/loaded_kernel.h"
#include "vmm/guest_memory.h"

namespace minivmm::vmm {

// Reads a whole file; throws VmmError(code) naming the path and the OS error.
std::vector<std::byte> read_file(const std::string& path, int what_for_code);

LoadedKernel load_kernel(const GuestMemory& mem, std::span<const std::byte> image,
                         const std::string& cmdline, std::span<const std::byte> initrd);

}  // namespace minivmm::vmm
