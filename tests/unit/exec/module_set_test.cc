// modules.dep resolution against hand-built module folders, hostile ones included.
#include "vmm/exec/module_set.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace minivmm::vmm::exec {
namespace {

namespace fs = std::filesystem;

class ModuleDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("modset-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void put(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary) << text;
  }
  std::optional<ModuleSet> resolve(const std::vector<WantedModule>& w) {
    return resolve_modules(dir_.string(), w, why_);
  }
  std::vector<std::string> order(const ModuleSet& s) {
    std::vector<std::string> out;
    for (const auto& m : s.load_order) out.push_back(m.name);
    return out;
  }
  fs::path dir_;
  std::string why_;
};

TEST(ModuleName, NormalizesDashesAndSuffixes) {
  EXPECT_EQ(module_name("kernel/net/9p/9pnet_virtio.ko"), "9pnet_virtio");
  EXPECT_EQ(module_name("kernel/drivers/misc/pvpanic/pvpanic-mmio.ko.xz"), "pvpanic_mmio");
  EXPECT_EQ(module_name("a/b/overlay.ko.zst"), "overlay");
  EXPECT_EQ(module_name("virtio-mmio"), "virtio_mmio");
}

TEST(ParseModulesDep, LinesAndMalformedOnes) {
  std::string why;
  const auto r = parse_modules_dep("a.ko: b.ko  c.ko\nb.ko:\n\n# comment\nc.ko:\tb.ko\n", why);
  ASSERT_TRUE(r) << why;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].second, (std::vector<std::string>{"b.ko", "c.ko"}));
  EXPECT_TRUE((*r)[1].second.empty());
  EXPECT_EQ((*r)[2].second, (std::vector<std::string>{"b.ko"}));
  EXPECT_FALSE(parse_modules_dep("a.ko b.ko\n", why));
  EXPECT_NE(why.find("line 1"), std::string::npos);
  EXPECT_FALSE(parse_modules_dep("ok.ko:\n: b.ko\n", why));
  EXPECT_NE(why.find("line 2"), std::string::npos);
}

TEST_F(ModuleDir, DependenciesComeFirstEachOnce) {
  put("modules.dep",
      "kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/netfs/netfs.ko\n"
      "kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko\n"
      "kernel/net/9p/9pnet.ko:\nkernel/fs/netfs/netfs.ko:\n");
  for (const char* m : {"kernel/fs/9p/9p.ko", "kernel/net/9p/9pnet_virtio.ko",
                        "kernel/net/9p/9pnet.ko", "kernel/fs/netfs/netfs.ko"}) {
    put(m, "module");
  }
  const auto s = resolve({{"9pnet_virtio", true}, {"9p", true}});
  ASSERT_TRUE(s) << why_;
  EXPECT_EQ(order(*s), (std::vector<std::string>{"9pnet", "9pnet_virtio", "netfs", "9p"}));
  EXPECT_EQ(s->load_order[0].size, 6u);
  EXPECT_GT(s->load_order[0].mtime_ns, 0);
}

TEST_F(ModuleDir, BuiltinNeedsNoFileAndOptionalMayBeAbsent) {
  put("modules.builtin", "kernel/drivers/virtio/virtio_mmio.ko\n");
  put("modules.dep", "kernel/fs/overlayfs/overlay.ko:\n");
  put("kernel/fs/overlayfs/overlay.ko", "m");
  const auto s = resolve({{"virtio-mmio", true}, {"overlay", false}, {"pvpanic_mmio", false}});
  ASSERT_TRUE(s) << why_;
  EXPECT_EQ(s->builtin, (std::vector<std::string>{"virtio_mmio"}));
  EXPECT_EQ(order(*s), (std::vector<std::string>{"overlay"}));
  EXPECT_EQ(s->absent, (std::vector<std::string>{"pvpanic_mmio"}));
}

TEST_F(ModuleDir, MissingRequiredModuleNamesItAndWhoNeedsIt) {
  put("modules.dep", "kernel/a.ko: kernel/b.ko\n");
  put("kernel/a.ko", "m");
  EXPECT_FALSE(resolve({{"nothere", true}}));
  EXPECT_NE(why_.find("'nothere'"), std::string::npos);
  EXPECT_FALSE(resolve({{"a", true}}));  // b.ko is named but not there
  EXPECT_NE(why_.find("'b' (needed by a)"), std::string::npos) << why_;
}

TEST_F(ModuleDir, CycleIsAnError) {
  put("modules.dep", "a.ko: b.ko\nb.ko: c.ko\nc.ko: a.ko\n");
  for (const char* m : {"a.ko", "b.ko", "c.ko"}) put(m, "m");
  EXPECT_FALSE(resolve({{"a", true}}));
  EXPECT_NE(why_.find("cycle"), std::string::npos) << why_;
}

TEST_F(ModuleDir, PathsLeavingTheFolderAreRefused) {
  put("modules.dep", "../../etc/evil.ko:\n/abs/olute.ko:\nkernel/./x.ko:\n");
  for (const char* w : {"evil", "olute", "x"}) {
    EXPECT_FALSE(resolve({{w, true}})) << w;
    EXPECT_NE(why_.find("leaves"), std::string::npos) << why_;
  }
}

