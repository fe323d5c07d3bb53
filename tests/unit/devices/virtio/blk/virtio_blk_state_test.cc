// virtio-blk's snapshot record through its transport (issue 23), under each engine: a restored
// device serves the next request at the next used-ring entry; a request in flight makes
// save_state() refuse until quiesce() has it answered; a record of another disk (capacity,
// read-only flag) is refused before the device serves anything.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "devices/virtio/blk/virtio_blk.h"
#include "devices/virtio/virtio_mmio_transport.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_virtio_driver.h"
#include "tests/unit/devices/virtio/virtio_state_support.h"

namespace minivmm::testing {
namespace {

using devices::BlockFile;
using devices::BlockUring;
using devices::kBlkSOk;
using devices::kBlkTIn;
using devices::kBlkTOut;
using devices::kVirtioFEventIdx;
using devices::kVirtioFVersion1;
using devices::StateError;
using devices::VirtioBlk;
using T = devices::VirtioMmioTransport;
namespace mr = mmio_record;

constexpr std::uint64_t kHeader = 0x10000, kData = 0x20000, kStatusByte = 0x30000;

// A temporary disk: `sectors` sectors where sector s holds the byte s + 1, or a copy of another.
class TempDisk {
 public:
  explicit TempDisk(std::uint64_t sectors = 64) {
    std::vector<std::uint8_t> data(sectors * 512);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i / 512 + 1);
    create(data);
  }
  explicit TempDisk(const TempDisk& other) { create(other.contents()); }
  TempDisk& operator=(const TempDisk&) = delete;
  ~TempDisk() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }
  std::vector<std::uint8_t> contents() const {
    struct stat st {};
    EXPECT_EQ(::stat(path_.c_str(), &st), 0);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(st.st_size));
    const int fd = ::open(path_.c_str(), O_RDONLY);
    EXPECT_EQ(::pread(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
    ::close(fd);
    return out;
  }
  std::uint8_t byte_at(std::uint64_t offset) const { return contents().at(offset); }

 private:
  void create(const std::vector<std::uint8_t>& data) {
    char tmpl[] = "/tmp/minivmm-blk-state-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    path_ = tmpl;
    EXPECT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ::close(fd);
  }

  std::string path_;
};

enum class Engine { kInline, kWorker, kIoUring };

std::string engine_name(const ::testing::TestParamInfo<Engine>& info) {
  switch (info.param) {
    case Engine::kInline: return "Inline";
    case Engine::kWorker: return "Worker";
    case Engine::kIoUring: return "IoUring";
  }
  return "?";
}

// `on_worker_start`: the worker engine's first call on its thread (a gate for in-flight tests).
std::unique_ptr<VirtioBlk> make_blk(Engine engine, const std::string& path, bool read_only = false,
                                    std::function<bool()> on_worker_start = nullptr) {
  BlockFile file = BlockFile::open(path, read_only);
  if (engine == Engine::kIoUring) {
    std::string why;
    auto ring = BlockUring::create(file.fd(), VirtioBlk::kQueueSize, why);
    if (!ring) {
      ADD_FAILURE() << "io_uring: " << why;
      return std::make_unique<VirtioBlk>(std::move(file), "state", false);
    }
    return std::make_unique<VirtioBlk>(std::move(file), "state", std::move(ring));
  }
  return std::make_unique<VirtioBlk>(std::move(file), "state", engine == Engine::kWorker,
                                     std::move(on_worker_start));
}

// One transport and device over shared guest RAM.
struct BlkSide {
  BlkSide(std::unique_ptr<VirtioBlk> device, const FakeGuestRam& mem)
      : blk(std::move(device)), t(*blk, mem.ram(), irq) {}
  std::unique_ptr<VirtioBlk> blk;
  FakeIrqLine irq;
  T t;
  FakeMmioDriver drv{t};
};

// Opens the worker engine's gate on every path out of a test (the worker joins at destruction).
struct Gate {
  ~Gate() { open(); }
  void open() {
    if (!opened) promise.set_value();
    opened = true;
  }
  std::function<bool()> hook() {
    return [f = promise.get_future().share()] {
      f.wait();
      return true;
    };
  }
  std::promise<void> promise;
  bool opened = false;
};

// A snapshot holds guest RAM, the device records and the disk: the twin that loads `a`'s record
// opens a copy of the disk as it stood (a read-write drive is open in one device at a time, and
// an io_uring engine lets go of its file only when the kernel has torn its ring down).
struct BlkRig {
  explicit BlkRig(Engine e, std::function<bool()> on_worker_start = nullptr)
      : engine(e),
        a(std::make_unique<BlkSide>(make_blk(e, disk->path(), false, std::move(on_worker_start)),
                                    mem)) {
    a->drv.bring_up(kVirtioFVersion1 | kVirtioFEventIdx | a->blk->device_features(), {&q});
  }
  // Drops `a` and makes the twin that loads its record, over the disk's copy (now `disk`).
  std::unique_ptr<BlkSide> twin(bool read_only = false) {
    auto copy = std::make_unique<TempDisk>(*disk);
    a.reset();
    disk = std::move(copy);
    return std::make_unique<BlkSide>(make_blk(engine, disk->path(), read_only), mem);
  }
  // Publishes header + 512 bytes of data + status at descriptors 0-2 (the previous request
  // is answered by then), without notifying.
  void post(std::uint32_t type, std::uint64_t sector) {
    mem.put(kHeader, type);
    mem.put<std::uint32_t>(kHeader + 4, 0);
    mem.put(kHeader + 8, sector);
    mem.put<std::uint8_t>(kStatusByte, 0xee);
    q.add_chain(0, {{kHeader, 16, false}, {kData, 512, type == kBlkTIn}, {kStatusByte, 1, true}});
  }

