// Hand-built 9P2000.L messages for the 9p tests, the fuzzer's seeds and the fd-transport
// server's checks: a request builder (fields appended in wire order, the size patched last)
// and a reader of answers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "devices/virtio/9p/p9_wire.h"

namespace minivmm::testing {

class Frame {
 public:
  Frame(std::uint8_t type, std::uint16_t tag) {
    u32(0);
    u8(type);
    u16(tag);
  }
  Frame& u8(std::uint8_t v) { return put(v, 1); }
  Frame& u16(std::uint16_t v) { return put(v, 2); }
  Frame& u32(std::uint32_t v) { return put(v, 4); }
  Frame& u64(std::uint64_t v) { return put(v, 8); }
  Frame& str(std::string_view s) {
    u16(static_cast<std::uint16_t>(s.size()));
    for (char c : s) bytes_.push_back(static_cast<std::byte>(c));
    return *this;
  }
  Frame& raw(std::span<const std::byte> b) {
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
  }
  // The bytes with the size field set to the length (or `size_override`, for hostile ones).
  std::vector<std::byte> bytes(std::int64_t size_override = -1) const {
    std::vector<std::byte> out = bytes_;
    const auto n = size_override >= 0 ? static_cast<std::uint32_t>(size_override)
                                      : static_cast<std::uint32_t>(out.size());
    for (std::size_t i = 0; i < 4; ++i) out[i] = static_cast<std::byte>(n >> (8 * i));
    return out;
  }

 private:
  Frame& put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<std::byte>(v >> (8 * i)));
    return *this;
  }
  std::vector<std::byte> bytes_;
};

// Requests Linux's v9fs sends, by name.
namespace t9 {
using namespace devices::p9;
inline Frame version(std::uint32_t msize = 65536, std::string_view v = "9P2000.L") {
  return std::move(Frame(kTversion, kNoTag).u32(msize).str(v));
}
inline Frame attach(std::uint32_t fid, std::uint16_t tag = 1) {
  return std::move(Frame(kTattach, tag).u32(fid).u32(kNoFid).str("root").str("").u32(0));
}
inline Frame walk(std::uint32_t fid, std::uint32_t newfid, const std::vector<std::string>& names,
                  std::uint16_t tag = 1) {
  Frame f(kTwalk, tag);
  f.u32(fid).u32(newfid).u16(static_cast<std::uint16_t>(names.size()));
  for (const auto& n : names) f.str(n);
  return f;
}
inline Frame lopen(std::uint32_t fid, std::uint32_t flags, std::uint16_t tag = 1) {
  return std::move(Frame(kTlopen, tag).u32(fid).u32(flags));
}
inline Frame lcreate(std::uint32_t fid, std::string_view name, std::uint32_t flags,
                     std::uint32_t mode = 0644, std::uint16_t tag = 1) {
  return std::move(Frame(kTlcreate, tag).u32(fid).str(name).u32(flags).u32(mode).u32(0));
}
inline Frame read(std::uint32_t fid, std::uint64_t offset, std::uint32_t count,
                  std::uint16_t tag = 1) {
  return std::move(Frame(kTread, tag).u32(fid).u64(offset).u32(count));
}
inline Frame write(std::uint32_t fid, std::uint64_t offset, std::string_view data,
                   std::uint16_t tag = 1) {
  Frame f(kTwrite, tag);
  f.u32(fid).u64(offset).u32(static_cast<std::uint32_t>(data.size()));
  f.raw(std::as_bytes(std::span(data.data(), data.size())));
  return f;
}
inline Frame getattr(std::uint32_t fid, std::uint16_t tag = 1) {
  return std::move(Frame(kTgetattr, tag).u32(fid).u64(0x7ff));
}
inline Frame clunk(std::uint32_t fid, std::uint16_t tag = 1) {
  return std::move(Frame(kTclunk, tag).u32(fid));
}
inline Frame readdir(std::uint32_t fid, std::uint64_t offset, std::uint32_t count,
                     std::uint16_t tag = 1) {
  return std::move(Frame(kTreaddir, tag).u32(fid).u64(offset).u32(count));
}
inline Frame mkdir(std::uint32_t dfid, std::string_view name, std::uint16_t tag = 1) {
  return std::move(Frame(kTmkdir, tag).u32(dfid).str(name).u32(0755).u32(0));
}
inline Frame unlinkat(std::uint32_t dfid, std::string_view name, std::uint32_t flags,
                      std::uint16_t tag = 1) {
  return std::move(Frame(kTunlinkat, tag).u32(dfid).str(name).u32(flags));
}
inline Frame renameat(std::uint32_t od, std::string_view on, std::uint32_t nd,
                      std::string_view nn, std::uint16_t tag = 1) {
  return std::move(Frame(kTrenameat, tag).u32(od).str(on).u32(nd).str(nn));
}
inline Frame symlink(std::uint32_t dfid, std::string_view name, std::string_view target,
                     std::uint16_t tag = 1) {
  return std::move(Frame(kTsymlink, tag).u32(dfid).str(name).str(target).u32(0));
}
inline Frame readlink(std::uint32_t fid, std::uint16_t tag = 1) {
  return std::move(Frame(kTreadlink, tag).u32(fid));
}
inline Frame setattr_size(std::uint32_t fid, std::uint64_t size, std::uint16_t tag = 1) {
  return std::move(Frame(kTsetattr, tag).u32(fid).u32(0x8).u32(0).u32(0).u32(0).u64(size)
                       .u64(0).u64(0).u64(0).u64(0));
}
inline Frame setattr_mode(std::uint32_t fid, std::uint32_t mode, std::uint16_t tag = 1) {
  return std::move(Frame(kTsetattr, tag).u32(fid).u32(0x1).u32(mode).u32(0).u32(0).u64(0)
                       .u64(0).u64(0).u64(0).u64(0));
}
}  // namespace t9

// An answer: its type, tag, and a reader over its body.
struct Answer {
  std::vector<std::byte> bytes;
  std::uint8_t type() const { return bytes.size() >= 5 ? static_cast<std::uint8_t>(bytes[4]) : 0; }
  std::uint16_t tag() const {
    return bytes.size() >= 7 ? static_cast<std::uint16_t>(static_cast<std::uint8_t>(bytes[5]) |
                                                          static_cast<std::uint8_t>(bytes[6]) << 8)
                             : 0;
  }
  std::uint32_t size_field() const {
    devices::p9::P9Reader r(bytes);
    return r.u32();
  }
  devices::p9::P9Reader body() const {
    return devices::p9::P9Reader(std::span(bytes).subspan(std::min<std::size_t>(7, bytes.size())));
  }
  // Rlerror's errno, 0 for any other answer.
  std::uint32_t error() const {
    if (type() != devices::p9::kRlerror) return 0;
    auto r = body();
    return r.u32();
  }
};

}  // namespace minivmm::testing
