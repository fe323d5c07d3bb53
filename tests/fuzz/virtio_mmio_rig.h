// The virtio-mmio transport at register level, with both our devices behind it: a
// VirtioConsole and a VirtioBlk (inline, over a 32 KiB memfd disk) each on a
// VirtioMmioTransport, both mapped on an MmioBus, over 64 KiB of guest RAM that the input
// writes too (rings, descriptors, buffers, request headers). Used by virtio_mmio_fuzz.cc.
//
// Records are fuzz_ops.h's 8-byte records (OpReader), read the way this target needs them:
//
//   kind          what the guest or the VMM does
//   kRead/kWrite  an MMIO access. arg bits 0-1: width 1 << n (1, 2, 4, 8 bytes); bit 2: straight
//                 to a transport (bit 3: 0 console, 1 blk) at offset `port`, which reaches past
//                 the 4 KiB window (bit 4 on a read: offset (value << 16) | port, far past it);
//                 otherwise through the bus at kBusBase + port (console window at +0, blk at
//                 +0x1000, nothing above +0x2000). An 8-byte write carries `value` twice.
//   kAdvance      a notification through the ioeventfd path: transport arg & 1, queue `value`
//   kAdvanceLate  the guest writes RAM: width 1 << (arg % 3) bytes of `value` at `port`
//   kHost         the VMM side, arg % 4: 0 host console input (value % 300 bytes); 1 the loop
//                 runs the console's scheduled resume, if any; 2 a resume nobody scheduled;
//                 3 a Linux driver's bring-up (the macro below) of transport (value >> 31)
//   kPauseResume  the same bring-up of transport arg & 1: queues of 1 << (value % 9) entries
//                 at 16-aligned `port` + 0x2000 * index (mod RAM); features VERSION_1, every
//                 device feature, INDIRECT if arg bit 1, EVENT_IDX if arg bit 2
//
// Config byte: bit 0 read-only disk; bit 1 no on_tx_pending hook (the console's rest then
// waits for the next notify).
//
// Guest RAM sits between two PROT_NONE pages, so any access outside it by the devices - ours
// or the kernel's preadv/pwritev into guest buffers (which ASan cannot see) - faults: a SEGV for
// ours, EFAULT for the kernel's, which the blk device counts as an I/O error; the rig checks
// there are none (a memfd disk has no other reason to fail).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "devices/host/block_file.h"
#include "devices/bus/byte_sink.h"
#include "devices/bus/guest_memory.h"
#include "devices/bus/mmio_bus.h"
#include "devices/virtio/blk/virtio_blk.h"
#include "devices/virtio/virtio_console.h"
#include "devices/virtio/virtio_mmio_transport.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_ops.h"
#include "tests/support/fake_irq_line.h"

namespace minivmm::fuzz {

// Guest RAM between two guard pages, mapped once per process per twin and cleared per input.
class GuardedRam {
 public:
  static constexpr std::size_t kSize = 0x10000;

  GuardedRam() {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    guard_ = page;
    void* p = ::mmap(nullptr, kSize + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    FUZZ_CHECK(p != MAP_FAILED, "mmap of guest RAM failed");
    base_ = static_cast<std::byte*>(p);
    FUZZ_CHECK(::mprotect(base_ + page, kSize, PROT_READ | PROT_WRITE) == 0, "mprotect failed");
  }
  GuardedRam(const GuardedRam&) = delete;
  GuardedRam& operator=(const GuardedRam&) = delete;

  std::span<std::byte> bytes() const noexcept { return {base_ + guard_, kSize}; }
  void clear() noexcept { std::memset(base_ + guard_, 0, kSize); }

 private:
  std::byte* base_ = nullptr;
  std::size_t guard_ = 0;
};

// The console's stdout: counts and hashes, checks the per-turn cap.
class CheckingSink final : public devices::ByteSink {
 public:
  void write(std::span<const std::uint8_t> bytes) noexcept override {
    FUZZ_CHECK(!bytes.empty(), "the console wrote 0 bytes to the sink");
    FUZZ_CHECK(bytes.size() <= devices::VirtioConsole::kTxBytesPerTurn,
               "one sink write of %zu bytes, more than a transmit turn", bytes.size());
    ++writes_in_op;
    for (const std::uint8_t b : bytes) hash = (hash ^ b) * 0x100000001b3ull;
    total += bytes.size();
  }
  std::uint64_t hash = 0xcbf29ce484222325ull;
  std::uint64_t total = 0;
  int writes_in_op = 0;
};

class VirtioMmioRig {
 public:
  using T = devices::VirtioMmioTransport;
  static constexpr std::uint64_t kBusBase = 0xd0000000;
  static constexpr std::size_t kDiskBytes = 64 * 512;
  static constexpr std::size_t kDevices = 2;  // 0 console, 1 blk
  static constexpr std::size_t kBlkConfigSize = 60;

