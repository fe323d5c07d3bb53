// Virtio9p through the virtio-mmio transport and a fake driver: the device id, feature and
// mount tag in the configuration space; requests gathered from several readable buffers and
// answers spread over several writable ones (the layout of Linux's zero-copy reads); a chain
// with no room for an answer; the worker thread; reset clunking the fids; snapshots refused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "devices/bus/device_state.h"
#include "devices/virtio/9p/virtio_9p.h"
#include "devices/virtio/virtio_mmio_transport.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_virtio_driver.h"
#include "tests/support/map_report_writer.h"
#include "tests/support/ninep_frames.h"

namespace minivmm::testing {
namespace {

namespace fs = std::filesystem;
using devices::Virtio9p;
using devices::VirtioMmioTransport;
using devices::kVirtioFVersion1;
using namespace devices::p9;

constexpr std::uint64_t kReq = 0x10000, kReq2 = 0x18000, kRep = 0x20000, kRep2 = 0x30000;

struct Rig {
  explicit Rig(bool worker = false, bool ro = false) {
    char tmpl[] = "/tmp/minivmm-v9p-XXXXXX";
    dir = ::mkdtemp(tmpl);
    std::ofstream(dir / "hello") << std::string(6000, 'h');
    std::string why;
    auto server = P9Server::open(dir, ro, why);
    EXPECT_NE(server, nullptr) << why;
    owned = std::make_unique<Virtio9p>(std::move(server), "share0", worker);
    dev = owned.get();
    t = std::make_unique<VirtioMmioTransport>(*dev, mem.ram(), irq);
    drv = std::make_unique<FakeMmioDriver>(*t);
    drv->bring_up(kVirtioFVersion1 | Virtio9p::kFMountTag, {&q});
  }
  ~Rig() {
    t.reset();
    owned.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // One request in one readable buffer, the answer in one writable buffer of `room` bytes.
  Answer send(const Frame& f, std::uint32_t room = 0x8000) {
    const auto b = f.bytes();
    std::memcpy(mem.at(kReq), b.data(), b.size());
    q.add_chain(next, {{kReq, static_cast<std::uint32_t>(b.size()), false}, {kRep, room, true}});
    return finish(kRep, room);
  }
  Answer finish(std::uint64_t at, std::uint32_t room) {
    const std::uint16_t used = ++expected_used;
    next = static_cast<std::uint16_t>((next + 2) % q.size());
    drv->notify(0);
    dev->wait_idle();
    EXPECT_EQ(q.used_idx(), used);
    Answer a;
    const std::uint32_t len = q.used_len(static_cast<std::uint16_t>(used - 1));
    EXPECT_LE(len, room);
    a.bytes.assign(mem.at(at), mem.at(at) + len);
    return a;
  }

  fs::path dir;
  FakeGuestRam mem{0x100000};
  FakeQueue q{mem, 0x1000, 16};
  std::unique_ptr<Virtio9p> owned;
  Virtio9p* dev = nullptr;
  FakeIrqLine irq;
  std::unique_ptr<VirtioMmioTransport> t;
  std::unique_ptr<FakeMmioDriver> drv;
  std::uint16_t next = 0, expected_used = 0;
};

TEST(Virtio9p, IdFeatureAndMountTag) {
  Rig rig;
  EXPECT_EQ(rig.drv->read(VirtioMmioTransport::kDeviceId), 9u);
  std::uint8_t cfg[10] = {};
  rig.dev->read_config(0, cfg);
  EXPECT_EQ(cfg[0], 6);
  EXPECT_EQ(cfg[1], 0);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(cfg + 2), 6), "share0");
  EXPECT_EQ(cfg[8], 0);  // past the end: zeros
  EXPECT_EQ(rig.dev->device_features(), Virtio9p::kFMountTag);
}

TEST(Virtio9p, ServesASessionOverTheQueue) {
  Rig rig;
  EXPECT_EQ(rig.send(t9::version(65536)).type(), kTversion + 1);
  EXPECT_EQ(rig.send(t9::attach(1)).type(), kTattach + 1);
  EXPECT_EQ(rig.send(t9::walk(1, 2, {"hello"})).type(), kTwalk + 1);
  EXPECT_EQ(rig.send(t9::lopen(2, O_RDONLY)).type(), kTlopen + 1);
  const Answer a = rig.send(t9::read(2, 0, 100));
  ASSERT_EQ(a.type(), kTread + 1);
  EXPECT_EQ(a.body().u32(), 100u);
  EXPECT_GT(rig.irq.pulses(), 0);
  MapReportWriter report;
  rig.dev->report(report);
  EXPECT_EQ(report.counter("requests/walk"), 1u);
  EXPECT_EQ(report.counter("bytes_read"), 100u);
  EXPECT_EQ(report.counter("fids_open"), 2u);
}

TEST(Virtio9p, GathersAndScattersLikeLinuxZeroCopy) {
  Rig rig;
  rig.send(t9::version(65536));
  rig.send(t9::attach(1));
  rig.send(t9::walk(1, 2, {"hello"}));
  rig.send(t9::lopen(2, O_RDONLY));
  // The request split over two readable buffers; the answer's 11 header bytes in the first
  // writable buffer, the data in the next one.
  const auto b = t9::read(2, 0, 5000).bytes();
  std::memcpy(rig.mem.at(kReq), b.data(), 5);
  std::memcpy(rig.mem.at(kReq2), b.data() + 5, b.size() - 5);
  rig.q.add_chain(rig.next, {{kReq, 5, false},
                             {kReq2, static_cast<std::uint32_t>(b.size() - 5), false},
                             {kRep, 11, true},
                             {kRep2, 8192, true}});
  rig.next = static_cast<std::uint16_t>(rig.next + 2);  // four descriptors
  const Answer head = rig.finish(kRep, 11 + 8192);
  EXPECT_EQ(head.bytes.size(), 11u + 5000u);
  P9Reader r(std::span(rig.mem.at(kRep), 11));
  EXPECT_EQ(r.u32(), 11u + 5000u);
  EXPECT_EQ(r.u8(), kTread + 1);
  r.u16();
  EXPECT_EQ(r.u32(), 5000u);
  EXPECT_EQ(static_cast<char>(*rig.mem.at(kRep2)), 'h');
  EXPECT_EQ(static_cast<char>(*rig.mem.at(kRep2 + 4999)), 'h');
}

TEST(Virtio9p, AChainWithoutRoomForAnAnswerIsReturnedEmpty) {
  Rig rig;
  const auto b = t9::version().bytes();
  std::memcpy(rig.mem.at(kReq), b.data(), b.size());
  rig.q.add_chain(0, {{kReq, static_cast<std::uint32_t>(b.size()), false}, {kRep, 4, true}});
  rig.drv->notify(0);
  EXPECT_EQ(rig.q.used_idx(), 1u);
  EXPECT_EQ(rig.q.used_len(0), 0u);
  EXPECT_EQ(rig.dev->unanswerable(), 1u);
}

TEST(Virtio9p, TheWorkerThreadServesRequests) {
  Rig rig(true);
  EXPECT_EQ(rig.send(t9::version()).type(), kTversion + 1);
  EXPECT_EQ(rig.send(t9::attach(1)).type(), kTattach + 1);
  EXPECT_EQ(rig.send(t9::getattr(1)).type(), kTgetattr + 1);
}

TEST(Virtio9p, ResetClunksEveryFid) {
  Rig rig;
  rig.send(t9::version());
  rig.send(t9::attach(1));
  EXPECT_EQ(rig.dev->stats().fids_open, 1u);
  rig.drv->write(VirtioMmioTransport::kStatus, 0);
  EXPECT_EQ(rig.dev->stats().fids_open, 0u);
}

TEST(Virtio9p, ASnapshotIsRefusedWithOneLine) {
  Rig rig;
  try {
    rig.dev->quiesce();
    FAIL() << "quiesce() did not refuse";
  } catch (const devices::StateError& e) {
    EXPECT_NE(std::string(e.what()).find("--share cannot be snapshotted"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(Virtio9p, AReadOnlyShareIsReadOnlyThroughTheDevice) {
  Rig rig(false, true);
  rig.send(t9::version());
  rig.send(t9::attach(1));
  EXPECT_EQ(rig.send(t9::mkdir(1, "x")).error(), static_cast<std::uint32_t>(EROFS));
  MapReportWriter report;
  rig.dev->report(report);
  EXPECT_TRUE(std::get<bool>(report.values().at("read_only")));
}

}  // namespace
}  // namespace minivmm::testing