TEST_F(ModuleDir, SymlinkOrFolderInsteadOfAModuleIsRefused) {
  put("modules.dep", "kernel/link.ko:\nkernel/dir.ko:\n");
  put("target", "m");
  fs::create_directories(dir_ / "kernel");
  fs::create_symlink(dir_ / "target", dir_ / "kernel/link.ko");
  fs::create_directories(dir_ / "kernel/dir.ko");
  EXPECT_FALSE(resolve({{"link", true}}));
  EXPECT_FALSE(resolve({{"dir", true}}));
}

TEST_F(ModuleDir, MalformedDepFileIsAnErrorNamingIt) {
  put("modules.dep", "this is not a dep line\n");
  EXPECT_FALSE(resolve({{"a", true}}));
  EXPECT_NE(why_.find("modules.dep: line 1"), std::string::npos) << why_;
}

TEST_F(ModuleDir, ModulesDepThatIsAFolderIsAnError) {
  fs::create_directories(dir_ / "modules.dep");
  EXPECT_FALSE(resolve({{"a", true}}));
  EXPECT_NE(why_.find("not a regular file"), std::string::npos) << why_;
}

// An ELF64 with a .modinfo section holding `info` (NULs between the key=value strings).
std::string fake_module(const std::string& info) {
  const std::string shstr = std::string("\0.modinfo\0.shstrtab\0", 20);
  std::string elf(64, '\0');
  std::memcpy(elf.data(), "\x7f" "ELF\x02\x01", 6);
  const std::uint64_t info_off = elf.size();
  elf += info;
  const std::uint64_t str_off = elf.size();
  elf += shstr;
  while (elf.size() % 8) elf.push_back('\0');
  const std::uint64_t shoff = elf.size();
  std::string sh(64 * 3, '\0');
  const auto set = [&](int i, std::uint32_t name, std::uint64_t off, std::uint64_t size) {
    std::memcpy(sh.data() + 64 * i, &name, 4);
    std::memcpy(sh.data() + 64 * i + 0x18, &off, 8);
    std::memcpy(sh.data() + 64 * i + 0x20, &size, 8);
  };
  set(1, 1, info_off, info.size());
  set(2, 10, str_off, shstr.size());
  elf += sh;
  const std::uint16_t shentsize = 64, shnum = 3, shstrndx = 2;
  std::memcpy(elf.data() + 0x28, &shoff, 8);
  std::memcpy(elf.data() + 0x3a, &shentsize, 2);
  std::memcpy(elf.data() + 0x3c, &shnum, 2);
  std::memcpy(elf.data() + 0x3e, &shstrndx, 2);
  return elf;
}

TEST(ModinfoDepends, ReadsTheField) {
  using namespace std::string_literals;
  EXPECT_EQ(modinfo_depends(fake_module("license=GPL\0depends=9pnet,netfs\0"s)), "9pnet,netfs");
  EXPECT_EQ(modinfo_depends(fake_module("license=GPL\0"s)), "");
  EXPECT_FALSE(modinfo_depends("not an elf"));
  std::string cut = fake_module("depends=x\0"s);
  cut.resize(cut.size() - 100);  // the section headers cut off
  EXPECT_FALSE(modinfo_depends(cut));
}

TEST_F(ModuleDir, WithoutModulesDepTheModinfoSaysTheDependencies) {
  using namespace std::string_literals;
  put("kernel/fs/9p/9p.ko", fake_module("depends=9pnet,netfs\0"s));
  put("kernel/net/9p/9pnet.ko", fake_module("depends=\0"s));
  put("kernel/fs/netfs/netfs.ko", fake_module("name=netfs\0"s));
  const auto s = resolve({{"9p", true}});
  ASSERT_TRUE(s) << why_;
  EXPECT_EQ(order(*s), (std::vector<std::string>{"9pnet", "netfs", "9p"}));
}

TEST_F(ModuleDir, WithoutModulesDepModulesOrderNamesThePathsAndNoWalkIsNeeded) {
  using namespace std::string_literals;
  put("modules.order", "kernel/fs/9p/9p.ko\nkernel/net/9p/9pnet.ko\n../../evil.ko\n");
  put("kernel/fs/9p/9p.ko", fake_module("depends=9pnet\0"s));
  put("kernel/net/9p/9pnet.ko", fake_module("depends=\0"s));
  put("elsewhere/unlisted.ko", fake_module("depends=\0"s));  // not in modules.order
  const auto s = resolve({{"9p", true}, {"unlisted", false}});
  ASSERT_TRUE(s) << why_;
  EXPECT_EQ(order(*s), (std::vector<std::string>{"9pnet", "9p"}));
  EXPECT_EQ(s->absent, (std::vector<std::string>{"unlisted"}));
  EXPECT_FALSE(resolve({{"evil", true}}));
}

TEST_F(ModuleDir, ModulesOrderOfAModuleCompressedSinceIsFoundAndRefusedWithoutDep) {
  put("modules.order", "kernel/a.ko\n");
  put("kernel/a.ko.zst", "zst");
  EXPECT_FALSE(resolve({{"a", true}}));
  EXPECT_NE(why_.find("kernel/a.ko.zst: compressed"), std::string::npos) << why_;
}

TEST_F(ModuleDir, WithoutModulesDepACompressedModuleAsksForDepmod) {
  put("kernel/a.ko.xz", "xz");
  EXPECT_FALSE(resolve({{"a", true}}));
  EXPECT_NE(why_.find("depmod"), std::string::npos) << why_;
}

}  // namespace
}  // namespace minivmm::vmm::exec
