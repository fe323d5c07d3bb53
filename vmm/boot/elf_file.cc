#include "vmm/boot/elf_file.h"

#include <cstring>
#include <string>
#include <utility>

#include "vmm/boot/boot_error.h"

namespace minivmm::vmm {
namespace {

// On-disk layouts (System V gABI "ELF Header" and "Program Header"), little-endian only since
// both accepted machines are.
struct [[gnu::packed]] Elf32Header {
  std::uint8_t ident[16];
  std::uint16_t type;
  std::uint16_t machine;
  std::uint32_t version;
  std::uint32_t entry;
  std::uint32_t phoff;
  std::uint32_t shoff;
  std::uint32_t flags;
  std::uint16_t ehsize;
  std::uint16_t phentsize;
  std::uint16_t phnum;
  std::uint16_t shentsize;
  std::uint16_t shnum;
  std::uint16_t shstrndx;
};
static_assert(sizeof(Elf32Header) == 52);

struct [[gnu::packed]] Elf64Header {
  std::uint8_t ident[16];
  std::uint16_t type;
  std::uint16_t machine;
  std::uint32_t version;
  std::uint64_t entry;
  std::uint64_t phoff;
  std::uint64_t shoff;
  std::uint32_t flags;
  std::uint16_t ehsize;
  std::uint16_t phentsize;
  std::uint16_t phnum;
  std::uint16_t shentsize;
  std::uint16_t shnum;
  std::uint16_t shstrndx;
};
static_assert(sizeof(Elf64Header) == 64);

struct [[gnu::packed]] Elf32Phdr {
  std::uint32_t type;
  std::uint32_t offset;
  std::uint32_t vaddr;
  std::uint32_t paddr;
  std::uint32_t filesz;
  std::uint32_t memsz;
  std::uint32_t flags;
  std::uint32_t align;
};
static_assert(sizeof(Elf32Phdr) == 32);

struct [[gnu::packed]] Elf64Phdr {
  std::uint32_t type;
  std::uint32_t flags;
  std::uint64_t offset;
  std::uint64_t vaddr;
  std::uint64_t paddr;
  std::uint64_t filesz;
  std::uint64_t memsz;
  std::uint64_t align;
};
static_assert(sizeof(Elf64Phdr) == 56);

constexpr std::uint8_t kElfClass32 = 1;  // EI_CLASS
constexpr std::uint8_t kElfClass64 = 2;
constexpr std::uint8_t kElfDataLsb = 1;  // EI_DATA
constexpr std::uint16_t kElfTypeExec = 2;
constexpr std::uint32_t kNoteHeaderSize = 12;  // namesz, descsz, type

template <typename T>
T read_at(std::span<const std::byte> bytes, std::uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

bool in_file(std::span<const std::byte> image, std::uint64_t offset, std::uint64_t len) {
  return offset <= image.size() && len <= image.size() - offset;
}

template <typename Header, typename Phdr>
std::pair<Header, std::vector<ElfSegment>> parse_headers(std::span<const std::byte> image) {
  if (image.size() < sizeof(Header)) {
    throw BootError("ELF image of " + std::to_string(image.size()) +
                    " bytes is truncated: the ELF header needs " +
                    std::to_string(sizeof(Header)));
  }
  const auto hdr = read_at<Header>(image, 0);
  if (hdr.type != kElfTypeExec) {
    throw BootError("ELF e_type is " + std::to_string(hdr.type) +
                    ", expected ET_EXEC (2): only executables can be loaded");
  }
  if (hdr.phnum == 0) throw BootError("ELF image has no program headers (e_phnum 0)");
  if (hdr.phentsize != sizeof(Phdr)) {
    throw BootError("ELF e_phentsize is " + std::to_string(hdr.phentsize) + ", expected " +
                    std::to_string(sizeof(Phdr)));
  }
  const std::uint64_t table_size = std::uint64_t{hdr.phnum} * sizeof(Phdr);
  if (!in_file(image, hdr.phoff, table_size)) {
    throw BootError("ELF program header table at e_phoff " + to_hex(hdr.phoff) + " (" +
                    std::to_string(hdr.phnum) + " entries) reaches past the end of the " +
                    to_hex(image.size()) + "-byte image");
  }
  std::vector<ElfSegment> segments;
  segments.reserve(hdr.phnum);
  for (std::uint16_t i = 0; i < hdr.phnum; ++i) {
    const auto ph = read_at<Phdr>(image, hdr.phoff + std::uint64_t{i} * sizeof(Phdr));
    ElfSegment seg{ph.type, ph.flags, ph.offset, ph.vaddr, ph.paddr,
                   ph.filesz, ph.memsz, ph.align};
    if (!in_file(image, seg.offset, seg.filesz)) {
      throw BootError("ELF segment " + std::to_string(i) + " file range [" + to_hex(seg.offset) +
                      ", +" + to_hex(seg.filesz) + ") reaches past the end of the " +
                      to_hex(image.size()) + "-byte image");
    }
    if (seg.filesz > seg.memsz) {
      throw BootError("ELF segment " + std::to_string(i) + " has p_filesz " +
                      to_hex(seg.filesz) + " larger than p_memsz " + to_hex(seg.memsz));
    }
    segments.push_back(seg);
  }
  return {hdr, std::move(segments)};
}

std::uint64_t note_pad(std::uint64_t value, std::uint64_t align) {
  return (value + align - 1) & ~(align - 1);
}

}  // namespace

ElfFile::ElfFile(std::span<const std::byte> image, ElfClass elf_class, std::uint16_t machine,
                 std::uint64_t entry, std::vector<ElfSegment> segments)
    : image_(image),
      class_(elf_class),
      machine_(machine),
      entry_(entry),
      segments_(std::move(segments)) {}

ElfFile ElfFile::parse(std::span<const std::byte> image) {
  constexpr unsigned char kMagic[4] = {0x7f, 'E', 'L', 'F'};
  if (image.size() < 16 || std::memcmp(image.data(), kMagic, sizeof kMagic) != 0) {
    throw BootError("not an ELF image: missing \\x7fELF magic");
  }
  const auto ei_class = std::to_integer<std::uint8_t>(image[4]);
  const auto ei_data = std::to_integer<std::uint8_t>(image[5]);
  if (ei_data != kElfDataLsb) {
    throw BootError("ELF EI_DATA is " + std::to_string(ei_data) +
                    ", expected 1 (little-endian)");
  }
  if (ei_class == kElfClass64) {
    auto [hdr, segs] = parse_headers<Elf64Header, Elf64Phdr>(image);
    return ElfFile(image, ElfClass::k64, hdr.machine, hdr.entry, std::move(segs));
  }
  if (ei_class == kElfClass32) {
    auto [hdr, segs] = parse_headers<Elf32Header, Elf32Phdr>(image);
    return ElfFile(image, ElfClass::k32, hdr.machine, hdr.entry, std::move(segs));
  }
  throw BootError("ELF EI_CLASS is " + std::to_string(ei_class) +
                  ", expected 1 (ELF32) or 2 (ELF64)");
}

std::span<const std::byte> ElfFile::contents(const ElfSegment& seg) const {
  return image_.subspan(static_cast<std::size_t>(seg.offset),
                        static_cast<std::size_t>(seg.filesz));
}

std::optional<std::span<const std::byte>> ElfFile::find_note(std::string_view name,
                                                             std::uint32_t type) const {
  for (const ElfSegment& seg : segments_) {
    if (seg.type != kElfPtNote) continue;
    // Entries are padded to 4 bytes; 8-aligned note segments (e.g. GNU properties) pad to 8.
    const std::uint64_t align = seg.align == 8 ? 8 : 4;
    const auto notes = contents(seg);
    std::uint64_t pos = 0;
    while (notes.size() - pos >= kNoteHeaderSize) {
      const auto namesz = read_at<std::uint32_t>(notes, pos);
      const auto descsz = read_at<std::uint32_t>(notes, pos + 4);
      const auto note_type = read_at<std::uint32_t>(notes, pos + 8);
      const std::uint64_t name_off = pos + kNoteHeaderSize;
      const std::uint64_t desc_off = name_off + note_pad(namesz, align);
      if (!in_file(notes, name_off, namesz) || !in_file(notes, desc_off, descsz)) {
        throw BootError("ELF note at offset " + to_hex(seg.offset + pos) +
                        " reaches past the end of its PT_NOTE segment");
      }
      // namesz counts the terminating NUL.
      const std::string_view note_name(reinterpret_cast<const char*>(notes.data() + name_off),
                                       namesz > 0 ? namesz - 1 : 0);
      if (note_type == type && note_name == name) {
        return notes.subspan(static_cast<std::size_t>(desc_off), descsz);
      }
      pos = desc_off + note_pad(descsz, align);
      if (pos > notes.size()) break;
    }
  }
  return std::nullopt;
}

}  // namespace minivmm::vmm
