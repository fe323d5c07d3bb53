#include "vmm/gdb/gdb_packet.h"

namespace minivmm::vmm::gdb {

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void PacketReader::feed(std::span<const std::uint8_t> bytes, std::vector<PacketEvent>& out) {
  for (const std::uint8_t b : bytes) {
    const char c = static_cast<char>(b);
    switch (state_) {
      case State::kIdle:
        if (c == '$') {
          state_ = State::kBody;
          body_.clear();
          overflow_ = false;
          sum_ = 0;
        } else if (b == 0x03) {
          ++stats_.interrupts;
          out.push_back({PacketEvent::Kind::kInterrupt, {}});
        } else if (c == '+') {
          out.push_back({PacketEvent::Kind::kAck, {}});
        } else if (c == '-') {
          ++stats_.nacks;
          out.push_back({PacketEvent::Kind::kNack, {}});
        } else {
          ++stats_.junk_bytes;
        }
        break;
      case State::kBody:
        if (c == '#') {
          state_ = State::kCsum1;
        } else if (c == '$') {
          // A new packet before the old one's end: the client gave up on it (gdb does so after
          // a timeout). Start over.
          body_.clear();
          overflow_ = false;
          sum_ = 0;
          ++stats_.junk_bytes;
        } else {
          sum_ = static_cast<std::uint8_t>(sum_ + b);
          if (body_.size() < max_payload_) {
            body_.push_back(c);
          } else {
            overflow_ = true;
          }
        }
        break;
      case State::kCsum1:
        csum_hi_ = hex_digit(c);
        state_ = State::kCsum2;
        break;
      case State::kCsum2: {
        state_ = State::kIdle;
        const int lo = hex_digit(c);
        const bool good = csum_hi_ >= 0 && lo >= 0 && ((csum_hi_ << 4) | lo) == sum_;
        if (overflow_) {
          ++stats_.oversized;
          out.push_back({PacketEvent::Kind::kBadPacket, {}});
        } else if (!good) {
          ++stats_.bad_checksums;
          out.push_back({PacketEvent::Kind::kBadPacket, {}});
        } else {
          ++stats_.packets;
          out.push_back({PacketEvent::Kind::kPacket, std::move(body_)});
        }
        body_.clear();
        break;
      }
    }
  }
}

std::string escape_binary(std::string_view data) {
  std::string s;
  s.reserve(data.size());
  for (const char c : data) {
    if (c == '$' || c == '#' || c == '}' || c == '*') {
      s.push_back('}');
      s.push_back(static_cast<char>(c ^ 0x20));
    } else {
      s.push_back(c);
    }
  }
  return s;
}

std::optional<std::string> unescape_binary(std::string_view data) {
  std::string s;
  s.reserve(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '}') {
      if (++i == data.size()) return std::nullopt;
      s.push_back(static_cast<char>(data[i] ^ 0x20));
    } else {
      s.push_back(data[i]);
    }
  }
  return s;
}

std::string frame_packet(std::string_view payload) {
  const std::string body = escape_binary(payload);
  std::uint8_t sum = 0;
  for (const char c : body) sum = static_cast<std::uint8_t>(sum + static_cast<std::uint8_t>(c));
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(body.size() + 4);
  s.push_back('$');
  s += body;
  s.push_back('#');
  s.push_back(kHex[sum >> 4]);
  s.push_back(kHex[sum & 15]);
  return s;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (const std::uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

std::string to_hex(std::string_view text) {
  return to_hex(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

std::optional<std::vector<std::uint8_t>> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::vector<std::uint8_t> v;
  v.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_digit(hex[i]);
    const int lo = hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    v.push_back(static_cast<std::uint8_t>((hi << 4) | lo));
  }
  return v;
}

std::optional<std::uint64_t> parse_hex_u64(std::string_view hex) {
  if (hex.empty()) return std::nullopt;
  // Leading zeros are free; 16 significant digits at most.
  std::size_t i = 0;
  while (i + 1 < hex.size() && hex[i] == '0') ++i;
  if (hex.size() - i > 16) return std::nullopt;
  std::uint64_t v = 0;
  for (; i < hex.size(); ++i) {
    const int d = hex_digit(hex[i]);
    if (d < 0) return std::nullopt;
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  return v;
}

}  // namespace minivmm::vmm::gdb