  Engine engine;
  std::unique_ptr<TempDisk> disk = std::make_unique<TempDisk>();
  FakeGuestRam mem{0x100000};
  FakeQueue q{mem, 0x1000, 16};
  std::unique_ptr<BlkSide> a;
};

// What a driver can read back: features (both words), status, interrupt status, the queue.
std::vector<std::uint32_t> registers(FakeMmioDriver& drv) {
  std::vector<std::uint32_t> r;
  for (const std::uint32_t sel : {0u, 1u}) {
    drv.write(T::kDeviceFeaturesSel, sel);
    r.push_back(drv.read(T::kDeviceFeatures));
  }
  drv.write(T::kQueueSel, 0);
  for (const std::uint64_t reg : {T::kDeviceId, T::kInterruptStatus, T::kStatus, T::kQueueNumMax,
                                  T::kQueueReady}) {
    r.push_back(drv.read(reg));
  }
  return r;
}

class VirtioBlkStateTest : public ::testing::TestWithParam<Engine> {};

TEST_P(VirtioBlkStateTest, RestoredDiskServesTheNextRequestAtTheNextUsedEntry) {
  BlkRig r(GetParam());
  r.post(kBlkTIn, 3);
  r.a->drv.notify(0);
  r.a->blk->wait_idle();
  ASSERT_EQ(r.q.used_idx(), 1);
  ASSERT_EQ(r.mem.get<std::uint8_t>(kData), 4);
  r.a->t.quiesce();
  const Record record = save_record(r.a->t);
  const std::vector<std::uint32_t> before = registers(r.a->drv);

  const auto b = r.twin();
  load_record(b->t, record);
  EXPECT_EQ(save_record(b->t), record);
  EXPECT_EQ(registers(b->drv), before);
  EXPECT_EQ(before[4], T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk |
                           T::kStatusDriverOk);

  r.q.set_used_event(1);  // EVENT_IDX: an interrupt for the next entry
  r.mem.fill(kData, 512, 0x5c);
  r.post(kBlkTOut, 7);
  b->drv.notify(0);
  b->blk->wait_idle();
  EXPECT_EQ(r.q.used_idx(), 2);
  EXPECT_EQ(r.q.used_id(1), 0u);
  EXPECT_EQ(r.q.used_len(1), 1u);  // the status byte
  EXPECT_EQ(r.mem.get<std::uint8_t>(kStatusByte), kBlkSOk);
  EXPECT_EQ(r.disk->byte_at(7 * 512), 0x5c);
  EXPECT_EQ(b->blk->stats().reads, 1u);
  EXPECT_EQ(b->blk->stats().writes, 1u);
  EXPECT_EQ(b->irq.pulses(), 1);
}

TEST_P(VirtioBlkStateTest, RequestPostedButNotNotifiedIsServedOnceAtRestoreAndCounted) {
  BlkRig r(GetParam());
  r.post(kBlkTIn, 1);
  r.a->drv.notify(0);
  r.a->blk->wait_idle();
  r.mem.fill(kData, 512, 0x71);
  r.post(kBlkTOut, 2);  // the vCPU stopped between publishing it and notifying
  r.a->t.quiesce();
  const Record record = save_record(r.a->t);

  const auto b = r.twin();
  load_record(b->t, record);  // activation finds it, as at DRIVER_OK
  b->blk->wait_idle();
  EXPECT_EQ(r.q.used_idx(), 2);
  EXPECT_EQ(r.disk->byte_at(2 * 512), 0x71);
  // The loaded counters, and the request activation served on top of them.
  EXPECT_EQ(b->blk->stats().reads, 1u);
  EXPECT_EQ(b->blk->stats().writes, 1u);
}

INSTANTIATE_TEST_SUITE_P(Engines, VirtioBlkStateTest,
                         ::testing::Values(Engine::kInline, Engine::kWorker, Engine::kIoUring),
                         engine_name);

TEST(VirtioBlkStateRecordTest, WorkerRequestInFlightRefusesSaveUntilQuiesceAnswersIt) {
  Gate gate;
  BlkRig r(Engine::kWorker, gate.hook());
  r.post(kBlkTIn, 5);
  r.a->drv.notify(0);  // queued for a worker that has not started
  EXPECT_THROW(save_record(r.a->t), StateError);
  EXPECT_EQ(r.q.used_idx(), 0);
  gate.open();
  r.a->t.quiesce();  // waits for the worker's answer
  EXPECT_EQ(r.q.used_idx(), 1);
  EXPECT_EQ(r.mem.get<std::uint8_t>(kData), 6);
  const Record record = save_record(r.a->t);

  const auto b = r.twin();
  load_record(b->t, record);
  r.post(kBlkTIn, 9);
  b->drv.notify(0);
  b->blk->wait_idle();
  EXPECT_EQ(r.q.used_idx(), 2);
  EXPECT_EQ(r.mem.get<std::uint8_t>(kData), 10);
}

TEST(VirtioBlkStateRecordTest, IoUringRequestInFlightRefusesSaveUntilQuiesceReapsIt) {
  BlkRig r(Engine::kIoUring);
  r.post(kBlkTIn, 4);
  r.a->drv.notify(0);  // on the ring; only the loop's on_completion_fd() (or quiesce) answers
  EXPECT_THROW(save_record(r.a->t), StateError);
  r.a->t.quiesce();
  EXPECT_EQ(r.q.used_idx(), 1);
  EXPECT_EQ(r.mem.get<std::uint8_t>(kData), 5);
  EXPECT_NO_THROW(save_record(r.a->t));
}

TEST(VirtioBlkStateRecordTest, RecordOfADiskWithAnotherCapacityIsRefusedBeforeAnythingIsServed) {
  BlkRig r(Engine::kInline);
  r.mem.fill(kData, 512, 0x33);
  r.post(kBlkTOut, 0);  // posted, not notified: a restore that went live would write it
  r.a->t.quiesce();
  const Record record = save_record(r.a->t);

  TempDisk other(128);
  BlkSide b(make_blk(Engine::kInline, other.path()), r.mem);
  EXPECT_THROW(load_record(b.t, record), StateError);
  EXPECT_EQ(other.byte_at(0), 1);  // untouched
  EXPECT_EQ(r.q.used_idx(), 0);
  EXPECT_EQ(b.irq.pulses(), 0);
}

TEST(VirtioBlkStateRecordTest, RecordOfAWritableDiskIsRefusedByAReadOnlyOne) {
  BlkRig r(Engine::kInline);
  const Record record = save_record(r.a->t);
  const auto b = r.twin(/*read_only=*/true);
  EXPECT_THROW(load_record(b->t, record), StateError);
}

TEST(VirtioBlkStateRecordTest, TruncatedLongerAndOutOfRangeRecordsAreRefused) {
  BlkRig r(Engine::kInline);
  r.post(kBlkTIn, 3);
  r.a->drv.notify(0);
  r.a->t.quiesce();
  const Record record = save_record(r.a->t);
  r.a.reset();
  const auto load_fresh = [&](const Record& rec) {
    BlkSide fresh(make_blk(Engine::kInline, r.disk->path()), r.mem);
    load_record(fresh.t, rec);
  };
  ASSERT_FALSE(refused(load_fresh, record));
  expect_truncations_refused(record, load_fresh);

  const std::size_t dev = mr::device_record(1) + 4;  // the device record's bytes
  Record bad = record;
  poke<std::uint64_t>(bad, dev + 1, 65);  // capacity
  EXPECT_TRUE(refused(load_fresh, bad));
  bad = record;
  bad[dev + 9] = 2;  // the read-only flag
  EXPECT_TRUE(refused(load_fresh, bad));
  bad = record;
  bad[dev] = 7;  // the device record's layout version
  EXPECT_TRUE(refused(load_fresh, bad));
  bad = record;
  poke<std::uint16_t>(bad, mr::queue(0, mr::kSize), 24);
  EXPECT_TRUE(refused(load_fresh, bad)) << "queue size not a power of two";
  bad = record;
  poke<std::uint16_t>(bad, mr::queue(0, mr::kSize), 512);
  EXPECT_TRUE(refused(load_fresh, bad)) << "queue size above 256";
  bad = record;
  poke<std::uint64_t>(bad, mr::queue(0, mr::kUsed), r.mem.size());
  EXPECT_TRUE(refused(load_fresh, bad)) << "used ring outside RAM";
  bad = record;
  poke<std::uint32_t>(bad, mr::device_record(1), 0x7fffffff);
  EXPECT_TRUE(refused(load_fresh, bad)) << "a device record longer than the cap";
}

}  // namespace
}  // namespace minivmm::testing
