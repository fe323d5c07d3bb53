// The 9P2000.L wire format (as Linux's net/9p and v9fs speak it): little-endian integers,
// strings as a 16-bit length and bytes, qids of 13 bytes, every message `size[4] type[1]
// tag[2] ...`. P9Reader and P9Writer are bounds-checked cursors over byte spans: a read past
// the end, or a string longer than what is left, sets a sticky failure instead of reading
// outside the span, so a message from the guest is parsed field by field and checked once at
// the end (ok()). Pure: no I/O, no allocation beyond the strings asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace minivmm::devices::p9 {

// Message types (T requests; the R answer is T+1). Only 9P2000.L and the base messages it
// keeps.
enum : std::uint8_t {
  kTlerror = 6, kRlerror = 7,
  kTstatfs = 8, kTlopen = 12, kTlcreate = 14, kTsymlink = 16, kTmknod = 18, kTrename = 20,
  kTreadlink = 22, kTgetattr = 24, kTsetattr = 26, kTxattrwalk = 30, kTxattrcreate = 32,
  kTreaddir = 40, kTfsync = 50, kTlock = 52, kTgetlock = 54, kTlink = 70, kTmkdir = 72,
  kTrenameat = 74, kTunlinkat = 76,
  kTversion = 100, kTauth = 102, kTattach = 104, kTflush = 108, kTwalk = 110, kTread = 116,
  kTwrite = 118, kTclunk = 120, kTremove = 122,
};

inline constexpr std::size_t kHeaderSize = 7;       // size[4] type[1] tag[2]
inline constexpr std::size_t kIoHeaderSize = 11;    // Rread/Rreaddir: header + count[4]
inline constexpr std::uint16_t kNoTag = 0xffff;
inline constexpr std::uint32_t kNoFid = 0xffffffff;
inline constexpr std::size_t kMaxWalkNames = 16;    // Twalk's nwname limit (MAXWELEM)

// Qid types.
inline constexpr std::uint8_t kQtDir = 0x80, kQtSymlink = 0x02, kQtFile = 0x00;

struct Qid {
  std::uint8_t type = 0;
  std::uint32_t version = 0;
  std::uint64_t path = 0;
};

class P9Reader {
 public:
  explicit P9Reader(std::span<const std::byte> data) noexcept : data_(data) {}

  std::uint8_t u8() noexcept { return static_cast<std::uint8_t>(get(1)); }
  std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(get(2)); }
  std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(get(4)); }
  std::uint64_t u64() noexcept { return get(8); }
  // A string: u16 length then bytes. Fails (empty) when the length runs past the end.
  std::string str() {
    const std::size_t n = u16();
    if (!ok_ || n > remaining()) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(data_.data() + at_), n);
    at_ += n;
    return s;
  }
  // `n` raw bytes (a Twrite's data), or an empty span and a failure.
  std::span<const std::byte> bytes(std::size_t n) noexcept {
    if (!ok_ || n > remaining()) {
      ok_ = false;
      return {};
    }
    auto s = data_.subspan(at_, n);
    at_ += n;
    return s;
  }

  bool ok() const noexcept { return ok_; }
  std::size_t remaining() const noexcept { return data_.size() - at_; }

 private:
  std::uint64_t get(std::size_t n) noexcept {
    if (!ok_ || n > remaining()) {
      ok_ = false;
      return 0;
    }
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      v |= std::uint64_t{static_cast<std::uint8_t>(data_[at_ + i])} << (8 * i);
    }
    at_ += n;
    return v;
  }

  std::span<const std::byte> data_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

// Writes into a caller's buffer of fixed capacity (the reply's room: msize and the driver's
// writable buffers); a write that does not fit sets a sticky failure and writes nothing.
class P9Writer {
 public:
  explicit P9Writer(std::span<std::byte> out) noexcept : out_(out) {}

  void u8(std::uint8_t v) noexcept { put(v, 1); }
  void u16(std::uint16_t v) noexcept { put(v, 2); }
  void u32(std::uint32_t v) noexcept { put(v, 4); }
  void u64(std::uint64_t v) noexcept { put(v, 8); }
  void str(std::string_view s) noexcept {
    if (s.size() > 0xffff) {
      ok_ = false;
      return;
    }
    if (!fits(2 + s.size())) return;
    u16(static_cast<std::uint16_t>(s.size()));
    std::memcpy(out_.data() + at_, s.data(), s.size());
    at_ += s.size();
  }
  void qid(const Qid& q) noexcept {
    if (!fits(13)) return;
    u8(q.type);
    u32(q.version);
    u64(q.path);
  }
  void bytes(std::span<const std::byte> b) noexcept {
    if (!fits(b.size())) return;
    if (!b.empty()) std::memcpy(out_.data() + at_, b.data(), b.size());
    at_ += b.size();
  }
  // Room for `n` bytes the caller fills itself (a read straight into the reply), or empty.
  std::span<std::byte> reserve(std::size_t n) noexcept {
    if (!fits(n)) return {};
    auto s = out_.subspan(at_, n);
    at_ += n;
    return s;
  }
  // Gives back the end of a reserve() the caller did not fill.
  void shrink(std::size_t n) noexcept { at_ -= n <= at_ ? n : at_; }
  // Overwrites a u32 already written at `offset` (a message's size, a count).
  void patch_u32(std::size_t offset, std::uint32_t v) noexcept {
    if (offset + 4 > at_) return;
    for (std::size_t i = 0; i < 4; ++i) out_[offset + i] = static_cast<std::byte>(v >> (8 * i));
  }

  bool ok() const noexcept { return ok_; }
  std::size_t size() const noexcept { return at_; }
  std::size_t room() const noexcept { return out_.size() - at_; }

 private:
  bool fits(std::size_t n) noexcept {
    if (!ok_ || n > room()) ok_ = false;
    return ok_;
  }
  void put(std::uint64_t v, std::size_t n) noexcept {
    if (!fits(n)) return;
    for (std::size_t i = 0; i < n; ++i) out_[at_ + i] = static_cast<std::byte>(v >> (8 * i));
    at_ += n;
  }

  std::span<std::byte> out_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

// A message's name for the report and the log ("walk", "read"; "unknown" otherwise).
std::string_view message_name(std::uint8_t type) noexcept;

}  // namespace minivmm::devices::p9