  // `ram` and `disk_fd` are this twin's; the disk is refilled by the caller.
  VirtioMmioRig(std::uint8_t config, GuardedRam& ram, int disk_fd)
      : ram_(ram),
        read_only_((config & 1) != 0),
        hook_((config & 2) == 0),
        guest_ram_(ram.bytes()),
        console_(sink_),
        blk_(devices::BlockFile::open("/proc/self/fd/" + std::to_string(disk_fd), read_only_),
             "fuzz", /*use_worker=*/false) {
    ram_.clear();
    transports_[0] = std::make_unique<T>(console_, guest_ram_, irq_[0]);
    transports_[1] = std::make_unique<T>(blk_, guest_ram_, irq_[1]);
    bus_.attach(kBusBase, T::kWindowSize, *transports_[0]);
    bus_.attach(kBusBase + T::kWindowSize, T::kWindowSize, *transports_[1]);
    if (hook_) {
      console_.set_on_tx_pending([this] {
        FUZZ_CHECK(!resume_pending_, "a second resume scheduled while one is pending");
        resume_pending_ = true;
      });
    }
  }

  // Runs one record; returns the bytes a read produced (for the twins' comparison).
  void apply(const Op& op, std::span<std::uint8_t> read_out) {
    sink_.writes_in_op = 0;
    switch (op.kind) {
      case OpKind::kRead: access(op, true, read_out); break;
      case OpKind::kWrite: access(op, false, read_out); break;
      case OpKind::kAdvance: {
        const std::size_t d = op.arg & 1u;
        transports_[d]->notify_from_eventfd(op.value);
        ++notifies_[d];
        break;
      }
      case OpKind::kAdvanceLate: {
        const std::size_t w = op.width();
        const auto bytes = op.value_bytes();
        const std::size_t n = std::min<std::size_t>(w, GuardedRam::kSize - op.port);
        std::memcpy(ram_.bytes().data() + op.port, bytes.data(), n);
        break;
      }
      case OpKind::kHost: host(op); break;
      case OpKind::kPauseResume: bring_up(op.arg & 1u, op); break;
    }
    // One console turn per notify or resume: at most one sink write per record.
    FUZZ_CHECK(sink_.writes_in_op <= 1, "%d sink writes in one record", sink_.writes_in_op);
    check();
  }

  void finish() {
    // What a VMM does at exit: the console's leftovers, then every device reset.
    console_.flush_transmit();
    check();
    for (std::size_t d = 0; d < kDevices; ++d) reset(d);
    check();
  }

  std::uint64_t digest() const {
    std::uint64_t h = sink_.hash ^ (sink_.total << 1);
    for (std::size_t d = 0; d < kDevices; ++d) {
      const devices::VirtioMmioStats s = transports_[d]->stats();
      for (const std::uint64_t v :
           {std::uint64_t(irq_[d].pulses()), s.bad_accesses, s.bad_notifies, s.needs_reset,
            s.features_refused, s.resets, std::uint64_t(transports_[d]->status())}) {
        h = (h ^ v) * 0x100000001b3ull;
      }
    }
    const devices::VirtioBlkStats b = blk_.stats();
    return h ^ (b.reads * 3) ^ (b.writes * 5) ^ (b.bytes_read << 7) ^ (b.unanswerable << 11);
  }

