#include "devices/virtio/blk/virtio_blk_request.h"

#include <algorithm>
#include <cstring>
#include <span>

namespace minivmm::devices {
namespace {

// struct virtio_blk_req's header (5.2.6).
struct RawHeader {
  std::uint32_t type;
  std::uint32_t reserved;
  std::uint64_t sector;
};
static_assert(sizeof(RawHeader) == 16);

// struct virtio_blk_discard_write_zeroes.
struct RawDiscard {
  std::uint64_t sector;
  std::uint32_t num_sectors;
  std::uint32_t flags;
};
static_assert(sizeof(RawDiscard) == 16);

// [sector, sector+count) within the disk, overflow-safe.
bool in_range(std::uint64_t sector, std::uint64_t count, std::uint64_t capacity) noexcept {
  return sector <= capacity && count <= capacity - sector;
}

bool all_data(const BlkRequest& r, bool writable) noexcept {
  for (const Descriptor& d : r.data) {
    if (d.device_writable != writable) return false;
  }
  return true;
}

}  // namespace

std::string_view blk_error_name(BlkError e) noexcept {
  switch (e) {
    case BlkError::kNone: return "none";
    case BlkError::kHeaderShort: return "header_short";
    case BlkError::kHeaderWritable: return "header_writable";
    case BlkError::kNoStatus: return "no_status";
    case BlkError::kStatusReadOnly: return "status_read_only";
    case BlkError::kDataWrongDirection: return "data_wrong_direction";
    case BlkError::kDataNotSectorMultiple: return "data_not_sector_multiple";
    case BlkError::kOutOfRange: return "out_of_range";
    case BlkError::kReadOnly: return "read_only";
    case BlkError::kBadDiscard: return "bad_discard";
    case BlkError::kUnsupported: return "unsupported";
    case BlkError::kCount: break;
  }
  return "unknown";
}

BlkRequest parse_blk_request(const DescriptorChain& chain, const GuestMemory& ram,
                             std::uint64_t capacity_sectors, bool read_only) {
  BlkRequest r;
  const auto& d = chain.descriptors;
  // The status is the chain's last byte: zero-length descriptors at the end do not hold it.
  std::size_t last = d.size();
  while (last > 0 && d[last - 1].len == 0) --last;
  if (last == 0) {
    r.error = BlkError::kNoStatus;
    return r;
  }
  const Descriptor& status = d[last - 1];
  if (!status.device_writable) {
    r.error = BlkError::kStatusReadOnly;
    return r;
  }
  r.has_status = true;
  r.status_addr = status.addr + status.len - 1;  // len > 0; in RAM: the walker checked it

  if (d.front().device_writable && d.front().len > 0) {
    r.error = BlkError::kHeaderWritable;
    return r;
  }
  // The header: the first 16 readable bytes, across descriptors if the driver split it. The
  // walker hands out readable descriptors before writable ones (2.7.4.2), so they come first.
  RawHeader h{};
  auto* hb = reinterpret_cast<std::byte*>(&h);
  std::size_t got = 0;
  std::size_t i = 0;
  std::uint64_t skip = 0;  // header bytes taken from d[i]
  while (got < sizeof h && i < d.size() && !d[i].device_writable) {
    // The status byte (the last one of the chain) is never header.
    const std::uint64_t avail = i + 1 == last ? 0 : d[i].len;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(avail, sizeof h - got));
    if (n > 0 && !ram.read(d[i].addr, std::span(hb + got, n))) break;
    got += n;
    if (got == sizeof h) {
      skip = n;
      break;
    }
    ++i;
  }
  if (got < sizeof h) {
    r.error = BlkError::kHeaderShort;
    return r;
  }
  r.type = h.type;
  r.sector = h.sector;
  // The data: from the end of the header to just before the status byte, as (parts of)
  // descriptors; empty pieces are dropped.
  for (std::size_t k = i; k < last; ++k) {
    std::uint64_t addr = d[k].addr;
    std::uint64_t len = d[k].len;
    if (k == i) {
      addr += skip;
      len -= skip;
    }
    if (k + 1 == last) --len;  // the status byte; d[last-1].len > 0
    if (len == 0) continue;
    r.data.push_back(Descriptor{addr, static_cast<std::uint32_t>(len), d[k].device_writable});
    r.data_bytes += len;
  }

  switch (h.type) {
    case kBlkTIn:
    case kBlkTOut: {
      const bool in = h.type == kBlkTIn;
      if (!all_data(r, in)) {
        r.error = BlkError::kDataWrongDirection;
      } else if (r.data_bytes % kSectorSize != 0) {
        r.error = BlkError::kDataNotSectorMultiple;
      } else if (!in_range(h.sector, r.data_bytes / kSectorSize, capacity_sectors)) {
        r.error = BlkError::kOutOfRange;
      } else if (!in && read_only) {
        r.error = BlkError::kReadOnly;
      }
      break;
    }
    case kBlkTFlush:
      break;
    case kBlkTGetId:
      if (!all_data(r, true)) r.error = BlkError::kDataWrongDirection;
      break;
    case kBlkTDiscard: {
      if (!all_data(r, false)) {
        r.error = BlkError::kDataWrongDirection;
        break;
      }
      if (r.data_bytes == 0 || r.data_bytes % sizeof(RawDiscard) != 0 ||
          r.data_bytes / sizeof(RawDiscard) > kMaxDiscardSegments) {
        r.error = BlkError::kBadDiscard;
        break;
      }
      // Segments may straddle descriptors: read them as one byte stream.
      std::vector<std::byte> bytes(static_cast<std::size_t>(r.data_bytes));
      std::size_t at = 0;
      for (const Descriptor& x : r.data) {
        ram.read(x.addr, std::span(bytes).subspan(at, x.len));
        at += x.len;
      }
      for (std::size_t off = 0; off < bytes.size(); off += sizeof(RawDiscard)) {
        RawDiscard seg{};
        std::memcpy(&seg, bytes.data() + off, sizeof seg);
        if (seg.flags != 0) {
          // 5.2.6.2: unknown flags, and the unmap flag on a discard, are "unsupported".
          r.error = BlkError::kUnsupported;
          break;
        }
        if (!in_range(seg.sector, seg.num_sectors, capacity_sectors)) {
          r.error = BlkError::kOutOfRange;
          break;
        }
        r.discards.push_back(DiscardSegment{seg.sector, seg.num_sectors});
      }
      // A read-only drive does not offer DISCARD at all, so the request type is unsupported.
      if (r.error == BlkError::kNone && read_only) r.error = BlkError::kUnsupported;
      break;
    }
    default:
      r.error = BlkError::kUnsupported;
      break;
  }
  return r;
}

std::vector<iovec> blk_data_iovecs(const GuestMemory& ram, const BlkRequest& r) {
  std::vector<iovec> iov;
  iov.reserve(r.data.size());
  for (const Descriptor& d : r.data) {
    std::span<std::byte> s = ram.slice(d.addr, d.len);
    iov.push_back(iovec{s.data(), s.size()});
  }
  return iov;
}

}  // namespace minivmm::devices
