// Parsing and checking one virtio-blk request (virtio 1.2 section 5.2.6) from a descriptor chain
// the virtqueue walker already bounded against guest RAM. Pure: no I/O, no state, so every
// malformed-request rule is unit-tested and fuzzed on its own.
//
// Framing is the driver's choice (virtio 1.x implies ANY_LAYOUT, 2.6.4): the header is the first
// 16 device-readable bytes of the chain, whichever descriptors hold them, the status is the
// chain's last byte (device-writable), and the data is everything between, so a driver may put
// header and data, or data and status, in one buffer. Linux and the bundled guest use a
// descriptor for each. A request whose last byte is not writable cannot be answered: it is
// returned with 0 bytes written and counted.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "devices/bus/guest_memory.h"
#include "devices/virtio/virtqueue.h"

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
  kHeaderShort,           // fewer than 16 readable bytes before the status
  kHeaderWritable,        // the chain starts device-writable: no header
  kNoStatus,              // an empty chain: nowhere to put the status
  kStatusReadOnly,        // the chain's last byte is not device-writable
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
  std::vector<Descriptor> data;  // between header and status (parts of descriptors, maybe)
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

BlkRequest parse_blk_request(const DescriptorChain& chain, const GuestMemory& ram,
                             std::uint64_t capacity_sectors, bool read_only);

// A parsed request's data buffers as host iovecs, for the engines' preadv/pwritev and io_uring.
// `r` must have been parsed against `ram`: the walker checked that every buffer is in RAM, and
// RAM does not shrink.
std::vector<iovec> blk_data_iovecs(const GuestMemory& ram, const BlkRequest& r);

}  // namespace minivmm::devices
