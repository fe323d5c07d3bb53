// Snapshot files made by the tests themselves, without KVM: the header and sections as minivmm
// writes them, guest memory a hole. A restore judges the file and its configuration before it
// opens /dev/kvm, so the bad-input tests reach those checks on any machine.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "vmm/machine/snapshot_config.h"
#include "vmm/snapshot/snapshot_file.h"

namespace minivmm::testing {

inline constexpr std::uint64_t kTestSnapshotRam = 64ull << 20;

// Writes a snapshot of `sections` with `ram` bytes of (sparse) memory at `path`; false if the
// file could not be made.
inline bool write_test_snapshot(const std::string& path,
                                const std::vector<vmm::SnapshotSection>& sections,
                                std::uint64_t ram = kTestSnapshotRam) {
  const auto meta = vmm::encode_snapshot_metadata(sections, ram);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(meta.data()), static_cast<std::streamsize>(meta.size()));
    if (!out.good()) return false;
  }
  const std::uint64_t offset = (meta.size() + 4095) / 4096 * 4096;
  return ::truncate(path.c_str(), static_cast<off_t>(offset + ram)) == 0;
}

// The sections a restore reads before /dev/kvm: the configuration (of `config`, 64 MiB unless
// it says otherwise, its drives of `drive_sizes`) and vm_clock.
inline std::vector<vmm::SnapshotSection> test_snapshot_sections(
    vmm::Config config = {}, const std::vector<std::uint64_t>& drive_sizes = {}) {
  if (config.memory_bytes == vmm::Config{}.memory_bytes) config.memory_bytes = kTestSnapshotRam;
  return {{"config", vmm::save_machine_config(config, drive_sizes)},
          {"vm_clock", std::vector<std::uint8_t>(8)}};
}

}  // namespace minivmm::testing
