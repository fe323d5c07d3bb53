// P9Server against a temporary folder: each 9P2000.L operation v9fs uses, the path rules (`..`
// at the root, absolute and relative symlinks out of the share, a symlink swapped in between
// two walk steps, a share that is itself a symlink), read-only shares, and hostile messages
// (short, oversized, bad counts, strings and fids) answered Rlerror.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "devices/virtio/9p/p9_server.h"
#include "tests/support/ninep_frames.h"

namespace minivmm::testing {
namespace {

namespace fs = std::filesystem;
using devices::p9::P9Server;
using namespace devices::p9;

class TempTree {
 public:
  TempTree() {
    char tmpl[] = "/tmp/minivmm-9p-XXXXXX";
    base_ = ::mkdtemp(tmpl);
    fs::create_directory(share());
    fs::create_directory(outside());
    write(outside() / "secret", "outside");
  }
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }
  fs::path base() const { return base_; }
  fs::path share() const { return base_ / "share"; }
  fs::path outside() const { return base_ / "outside"; }
  static void write(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  fs::path base_;
};

class P9ServerTest : public ::testing::Test {
 protected:
  void SetUp() override { open(tree.share(), false); }
  void open(const fs::path& dir, bool ro) {
    std::string why;
    server = P9Server::open(dir, ro, why);
    ASSERT_NE(server, nullptr) << why;
    ASSERT_EQ(send(t9::version()).type(), kTversion + 1);
    ASSERT_EQ(send(t9::attach(kRoot)).type(), kTattach + 1);
  }
  Answer send_bytes(const std::vector<std::byte>& req, std::size_t room = 1 << 17) {
    Answer a;
    a.bytes.resize(room);
    a.bytes.resize(server->handle(req, a.bytes));
    if (!a.bytes.empty()) {
      EXPECT_EQ(a.size_field(), a.bytes.size());
    }
    return a;
  }
  Answer send(const Frame& f, std::size_t room = 1 << 17) { return send_bytes(f.bytes(), room); }
  // Walks root -> names into `fid`; returns the Rlerror errno (0: walked all of them).
  std::uint32_t walk(std::uint32_t fid, const std::vector<std::string>& names) {
    const Answer a = send(t9::walk(kRoot, fid, names));
    if (a.error() != 0) return a.error();
    auto r = a.body();
    return r.u16() == names.size() ? 0 : ENOENT;
  }
  std::uint64_t size_of(std::uint32_t fid) {
    const Answer a = send(t9::getattr(fid));
    EXPECT_EQ(a.type(), kTgetattr + 1);
    auto r = a.body();
    r.u64();
    r.u8(); r.u32(); r.u64();  // qid
    r.u32(); r.u32(); r.u32();  // mode uid gid
    r.u64(); r.u64();           // nlink rdev
    return r.u64();
  }
  std::string read_all(std::uint32_t fid) {
    const Answer a = send(t9::read(fid, 0, 4096));
    EXPECT_EQ(a.type(), kTread + 1) << a.error();
    auto r = a.body();
    const std::uint32_t n = r.u32();
    auto data = r.bytes(n);
    return std::string(reinterpret_cast<const char*>(data.data()), data.size());
  }

