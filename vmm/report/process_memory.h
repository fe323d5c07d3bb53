// The process's resident memory from /proc/self/status: what `ps` and the density benchmark see.
// The run report subtracts the guest RAM that is resident (GuestRamMapping::resident_bytes) to
// give what the VMM itself costs per guest, the figure issue #12's density goal (<= 5 MiB) is
// about.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace minivmm::vmm {

struct ProcessMemory {
  std::uint64_t rss_bytes = 0;       // VmRSS: resident now, shared library pages included
  std::uint64_t peak_rss_bytes = 0;  // VmHWM: the most that was ever resident
  std::uint64_t anon_bytes = 0;      // RssAnon: private to this process (heap, stacks, guest RAM)
  // Pss from /proc/self/smaps_rollup: shared pages divided among the processes that map them,
  // which is what one more guest really adds when many run (libstdc++ and libc are shared).
  std::optional<std::uint64_t> pss_bytes;
};

// Parses the text of a /proc/PID/status file; nullopt when VmRSS, VmHWM or RssAnon is missing
// or bad. pss_bytes stays empty.
std::optional<ProcessMemory> parse_proc_status_memory(std::string_view status) noexcept;

// "Pss:" from the text of /proc/PID/smaps_rollup, in bytes.
std::optional<std::uint64_t> parse_smaps_rollup_pss(std::string_view rollup) noexcept;

// This process's, or nullopt when /proc cannot be read.
std::optional<ProcessMemory> read_process_memory() noexcept;

}  // namespace minivmm::vmm
