// CRC-32C (Castagnoli, the iSCSI/ext4 polynomial 0x1EDC6F41, reflected), the checksum of each
// snapshot section. Castagnoli rather than zlib's CRC-32: the same strength for records of this
// size, and the polynomial the x86 `crc32` instruction computes, should the sections ever grow
// large enough for the table version to matter (a section is kilobytes; guest memory is not
// checksummed, snapshot_file.h says why).
#pragma once

#include <cstdint>
#include <span>

namespace minivmm::vmm {

// The CRC of `data`, continuing from `crc` (0 to start).
std::uint32_t crc32c(std::span<const std::uint8_t> data, std::uint32_t crc = 0) noexcept;

}  // namespace minivmm::vmm
