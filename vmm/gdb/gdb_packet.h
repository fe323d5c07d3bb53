// The remote serial protocol's framing, no meaning: `$payload#xx` packets with a modulo-256
// checksum, `+`/`-` acknowledgements, the out-of-band 0x03 interrupt, and `}` escapes.
//
// PacketReader takes bytes as they come from the socket, in any split, and hands out whole
// events. Hostile input costs it bounded memory: a payload longer than `max_payload` is
// dropped as it arrives (only its checksum is awaited) and answered like a bad checksum.
//
// Threads: none of its own; one reader per connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace minivmm::vmm::gdb {

struct FramingStats {
  std::uint64_t packets = 0;
  std::uint64_t bad_checksums = 0;
  std::uint64_t oversized = 0;   // payloads over the bound, dropped
  std::uint64_t interrupts = 0;  // 0x03 bytes
  std::uint64_t nacks = 0;       // '-' from the client: our last packet is sent again
  std::uint64_t junk_bytes = 0;  // bytes outside any packet that mean nothing
};

struct PacketEvent {
  enum class Kind { kPacket, kBadPacket, kInterrupt, kAck, kNack } kind;
  std::string payload;  // kPacket: the payload as sent (escapes not undone)
};

class PacketReader {
 public:
  explicit PacketReader(std::size_t max_payload) : max_payload_(max_payload) {}
  // Appends the events `bytes` complete to `out`.
  void feed(std::span<const std::uint8_t> bytes, std::vector<PacketEvent>& out);
  const FramingStats& stats() const noexcept { return stats_; }

 private:
  enum class State { kIdle, kBody, kCsum1, kCsum2 };
  std::size_t max_payload_;
  State state_ = State::kIdle;
  std::string body_;
  bool overflow_ = false;
  std::uint8_t sum_ = 0;
  int csum_hi_ = 0;
  FramingStats stats_;
};

// `$payload#xx`, with `$ # } *` in the payload escaped.
std::string frame_packet(std::string_view payload);
// Binary data escaped for a reply or undone from a packet (`}` then the byte xor 0x20); a
// trailing lone `}` is an error (nullopt).
std::string escape_binary(std::string_view data);
std::optional<std::string> unescape_binary(std::string_view data);

// Hex helpers. Every parse refuses what is not all hex digits, an empty string, or a value
// that does not fit.
std::string to_hex(std::span<const std::uint8_t> bytes);
std::string to_hex(std::string_view text);
std::optional<std::vector<std::uint8_t>> from_hex(std::string_view hex);
std::optional<std::uint64_t> parse_hex_u64(std::string_view hex);
int hex_digit(char c) noexcept;  // -1 if not one

}  // namespace minivmm::vmm::gdb
