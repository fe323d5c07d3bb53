// Parsing and checking one virtio-blk request (virtio 1.2 section 5.2.6) from a descriptor chain
// the virtqueue walker already bounded against guest RAM. Pure: no I/O, no state, so every
// malformed-request rule is unit-tested and fuzzed on its own.
//
// Layout accepted (what Linux and the bundled guest send): the first descriptor is the 16-byte
// header (device-readable, at least 16 bytes), the last one is the status byte (device-writable,
// at least 1 byte, the status goes to its first byte), everything between is data. A request
// without a usable status descriptor cannot be answered: it is returned with 0 bytes written and
// counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "devices/guest_ram.h"
#include "devices/virtqueue.h"

namespace minivmm::devices {

inline constexpr std::uint64_t kSectorSize = 512;

// Request types (5.2.6) and status values.
inline constexpr std::uint32_t kBlkTIn = 0, kBlkTOut = 1, kBlkTFlush = 4, kBlkTGetId = 8,
                               kBlkTDiscard = 11, kBlkTWriteZeroes = 13;
inline constexpr std::uint8_t kBlkSOk = 0, kBlkSIoErr = 1, kBlkSUnsupp = 2;
inline constexpr std::size_t kBlkIdBytes = 20;
// More discard segments than this in one request is refused (we offer max_discard_seg = 1;
// the bound keeps a hostile request from making us read a whole data buffer of them).
inline constexpr std::size_t kMaxDiscardSegments = 64;

enum class BlkError : std::size_t {
  kNone,
  kHeaderShort,           // no header descriptor, or shorter than 16 bytes
  kHeaderWritable,        // the header is device-writable
  kNoStatus,              // fewer than two descriptors: nowhere to put the status
  kStatusReadOnly,        // the last descriptor is not device-writable, or empty
  kDataWrongDirection,    // IN/GET_ID data not writable, OUT/DISCARD data not readable
  kDataNotSectorMultiple, // IN/OUT data not a multiple of 512 bytes
  kOutOfRange,            // sectors past the end of the disk
  kReadOnly,              // OUT/DISCARD on a read-only disk
  kBadDiscard,            // discard data not whole segments, too many, or flags set
  kUnsupported,           // a request type we do not serve (answered UNSUPP)
  kCount,
};

std::string_view blk_error_name(BlkError e) noexcept;

struct DiscardSegment {
  std::uint64_t sector = 0;
  std::uint32_t sectors = 0;
};

struct BlkRequest {
  std::uint32_t type = 0;
  std::uint64_t sector = 0;
  std::vector<Descriptor> data;  // between header and status
  std::uint64_t data_bytes = 0;
  std::vector<DiscardSegment> discards;
  bool has_status = false;  // status_addr is a writable guest byte
  std::uint64_t status_addr = 0;
  BlkError error = BlkError::kNone;  // kNone: serve it; otherwise answer status_for(error)
};

// The status byte an error answers with.
inline std::uint8_t blk_status_for(BlkError e) noexcept {
  return e == BlkError::kNone ? kBlkSOk : e == BlkError::kUnsupported ? kBlkSUnsupp : kBlkSIoErr;
}

BlkRequest parse_blk_request(const DescriptorChain& chain, const GuestRam& ram,
                             std::uint64_t capacity_sectors, bool read_only);

}  // namespace minivmm::devices
