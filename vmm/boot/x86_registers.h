// Architectural control-register, EFER and page-table bits the boot states use (Intel SDM
// vol. 3A 2.5 "Control Registers", 2.2.1 "Extended Feature Enable Register", 4.5 "4-Level
// Paging").
#pragma once

#include <cstdint>

namespace minivmm::vmm {

inline constexpr std::uint64_t kCr0Pe = 1ull << 0;   // protected mode
inline constexpr std::uint64_t kCr0Et = 1ull << 4;   // reserved-as-one on modern CPUs
inline constexpr std::uint64_t kCr0Ne = 1ull << 5;   // native x87 error reporting
inline constexpr std::uint64_t kCr0Pg = 1ull << 31;  // paging
inline constexpr std::uint64_t kCr4Pae = 1ull << 5;  // required for long mode
inline constexpr std::uint64_t kEferLme = 1ull << 8;
inline constexpr std::uint64_t kEferLma = 1ull << 10;  // set by the CPU on entry; KVM wants it given

inline constexpr std::uint64_t kPtePresent = 1ull << 0;
inline constexpr std::uint64_t kPteWritable = 1ull << 1;
inline constexpr std::uint64_t kPteLargePage = 1ull << 7;  // PS: a PD entry maps 2 MiB

inline constexpr std::uint64_t kRflagsReserved = 1ull << 1;  // bit 1 reads as one; IF stays clear

}  // namespace minivmm::vmm
