// QEMU's firmware configuration device, the port I/O ("traditional") interface only: a 16-bit
// selector at 0x510 and a byte-stream data port at 0x511 (QEMU docs/specs/fw_cfg.rst, "Selector
// (Control) Register" and "Data Register"). Not a chip; QEMU's own interface between the VMM
// and firmware. kvm-unit-tests reads the CPU count (0x05) and RAM size (0x03) through it
// (lib/x86/fwcfg.c), and probes key 0x11, which QEMU does not define for it and which reads 0.
//
// Items: signature 0x00 "QEMU", id 0x01 (bit 0: traditional interface; no DMA, so bit 1 is
// clear), RAM size 0x03 (u64), CPU count 0x05 (u16), max CPUs 0x0f (u16), the file directory
// 0x19 (big-endian count, then 64-byte entries; empty unless add_file() was called), and
// named files from 0x20 on. Deliberately missing: the DMA interface (0x514), writes to items
// (QEMU ignores them since 2.4), the arch-local items (0x8000+: ACPI tables, e820, ...).
//
// Guest behaviour, as QEMU's (hw/nvram/fw_cfg.c fw_cfg_comb_*): a 16-bit write at offset 0
// selects an item and rewinds it; a byte read at either offset returns the next byte of the
// selected item, or 0 past its end or when the selector names no item (counted in
// `unknown_selects`, logged once per key). Byte writes are data writes, which QEMU ignores;
// so do we (counted). Any other width is not decoded by QEMU: writes are ignored, reads return
// all ones, both counted as bad accesses.
//
// Threads: read()/write() on any vCPU thread; the selector and offset are shared by every vCPU
// (guests serialise with a lock, as the suite does), guarded by mu_. add_file() during setup.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "devices/bus/device_state.h"
#include "devices/bus/port_io_device.h"
#include "devices/bus/report_writer.h"

namespace minivmm::devices {

struct FwCfgConfig {
  std::uint64_t ram_bytes = 0;
  std::uint16_t cpus = 1;
  std::uint16_t max_cpus = 1;
};

struct FwCfgStats {
  std::uint64_t selects = 0;
  std::uint64_t unknown_selects = 0;  // selector named no item
  std::uint64_t data_reads = 0;
  std::uint64_t reads_past_end = 0;   // bytes read after the item's end (read as 0)
  std::uint64_t ignored_writes = 0;   // byte writes to items: QEMU ignores them too
  std::uint64_t bad_accesses = 0;     // widths QEMU does not decode
};

class FwCfg final : public PortIoDevice, public ReportingDevice, public StatefulDevice {
 public:
  static constexpr std::uint16_t kPortCount = 2;

  // Keys (QEMU include/standard-headers/linux/qemu_fw_cfg.h).
  static constexpr std::uint16_t kSignature = 0x00;
  static constexpr std::uint16_t kId = 0x01;
  static constexpr std::uint16_t kRamSize = 0x03;
  static constexpr std::uint16_t kNbCpus = 0x05;
  static constexpr std::uint16_t kMaxCpus = 0x0f;
  static constexpr std::uint16_t kFileDir = 0x19;
  static constexpr std::uint16_t kFileFirst = 0x20;
  static constexpr std::uint16_t kWriteChannel = 0x4000;  // ignored in the selector
  static constexpr std::size_t kFileNameBytes = 56;
  static constexpr std::size_t kMaxFiles = 0x3fff - kFileFirst;

  explicit FwCfg(const FwCfgConfig& config);

  // Setup only. Adds a named file (the name is cut to 55 bytes plus NUL) at the next key and
  // rebuilds the directory. Returns its key. Throws std::length_error when the keys run out.
  std::uint16_t add_file(std::string_view name, std::vector<std::uint8_t> data);

  std::string_view name() const noexcept override { return report_key(); }
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  FwCfgStats stats() const;

  // ReportingDevice: stats() under "fw_cfg".
  std::string_view report_key() const noexcept override { return "fw_cfg"; }
  void report(ReportWriter& out) const override;

  // StatefulDevice (pc_testdev_state.cc): the selected item (by key: the items themselves are
  // the constructor's and add_file()'s, made the same way on restore), the read offset into it
  // and the counters.
  std::string_view state_key() const noexcept override { return report_key(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  void rebuild_directory();

  std::map<std::uint16_t, std::vector<std::uint8_t>> items_;  // immutable once vCPUs run
  std::vector<std::pair<std::string, std::uint16_t>> files_;

  mutable std::mutex mu_;
  const std::vector<std::uint8_t>* selected_ = nullptr;  // guarded by mu_; null: no item
  std::size_t offset_ = 0;                               // guarded by mu_
  std::set<std::uint16_t> logged_unknown_;               // guarded by mu_
  FwCfgStats stats_;                                     // guarded by mu_
};

}  // namespace minivmm::devices
