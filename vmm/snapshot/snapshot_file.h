// The snapshot file (docs/snapshot.md, "Format"): one file, written beside its final name and
// renamed into place, so a clone that has the previous snapshot mapped keeps its pages.
//
//   offset 0   header (44 bytes): magic "MVMMSNAP", u32 format version, u32 section count,
//              u64 metadata bytes (header + sections), u64 memory offset (4 KiB aligned),
//              u64 memory bytes, u32 CRC-32C of the 40 bytes before it
//   44         sections, in order: u16 name length (1..64), the name, u32 data length,
//              u32 CRC-32C of the data, the data (a StateWriter record)
//   ...        zeros up to the memory offset
//   memory     guest RAM, byte for byte; pages the guest never touched are holes
//
// The file's size must be exactly memory offset + memory bytes. Guest memory has no checksum:
// restore maps it MAP_PRIVATE so that pages load when the guest touches them and clones share
// them (reading 1 GiB to check it would cost the restore its speed); a file cut short is still
// caught by its size. Integers are little-endian (x86).
//
// Bad input: parse_snapshot_metadata() takes the bytes as untrusted (tests/fuzz has a target on
// it); every problem is a SnapshotError whose message is one line naming it.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "devices/bus/guest_memory.h"
#include "vmm/kvm/unique_fd.h"

namespace minivmm::vmm {

class SnapshotError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr char kSnapshotMagic[8] = {'M', 'V', 'M', 'M', 'S', 'N', 'A', 'P'};
inline constexpr std::uint32_t kSnapshotVersion = 1;
inline constexpr std::size_t kSnapshotHeaderBytes = 44;
inline constexpr std::size_t kMaxSnapshotSections = 256;
inline constexpr std::size_t kMaxSectionName = 64;
inline constexpr std::size_t kMaxSectionBytes = 16u << 20;   // the largest record: 16 MiB
inline constexpr std::size_t kMaxSnapshotMetadata = 64u << 20;
inline constexpr std::uint64_t kSnapshotPage = 4096;

struct SnapshotSection {
  std::string name;
  std::vector<std::uint8_t> data;
};

struct SnapshotMetadata {
  std::vector<SnapshotSection> sections;
  std::uint64_t metadata_bytes = 0;
  std::uint64_t memory_offset = 0;
  std::uint64_t memory_bytes = 0;

  // The section named `name`; SnapshotError "the snapshot has no section 'x'" without one.
  const SnapshotSection& section(std::string_view name) const;
  const SnapshotSection* find(std::string_view name) const noexcept;
};

// The 44-byte header alone: how many bytes of metadata follow it, and where memory lies.
// `file_size` is the file's; the header must agree with it.
SnapshotMetadata parse_snapshot_header(std::span<const std::uint8_t> header,
                                       std::uint64_t file_size);
// Header and sections (the first metadata_bytes of the file). Throws SnapshotError.
SnapshotMetadata parse_snapshot_metadata(std::span<const std::uint8_t> metadata,
                                         std::uint64_t file_size);

// The metadata bytes for `sections` with memory of `memory_bytes` after them.
std::vector<std::uint8_t> encode_snapshot_metadata(const std::vector<SnapshotSection>& sections,
                                                   std::uint64_t memory_bytes);

struct SnapshotWriteStats {
  std::uint64_t file_bytes = 0;     // the file's size
  std::uint64_t memory_written = 0;  // guest pages written (the rest are holes)
};

// Writes `sections` and guest RAM to `path`: a new file beside it (same folder), renamed onto
// it once whole. `ram_untouched_is_zero`: RAM is an anonymous mapping, so a page the host never
// backed (mincore) is zero and is skipped without reading it; a page that is all zeros is a
// hole either way. Throws SnapshotError naming the step that failed (the temporary is removed).
SnapshotWriteStats write_snapshot_file(const std::string& path,
                                       const std::vector<SnapshotSection>& sections,
                                       devices::GuestMemory ram, bool ram_untouched_is_zero);

// An opened snapshot: its metadata, checked, and the file (for mapping guest memory).
struct SnapshotFile {
  // Throws SnapshotError (with the path) for a file that cannot be read or is not a snapshot.
  static SnapshotFile open(const std::string& path);

  std::string path;
  UniqueFd fd;
  SnapshotMetadata meta;
  double open_ms = 0;  // open() itself: the file opened, its metadata read and checked
};

}  // namespace minivmm::vmm
