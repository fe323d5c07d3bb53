// Snapshot records of the test devices (mounted only with --testdev): fw_cfg's selection and
// pc-testdev's parts. Their tests run across a snapshot too, so what a guest wrote (the echo
// register, the iomem buffer, the IRQ levels it set) must read back the same.
#include "devices/testdev/fw_cfg.h"
#include "devices/testdev/pc_testdev.h"

namespace minivmm::devices {
namespace {

constexpr std::uint8_t kPcTestdevStateVersion = 1;

}  // namespace

void FwCfg::save_state(StateWriter& out) const {
  std::lock_guard lock(mu_);
  write_version(out, kPcTestdevStateVersion);
  std::uint16_t key = 0;
  for (const auto& [k, item] : items_) {
    if (&item == selected_) key = k;
  }
  out.boolean(selected_ != nullptr);
  out.u16(key);
  out.u64(offset_);
  for (std::uint64_t v : {stats_.selects, stats_.unknown_selects, stats_.data_reads,
                          stats_.reads_past_end, stats_.ignored_writes, stats_.bad_accesses}) {
    out.u64(v);
  }
}

void FwCfg::load_state(StateReader& in) {
  std::lock_guard lock(mu_);
  read_version(in, kPcTestdevStateVersion);
  const bool selected = in.boolean();
  const std::uint16_t key = in.u16();
  const std::uint64_t offset = in.u64();
  FwCfgStats stats;
  for (std::uint64_t* v : {&stats.selects, &stats.unknown_selects, &stats.data_reads,
                           &stats.reads_past_end, &stats.ignored_writes, &stats.bad_accesses}) {
    *v = in.u64();
  }
  in.expect_end();
  const std::vector<std::uint8_t>* item = nullptr;
  if (selected) {
    const auto it = items_.find(key);
    if (it == items_.end()) in.fail("selected key " + std::to_string(key) + " is no item here");
    item = &it->second;
  } else if (key != 0) {
    in.fail("a key without a selection");
  }
  // Reads stop advancing at the item's end; nothing selected reads from nowhere.
  const std::uint64_t end = item != nullptr ? item->size() : 0;
  if (offset > end) in.fail("offset " + std::to_string(offset) + " past the item's end");
  selected_ = item;
  offset_ = static_cast<std::size_t>(offset);
  stats_ = stats;
}

void PcTestdevPort::save_state(StateWriter& out) const {
  out.u32(data_.load());
  out.u64(bad_accesses_.load());
}

void PcTestdevPort::load_state(StateReader& in) {
  data_.store(in.u32());
  bad_accesses_.store(in.u64());
}

void PcTestdevFlushPage::save_state(StateWriter& out) const {
  out.u64(flushes_.load());
  out.u64(bad_accesses_.load());
}

void PcTestdevFlushPage::load_state(StateReader& in) {
  flushes_.store(in.u64());
  bad_accesses_.store(in.u64());
}

void PcTestdevIrq::save_state(StateWriter& out) const {
  std::lock_guard lock(mu_);
  std::array<std::uint8_t, kLines> levels{};
  for (std::size_t i = 0; i < kLines; ++i) levels[i] = levels_[i] ? 1 : 0;
  out.bytes(levels);
  for (std::uint64_t v : {stats_.raises, stats_.lowers, stats_.unwired, stats_.bad_accesses}) {
    out.u64(v);
  }
}

void PcTestdevIrq::load_state(StateReader& in) {
  std::lock_guard lock(mu_);
  std::array<std::uint8_t, kLines> levels{};
  in.fixed_bytes(levels);
  PcTestdevIrqStats stats;
  for (std::uint64_t* v : {&stats.raises, &stats.lowers, &stats.unwired, &stats.bad_accesses}) {
    *v = in.u64();
  }
  for (std::uint8_t l : levels) {
    if (l > 1) in.fail("an IRQ level of " + std::to_string(l));
  }
  // The record's last part: a longer record is refused before any line is driven.
  in.expect_end();
  stats_ = stats;
  for (std::size_t i = 0; i < kLines; ++i) {
    levels_[i] = levels[i] != 0;
    // A fresh board's lines are low: raise those the guest had raised.
    if (levels_[i] && lines_[i] != nullptr) lines_[i]->set_level(true);
  }
}

void PcTestdevIomem::save_state(StateWriter& out) const {
  std::lock_guard lock(mu_);
  out.bytes(buf_);
  out.u64(reads_.load());
  out.u64(writes_.load());
  out.u64(bad_accesses_.load());
}

void PcTestdevIomem::load_state(StateReader& in) {
  std::lock_guard lock(mu_);
  in.fixed_bytes(buf_);
  reads_.store(in.u64());
  writes_.store(in.u64());
  bad_accesses_.store(in.u64());
}

void PcTestdev::save_state(StateWriter& out) const {
  write_version(out, kPcTestdevStateVersion);
  echo_.save_state(out);
  flush_page_.save_state(out);
  out.u64(flushes_outside_ram_.load(std::memory_order_relaxed));
  iomem_.save_state(out);
  irq_.save_state(out);  // last: its load drives lines
}

void PcTestdev::load_state(StateReader& in) {
  read_version(in, kPcTestdevStateVersion);
  echo_.load_state(in);
  flush_page_.load_state(in);
  flushes_outside_ram_.store(in.u64(), std::memory_order_relaxed);
  iomem_.load_state(in);
  irq_.load_state(in);
  in.expect_end();
}

}  // namespace minivmm::devices
