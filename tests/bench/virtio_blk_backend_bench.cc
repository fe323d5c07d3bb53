// The host side of virtio-blk without KVM (issue 14): one sequential 4 KiB read per iteration
// through VirtioMmioTransport + VirtioBlk over a 64 MiB temporary file — the notify, the chain
// walk, the request parse, the I/O into "guest RAM" and the used-ring completion with its
// interrupt — beside a bare pread of the same 4 KiB (the floor), under each engine:
//  * io_uring (minivmm's default): submitted in one io_uring_enter, answered as the loop does it,
//    when the ring's eventfd is readable (poll, then on_completion_fd);
//  * worker: handed to the disk's worker thread, which does the preadv;
//  * inline: the request run on the notifying thread (no hand-off at all).
//
// Usage: virtio_blk_backend_bench [Google Benchmark flags]. The file is in the page cache after
// the first pass, so this measures CPU cost per request, not the disk.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "devices/host/block_file.h"
#include "devices/host/block_uring.h"
#include "devices/virtio/blk/virtio_blk.h"
#include "devices/virtio/virtio_mmio_transport.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_virtio_driver.h"

namespace {

using namespace minivmm::devices;
using minivmm::testing::FakeGuestRam;
using minivmm::testing::FakeIrqLine;
using minivmm::testing::FakeMmioDriver;
using minivmm::testing::FakeQueue;

constexpr std::uint64_t kFileBytes = 64ull << 20;
constexpr std::uint32_t kRead = 4096;
constexpr std::uint64_t kHeader = 0x10000, kData = 0x20000, kStatus = 0x30000;

const std::string& test_file() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/minivmm-blk-bench-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    std::vector<char> chunk(1 << 20, 'x');
    for (std::uint64_t off = 0; off < kFileBytes; off += chunk.size()) {
      if (::pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(off)) < 0) std::abort();
    }
    ::close(fd);
    std::atexit([] { ::unlink(test_file().c_str()); });
    return std::string(tmpl);
  }();
  return path;
}

enum class Engine { kIoUring, kWorker, kInline };

std::unique_ptr<VirtioBlk> make_blk(Engine engine, std::string& why) {
  BlockFile file = BlockFile::open(test_file(), true);
  if (engine == Engine::kIoUring) {
    auto ring = BlockUring::create(file.fd(), VirtioBlk::kQueueSize, why);
    if (!ring) return nullptr;
    return std::make_unique<VirtioBlk>(std::move(file), "bench", std::move(ring));
  }
  return std::make_unique<VirtioBlk>(std::move(file), "bench", engine == Engine::kWorker);
}

void BM_VirtioBlkRead4k(benchmark::State& state, Engine engine) {
  FakeGuestRam mem(0x100000);
  FakeQueue q(mem, 0x1000, 256);
  std::string why;
  const auto owned = make_blk(engine, why);
  if (!owned) {
    state.SkipWithError(("io_uring: " + why).c_str());
    return;
  }
  VirtioBlk& blk = *owned;
  FakeIrqLine irq;
  VirtioMmioTransport t(blk, mem.ram(), irq);
  FakeMmioDriver drv(t);
  drv.bring_up(kVirtioFVersion1, {&q});
  std::uint64_t sector = 0;
  for (auto _ : state) {
    mem.put<std::uint32_t>(kHeader, kBlkTIn);
    mem.put<std::uint64_t>(kHeader + 8, sector);
    q.add_chain(0, {{kHeader, 16, false}, {kData, kRead, true}, {kStatus, 1, true}});
    drv.notify(0);
    if (engine == Engine::kIoUring) {
      // As the loop does: wait for the ring's eventfd, then answer.
      const std::uint16_t want = static_cast<std::uint16_t>(q.used_idx() + 1);
      while (q.used_idx() != want) {
        pollfd p{blk.completion_fd(), POLLIN, 0};
        if (::poll(&p, 1, 1000) == 1) blk.on_completion_fd();
      }
    } else {
      blk.wait_idle();
    }
    sector = (sector + kRead / 512) % (kFileBytes / 512);
  }
  if (blk.stats().reads != static_cast<std::uint64_t>(state.iterations())) {
    state.SkipWithError("reads went missing");
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * kRead);
}

void BM_Pread4k(benchmark::State& state) {
  const int fd = ::open(test_file().c_str(), O_RDONLY);
  std::vector<char> buf(kRead);
  std::uint64_t off = 0;
  for (auto _ : state) {
    if (::pread(fd, buf.data(), kRead, static_cast<off_t>(off)) != kRead) std::abort();
    off = (off + kRead) % kFileBytes;
  }
  ::close(fd);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * kRead);
}

BENCHMARK_CAPTURE(BM_VirtioBlkRead4k, io_uring, Engine::kIoUring);
BENCHMARK_CAPTURE(BM_VirtioBlkRead4k, worker, Engine::kWorker);
BENCHMARK_CAPTURE(BM_VirtioBlkRead4k, inline, Engine::kInline);
BENCHMARK(BM_Pread4k);

}  // namespace

BENCHMARK_MAIN();
