// The virtio-net header and the two things done with a chain (virtio 1.2 section 5.1.6): read a
// transmitted frame out of a transmitq chain, and write a received frame into a receiveq chain.
// Pure functions over a DescriptorChain and guest RAM, so the fuzzer can call them on every chain
// the walker hands out.
//
// With VIRTIO_F_VERSION_1 the header is always 12 bytes (struct virtio_net_hdr_v1, the same
// layout as the legacy virtio_net_hdr_mrg_rxbuf), and header and frame may be split across
// descriptors anywhere (ANY_LAYOUT is implied by VERSION_1): they are gathered, not assumed to sit
// in one buffer each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "devices/bus/guest_memory.h"
#include "devices/virtio/virtqueue.h"

namespace minivmm::devices {

// struct virtio_net_hdr_v1 (5.1.6), little-endian like every virtio 1.x field.
struct VirtioNetHeader {
  std::uint8_t flags = 0;
  std::uint8_t gso_type = 0;
  std::uint16_t hdr_len = 0;
  std::uint16_t gso_size = 0;
  std::uint16_t csum_start = 0;
  std::uint16_t csum_offset = 0;
  std::uint16_t num_buffers = 0;
};
static_assert(sizeof(VirtioNetHeader) == 12);

inline constexpr std::size_t kVirtioNetHeaderBytes = sizeof(VirtioNetHeader);
inline constexpr std::uint8_t kVirtioNetHdrFNeedsCsum = 1;
inline constexpr std::uint8_t kVirtioNetHdrGsoNone = 0;

enum class TxFrameError {
  kNone,
  kWritableDescriptor,  // a transmit chain is read-only (2.7.4); a writable buffer is a bug
  kShortHeader,         // fewer than 12 readable bytes
  kRunt,                // the frame after the header is shorter than an Ethernet header
  kOversized,           // longer than kMaxFrameBytes
  kOffloadRequested,    // NEEDS_CSUM or a GSO type: offloads that were never offered
};

std::string_view tx_frame_error_name(TxFrameError e) noexcept;

struct TxFrame {
  TxFrameError error = TxFrameError::kNone;
  std::size_t frame_bytes = 0;  // copied into the caller's buffer when error is kNone
  VirtioNetHeader header;       // as the driver wrote it (valid unless kShortHeader or earlier)
};

// Reads the frame of a transmitq chain into `out` (at least kMaxFrameBytes), the 12-byte header
// skipped. Checks the sizes before copying anything, so a chain that describes gigabytes (an
// indirect table over the same RAM, repeated) costs nothing.
TxFrame read_tx_frame(const DescriptorChain& chain, const GuestMemory& ram,
                      std::span<std::uint8_t> out) noexcept;

enum class RxChainError {
  kNone,
  kReadableDescriptor,  // a receive chain is write-only; a readable buffer is a bug
  kNoRoomForHeader,     // fewer than 12 writable bytes: not even the header fits
};

RxChainError check_rx_chain(const DescriptorChain& chain) noexcept;

// Writes the header (flags 0, no GSO, num_buffers 1: one chain per packet without
// VIRTIO_NET_F_MRG_RXBUF, 5.1.6.3.1) and `frame` into the writable buffers of `chain`. The chain
// must have passed check_rx_chain() and hold 12 + frame.size() bytes. Returns the bytes written,
// the used length the driver reads.
std::uint32_t write_rx_frame(const DescriptorChain& chain, const GuestMemory& ram,
                             std::span<const std::uint8_t> frame) noexcept;

}  // namespace minivmm::devices
