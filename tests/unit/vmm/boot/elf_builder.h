// Builds small synthetic ELF32/ELF64 executables for the ELF, PVH and multiboot tests. Field
// offsets come from the System V gABI tables, independent of the loader's structs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/vmm/boot/test_ram.h"

namespace minivmm::vmm::testing {

struct ElfSegmentSpec {
  std::uint32_t type = 1;  // PT_LOAD
  std::uint64_t paddr = 0;
  std::vector<std::byte> data;
  std::uint64_t memsz = 0;  // 0: same as data.size()
  std::uint64_t align = 4;
};

struct ElfSpec {
  bool is64 = true;
  std::uint16_t machine = 62;  // EM_X86_64
  std::uint16_t type = 2;      // ET_EXEC
  std::uint64_t entry = 0;
  std::vector<ElfSegmentSpec> segments;
};

inline std::vector<std::byte> make_elf(const ElfSpec& spec) {
  const std::size_t ehsize = spec.is64 ? 64 : 52;
  const std::size_t phentsize = spec.is64 ? 56 : 32;
  std::vector<std::byte> img(ehsize + phentsize * spec.segments.size(), std::byte{0});
  const std::uint8_t ident[] = {0x7f, 'E', 'L', 'F', static_cast<std::uint8_t>(spec.is64 ? 2 : 1),
                                1, 1};
  for (std::size_t i = 0; i < sizeof ident; ++i) img[i] = std::byte{ident[i]};
  put<std::uint16_t>(img, 16, spec.type);
  put<std::uint16_t>(img, 18, spec.machine);
  put<std::uint32_t>(img, 20, 1);
  if (spec.is64) {
    put<std::uint64_t>(img, 24, spec.entry);
    put<std::uint64_t>(img, 32, ehsize);  // e_phoff
    put<std::uint16_t>(img, 52, static_cast<std::uint16_t>(ehsize));
    put<std::uint16_t>(img, 54, static_cast<std::uint16_t>(phentsize));
    put<std::uint16_t>(img, 56, static_cast<std::uint16_t>(spec.segments.size()));
  } else {
    put<std::uint32_t>(img, 24, static_cast<std::uint32_t>(spec.entry));
    put<std::uint32_t>(img, 28, static_cast<std::uint32_t>(ehsize));
    put<std::uint16_t>(img, 40, static_cast<std::uint16_t>(ehsize));
    put<std::uint16_t>(img, 42, static_cast<std::uint16_t>(phentsize));
    put<std::uint16_t>(img, 44, static_cast<std::uint16_t>(spec.segments.size()));
  }
  for (std::size_t i = 0; i < spec.segments.size(); ++i) {
    const ElfSegmentSpec& seg = spec.segments[i];
    img.resize((img.size() + 15) & ~std::size_t{15});
    const std::uint64_t offset = img.size();
    img.insert(img.end(), seg.data.begin(), seg.data.end());
    const std::uint64_t memsz = seg.memsz != 0 ? seg.memsz : seg.data.size();
    const std::size_t ph = ehsize + i * phentsize;
    if (spec.is64) {
      put<std::uint32_t>(img, ph + 0, seg.type);
      put<std::uint32_t>(img, ph + 4, 5);  // R+X
      put<std::uint64_t>(img, ph + 8, offset);
      put<std::uint64_t>(img, ph + 16, seg.paddr + 0xffffffff80000000ull);  // vaddr differs
      put<std::uint64_t>(img, ph + 24, seg.paddr);
      put<std::uint64_t>(img, ph + 32, seg.data.size());
      put<std::uint64_t>(img, ph + 40, memsz);
      put<std::uint64_t>(img, ph + 48, seg.align);
    } else {
      put<std::uint32_t>(img, ph + 0, seg.type);
      put<std::uint32_t>(img, ph + 4, static_cast<std::uint32_t>(offset));
      put<std::uint32_t>(img, ph + 8, static_cast<std::uint32_t>(seg.paddr));
      put<std::uint32_t>(img, ph + 12, static_cast<std::uint32_t>(seg.paddr));
      put<std::uint32_t>(img, ph + 16, static_cast<std::uint32_t>(seg.data.size()));
      put<std::uint32_t>(img, ph + 20, static_cast<std::uint32_t>(memsz));
      put<std::uint32_t>(img, ph + 24, 5);
      put<std::uint32_t>(img, ph + 28, static_cast<std::uint32_t>(seg.align));
    }
  }
  return img;
}

// One ELF note: namesz, descsz, type, name + NUL padded to 4, desc padded to 4.
inline std::vector<std::byte> make_note(const std::string& name, std::uint32_t type,
                                        const std::vector<std::byte>& desc) {
  std::vector<std::byte> note;
  put<std::uint32_t>(note, 0, static_cast<std::uint32_t>(name.size() + 1));
  put<std::uint32_t>(note, 4, static_cast<std::uint32_t>(desc.size()));
  put<std::uint32_t>(note, 8, type);
  for (char c : name) note.push_back(static_cast<std::byte>(c));
  note.push_back(std::byte{0});
  note.resize((note.size() + 3) & ~std::size_t{3});
  note.insert(note.end(), desc.begin(), desc.end());
  note.resize((note.size() + 3) & ~std::size_t{3});
  return note;
}

template <typename T>
std::vector<std::byte> le_bytes(T value) {
  std::vector<std::byte> out;
  put<T>(out, 0, value);
  return out;
}

}  // namespace minivmm::vmm::testing
