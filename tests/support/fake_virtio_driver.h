// The driver side of virtio for device tests and fuzzers: guest RAM in a std::vector, split
// virtqueues laid out in it by hand (so tests can also write every malformed thing a hostile
// guest could), and the register sequence a Linux driver performs on a virtio-mmio transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "devices/bus/guest_memory.h"
#include "devices/virtio/virtio_device.h"
#include "devices/virtio/virtio_mmio_transport.h"

namespace minivmm::testing {

inline constexpr std::uint16_t kDescNext = 1, kDescWrite = 2, kDescIndirect = 4;

class FakeGuestRam {
 public:
  explicit FakeGuestRam(std::size_t size) : bytes_(size), ram_(std::span(bytes_)) {}
  const devices::GuestMemory& ram() const { return ram_; }
  std::byte* at(std::uint64_t gpa) { return bytes_.data() + gpa; }
  template <typename T>
  void put(std::uint64_t gpa, T v) { std::memcpy(at(gpa), &v, sizeof v); }
  template <typename T>
  T get(std::uint64_t gpa) const {
    T v;
    std::memcpy(&v, bytes_.data() + gpa, sizeof v);
    return v;
  }
  void fill(std::uint64_t gpa, std::size_t len, std::uint8_t value) {
    std::memset(at(gpa), value, len);
  }
  std::size_t size() const { return bytes_.size(); }

 private:
  std::vector<std::byte> bytes_;
  devices::GuestMemory ram_;
};

// One split queue at `base`: descriptor table, then the available ring, then the used ring
// (4-aligned), as a driver lays it out.
class FakeQueue {
 public:
  FakeQueue(FakeGuestRam& mem, std::uint64_t base, std::uint16_t size)
      : mem_(mem), size_(size), desc_(base), avail_(base + 16u * size),
        used_((avail_ + 6u + 2u * size + 3u) & ~std::uint64_t{3}) {}

  std::uint16_t size() const { return size_; }
  std::uint64_t desc_addr() const { return desc_; }
  std::uint64_t avail_addr() const { return avail_; }
  std::uint64_t used_addr() const { return used_; }
  std::uint64_t end() const { return used_ + 6u + 8u * size_; }

  void set_desc(std::uint16_t i, std::uint64_t addr, std::uint32_t len, std::uint16_t flags,
                std::uint16_t next = 0) {
    write_desc(desc_ + 16u * i, addr, len, flags, next);
  }
  void write_desc(std::uint64_t at, std::uint64_t addr, std::uint32_t len, std::uint16_t flags,
                  std::uint16_t next) {
    mem_.put(at, addr);
    mem_.put(at + 8, len);
    mem_.put(at + 12, flags);
    mem_.put(at + 14, next);
  }
  // Makes `head` available and moves avail.idx.
  void publish(std::uint16_t head) {
    mem_.put<std::uint16_t>(avail_ + 4 + 2u * (avail_idx_ % size_), head);
    ++avail_idx_;
    mem_.put<std::uint16_t>(avail_ + 2, avail_idx_);
  }
  void set_avail_idx(std::uint16_t idx) {
    avail_idx_ = idx;
    mem_.put<std::uint16_t>(avail_ + 2, idx);
  }
  void set_avail_flags(std::uint16_t f) { mem_.put<std::uint16_t>(avail_, f); }
  void set_used_event(std::uint16_t e) { mem_.put<std::uint16_t>(avail_ + 4 + 2u * size_, e); }
  std::uint16_t avail_event() const { return mem_.get<std::uint16_t>(used_ + 4 + 8u * size_); }

  std::uint16_t used_idx() const { return mem_.get<std::uint16_t>(used_ + 2); }
  std::uint32_t used_id(std::uint16_t i) const {
    return mem_.get<std::uint32_t>(used_ + 4 + 8u * (i % size_));
  }
  std::uint32_t used_len(std::uint16_t i) const {
    return mem_.get<std::uint32_t>(used_ + 8 + 8u * (i % size_));
  }

