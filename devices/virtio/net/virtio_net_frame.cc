#include "devices/virtio/net/virtio_net_frame.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "devices/host/net_backend.h"

namespace minivmm::devices {

std::string_view tx_frame_error_name(TxFrameError e) noexcept {
  switch (e) {
    case TxFrameError::kNone: return "none";
    case TxFrameError::kWritableDescriptor: return "writable_descriptor";
    case TxFrameError::kShortHeader: return "short_header";
    case TxFrameError::kRunt: return "runt";
    case TxFrameError::kOversized: return "oversized";
    case TxFrameError::kOffloadRequested: return "offload_requested";
  }
  return "unknown";
}

namespace {

// Copies `out.size()` readable bytes starting `skip` bytes into the chain's readable buffers.
// The walker checked that every buffer lies in RAM, so the reads cannot fail.
void gather(const DescriptorChain& chain, const GuestMemory& ram, std::uint64_t skip,
            std::span<std::byte> out) noexcept {
  std::size_t done = 0;
  for (const Descriptor& d : chain.descriptors) {
    if (done == out.size()) break;
    if (d.device_writable) continue;
    if (skip >= d.len) {
      skip -= d.len;
      continue;
    }
    const std::size_t n = static_cast<std::size_t>(
        std::min<std::uint64_t>(d.len - skip, out.size() - done));
    ram.read(d.addr + skip, out.subspan(done, n));
    done += n;
    skip = 0;
  }
}

}  // namespace

TxFrame read_tx_frame(const DescriptorChain& chain, const GuestMemory& ram,
                      std::span<std::uint8_t> out) noexcept {
  TxFrame f;
  if (chain.writable_bytes != 0) {
    f.error = TxFrameError::kWritableDescriptor;
    return f;
  }
  if (chain.readable_bytes < kVirtioNetHeaderBytes) {
    f.error = TxFrameError::kShortHeader;
    return f;
  }
  gather(chain, ram, 0, std::as_writable_bytes(std::span(&f.header, 1)));
  const std::uint64_t frame = chain.readable_bytes - kVirtioNetHeaderBytes;
  if (frame < kMinFrameBytes) {
    f.error = TxFrameError::kRunt;
    return f;
  }
  if (frame > kMaxFrameBytes || frame > out.size()) {
    f.error = TxFrameError::kOversized;
    return f;
  }
  // No CSUM and no HOST_TSO*/UFO were offered, so the driver MUST send complete frames with a
  // zero flags field and GSO_NONE (5.1.6.2.1). Sending one that asks for a checksum we would not
  // compute puts a corrupt frame on the wire; refuse it instead.
  if ((f.header.flags & kVirtioNetHdrFNeedsCsum) != 0 ||
      f.header.gso_type != kVirtioNetHdrGsoNone) {
    f.error = TxFrameError::kOffloadRequested;
    return f;
  }
  f.frame_bytes = static_cast<std::size_t>(frame);
  gather(chain, ram, kVirtioNetHeaderBytes, std::as_writable_bytes(out.first(f.frame_bytes)));
  return f;
}

RxChainError check_rx_chain(const DescriptorChain& chain) noexcept {
  if (chain.readable_bytes != 0) return RxChainError::kReadableDescriptor;
  if (chain.writable_bytes < kVirtioNetHeaderBytes) return RxChainError::kNoRoomForHeader;
  return RxChainError::kNone;
}

std::uint32_t write_rx_frame(const DescriptorChain& chain, const GuestMemory& ram,
                             std::span<const std::uint8_t> frame) noexcept {
  VirtioNetHeader h;
  h.num_buffers = 1;
  std::array<std::uint8_t, kVirtioNetHeaderBytes> head{};
  std::memcpy(head.data(), &h, sizeof h);
  // Header then frame, poured into the writable buffers in order.
  const std::span<const std::uint8_t> parts[2] = {head, frame};
  std::size_t part = 0;
  std::size_t offset = 0;
  std::uint32_t written = 0;
  for (const Descriptor& d : chain.descriptors) {
    if (!d.device_writable) continue;
    std::uint64_t room = d.len;
    std::uint64_t at = d.addr;
    while (room > 0 && part < 2) {
      const auto src = parts[part].subspan(offset);
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(room, src.size()));
      ram.write(at, std::as_bytes(src.first(n)));
      at += n;
      room -= n;
      offset += n;
      written += static_cast<std::uint32_t>(n);
      if (offset == parts[part].size()) {
        ++part;
        offset = 0;
      }
    }
    if (part == 2) break;
  }
  return written;
}

}  // namespace minivmm::devices
