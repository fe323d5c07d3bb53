// The newc writer against the format's own rules, read back by a reader written here from
// the format description (and by cpio(1) where it is installed).
#include "vmm/exec/cpio_writer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace minivmm::vmm::exec {
namespace {

struct Entry {
  std::string name;
  std::uint32_t mode;
  std::string data;
};

std::uint32_t field(const std::vector<std::uint8_t>& a, std::size_t at, int index) {
  const std::string hex(a.begin() + static_cast<long>(at + 6 + 8 * static_cast<std::size_t>(index)),
                        a.begin() + static_cast<long>(at + 14 + 8 * static_cast<std::size_t>(index)));
  return static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
}

std::vector<Entry> read_back(const std::vector<std::uint8_t>& a) {
  std::vector<Entry> out;
  std::size_t at = 0;
  for (;;) {
    EXPECT_EQ(std::string(a.begin() + static_cast<long>(at), a.begin() + static_cast<long>(at + 6)), "070701");
    const std::uint32_t mode = field(a, at, 1), size = field(a, at, 6), namesize = field(a, at, 11);
    std::string name(a.begin() + static_cast<long>(at + 110),
                     a.begin() + static_cast<long>(at + 110 + namesize - 1));
    EXPECT_EQ(a[at + 110 + namesize - 1], 0);
    at = (at + 110 + namesize + 3) & ~std::size_t{3};
    std::string data(a.begin() + static_cast<long>(at), a.begin() + static_cast<long>(at + size));
    at = (at + size + 3) & ~std::size_t{3};
    if (name == "TRAILER!!!") break;
    out.push_back({name, mode, data});
  }
  EXPECT_EQ(at, a.size());
  return out;
}

std::span<const std::uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

TEST(CpioWriter, EntriesReadBackWithModesAndPadding) {
  CpioWriter w;
  w.add_directory("modules");
  w.add_file("init", bytes("\x7f" "ELF..."), 0755);
  w.add_file("modules/a.ko", bytes("abc"));  // 3 bytes: padded to 4
  w.add_file("empty", bytes(""));
  const auto a = w.finish();
  EXPECT_EQ(a.size() % 4, 0u);
  const auto e = read_back(a);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].name, "modules");
  EXPECT_EQ(e[0].mode, 040755u);
  EXPECT_EQ(e[1].mode, 0100755u);
  EXPECT_EQ(e[1].data, std::string("\x7f" "ELF..."));
  EXPECT_EQ(e[2].data, "abc");
  EXPECT_EQ(e[3].data, "");
}

TEST(CpioWriter, DistinctInodesSoNothingLooksLikeAHardLink) {
  CpioWriter w;
  w.add_file("a", bytes("1"));
  w.add_file("b", bytes("2"));
  const auto a = w.finish();
  const std::size_t second = (110 + 2 + 3) / 4 * 4 + 4;
  EXPECT_NE(field(a, 0, 0), field(a, second, 0));
}

TEST(CpioWriter, EqualInputsGiveEqualArchives) {
  CpioWriter w1, w2;
  w1.add_file("x", bytes("same"));
  w2.add_file("x", bytes("same"));
  EXPECT_EQ(w1.finish(), w2.finish());
}

TEST(CpioWriter, BadNamesAreRefusedAndTheArchiveStaysWhole) {
  CpioWriter w;
  w.add_file("ok", bytes("1"));
  for (const char* bad : {"", "/abs", "a/../b", "..", ".", "a//b", "trailing/"}) {
    EXPECT_THROW(w.add_file(bad, bytes("x")), std::invalid_argument) << bad;
  }
  EXPECT_THROW(w.add_file(std::string(4096, 'a'), bytes("x")), std::invalid_argument);
  EXPECT_THROW(w.add_file(std::string("a\0b", 3), bytes("x")), std::invalid_argument);
  const auto e = read_back(w.finish());
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].name, "ok");
}

TEST(CpioWriter, ConcatenatedArchivesEachEndInATrailer) {
  CpioWriter w;
  w.add_file("first", bytes("1"));
  auto a = w.finish();
  EXPECT_EQ(w.entries(), 0u);
  w.add_file("second", bytes("2"));
  const auto b = w.finish();
  EXPECT_EQ(read_back(b).at(0).name, "second");
  a.insert(a.end(), b.begin(), b.end());
  EXPECT_EQ(a.size() % 4, 0u);
}

TEST(CpioWriter, SystemCpioListsTheArchive) {
  if (std::system("command -v cpio >/dev/null 2>&1") != 0) GTEST_SKIP() << "no cpio(1)";
  CpioWriter w;
  w.add_directory("d");
  w.add_file("d/f", bytes("hello"));
  const auto a = w.finish();
  const std::string path = ::testing::TempDir() + "/cpio_writer_test.cpio";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(a.data(), 1, a.size(), f);
  std::fclose(f);
  EXPECT_EQ(std::system(("cpio -it --quiet < " + path + " | grep -qx d/f").c_str()), 0);
}

}  // namespace
}  // namespace minivmm::vmm::exec
