// libFuzzer target: the 9P2000.L server (devices/virtio/9p/p9_server.h) over a small folder
// rebuilt for every input, fed messages as a guest could write them.
//
// Input: byte 0 is flags (bit 0: the share is read-only; bit 1: a valid Tversion and Tattach
// of fid 0 first, so the fuzzer starts inside a session); then messages, each a little-endian
// u16 length L, a u16 answer room R, and L bytes sent as they are (their own size field is the
// fuzzer's too).
//
// Checks: every answer fits the room it was given and its size field is its length; a request
// with a whole header gets its own tag back; nothing outside the share changes (a file beside
// it, which symlinks inside the share point at); a read-only share is never modified. ASan and
// UBSan catch the rest.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "devices/virtio/9p/p9_server.h"
#include "tests/support/ninep_frames.h"

namespace {

namespace fs = std::filesystem;
using minivmm::devices::p9::P9Server;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "virtio_9p_fuzz: %s\n", what);
  std::abort();
}

const fs::path& base() {
  static const fs::path b = [] {
    char tmpl[] = "/tmp/minivmm-9p-fuzz-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) fail("mkdtemp");
    fs::path p(tmpl);
    fs::create_directory(p / "outside");
    std::ofstream(p / "outside" / "secret") << "secret";
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(base(), ec);
    });
    return p;
  }();
  return b;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The share as every input starts: files, a folder, symlinks out of it.
void rebuild_share() {
  const fs::path share = base() / "share";
  std::error_code ec;
  fs::remove_all(share, ec);
  fs::create_directories(share / "d" / "e");
  std::ofstream(share / "f") << "hello";
  std::ofstream(share / "d" / "g") << "world";
  fs::create_symlink("../outside/secret", share / "rel", ec);
  fs::create_symlink(base() / "outside", share / "abs", ec);
}

// What a read-only share must still be: names and sizes.
std::string snapshot_share() {
  std::string s;
  for (const auto& e : fs::recursive_directory_iterator(base() / "share")) {
    s += e.path().string();
    if (e.is_regular_file() && !e.is_symlink()) s += ":" + std::to_string(e.file_size());
    s += "\n";
  }
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const bool ro = (data[0] & 1) != 0;
  const bool session = (data[0] & 2) != 0;
  rebuild_share();
  const std::string before = ro ? snapshot_share() : "";
  std::string why;
  auto server = P9Server::open((base() / "share").string(), ro, why);
  if (!server) fail(why.c_str());

  static std::vector<std::byte> out(P9Server::kMaxMsize);
  const auto send = [&](std::span<const std::byte> req, std::size_t room) {
    const std::size_t n = server->handle(req, std::span(out).first(room));
    if (n > room) fail("an answer larger than its room");
    if (room < 11) {
      if (n != 0) fail("an answer in less room than Rlerror needs");
      return;
    }
    if (n == 0) fail("no answer with room for one");
    if (n < 7) fail("an answer shorter than a header");
    minivmm::devices::p9::P9Reader r(std::span<const std::byte>(out.data(), n));
    if (r.u32() != n) fail("an answer whose size field is not its length");
    r.u8();
    const std::uint16_t tag = r.u16();
    if (req.size() >= 7) {
      const auto want = static_cast<std::uint16_t>(static_cast<std::uint8_t>(req[5]) |
                                                   static_cast<std::uint8_t>(req[6]) << 8);
      if (tag != want) fail("an answer with another tag");
    }
  };
  if (session) {
    send(minivmm::testing::t9::version(65536).bytes(), 65536);
    send(minivmm::testing::t9::attach(0).bytes(), 65536);
  }
  std::size_t at = 1;
  while (at + 4 <= size) {
    const std::size_t len = static_cast<std::size_t>(data[at] | data[at + 1] << 8);
    const std::size_t room = static_cast<std::size_t>(data[at + 2] | data[at + 3] << 8);
    at += 4;
    const std::size_t n = std::min(len, size - at);
    send(std::span(reinterpret_cast<const std::byte*>(data + at), n), room);
    at += n;
  }
  server.reset();
  if (read_file(base() / "outside" / "secret") != "secret") fail("a file outside the share changed");
  std::size_t outside = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(base() / "outside")) ++outside;
  if (outside != 1) fail("a file appeared outside the share");
  if (ro && snapshot_share() != before) fail("a read-only share changed");
  return 0;
}