  struct Buf {
    std::uint64_t addr;
    std::uint32_t len;
    bool writable;
  };
  // Writes `bufs` as a chain in descriptors [first, first+n) and publishes it.
  std::uint16_t add_chain(std::uint16_t first, const std::vector<Buf>& bufs) {
    for (std::size_t k = 0; k < bufs.size(); ++k) {
      const auto i = static_cast<std::uint16_t>(first + k);
      const bool last = k + 1 == bufs.size();
      set_desc(i, bufs[k].addr, bufs[k].len,
               static_cast<std::uint16_t>((bufs[k].writable ? kDescWrite : 0) |
                                          (last ? 0 : kDescNext)),
               static_cast<std::uint16_t>(i + 1));
    }
    publish(first);
    return first;
  }

 private:
  FakeGuestRam& mem_;
  std::uint16_t size_;
  std::uint64_t desc_, avail_, used_;
  std::uint16_t avail_idx_ = 0;
};

// What a Linux virtio-mmio driver writes, register by register.
class FakeMmioDriver {
 public:
  explicit FakeMmioDriver(devices::VirtioMmioTransport& t) : t_(t) {}

  std::uint32_t read(std::uint64_t offset) {
    std::uint32_t v = 0;
    t_.read(offset, std::span(reinterpret_cast<std::uint8_t*>(&v), 4));
    return v;
  }
  void write(std::uint64_t offset, std::uint32_t v) {
    t_.write(offset, std::span(reinterpret_cast<const std::uint8_t*>(&v), 4));
  }
  void set_features(std::uint64_t f) {
    write(devices::VirtioMmioTransport::kDriverFeaturesSel, 0);
    write(devices::VirtioMmioTransport::kDriverFeatures, static_cast<std::uint32_t>(f));
    write(devices::VirtioMmioTransport::kDriverFeaturesSel, 1);
    write(devices::VirtioMmioTransport::kDriverFeatures, static_cast<std::uint32_t>(f >> 32));
  }
  void setup_queue(std::uint32_t index, const FakeQueue& q) {
    using T = devices::VirtioMmioTransport;
    write(T::kQueueSel, index);
    write(T::kQueueNum, q.size());
    write(T::kQueueDescLow, static_cast<std::uint32_t>(q.desc_addr()));
    write(T::kQueueDescHigh, static_cast<std::uint32_t>(q.desc_addr() >> 32));
    write(T::kQueueDriverLow, static_cast<std::uint32_t>(q.avail_addr()));
    write(T::kQueueDriverHigh, static_cast<std::uint32_t>(q.avail_addr() >> 32));
    write(T::kQueueDeviceLow, static_cast<std::uint32_t>(q.used_addr()));
    write(T::kQueueDeviceHigh, static_cast<std::uint32_t>(q.used_addr() >> 32));
    write(T::kQueueReady, 1);
  }
  // ACKNOWLEDGE, DRIVER, features, FEATURES_OK, queues, DRIVER_OK. Returns the final status.
  std::uint32_t bring_up(std::uint64_t features, const std::vector<const FakeQueue*>& queues) {
    using T = devices::VirtioMmioTransport;
    write(T::kStatus, 0);
    write(T::kStatus, T::kStatusAcknowledge);
    write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver);
    set_features(features);
    write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk);
    for (std::size_t i = 0; i < queues.size(); ++i) {
      if (queues[i] != nullptr) setup_queue(static_cast<std::uint32_t>(i), *queues[i]);
    }
    write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk |
                          T::kStatusDriverOk);
    return read(T::kStatus);
  }
  void notify(std::uint32_t queue) { write(devices::VirtioMmioTransport::kQueueNotify, queue); }

 private:
  devices::VirtioMmioTransport& t_;
};

}  // namespace minivmm::testing
