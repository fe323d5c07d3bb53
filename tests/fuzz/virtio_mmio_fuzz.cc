// libFuzzer target: the virtio-mmio transport driven at register level - 1/2/4/8-byte reads and
// writes at any offset, in and out of the window, aligned or not, through the MMIO bus or
// straight to the transport; notifications by register and by ioeventfd; interrupt acks; status
// writes including reset and FAILED; a Linux driver's bring-up - with virtio-console and
// virtio-blk behind it and the input writing guest RAM (rings and buffers) in between. Record
// format and checks: virtio_mmio_rig.h.
//
// As for the other register-driven targets, every input runs on two identical rigs ("twins"):
// before a read one buffer holds 0x00 and the other 0xff, so a byte the device did not fill
// differs; the twins' observable outcomes (interrupts, output, counters) must agree throughout.
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "devices/log/log.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_ops.h"
#include "tests/fuzz/virtio_mmio_rig.h"

namespace {

using minivmm::fuzz::GuardedRam;
using minivmm::fuzz::Op;
using minivmm::fuzz::OpKind;
using minivmm::fuzz::OpReader;
using minivmm::fuzz::VirtioMmioRig;

// One disk per twin, refilled per input: both must start identical every run.
int disk_fd(std::size_t twin) {
  static const std::array<int, 2> fds = [] {
    std::array<int, 2> f{};
    for (int& fd : f) {
      fd = ::memfd_create("virtio-mmio-fuzz", MFD_CLOEXEC);
      FUZZ_CHECK(fd >= 0, "memfd_create failed");
    }
    return f;
  }();
  const int fd = fds[twin];
  static const std::vector<std::uint8_t> pattern = [] {
    std::vector<std::uint8_t> d(VirtioMmioRig::kDiskBytes);
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(i * 7 + i / 512);
    return d;
  }();
  FUZZ_CHECK(::ftruncate(fd, 0) == 0 &&
                 ::pwrite(fd, pattern.data(), pattern.size(), 0) ==
                     static_cast<ssize_t>(pattern.size()),
             "refilling the disk failed");
  return fd;
}

GuardedRam& ram(std::size_t twin) {
  static std::array<GuardedRam, 2> rams;
  return rams[twin];
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  minivmm::log::set_level(minivmm::log::Level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  OpReader in(data, size);
  VirtioMmioRig a(in.config(), ram(0), disk_fd(0));
  VirtioMmioRig b(in.config(), ram(1), disk_fd(1));
  while (const std::optional<Op> op = in.next()) {
    std::array<std::uint8_t, 8> x{};
    std::array<std::uint8_t, 8> y{};
    y.fill(0xff);
    a.apply(*op, x);
    b.apply(*op, y);
    if (op->kind == OpKind::kRead) {
      const std::size_t w = std::size_t{1} << (op->arg & 3u);
      for (std::size_t i = 0; i < w; ++i) {
        FUZZ_CHECK(x[i] == y[i], "read (arg 0x%02x, port 0x%04x): byte %zu not filled (0x%02x, 0x%02x)",
                   op->arg, op->port, i, x[i], y[i]);
      }
    }
    FUZZ_CHECK(a.digest() == b.digest(), "identical twins diverged (nondeterministic device)");
  }
  a.finish();
  b.finish();
  FUZZ_CHECK(a.digest() == b.digest(), "identical twins diverged (nondeterministic device)");
  return 0;
}
