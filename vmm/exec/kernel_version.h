// The release of a Linux kernel image ("6.1.0-57-amd64"), which names its modules folder
// (/lib/modules/RELEASE). A bzImage says it in its setup header: kernel_version (offset 0x20E)
// points, less 0x200, at a NUL-terminated string that starts with the release (boot protocol
// 2.00+, Documentation/arch/x86/boot.rst). A vmlinux (PVH ELF) holds the banner
// "Linux version RELEASE (...)" in its read-only data; the first one is taken.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace minivmm::vmm::exec {

// The release, or nullopt (and `why`) when the image says none a folder could be named by:
// empty, over 64 bytes, or with a '/' or a byte that is not printable ASCII.
std::optional<std::string> kernel_release(std::span<const std::uint8_t> image, std::string& why);

}  // namespace minivmm::vmm::exec