  static constexpr std::uint32_t kRoot = 1;
  TempTree tree;
  std::unique_ptr<P9Server> server;
};

TEST_F(P9ServerTest, VersionAgreesOnTheSmallerMsizeAndOnlyOnDotL) {
  Answer a = send(t9::version(8192));
  auto r = a.body();
  EXPECT_EQ(r.u32(), 8192u);
  EXPECT_EQ(r.str(), "9P2000.L");
  a = send(t9::version(1u << 30, "9P2000.u"));
  r = a.body();
  EXPECT_EQ(r.u32(), P9Server::kMaxMsize);
  EXPECT_EQ(r.str(), "unknown");
  // A new session clunked the old fids.
  EXPECT_EQ(send(t9::getattr(kRoot)).error(), static_cast<std::uint32_t>(EBADF));
}

TEST_F(P9ServerTest, CreateWriteReadBack) {
  ASSERT_EQ(walk(2, {}), 0u);
  Answer a = send(t9::lcreate(2, "f.txt", O_RDWR | O_CREAT));
  ASSERT_EQ(a.type(), kTlcreate + 1) << a.error();
  a = send(t9::write(2, 0, "hello 9p"));
  ASSERT_EQ(a.type(), kTwrite + 1);
  EXPECT_EQ(a.body().u32(), 8u);
  EXPECT_EQ(TempTree::read(tree.share() / "f.txt"), "hello 9p");
  EXPECT_EQ(read_all(2), "hello 9p");
  EXPECT_EQ(size_of(2), 8u);
  EXPECT_EQ(server->stats().bytes_written, 8u);
  EXPECT_EQ(server->stats().bytes_read, 8u);
  EXPECT_EQ(send(t9::clunk(2)).type(), kTclunk + 1);
  EXPECT_EQ(server->stats().fids_open, 1u);
}

TEST_F(P9ServerTest, GetattrWorksOnAnOpenThenUnlinkedFile) {
  TempTree::write(tree.share() / "gone", "12345");
  ASSERT_EQ(walk(2, {"gone"}), 0u);
  ASSERT_EQ(send(t9::lopen(2, O_RDONLY)).type(), kTlopen + 1);
  ASSERT_EQ(send(t9::unlinkat(kRoot, "gone", 0)).type(), kTunlinkat + 1);
  EXPECT_FALSE(fs::exists(tree.share() / "gone"));
  EXPECT_EQ(size_of(2), 5u);
  EXPECT_EQ(read_all(2), "12345");
}

TEST_F(P9ServerTest, ReaddirListsEveryEntryAcrossCalls) {
  for (int i = 0; i < 300; ++i) TempTree::write(tree.share() / ("e" + std::to_string(i)), "");
  ASSERT_EQ(walk(2, {}), 0u);
  ASSERT_EQ(send(t9::lopen(2, O_RDONLY | O_DIRECTORY)).type(), kTlopen + 1);
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (int calls = 0; calls < 1000; ++calls) {
    const Answer a = send(t9::readdir(2, offset, 512));
    ASSERT_EQ(a.type(), kTreaddir + 1) << a.error();
    auto r = a.body();
    const std::uint32_t count = r.u32();
    if (count == 0) break;
    auto data = r.bytes(count);
    P9Reader e(data);
    while (e.remaining() > 0) {
      e.u8(); e.u32(); e.u64();
      offset = e.u64();
      e.u8();
      names.insert(e.str());
      ASSERT_TRUE(e.ok());
    }
  }
  EXPECT_EQ(names.size(), 302u);  // and . and ..
  EXPECT_TRUE(names.count("e299"));
}

TEST_F(P9ServerTest, DotDotAtTheRootStaysAtTheRoot) {
  ASSERT_EQ(walk(2, {"..", "..", ".."}), 0u);
  struct stat root{};
  ASSERT_EQ(::stat(tree.share().c_str(), &root), 0);
  const Answer a = send(t9::getattr(2));
  auto r = a.body();
  r.u64();
  r.u8(); r.u32();
  EXPECT_EQ(r.u64(), root.st_ino);
  // And from a subdirectory `..` is its parent, not more.
  fs::create_directories(tree.share() / "a" / "b");
  ASSERT_EQ(walk(3, {"a", "b", "..", "..", ".."}), 0u);
  const Answer b = send(t9::getattr(3));
  auto rb = b.body();
  rb.u64();
  rb.u8(); rb.u32();
  EXPECT_EQ(rb.u64(), root.st_ino);
  // The secret next to the share is not reachable by name.
  EXPECT_NE(walk(4, {"..", "outside", "secret"}), 0u);
}

TEST_F(P9ServerTest, SymlinksOutOfTheShareAreNeverFollowed) {
  fs::create_symlink(tree.outside() / "secret", tree.share() / "abs");
  fs::create_symlink("../outside/secret", tree.share() / "rel");
  fs::create_directory_symlink(tree.outside(), tree.share() / "dirlink");
  // The walk reaches the link itself: a symlink qid, which lopen refuses.
  ASSERT_EQ(walk(2, {"abs"}), 0u);
  const Answer q = send(t9::getattr(2));
  auto r = q.body();
  r.u64();
  EXPECT_EQ(r.u8(), kQtSymlink);
  EXPECT_EQ(send(t9::lopen(2, O_RDONLY)).error(), static_cast<std::uint32_t>(ELOOP));
  // readlink answers the target text; the guest resolves it in its own tree.
  const Answer rl = send(t9::readlink(2));
  EXPECT_EQ(rl.body().str(), (tree.outside() / "secret").string());
  ASSERT_EQ(walk(3, {"rel"}), 0u);
  EXPECT_EQ(send(t9::lopen(3, O_RDONLY)).error(), static_cast<std::uint32_t>(ELOOP));
  // Through a directory symlink: the walk stops at the link (partial walk, no newfid).
  const Answer w = send(t9::walk(kRoot, 4, {"dirlink", "secret"}));
  ASSERT_EQ(w.type(), kTwalk + 1);
  EXPECT_EQ(w.body().u16(), 1u);
  EXPECT_EQ(send(t9::getattr(4)).error(), static_cast<std::uint32_t>(EBADF));
  ASSERT_EQ(walk(5, {"dirlink"}), 0u);
  EXPECT_EQ(send(Frame(kTwalk, 1).u32(5).u32(6).u16(1).str("secret")).error(),
            static_cast<std::uint32_t>(ENOTDIR));
  // setattr through the link never changes the target.
  EXPECT_NE(send(t9::setattr_mode(2, 0777)).error(), 0u);
  struct stat st{};
  ASSERT_EQ(::stat((tree.outside() / "secret").c_str(), &st), 0);
  EXPECT_NE(st.st_mode & 0777, 0777u);
}

TEST_F(P9ServerTest, ASymlinkSwappedInBetweenWalkStepsIsNotFollowed) {
  fs::create_directories(tree.share() / "d" / "e");
  TempTree::write(tree.share() / "d" / "e" / "secret", "inside");
  TempTree::write(tree.outside() / "e", "outside");
  // Step one: the guest walks to d/e...
  ASSERT_EQ(walk(3, {"d", "e"}), 0u);
  // ...the host replaces d with a symlink out of the share...
  fs::rename(tree.share() / "d", tree.base() / "moved");
  fs::create_directory_symlink(tree.outside(), tree.share() / "d");
  // ...a walk from the root meets the link and stops there (one qid: the link's);
  const Answer a = send(t9::walk(kRoot, 4, {"d", "e"}));
  ASSERT_EQ(a.type(), kTwalk + 1);
  EXPECT_EQ(a.body().u16(), 1u);
  // the fid walked before still names the directory it had (moved by the host itself), never
  // the symlink's target;
  ASSERT_EQ(send(t9::walk(3, 5, {"secret"})).type(), kTwalk + 1);
  ASSERT_EQ(send(t9::lopen(5, O_RDONLY)).type(), kTlopen + 1);
  EXPECT_EQ(read_all(5), "inside");
  // and its `..`, found again from the root by path, meets the link: refused.
  EXPECT_NE(send(t9::walk(3, 6, {".."})).error(), 0u);
  EXPECT_GE(server->stats().escapes_refused, 1u);
}

TEST_F(P9ServerTest, AShareThatIsASymlinkServesTheFolderItNames) {
  fs::create_directory_symlink(tree.share(), tree.base() / "link-to-share");
  TempTree::write(tree.share() / "x", "via link");
  open(tree.base() / "link-to-share", false);
  ASSERT_EQ(walk(2, {"x"}), 0u);
  ASSERT_EQ(send(t9::lopen(2, O_RDONLY)).type(), kTlopen + 1);
  EXPECT_EQ(read_all(2), "via link");
}

TEST(P9ServerOpen, RefusesAFileOrAMissingFolder) {
  TempTree tree;
  std::string why;
  EXPECT_EQ(P9Server::open((tree.outside() / "secret").string(), false, why), nullptr);
  EXPECT_NE(why.find("not a directory"), std::string::npos) << why;
  EXPECT_EQ(P9Server::open((tree.base() / "nope").string(), false, why), nullptr);
  EXPECT_NE(why.find("No such file"), std::string::npos) << why;
}

TEST_F(P9ServerTest, AReadOnlyShareRefusesEveryChange) {
  TempTree::write(tree.share() / "f", "keep");
  fs::create_directory(tree.share() / "d");
  open(tree.share(), true);
  ASSERT_EQ(walk(2, {"f"}), 0u);
  const auto erofs = static_cast<std::uint32_t>(EROFS);
  EXPECT_EQ(send(t9::lopen(2, O_RDWR)).error(), erofs);
  EXPECT_EQ(send(t9::lopen(2, O_RDONLY | O_TRUNC)).error(), erofs);
  EXPECT_EQ(send(t9::setattr_size(2, 0)).error(), erofs);
  EXPECT_EQ(send(t9::setattr_mode(2, 0600)).error(), erofs);
  ASSERT_EQ(walk(3, {}), 0u);
  EXPECT_EQ(send(t9::lcreate(3, "new", O_RDWR | O_CREAT)).error(), erofs);
  EXPECT_EQ(send(t9::mkdir(kRoot, "m")).error(), erofs);
  EXPECT_EQ(send(t9::unlinkat(kRoot, "f", 0)).error(), erofs);
  EXPECT_EQ(send(t9::unlinkat(kRoot, "d", 0x200)).error(), erofs);
  EXPECT_EQ(send(t9::renameat(kRoot, "f", kRoot, "g")).error(), erofs);
  EXPECT_EQ(send(t9::symlink(kRoot, "s", "f")).error(), erofs);
  EXPECT_EQ(send(Frame(kTlink, 1).u32(kRoot).u32(2).str("h")).error(), erofs);
  // Reading still works; a write on a read-only open is refused as well.
  ASSERT_EQ(send(t9::lopen(2, O_RDONLY)).type(), kTlopen + 1);
  EXPECT_EQ(read_all(2), "keep");
  EXPECT_EQ(send(t9::write(2, 0, "x")).error(), erofs);
  EXPECT_EQ(TempTree::read(tree.share() / "f"), "keep");
  EXPECT_TRUE(fs::exists(tree.share() / "d"));
  EXPECT_GE(server->stats().read_only_refused, 12u);
}

TEST_F(P9ServerTest, DirectoriesLinksRenames) {
  ASSERT_EQ(send(t9::mkdir(kRoot, "dir")).type(), kTmkdir + 1);
  EXPECT_TRUE(fs::is_directory(tree.share() / "dir"));
  TempTree::write(tree.share() / "a", "A");
  TempTree::write(tree.share() / "b", "B");
  // rename over an existing file
  ASSERT_EQ(send(t9::renameat(kRoot, "a", kRoot, "b")).type(), kTrenameat + 1);
  EXPECT_EQ(TempTree::read(tree.share() / "b"), "A");
  // link
  ASSERT_EQ(walk(2, {"b"}), 0u);
  ASSERT_EQ(send(Frame(kTlink, 1).u32(kRoot).u32(2).str("c")).type(), kTlink + 1);
  EXPECT_EQ(fs::hard_link_count(tree.share() / "b"), 2u);
  // Trename by fid, into the directory
  ASSERT_EQ(walk(3, {"dir"}), 0u);
  ASSERT_EQ(send(Frame(kTrename, 1).u32(2).u32(3).str("moved")).type(), kTrename + 1);
  EXPECT_EQ(TempTree::read(tree.share() / "dir" / "moved"), "A");
  // symlink + readlink
  ASSERT_EQ(send(t9::symlink(kRoot, "ln", "dir/moved")).type(), kTsymlink + 1);
  ASSERT_EQ(walk(4, {"ln"}), 0u);
  EXPECT_EQ(send(t9::readlink(4)).body().str(), "dir/moved");
  // truncate and chmod
  ASSERT_EQ(walk(5, {"c"}), 0u);
  ASSERT_EQ(send(t9::setattr_size(5, 0)).type(), kTsetattr + 1);
  EXPECT_EQ(fs::file_size(tree.share() / "c"), 0u);
  ASSERT_EQ(send(t9::setattr_mode(5, 0600)).type(), kTsetattr + 1);
  EXPECT_EQ(fs::status(tree.share() / "c").permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
  // rmdir of a non-empty directory fails, of an empty one works
  EXPECT_EQ(send(t9::unlinkat(kRoot, "dir", 0x200)).error(), static_cast<std::uint32_t>(ENOTEMPTY));
  ASSERT_EQ(send(t9::unlinkat(3, "moved", 0)).type(), kTunlinkat + 1);
  ASSERT_EQ(send(t9::unlinkat(kRoot, "dir", 0x200)).type(), kTunlinkat + 1);
  EXPECT_FALSE(fs::exists(tree.share() / "dir"));
}

TEST_F(P9ServerTest, RefusedOperations) {
  EXPECT_EQ(send(Frame(kTmknod, 1).u32(kRoot).str("fifo").u32(S_IFIFO | 0644).u32(0).u32(0).u32(0))
                .error(),
            static_cast<std::uint32_t>(EPERM));
  EXPECT_EQ(send(Frame(kTxattrwalk, 1).u32(kRoot).u32(9).str("user.x")).error(),
            static_cast<std::uint32_t>(EOPNOTSUPP));
  // A FIFO made on the host is walked to, never opened.
  ASSERT_EQ(::mkfifo((tree.share() / "fifo").c_str(), 0644), 0);
  ASSERT_EQ(walk(2, {"fifo"}), 0u);
  EXPECT_EQ(send(t9::lopen(2, O_RDONLY)).error(), static_cast<std::uint32_t>(EOPNOTSUPP));
  ASSERT_EQ(walk(3, {}), 0u);
  EXPECT_EQ(send(t9::lcreate(3, "fifo", O_RDONLY | O_CREAT)).error(),
            static_cast<std::uint32_t>(EOPNOTSUPP));
  // Names that are not one component.
  EXPECT_EQ(send(t9::mkdir(kRoot, "a/b")).error(), static_cast<std::uint32_t>(EINVAL));
  EXPECT_EQ(send(t9::mkdir(kRoot, "..")).error(), static_cast<std::uint32_t>(EINVAL));
  EXPECT_EQ(send(t9::mkdir(kRoot, std::string("x\0y", 3))).error(),
            static_cast<std::uint32_t>(EINVAL));
  EXPECT_EQ(send(t9::walk(kRoot, 4, {"../outside"})).error(), static_cast<std::uint32_t>(EINVAL));
  EXPECT_EQ(send(t9::walk(kRoot, 4, {"/etc"})).error(), static_cast<std::uint32_t>(EINVAL));
}

TEST_F(P9ServerTest, LocksAreTheFidsOwn) {
  TempTree::write(tree.share() / "l", "x");
  ASSERT_EQ(walk(2, {"l"}), 0u);
  ASSERT_EQ(walk(3, {"l"}), 0u);
  ASSERT_EQ(send(t9::lopen(2, O_RDWR)).type(), kTlopen + 1);
  ASSERT_EQ(send(t9::lopen(3, O_RDWR)).type(), kTlopen + 1);
  auto lock = [&](std::uint32_t fid, std::uint8_t type) {
    const Answer a = send(Frame(kTlock, 1).u32(fid).u8(type).u32(0).u64(0).u64(0).u32(1).str("c"));
    EXPECT_EQ(a.type(), kTlock + 1);
    return a.body().u8();
  };
  EXPECT_EQ(lock(2, 1), 0u);  // write lock: success
  EXPECT_EQ(lock(3, 1), 1u);  // the other open: blocked
  const Answer g = send(Frame(kTgetlock, 1).u32(3).u8(1).u64(0).u64(0).u32(1).str("c"));
  EXPECT_EQ(g.body().u8(), 1u);  // a write lock is in the way
  EXPECT_EQ(lock(2, 2), 0u);  // unlock
  EXPECT_EQ(lock(3, 1), 0u);
}

TEST_F(P9ServerTest, StatfsAndFsync) {
  const Answer s = send(Frame(kTstatfs, 1).u32(kRoot));
  ASSERT_EQ(s.type(), kTstatfs + 1);
  EXPECT_EQ(s.bytes.size(), 7u + 4 + 4 + 8 * 6 + 4);
  ASSERT_EQ(walk(2, {}), 0u);
  ASSERT_EQ(send(t9::lcreate(2, "s", O_RDWR | O_CREAT)).type(), kTlcreate + 1);
  EXPECT_EQ(send(Frame(kTfsync, 1).u32(2).u32(0)).type(), kTfsync + 1);
  EXPECT_EQ(send(Frame(kTflush, 1).u16(7)).type(), kTflush + 1);
}

TEST_F(P9ServerTest, HostileMessagesGetRlerror) {
  const auto eproto = static_cast<std::uint32_t>(EPROTO);
  // Shorter than a header, a size below 7, a size beyond the bytes, a size beyond msize.
  EXPECT_EQ(send_bytes({std::byte{1}, std::byte{2}}).error(), eproto);
  EXPECT_EQ(send_bytes(t9::getattr(kRoot).bytes(3)).error(), eproto);
  EXPECT_EQ(send_bytes(t9::getattr(kRoot).bytes(1000)).error(), eproto);
  send(t9::version(4096));
  send(t9::attach(kRoot));
  EXPECT_EQ(send_bytes(t9::write(kRoot, 0, std::string(5000, 'x')).bytes()).error(), eproto);
  // Fields cut short: each message type with its body missing.
  for (int type = 0; type < 256; ++type) {
    if (type == kTversion) continue;
    const Answer a = send(Frame(static_cast<std::uint8_t>(type), 9));
    ASSERT_EQ(a.type(), kRlerror) << type;
    EXPECT_EQ(a.tag(), 9u);
  }
  // A string claiming more than the message holds; a walk of 17 names; a count past the data.
  EXPECT_EQ(send(Frame(kTmkdir, 1).u32(kRoot).u16(60000).u32(0).u32(0)).error(), eproto);
  EXPECT_EQ(send(t9::walk(kRoot, 2, std::vector<std::string>(17, "a"))).error(),
            static_cast<std::uint32_t>(EINVAL));
  EXPECT_EQ(send(Frame(kTwrite, 1).u32(kRoot).u64(0).u32(0xffffffff)).error(), eproto);
  // Unknown fids, fids in use.
  EXPECT_EQ(send(t9::getattr(12345)).error(), static_cast<std::uint32_t>(EBADF));
  EXPECT_EQ(send(t9::attach(kRoot)).error(), static_cast<std::uint32_t>(EBADF));
  EXPECT_EQ(send(t9::read(kRoot, 0, 10)).error(), static_cast<std::uint32_t>(EBADF));
  EXPECT_EQ(send(t9::read(kRoot, 1ull << 63, 10)).error(), static_cast<std::uint32_t>(EBADF));
  // No room for even Rlerror: nothing is written.
  EXPECT_EQ(send(t9::getattr(kRoot), 10).bytes.size(), 0u);
  EXPECT_GT(server->stats().protocol_errors, 20u);
}

TEST_F(P9ServerTest, AReadIsCutToTheRoomOfTheAnswer) {
  TempTree::write(tree.share() / "big", std::string(10000, 'b'));
  ASSERT_EQ(walk(2, {"big"}), 0u);
  ASSERT_EQ(send(t9::lopen(2, O_RDONLY)).type(), kTlopen + 1);
  const Answer a = send(t9::read(2, 0, 10000), 100);
  ASSERT_EQ(a.type(), kTread + 1);
  EXPECT_EQ(a.body().u32(), 100u - 11u);
  // A readdir whose count holds no entry at all.
  ASSERT_EQ(walk(3, {}), 0u);
  ASSERT_EQ(send(t9::lopen(3, O_RDONLY)).type(), kTlopen + 1);
  EXPECT_EQ(send(t9::readdir(3, 0, 5)).error(), static_cast<std::uint32_t>(EMSGSIZE));
}

}  // namespace
}  // namespace minivmm::testing