 private:
  void access(const Op& op, bool is_read, std::span<std::uint8_t> read_out) {
    const std::size_t w = std::size_t{1} << (op.arg & 3u);
    std::array<std::uint8_t, 8> wbuf{};
    const auto v = op.value_bytes();
    std::memcpy(wbuf.data(), v.data(), 4);
    std::memcpy(wbuf.data() + 4, v.data(), 4);
    const auto data = std::span(wbuf).first(w);
    if ((op.arg & 4u) != 0) {
      const std::size_t d = (op.arg >> 3) & 1u;
      std::uint64_t offset = op.port;
      if (is_read && (op.arg & 16u) != 0) offset |= std::uint64_t{op.value} << 16;
      if (is_read) {
        transports_[d]->read(offset, read_out.first(w));
        check_direct_read(d, offset, read_out.first(w));
      } else {
        before_write(d, offset, data);
        transports_[d]->write(offset, data);
        after_write(d, offset, data);
      }
      return;
    }
    const std::uint64_t gpa = kBusBase + op.port;
    const std::optional<std::size_t> d =
        op.port + w <= kDevices * T::kWindowSize
            ? std::optional<std::size_t>(op.port / T::kWindowSize)
            : std::nullopt;
    // An access that straddles the end of the console's window is not in one device: unmapped.
    const bool inside = d && (op.port % T::kWindowSize) + w <= T::kWindowSize;
    const std::uint64_t unmapped_before = unmapped();
    if (is_read) {
      const bool taken = bus_.read(gpa, read_out.first(w));
      FUZZ_CHECK(taken == inside, "bus read at +0x%x width %zu: taken %d", op.port, w, taken);
      if (!inside) {
        for (std::size_t i = 0; i < w; ++i) {
          FUZZ_CHECK(read_out[i] == 0xff, "unmapped MMIO read did not return all ones");
        }
      } else {
        check_direct_read(*d, op.port % T::kWindowSize, read_out.first(w));
      }
    } else {
      if (inside) before_write(*d, op.port % T::kWindowSize, data);
      const bool taken = bus_.write(gpa, data);
      FUZZ_CHECK(taken == inside, "bus write at +0x%x width %zu: taken %d", op.port, w, taken);
      if (inside) after_write(*d, op.port % T::kWindowSize, data);
    }
    FUZZ_CHECK(unmapped() == unmapped_before + (inside ? 0 : 1),
               "unmapped MMIO not counted exactly once");
  }

  std::uint64_t unmapped() const {
    const devices::MmioBusStats s = bus_.stats();
    return s.unmapped_reads + s.unmapped_writes;
  }

  // What a read may return, whichever way it came.
  void check_direct_read(std::size_t d, std::uint64_t offset, std::span<const std::uint8_t> got) {
    const bool all_zero =
        std::all_of(got.begin(), got.end(), [](std::uint8_t b) { return b == 0; });
    if (offset < T::kConfig) {
      // Registers: only aligned 32-bit reads of a readable register return anything.
      if (got.size() != 4 || offset % 4 != 0) {
        FUZZ_CHECK(all_zero, "a %zu-byte register read at 0x%llx returned data", got.size(),
                   static_cast<unsigned long long>(offset));
      }
      if (got.size() == 4 && offset == T::kInterruptStatus) {
        std::uint32_t isr = 0;
        std::memcpy(&isr, got.data(), 4);
        FUZZ_CHECK(isr == isr_model_[d], "InterruptStatus 0x%x, expected 0x%x", isr,
                   isr_model_[d]);
      }
      return;
    }
    // Configuration space: the console has none we fill, blk 60 bytes; beyond that (and beyond
    // the window, whatever the offset) reads are 0.
    const std::uint64_t cfg = offset - T::kConfig;
    const std::uint64_t filled = d == 0 ? 0 : kBlkConfigSize;
    if (cfg >= filled) {
      FUZZ_CHECK(all_zero, "config read past its end (device %zu, offset 0x%llx) returned data",
                 d, static_cast<unsigned long long>(offset));
    }
  }

  // The transport counts every aligned 32-bit QueueNotify write, valid or not.
  void before_write(std::size_t d, std::uint64_t offset, std::span<const std::uint8_t> data) {
    if (data.size() == 4 && offset == T::kQueueNotify) ++notifies_[d];
  }

