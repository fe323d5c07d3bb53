// libFuzzer target: virtio-net behind the virtio-mmio transport, with a guest that writes anything
// into both queues, headers and buffers, and a fake back-end that offers host frames of many
// sizes, blocks and drops as the input says. Everything runs on one thread (no scheduler), so a
// run is deterministic.
//
// Input (little-endian):
//   byte 0       flags: bit 0 INDIRECT_DESC, bit 1 EVENT_IDX, bit 2 the back-end blocks the first
//                transmit (until "writable"), bit 3 it drops every transmit it takes, bit 4 it
//                blocks every transmit (a frame is held when the driver resets)
//   bytes 1-2    receive queue size, transmit queue size, as written to QueueNum (any value)
//   bytes 3-14   receive desc/avail/used, transmit desc/avail/used addresses (u16 each; RAM is
//                kRamSize bytes, so larger values put a ring outside it)
//   byte 15      host frames to offer: count (low nibble) and which sizes (high nibble)
//   bytes 16-    guest RAM from address 0 (the rest is zero)
//
// tests/fuzz/make_virtio_net_seeds.py writes seeds in this format.
//
// Checks: read_tx_frame and check_rx_chain classify every chain the walker hands out as the spec
// says, and write_rx_frame writes exactly header + frame; the back-end is only ever handed frames
// of kMinFrameBytes..kMaxFrameBytes, and never more than the chains popped; every host frame
// offered is accounted for (delivered, dropped and counted, or refused and held); after a reset
// nothing is sent or delivered, and a held frame is dropped and counted; config space reads at
// any offset and width fill every byte the same way twice. ASan/UBSan catch any access outside guest RAM.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "devices/bus/guest_memory.h"
#include "devices/log/log.h"
#include "devices/virtio/net/virtio_net.h"
#include "devices/virtio/net/virtio_net_frame.h"
#include "devices/virtio/virtio_mmio_transport.h"
#include "devices/virtio/virtqueue.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_net_backend.h"
#include "tests/support/fake_virtio_driver.h"
#include "tests/support/map_report_writer.h"

namespace {

using namespace minivmm::devices;
using minivmm::testing::FakeIrqLine;
using minivmm::testing::FakeMmioDriver;
using minivmm::testing::FakeNetBackend;
using minivmm::testing::MapReportWriter;

constexpr std::size_t kRamSize = 0x2000;
constexpr std::size_t kHeader = 16;

struct Input {
  bool indirect = false, event_idx = false, block_first = false, drop_all = false,
       block_all = false;
  std::uint16_t size[2] = {0, 0};
  std::uint64_t desc[2] = {}, avail[2] = {}, used[2] = {};
  unsigned frames = 0, size_mix = 0;
  std::vector<std::byte> ram = std::vector<std::byte>(kRamSize);

