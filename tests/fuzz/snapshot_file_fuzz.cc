// libFuzzer target: the snapshot file's metadata (vmm/snapshot/snapshot_file.h) and the records
// a restore reads before KVM is touched: the configuration and vm_clock. The input is the file's
// first bytes; its size on disk is taken as the header claims it (so that inputs get past the
// size check to the sections), or, when the first byte is odd, as the input's own size.
// Checked: no crash, leak or UB on any input, every refusal is a SnapshotError or StateError,
// and what parses encodes back to the same bytes (nothing is accepted that is not read whole).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "devices/bus/device_state.h"
#include "vmm/machine/snapshot_config.h"
#include "vmm/snapshot/snapshot_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace minivmm;
  const std::span<const std::uint8_t> in(data, size);
  std::uint64_t file_size = size;
  if (size >= vmm::kSnapshotHeaderBytes && (data[0] & 1) == 0) {
    std::uint64_t off = 0, bytes = 0;
    std::memcpy(&off, data + 24, 8);
    std::memcpy(&bytes, data + 32, 8);
    file_size = off + bytes;
  }
  vmm::SnapshotMetadata meta;
  try {
    meta = vmm::parse_snapshot_metadata(in, file_size);
  } catch (const vmm::SnapshotError&) {
    return 0;
  }
  // Encoding what was read gives the input back, up to the metadata's end.
  const auto again = vmm::encode_snapshot_metadata(meta.sections, meta.memory_bytes);
  if (again.size() != meta.metadata_bytes ||
      std::memcmp(again.data(), data, again.size()) != 0) {
    std::fprintf(stderr, "parsed metadata does not encode back to its bytes\n");
    std::abort();
  }
  if (const auto* config = meta.find("config")) {
    try {
      const auto saved = vmm::load_machine_config(config->data);
      if (saved.config.cpus < 1 || saved.config.cpus > 16 ||
          saved.drive_sizes.size() != saved.config.drives.size()) {
        std::fprintf(stderr, "a configuration out of range was accepted\n");
        std::abort();
      }
    } catch (const devices::StateError&) {
    }
  }
  if (const auto* clock = meta.find("vm_clock")) {
    try {
      devices::StateReader r(clock->data, "vm_clock");
      (void)r.i64();
      r.expect_end();
    } catch (const devices::StateError&) {
    }
  }
  return 0;
}