  void after_write(std::size_t d, std::uint64_t offset, std::span<const std::uint8_t> data) {
    if (data.size() != 4 || offset % 4 != 0) return;
    std::uint32_t v = 0;
    std::memcpy(&v, data.data(), 4);
    if (offset == T::kInterruptAck) isr_model_[d] &= ~v;
    if (offset == T::kStatus && v == 0) after_reset(d);
  }

  void reset(std::size_t d) {
    set_reg(d, T::kStatus, 0);
    after_reset(d);
  }

  // 4.2.2.1: after a reset InterruptStatus and every QueueReady read 0, and so does Status.
  void after_reset(std::size_t d) {
    sync_interrupts(d);
    isr_model_[d] = 0;
    FUZZ_CHECK(reg(d, T::kStatus) == 0, "status not 0 after reset");
    FUZZ_CHECK(reg(d, T::kInterruptStatus) == 0, "InterruptStatus not 0 after reset");
    const std::size_t queues = d == 0 ? 2 : 1;
    for (std::uint32_t q = 0; q < queues; ++q) {
      set_reg(d, T::kQueueSel, q);
      FUZZ_CHECK(reg(d, T::kQueueReady) == 0, "queue %u ready after reset", q);
    }
    set_reg(d, T::kQueueSel, 0);  // as the reset left it
  }

  std::uint32_t reg(std::size_t d, std::uint64_t offset) {
    std::uint32_t v = 0;
    transports_[d]->read(offset, std::span(reinterpret_cast<std::uint8_t*>(&v), 4));
    return v;
  }
  void set_reg(std::size_t d, std::uint64_t offset, std::uint32_t v) {
    transports_[d]->write(offset, std::span(reinterpret_cast<const std::uint8_t*>(&v), 4));
    if (offset == T::kQueueNotify) ++notifies_[d];
  }

  void host(const Op& op) {
    switch (op.arg % 4) {
      case 0: {
        std::array<std::uint8_t, 300> in{};
        const std::size_t n = op.value % in.size();
        for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::uint8_t>(op.value + i);
        const std::size_t room = console_.rx_space();
        const std::size_t took = console_.receive(std::span(in).first(n));
        FUZZ_CHECK(took == std::min(n, room), "receive took %zu of %zu with room %zu", took, n,
                   room);
        break;
      }
      case 1:
        if (resume_pending_) {
          resume_pending_ = false;
          console_.resume_transmit();
        }
        break;
      case 2: console_.resume_transmit(); break;
      case 3: bring_up(op.value >> 31, op); break;
    }
  }

  // A Linux driver's probe: reset, ACKNOWLEDGE, DRIVER, features, FEATURES_OK, each queue
  // (checking QueueReady reads 0 first, as vm_setup_vq does), DRIVER_OK.
  void bring_up(std::size_t d, const Op& op) {
    set_reg(d, T::kStatus, 0);
    after_reset(d);
    set_reg(d, T::kStatus, T::kStatusAcknowledge);
    set_reg(d, T::kStatus, T::kStatusAcknowledge | T::kStatusDriver);
    std::uint64_t f = transports_[d]->offered_features() &
                      ~(devices::kVirtioFIndirectDesc | devices::kVirtioFEventIdx);
    if ((op.arg & 2u) != 0) f |= devices::kVirtioFIndirectDesc;
    if ((op.arg & 4u) != 0) f |= devices::kVirtioFEventIdx;
    set_reg(d, T::kDriverFeaturesSel, 0);
    set_reg(d, T::kDriverFeatures, static_cast<std::uint32_t>(f));
    set_reg(d, T::kDriverFeaturesSel, 1);
    set_reg(d, T::kDriverFeatures, static_cast<std::uint32_t>(f >> 32));
    set_reg(d, T::kStatus, T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk);
    const std::uint32_t size = 1u << (op.value % 9);
    const std::size_t queues = d == 0 ? 2 : 1;
    for (std::uint32_t q = 0; q < queues; ++q) {
      const std::uint64_t base = ((op.port & 0xfff0u) + 0x2000u * q) % GuardedRam::kSize;
      const std::uint64_t avail = base + 16u * size;
      const std::uint64_t used = (avail + 6u + 2u * size + 3u) & ~std::uint64_t{3};
      set_reg(d, T::kQueueSel, q);
      FUZZ_CHECK(reg(d, T::kQueueReady) == 0, "queue %u ready before set-up", q);
      set_reg(d, T::kQueueNum, size);
      set_reg(d, T::kQueueDescLow, static_cast<std::uint32_t>(base));
      set_reg(d, T::kQueueDescHigh, 0);
      set_reg(d, T::kQueueDriverLow, static_cast<std::uint32_t>(avail));
      set_reg(d, T::kQueueDriverHigh, 0);
      set_reg(d, T::kQueueDeviceLow, static_cast<std::uint32_t>(used));
      set_reg(d, T::kQueueDeviceHigh, 0);
      set_reg(d, T::kQueueReady, 1);
    }
    set_reg(d, T::kStatus, T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk |
                               T::kStatusDriverOk);
  }

