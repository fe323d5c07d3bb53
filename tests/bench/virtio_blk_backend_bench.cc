// The host side of virtio-blk without KVM (issue 14): one sequential 4 KiB read per iteration
// through VirtioMmioTransport + VirtioBlk over a 64 MiB temporary file — the notify, the chain
// walk, the request parse, the hand-off to the worker thread, its preadv into "guest RAM" and
// the used-ring completion with its interrupt — beside a bare pread of the same 4 KiB (the
// floor). `inline` runs the request on the notifying thread (no worker hand-off).
//
// Usage: virtio_blk_backend_bench [Google Benchmark flags]. The file is in the page cache after
// the first pass, so this measures CPU cost per request, not the disk.
#include <fcntl.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "devices/block_file.h"
#include "devices/virtio_blk.h"
#include "devices/virtio_mmio_transport.h"
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

void BM_VirtioBlkRead4k(benchmark::State& state, bool worker) {
  FakeGuestRam mem(0x100000);
  FakeQueue q(mem, 0x1000, 256);
  VirtioBlk blk(BlockFile::open(test_file(), true), "bench", worker);
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
    blk.wait_idle();
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

BENCHMARK_CAPTURE(BM_VirtioBlkRead4k, worker, true);
BENCHMARK_CAPTURE(BM_VirtioBlkRead4k, inline, false);
BENCHMARK(BM_Pread4k);

}  // namespace

BENCHMARK_MAIN();