  bool parse(const std::uint8_t* data, std::size_t n) {
    if (n < kHeader) return false;
    indirect = (data[0] & 1) != 0;
    event_idx = (data[0] & 2) != 0;
    block_first = (data[0] & 4) != 0;
    drop_all = (data[0] & 8) != 0;
    block_all = (data[0] & 16) != 0;
    size[0] = data[1];
    size[1] = data[2];
    auto u16 = [&](std::size_t at) {
      return static_cast<std::uint64_t>(data[at] | (data[at + 1] << 8));
    };
    for (std::size_t q = 0; q < 2; ++q) {
      desc[q] = u16(3 + 6 * q);
      avail[q] = u16(5 + 6 * q);
      used[q] = u16(7 + 6 * q);
    }
    frames = data[15] & 0xfu;
    size_mix = data[15] >> 4;
    const std::size_t m = n - kHeader < kRamSize ? n - kHeader : kRamSize;
    std::memcpy(ram.data(), data + kHeader, m);
    return true;
  }
};

// Host frame sizes: the edges that matter (empty, a runt, the smallest and largest Ethernet
// frames, one that no 8 KiB guest holds, the largest and one past it), picked per frame.
std::size_t frame_size(unsigned i, unsigned mix) {
  static constexpr std::size_t kSizes[] = {0,    1,    13,   14,   42,          60,
                                           1514, 1515, 4000, 9000, kMaxFrameBytes,
                                           kMaxFrameBytes + 1};
  return kSizes[(i * 5 + mix) % (sizeof kSizes / sizeof kSizes[0])];
}

// The pure functions' promises, on every chain either queue hands out (over a copy of RAM).
void check_chains(const Input& in) {
  std::vector<std::byte> copy = in.ram;
  const GuestMemory ram{std::span(copy)};
  std::vector<std::uint8_t> buf(kMaxFrameBytes);
  for (std::size_t q = 0; q < 2; ++q) {
    Virtqueue vq(VirtioNet::kQueueSize);
    vq.set_size(in.size[q]);
    vq.set_desc_addr(in.desc[q]);
    vq.set_avail_addr(in.avail[q]);
    vq.set_used_addr(in.used[q]);
    if (!vq.activate(ram, in.indirect, in.event_idx)) continue;
    DescriptorChain c;
    for (int i = 0; i < in.size[q] && vq.pop(c) == Virtqueue::Pop::kChain; ++i) {
      const TxFrame f = read_tx_frame(c, ram, buf);
      if (f.error == TxFrameError::kNone) {
        FUZZ_CHECK(c.writable_bytes == 0, "a transmit chain with writable buffers was read");
        FUZZ_CHECK(f.frame_bytes + kVirtioNetHeaderBytes == c.readable_bytes,
                   "frame of %zu bytes from %llu readable", f.frame_bytes,
                   static_cast<unsigned long long>(c.readable_bytes));
        FUZZ_CHECK(f.frame_bytes >= kMinFrameBytes && f.frame_bytes <= kMaxFrameBytes,
                   "a frame of %zu bytes passed", f.frame_bytes);
        FUZZ_CHECK((f.header.flags & kVirtioNetHdrFNeedsCsum) == 0 && f.header.gso_type == 0,
                   "an offload request passed");
      } else {
        FUZZ_CHECK(f.frame_bytes == 0, "a refused chain reported a frame");
      }
      const RxChainError r = check_rx_chain(c);
      if (r != RxChainError::kNone) continue;
      FUZZ_CHECK(c.readable_bytes == 0 && c.writable_bytes >= kVirtioNetHeaderBytes,
                 "a bad receive chain passed");
      const std::size_t n = static_cast<std::size_t>(
          std::min<std::uint64_t>(c.writable_bytes - kVirtioNetHeaderBytes, 1600));
      const std::vector<std::uint8_t> frame(n, 0x5a);
      const std::uint32_t len = write_rx_frame(c, ram, frame);
      FUZZ_CHECK(len == kVirtioNetHeaderBytes + n, "wrote %u bytes for a %zu-byte frame", len, n);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  minivmm::log::set_level(minivmm::log::Level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in;
  if (!in.parse(data, size)) return 0;
  check_chains(in);

  const GuestMemory ram{std::span(in.ram)};
  FakeNetBackend backend;
  if (in.block_first) backend.results.push_back(NetTxResult::kWouldBlock);
  if (in.drop_all) backend.next_result = NetTxResult::kDropped;
  if (in.block_all) backend.next_result = NetTxResult::kWouldBlock;
  VirtioNet net(backend, nullptr);
  FakeIrqLine irq;
  VirtioMmioTransport t(net, ram, irq);
  FakeMmioDriver drv(t);
  using T = VirtioMmioTransport;
  drv.write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver);
  std::uint64_t features = kVirtioFVersion1 | net.device_features();
  if (in.indirect) features |= kVirtioFIndirectDesc;
  if (in.event_idx) features |= kVirtioFEventIdx;
  drv.set_features(features);
  drv.write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk);
  for (std::uint32_t q = 0; q < 2; ++q) {
    drv.write(T::kQueueSel, q);
    drv.write(T::kQueueNum, in.size[q]);
    drv.write(T::kQueueDescLow, static_cast<std::uint32_t>(in.desc[q]));
    drv.write(T::kQueueDriverLow, static_cast<std::uint32_t>(in.avail[q]));
    drv.write(T::kQueueDeviceLow, static_cast<std::uint32_t>(in.used[q]));
    drv.write(T::kQueueReady, 1);
  }
  drv.write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk |
                            T::kStatusDriverOk);

  // Config space at every offset of the fields and past them, at every width: what is read is
  // the same whatever the buffer held before (every byte written).
  for (std::uint64_t off = 0; off < 12; ++off) {
    for (const std::size_t width : {1u, 2u, 4u, 8u}) {
      std::uint8_t a[8], b[8];
      std::memset(a, 0x00, sizeof a);
      std::memset(b, 0xff, sizeof b);
      t.read(T::kConfig + off, std::span(a, width));
      t.read(T::kConfig + off, std::span(b, width));
      FUZZ_CHECK(std::memcmp(a, b, width) == 0, "config read at %llu width %zu left bytes unset",
                 static_cast<unsigned long long>(off), width);
    }
  }

  drv.notify(VirtioNet::kTransmitQueue);
  for (unsigned i = 0; i < in.frames; ++i) {
    backend.inject(std::vector<std::uint8_t>(frame_size(i, in.size_mix), static_cast<std::uint8_t>(i)));
  }
  drv.notify(VirtioNet::kReceiveQueue);
  backend.make_writable();
  drv.notify(VirtioNet::kTransmitQueue);
  drv.notify(VirtioNet::kReceiveQueue);

  for (const auto& f : backend.sent) {
    FUZZ_CHECK(f.size() >= kMinFrameBytes && f.size() <= kMaxFrameBytes,
               "the back-end was handed %zu bytes", f.size());
  }
  const VirtioMmioStats ts = t.stats();
  const std::uint64_t tx_chains = ts.queues[VirtioNet::kTransmitQueue].chains;
  FUZZ_CHECK(static_cast<std::uint64_t>(backend.transmit_calls) <= tx_chains + 1,
             "%d transmits for %llu chains", backend.transmit_calls,
             static_cast<unsigned long long>(tx_chains));
  const VirtioNetStats s = net.stats();
  // Every offer was taken (delivered or dropped, each counted) or refused (held by the back-end).
  const std::uint64_t taken = s.rx_frames + s.rx_dropped_too_big + s.rx_dropped_not_ready +
                              s.rx_dropped_bad_chains;
  FUZZ_CHECK(taken + static_cast<std::uint64_t>(backend.refused) ==
                 static_cast<std::uint64_t>(backend.offered),
             "offers %d, refused %d, accounted %llu", backend.offered, backend.refused,
             static_cast<unsigned long long>(taken));
  FUZZ_CHECK(s.rx_no_buffer == static_cast<std::uint64_t>(backend.refused),
             "refusals not counted as shortages");
  FUZZ_CHECK(s.tx_frames == backend.sent.size(), "sent frames miscounted");

  // After a reset a frame held for the blocked back-end is dropped, not sent, and host frames
  // find no driver.
  const std::size_t sent_before = backend.sent.size();
  const std::uint64_t stalls = s.tx_stalls;
  drv.write(T::kStatus, 0);
  backend.results.clear();
  backend.next_result = NetTxResult::kSent;
  backend.make_writable();
  FUZZ_CHECK(backend.sent.size() == sent_before, "a frame went out after reset");
  const VirtioNetStats r = net.stats();
  const bool held = in.block_all && backend.transmit_calls > 0;
  FUZZ_CHECK(r.tx_dropped_reset == (held ? 1u : 0u) && r.tx_dropped_reset <= stalls,
             "%llu held frames dropped by reset", static_cast<unsigned long long>(r.tx_dropped_reset));
  backend.inject(std::vector<std::uint8_t>(60, 1));
  FUZZ_CHECK(net.stats().rx_frames == r.rx_frames, "a frame delivered after reset");
  MapReportWriter report;
  net.report(report);
  FUZZ_CHECK(report.counter("tx_frames") == net.stats().tx_frames, "the report disagrees");
  return 0;
}