  // Folds the interrupts raised since the last look into the InterruptStatus model.
  void sync_interrupts(std::size_t d) {
    const devices::VirtioMmioStats s = transports_[d]->stats();
    if (s.interrupts != seen_interrupts_[d]) isr_model_[d] |= T::kInterruptUsedBuffer;
    if (s.config_interrupts != seen_config_[d]) isr_model_[d] |= T::kInterruptConfigChange;
    seen_interrupts_[d] = s.interrupts;
    seen_config_[d] = s.config_interrupts;
  }

  void check() {
    for (std::size_t d = 0; d < kDevices; ++d) {
      sync_interrupts(d);
      const devices::VirtioMmioStats s = transports_[d]->stats();
      // Every pulse is a counted interrupt, and nothing else pulses the line.
      FUZZ_CHECK(static_cast<std::uint64_t>(irq_[d].pulses()) == s.interrupts + s.config_interrupts,
                 "device %zu: %d pulses, %llu + %llu interrupts counted", d, irq_[d].pulses(),
                 static_cast<unsigned long long>(s.interrupts),
                 static_cast<unsigned long long>(s.config_interrupts));
      FUZZ_CHECK(s.notifies_vcpu + s.notifies_eventfd == notifies_[d],
                 "device %zu: notifies counted %llu, made %llu", d,
                 static_cast<unsigned long long>(s.notifies_vcpu + s.notifies_eventfd),
                 static_cast<unsigned long long>(notifies_[d]));
      FUZZ_CHECK(s.bad_notifies <= notifies_[d], "more bad notifies than notifies");
      const std::uint32_t isr = reg(d, T::kInterruptStatus);
      FUZZ_CHECK(isr == isr_model_[d], "device %zu: InterruptStatus 0x%x, expected 0x%x", d, isr,
                 isr_model_[d]);
      const std::uint32_t status = reg(d, T::kStatus);
      if ((status & T::kStatusDriverOk) != 0) {
        FUZZ_CHECK((status & T::kStatusFeaturesOk) != 0, "DRIVER_OK without FEATURES_OK");
      }
    }
    const devices::VirtioConsoleStats c = console_.stats();
    FUZZ_CHECK(c.tx_bytes == sink_.total, "console counted %llu bytes out, the sink got %llu",
               static_cast<unsigned long long>(c.tx_bytes),
               static_cast<unsigned long long>(sink_.total));
    const devices::VirtioBlkStats b = blk_.stats();
    FUZZ_CHECK(b.io_errors == 0, "a disk I/O failed: a guest buffer outside guest RAM (EFAULT)?");
    if (read_only_) FUZZ_CHECK(b.bytes_written == 0 && b.writes == 0, "a read-only disk written");
  }

  GuardedRam& ram_;
  const bool read_only_;
  const bool hook_;
  const devices::GuestMemory guest_ram_;
  CheckingSink sink_;
  devices::VirtioConsole console_;
  devices::VirtioBlk blk_;
  std::array<testing::FakeIrqLine, kDevices> irq_;
  std::array<std::unique_ptr<T>, kDevices> transports_;
  devices::MmioBus bus_;
  bool resume_pending_ = false;
  std::array<std::uint32_t, kDevices> isr_model_{};
  std::array<std::uint64_t, kDevices> seen_interrupts_{}, seen_config_{}, notifies_{};
};

}  // namespace minivmm::fuzz
