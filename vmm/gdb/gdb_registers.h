// The x86-64 register file the stub shows gdb, in the order of its target description
// (target_xml()): gdb's own amd64 core and SSE features (which its i386 architecture requires,
// 40 and 17 registers), org.gnu.gdb.i386.segments (fs_base, gs_base) and a system feature of
// ours with the control registers and EFER, which gdb shows as plain registers ($cr3).
// `g` and `G` carry every register in this order; `p`/`P` name one by its number here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace minivmm::vmm::gdb {

namespace reg {
// rax rbx rcx rdx rsi rdi rbp rsp r8..r15: gdb's amd64 order, not the hardware's encoding.
inline constexpr int kRax = 0, kRbx = 1, kRcx = 2, kRdx = 3, kRsi = 4, kRdi = 5, kRbp = 6,
                     kRsp = 7, kR8 = 8;
inline constexpr int kRip = 16, kEflags = 17;
inline constexpr int kCs = 18, kSs = 19, kDs = 20, kEs = 21, kFs = 22, kGs = 23;
inline constexpr int kSt0 = 24;    // st0..st7, 10 bytes each
inline constexpr int kFctrl = 32;  // fctrl fstat ftag fiseg fioff foseg fooff fop
inline constexpr int kXmm0 = 40;   // xmm0..xmm15, 16 bytes each
inline constexpr int kMxcsr = 56;
inline constexpr int kFsBase = 57, kGsBase = 58;
inline constexpr int kCr0 = 59, kCr2 = 60, kCr3 = 61, kCr4 = 62, kCr8 = 63, kEfer = 64;
inline constexpr int kCount = 65;
}  // namespace reg

struct RegisterInfo {
  const char* name;
  int bits;
  const char* type;   // the XML's type
  const char* group;  // nullptr: gdb's default
  std::size_t offset; // in RegisterFile::bytes
};

// The table, kCount entries in register-number order.
std::span<const RegisterInfo> registers();
// Bytes of all registers together (what `g` carries, times two hex digits).
std::size_t register_file_bytes();

struct RegisterFile {
  std::array<std::uint8_t, 640> bytes{};
  // Little-endian values of up to 8 bytes (the wider ones are read with raw()).
  std::uint64_t get(int r) const;
  void set(int r, std::uint64_t v);
  std::span<std::uint8_t> raw(int r);
  std::span<const std::uint8_t> raw(int r) const;
};

// The target description gdb reads with qXfer:features:read:target.xml.
const std::string& target_xml();

}  // namespace minivmm::vmm::gdb
