#include "devices/testdev/fw_cfg.h"

#include <algorithm>
#include <stdexcept>

#include "devices/log/log.h"

namespace minivmm::devices {
namespace {

void put_le(std::vector<std::uint8_t>& out, std::uint64_t v, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// The file directory is the one big-endian structure of fw_cfg (fw_cfg.rst "File Directory").
void put_be(std::vector<std::uint8_t>& out, std::uint64_t v, std::size_t bytes) {
  for (std::size_t i = bytes; i-- > 0;) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::vector<std::uint8_t> le(std::uint64_t v, std::size_t bytes) {
  std::vector<std::uint8_t> out;
  put_le(out, v, bytes);
  return out;
}

}  // namespace

FwCfg::FwCfg(const FwCfgConfig& config) {
  items_[kSignature] = {'Q', 'E', 'M', 'U'};
  items_[kId] = le(1, 4);  // bit 0: the traditional interface; bit 1 (DMA) clear
  items_[kRamSize] = le(config.ram_bytes, 8);
  items_[kNbCpus] = le(config.cpus, 2);
  items_[kMaxCpus] = le(config.max_cpus, 2);
  rebuild_directory();
}

std::uint16_t FwCfg::add_file(std::string_view name, std::vector<std::uint8_t> data) {
  if (files_.size() >= kMaxFiles) throw std::length_error("fw_cfg: no free file keys");
  const auto key = static_cast<std::uint16_t>(kFileFirst + files_.size());
  files_.emplace_back(std::string(name.substr(0, kFileNameBytes - 1)), key);
  items_[key] = std::move(data);
  rebuild_directory();
  return key;
}

void FwCfg::rebuild_directory() {
  std::vector<std::uint8_t> dir;
  put_be(dir, files_.size(), 4);
  for (const auto& [file_name, key] : files_) {
    put_be(dir, items_.at(key).size(), 4);
    put_be(dir, key, 2);
    put_be(dir, 0, 2);  // reserved
    for (std::size_t i = 0; i < kFileNameBytes; ++i) {
      dir.push_back(i < file_name.size() ? static_cast<std::uint8_t>(file_name[i]) : 0);
    }
  }
  items_[kFileDir] = std::move(dir);
}

void FwCfg::read(std::uint16_t /*offset*/, std::span<std::uint8_t> data) noexcept {
  std::lock_guard lock(mu_);
  if (data.size() != 1) {
    ++stats_.bad_accesses;
    std::fill(data.begin(), data.end(), std::uint8_t{0xff});
    return;
  }
  ++stats_.data_reads;
  if (selected_ == nullptr || offset_ >= selected_->size()) {
    if (selected_ != nullptr) ++stats_.reads_past_end;
    data[0] = 0;
    return;
  }
  data[0] = (*selected_)[offset_++];
}

void FwCfg::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  std::lock_guard lock(mu_);
  if (data.size() == 1) {
    ++stats_.ignored_writes;
    return;
  }
  if (data.size() != 2 || offset != 0) {
    ++stats_.bad_accesses;
    return;
  }
  const auto raw = static_cast<std::uint16_t>(data[0] | (data[1] << 8));
  const auto key = static_cast<std::uint16_t>(raw & ~kWriteChannel);
  ++stats_.selects;
  offset_ = 0;
  const auto it = items_.find(key);
  if (it == items_.end()) {
    selected_ = nullptr;
    ++stats_.unknown_selects;
    // Once per key: a guest polling an unknown key must not flood the log.
    if (logged_unknown_.size() < 64 && logged_unknown_.insert(key).second) {
      log::info("fw_cfg: guest selected unknown key {:#06x}: reads return 0", raw);
    }
    return;
  }
  selected_ = &it->second;
}

FwCfgStats FwCfg::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void FwCfg::report(ReportWriter& out) const {
  const FwCfgStats s = stats();
  out.count("selects", s.selects);
  out.count("unknown_selects", s.unknown_selects);
  out.count("data_reads", s.data_reads);
  out.count("reads_past_end", s.reads_past_end);
  out.count("ignored_writes", s.ignored_writes);
  out.count("bad_accesses", s.bad_accesses);
}

}  // namespace minivmm::devices
