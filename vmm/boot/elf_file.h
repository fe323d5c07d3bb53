// A read-only view of an ELF executable's program headers, for the loaders that take ELF
// kernels (PVH vmlinux, multiboot). Only what loading needs: class, machine, entry, segments
// and notes. Section headers are never read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace minivmm::vmm {

// System V gABI values ("ELF Header", "Program Header").
inline constexpr std::uint16_t kElfMachine386 = 3;
inline constexpr std::uint16_t kElfMachineX86_64 = 62;
inline constexpr std::uint32_t kElfPtLoad = 1;
inline constexpr std::uint32_t kElfPtNote = 4;

enum class ElfClass { k32, k64 };

struct ElfSegment {
  std::uint32_t type = 0;
  std::uint32_t flags = 0;
  std::uint64_t offset = 0;
  std::uint64_t vaddr = 0;
  std::uint64_t paddr = 0;
  std::uint64_t filesz = 0;
  std::uint64_t memsz = 0;
  std::uint64_t align = 0;
};

class ElfFile {
 public:
  // Parses a little-endian ELF32 or ELF64 executable. Throws BootError when the image is not
  // ELF, is not an executable, or any program header or segment reaches past its end. `image`
  // must outlive the ElfFile.
  static ElfFile parse(std::span<const std::byte> image);

  ElfClass elf_class() const noexcept { return class_; }
  std::uint16_t machine() const noexcept { return machine_; }
  std::uint64_t entry() const noexcept { return entry_; }
  const std::vector<ElfSegment>& segments() const noexcept { return segments_; }

  // The segment's bytes in the file (filesz of them; already bounds-checked by parse).
  std::span<const std::byte> contents(const ElfSegment& seg) const;

  // The descriptor of the first note called `name` with type `type` in any PT_NOTE segment.
  // Throws BootError on a malformed note segment.
  std::optional<std::span<const std::byte>> find_note(std::string_view name,
                                                      std::uint32_t type) const;

 private:
  ElfFile(std::span<const std::byte> image, ElfClass elf_class, std::uint16_t machine,
          std::uint64_t entry, std::vector<ElfSegment> segments);

  std::span<const std::byte> image_;
  ElfClass class_;
  std::uint16_t machine_;
  std::uint64_t entry_;
  std::vector<ElfSegment> segments_;
};

}  // namespace minivmm::vmm
