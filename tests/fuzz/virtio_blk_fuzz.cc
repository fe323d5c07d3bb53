// libFuzzer target: virtio-blk behind the virtio-mmio transport, with a guest that writes
// anything into its queue and requests (input format: virtio_fuzz_input.h), over a 32 KiB
// in-memory disk. Requests run inline (no worker thread), so a run is deterministic.
//
// Checks: the request parser never lets through an IN/OUT outside the disk, not whole sectors,
// or a write to a read-only disk, nor any request without a status byte; a read-only disk is
// never modified; the VMM survives (ASan/UBSan catch any access outside guest RAM or the disk
// buffers), and a reset afterwards leaves nothing in flight.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "devices/host/block_file.h"
#include "devices/bus/guest_memory.h"
#include "devices/virtio/blk/virtio_blk.h"
#include "devices/virtio/blk/virtio_blk_request.h"
#include "devices/virtio/virtio_mmio_transport.h"
#include "devices/virtio/virtqueue.h"
#include "tests/fuzz/virtio_fuzz_input.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_virtio_driver.h"

namespace {

using namespace minivmm::devices;
using minivmm::testing::FakeIrqLine;
using minivmm::testing::FakeMmioDriver;

constexpr std::size_t kDiskBytes = 64 * 512;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "virtio_blk_fuzz: %s\n", what);
  std::abort();
}

// One memfd per process, refilled per input: the disk must start the same every run.
int disk_fd() {
  static const int fd = [] {
    const int f = ::memfd_create("virtio-blk-fuzz", MFD_CLOEXEC);
    if (f < 0) fail("memfd_create");
    return f;
  }();
  return fd;
}

std::vector<std::uint8_t> disk_pattern() {
  std::vector<std::uint8_t> d(kDiskBytes);
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(i * 7 + i / 512);
  return d;
}

// Checks the parser's promises on every chain the walker hands out.
void check_parser(const minivmm::fuzz::VirtioFuzzInput& in, const GuestMemory& ram) {
  Virtqueue q(128);
  q.set_size(in.queue_size);
  q.set_desc_addr(in.desc);
  q.set_avail_addr(in.avail);
  q.set_used_addr(in.used);
  if (!q.activate(ram, in.indirect, in.event_idx)) return;
  DescriptorChain c;
  for (int i = 0; i < in.queue_size && q.pop(c) == Virtqueue::Pop::kChain; ++i) {
    const BlkRequest r = parse_blk_request(c, ram, kDiskBytes / 512, in.read_only);
    if (r.error != BlkError::kNone) continue;
    if (r.type == kBlkTIn || r.type == kBlkTOut) {
      if (r.data_bytes % 512 != 0) fail("served a request that is not whole sectors");
      if (r.sector > kDiskBytes / 512 || r.data_bytes / 512 > kDiskBytes / 512 - r.sector) {
        fail("served a request outside the disk");
      }
      if (r.type == kBlkTOut && in.read_only) fail("served a write to a read-only disk");
    }
    if (!r.has_status) fail("served a request with no status byte");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  minivmm::fuzz::VirtioFuzzInput in;
  if (!in.parse(data, size)) return 0;

  const std::vector<std::uint8_t> pattern = disk_pattern();
  const int fd = disk_fd();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pattern.data(), pattern.size(), 0) !=
                                      static_cast<ssize_t>(pattern.size())) {
    fail("resetting the disk");
  }

  {
    std::vector<std::byte> copy = in.ram;
    check_parser(in, GuestMemory{std::span(copy)});
  }

  const GuestMemory ram{std::span(in.ram)};
  VirtioBlk blk(BlockFile::open("/proc/self/fd/" + std::to_string(fd), in.read_only), "fuzz",
                /*use_worker=*/false);
  FakeIrqLine irq;
  VirtioMmioTransport t(blk, ram, irq);
  FakeMmioDriver drv(t);
  using T = VirtioMmioTransport;
  drv.write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver);
  std::uint64_t features = kVirtioFVersion1 | blk.device_features();
  if (in.indirect) features |= kVirtioFIndirectDesc;
  if (in.event_idx) features |= kVirtioFEventIdx;
  drv.set_features(features);
  drv.write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk);
  drv.write(T::kQueueSel, 0);
  drv.write(T::kQueueNum, in.queue_size);
  drv.write(T::kQueueDescLow, static_cast<std::uint32_t>(in.desc));
  drv.write(T::kQueueDriverLow, static_cast<std::uint32_t>(in.avail));
  drv.write(T::kQueueDeviceLow, static_cast<std::uint32_t>(in.used));
  drv.write(T::kQueueReady, 1);
  drv.write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk |
                            T::kStatusDriverOk);
  drv.notify(0);
  drv.notify(0);

  if (in.read_only) {
    std::vector<std::uint8_t> now(kDiskBytes);
    if (::pread(fd, now.data(), now.size(), 0) != static_cast<ssize_t>(now.size()) ||
        now != pattern) {
      fail("a read-only disk changed");
    }
  }
  drv.write(T::kStatus, 0);
  return 0;
}
