// The initramfs cache: a hit is reused only after its key and checksum are checked.
#include "vmm/exec/initramfs.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace minivmm::vmm::exec {
namespace {

namespace fs = std::filesystem;

class InitramfsCache : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(::testing::TempDir()) / ("initramfs-" + std::to_string(::getpid()) + "-" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_ / "mods/kernel");
    std::ofstream(base_ / "mods/kernel/a.ko") << "module a";
    std::ofstream(base_ / "mods/modules.dep") << "kernel/a.ko:\n";
  }
  void TearDown() override { fs::remove_all(base_); }
  InitramfsInputs inputs() {
    std::string why;
    auto set = resolve_modules((base_ / "mods").string(), {{"a", true}}, why);
    EXPECT_TRUE(set) << why;
    return {"9.9", (base_ / "mods").string(), *set, init_, (base_ / "cache").string()};
  }
  fs::path base_;
  const std::vector<std::uint8_t> init_{0x7f, 'E', 'L', 'F', 1, 2, 3};
};

TEST_F(InitramfsCache, SecondRunIsACheckedHit) {
  std::string why;
  const auto first = make_initramfs(inputs(), why);
  ASSERT_TRUE(first) << why;
  EXPECT_FALSE(first->cache_hit);
  EXPECT_TRUE(fs::exists(first->path));
  const auto second = make_initramfs(inputs(), why);
  ASSERT_TRUE(second) << why;
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->bytes, first->bytes);
}

TEST_F(InitramfsCache, TamperedArchiveIsRebuilt) {
  std::string why;
  const auto first = make_initramfs(inputs(), why);
  ASSERT_TRUE(first) << why;
  {
    std::fstream f(first->path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('X');
  }
  const auto again = make_initramfs(inputs(), why);
  ASSERT_TRUE(again) << why;
  EXPECT_FALSE(again->cache_hit);
  EXPECT_NE(again->cache_note.find("did not match"), std::string::npos);
  EXPECT_EQ(again->bytes, first->bytes);
  fs::resize_file(first->path, 10);  // cut short
  EXPECT_FALSE(make_initramfs(inputs(), why)->cache_hit);
}

TEST_F(InitramfsCache, ATouchedModuleIsANewKey) {
  const std::string k1 = initramfs_key(inputs());
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (base_ / "mods/kernel/a.ko").c_str(), times, 0), 0);
  EXPECT_NE(initramfs_key(inputs()), k1);
}

TEST_F(InitramfsCache, UnwritableCacheStillGivesTheArchive) {
  std::ofstream(base_ / "cache") << "a file where the folder should be";
  std::string why;
  const auto r = make_initramfs(inputs(), why);
  ASSERT_TRUE(r) << why;
  EXPECT_TRUE(r->path.empty());
  EXPECT_FALSE(r->bytes.empty());
}

}  // namespace
}  // namespace minivmm::vmm::exec
