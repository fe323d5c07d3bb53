#include "vmm/boot/elf_file.h"

#include <gtest/gtest.h>

#include "tests/unit/vmm/boot/elf_builder.h"
#include "tests/unit/vmm/boot/test_ram.h"

namespace minivmm::vmm {
namespace {

using testing::ElfSpec;
using testing::le_bytes;
using testing::make_elf;
using testing::make_note;
using testing::pattern_bytes;
using testing::put;
using testing::throws_boot_error;

ElfSpec two_segment_spec(bool is64) {
  ElfSpec spec;
  spec.is64 = is64;
  spec.machine = is64 ? 62 : 3;
  spec.entry = 0x200010;
  spec.segments = {{1, 0x200000, pattern_bytes(0x100, 1), 0x180, 0x1000},
                   {4, 0, make_note("Xen", 18, le_bytes<std::uint32_t>(0x200010)), 0, 4}};
  return spec;
}

TEST(ElfFileTest, ParsesElf64Headers) {
  const auto img = make_elf(two_segment_spec(true));
  const ElfFile elf = ElfFile::parse(img);
  EXPECT_EQ(elf.elf_class(), ElfClass::k64);
  EXPECT_EQ(elf.machine(), 62);
  EXPECT_EQ(elf.entry(), 0x200010u);
  ASSERT_EQ(elf.segments().size(), 2u);
  const ElfSegment& load = elf.segments()[0];
  EXPECT_EQ(load.type, kElfPtLoad);
  EXPECT_EQ(load.paddr, 0x200000u);
  EXPECT_EQ(load.vaddr, 0xffffffff80200000u);
  EXPECT_EQ(load.filesz, 0x100u);
  EXPECT_EQ(load.memsz, 0x180u);
  const auto bytes = elf.contents(load);
  EXPECT_EQ(std::vector<std::byte>(bytes.begin(), bytes.end()), pattern_bytes(0x100, 1));
}

TEST(ElfFileTest, ParsesElf32Headers) {
  const auto img = make_elf(two_segment_spec(false));
  const ElfFile elf = ElfFile::parse(img);
  EXPECT_EQ(elf.elf_class(), ElfClass::k32);
  EXPECT_EQ(elf.machine(), 3);
  EXPECT_EQ(elf.entry(), 0x200010u);
  ASSERT_EQ(elf.segments().size(), 2u);
  EXPECT_EQ(elf.segments()[0].paddr, 0x200000u);
  EXPECT_EQ(elf.segments()[0].memsz, 0x180u);
}

TEST(ElfFileTest, FindsNotesByNameAndType) {
  ElfSpec spec = two_segment_spec(true);
  auto notes = make_note("GNU", 3, pattern_bytes(20, 9));
  const auto xen_other = make_note("Xen", 6, pattern_bytes(5, 2));
  const auto xen_entry = make_note("Xen", 18, le_bytes<std::uint32_t>(0x1234567));
  notes.insert(notes.end(), xen_other.begin(), xen_other.end());
  notes.insert(notes.end(), xen_entry.begin(), xen_entry.end());
  spec.segments[1].data = notes;
  const auto img = make_elf(spec);
  const ElfFile elf = ElfFile::parse(img);
  const auto desc = elf.find_note("Xen", 18);
  ASSERT_TRUE(desc.has_value());
  ASSERT_EQ(desc->size(), 4u);
  EXPECT_EQ(std::vector<std::byte>(desc->begin(), desc->end()), le_bytes<std::uint32_t>(0x1234567));
  EXPECT_FALSE(elf.find_note("Xen", 19).has_value());
  EXPECT_FALSE(elf.find_note("Xe", 18).has_value());
  EXPECT_TRUE(elf.find_note("GNU", 3).has_value());
}

TEST(ElfFileTest, MalformedNoteIsRejected) {
  ElfSpec spec = two_segment_spec(true);
  auto note = make_note("Xen", 18, le_bytes<std::uint32_t>(1));
  put<std::uint32_t>(note, 4, 0x1000);  // descsz past the segment
  spec.segments[1].data = note;
  const auto img = make_elf(spec);
  const ElfFile elf = ElfFile::parse(img);
  EXPECT_TRUE(throws_boot_error([&] { elf.find_note("Xen", 18); }, "PT_NOTE"));
}

TEST(ElfFileTest, RejectsNonElf) {
  const std::vector<std::byte> junk(100, std::byte{0x4d});
  EXPECT_TRUE(throws_boot_error([&] { ElfFile::parse(junk); }, "not an ELF image"));
  EXPECT_TRUE(throws_boot_error([&] { ElfFile::parse({}); }, "not an ELF image"));
}

TEST(ElfFileTest, RejectsBigEndianAndUnknownClass) {
  auto img = make_elf(two_segment_spec(true));
  img[5] = std::byte{2};
  EXPECT_TRUE(throws_boot_error([&] { ElfFile::parse(img); }, "EI_DATA is 2"));
  img = make_elf(two_segment_spec(true));
  img[4] = std::byte{3};
  EXPECT_TRUE(throws_boot_error([&] { ElfFile::parse(img); }, "EI_CLASS is 3"));
}

TEST(ElfFileTest, RejectsNonExecutables) {
  ElfSpec spec = two_segment_spec(true);
  spec.type = 3;  // ET_DYN
  const auto img = make_elf(spec);
  EXPECT_TRUE(throws_boot_error([&] { ElfFile::parse(img); }, "ET_EXEC"));
}

TEST(ElfFileTest, RejectsTruncatedHeader) {
  auto img = make_elf(two_segment_spec(true));
  img.resize(40);
  EXPECT_TRUE(throws_boot_error([&] { ElfFile::parse(img); }, "truncated"));
}

TEST(ElfFileTest, RejectsProgramHeadersPastTheEnd) {
  auto img = make_elf(two_segment_spec(true));
  img.resize(64 + 56 + 10);
  EXPECT_TRUE(throws_boot_error([&] { ElfFile::parse(img); }, "e_phoff"));
}

TEST(ElfFileTest, RejectsSegmentDataPastTheEnd) {
  auto img = make_elf(two_segment_spec(true));
  put<std::uint64_t>(img, 64 + 32, 0x100000);  // p_filesz of segment 0
  put<std::uint64_t>(img, 64 + 40, 0x100000);  // p_memsz
  EXPECT_TRUE(throws_boot_error([&] { ElfFile::parse(img); }, "segment 0 file range"));
}

TEST(ElfFileTest, RejectsFileSizeAboveMemorySize) {
  auto img = make_elf(two_segment_spec(true));
  put<std::uint64_t>(img, 64 + 40, 0x10);  // p_memsz < p_filesz
  EXPECT_TRUE(throws_boot_error([&] { ElfFile::parse(img); }, "p_filesz"));
}

}  // namespace
}  // namespace minivmm::vmm
