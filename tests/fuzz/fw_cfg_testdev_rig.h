// The devices kvm-unit-tests talks to besides the PC's own: fw_cfg (0x510-0x511) and
// pc-testdev's echo register (0xe0), flush-page port (0xe4) and IRQ ports (0x2000-0x2017).
// Offsets: fw_cfg 0-1, echo 2-5, flush 6-9, IRQ lines 10-33.
//
// Checks, against a model kept here from the accesses alone: fw_cfg byte reads return the
// selected item's next byte (0 past its end or for an unknown key), other widths read all ones
// and never move the stream; the echo register reads back what was written, byte by byte; each
// 32-bit flush write at offset 0 calls flush once with the 4 KiB page of the value, nothing else
// does; each IRQ line is at the level of the last byte written to it and nothing else moves it.
// Config bit 0 adds a file to fw_cfg, so the directory is fuzzed non-empty too.
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <vector>

#include "devices/testdev/fw_cfg.h"
#include "devices/testdev/pc_testdev_flush_page.h"
#include "devices/testdev/pc_testdev_irq.h"
#include "devices/testdev/pc_testdev_port.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/support/fake_irq_line.h"

namespace minivmm::fuzz {

class FwCfgTestdevRig final : public Rig {
 public:
  FwCfgTestdevRig(Env& /*env*/, std::uint8_t config) {
    const bool with_file = (config & 1) != 0;
    if (with_file) fw_cfg_.add_file("etc/fuzz", {1, 2, 3, 4, 5});
    items_ = &model_items(with_file);
    fw_cfg_.write(0, std::array<std::uint8_t, 2>{0xff, 0xff});  // start from "no item"
    selected_ = 0xffff;
    for (std::size_t i = 0; i < lines_.size(); ++i) wires_[i] = &lines_[i];
    irq_ = std::make_unique<devices::PcTestdevIrq>(wires_);
    // At QEMU's places, as the PC board puts them with --testdev (vmm/machine/pc_board.cc).
    slots_ = {Slot{&fw_cfg_, devices::FwCfg::kPortCount, 0x510},
              Slot{&echo_, devices::PcTestdevPort::kPortCount, 0xe0},
              Slot{&flush_, devices::PcTestdevFlushPage::kPortCount, 0xe4},
              Slot{irq_.get(), devices::PcTestdevIrq::kPortCount, 0x2000}};
  }

  std::span<const Slot> slots() const noexcept override { return slots_; }

  void before_access(std::size_t /*slot*/, std::uint16_t /*offset*/) override { flushed_.clear(); }

  void after_read(std::size_t slot, std::uint16_t offset,
                  std::span<const std::uint8_t> data) override {
    if (slot == kFwCfg) {
      if (data.size() != 1) {
        FUZZ_CHECK(all(data, 0xff), "fw_cfg %zu-byte read is not all ones", data.size());
        return;
      }
      std::uint8_t expected = 0;
      const auto it = items_->find(static_cast<std::uint16_t>(selected_ & ~0x4000u));
      if (selected_ < 0x8000 && it != items_->end() && pos_ < it->second.size()) {
        expected = it->second[pos_];
      }
      ++pos_;
      FUZZ_CHECK(data[0] == expected, "fw_cfg key 0x%x byte %zu read 0x%02x, expected 0x%02x",
                 selected_, pos_ - 1, data[0], expected);
    } else if (slot == kEcho) {
      for (std::size_t i = 0; i < data.size(); ++i) {
        const std::size_t b = offset + i;
        const std::uint8_t expected = b < 4 ? echo_model_[b] : 0;
        FUZZ_CHECK(data[i] == expected, "echo byte %zu read 0x%02x, expected 0x%02x", b, data[i],
                   expected);
      }
    } else {
      FUZZ_CHECK(all(data, 0xff), "%s read is not all ones", slot == kFlush ? "flush" : "irq");
    }
  }

  void after_write(std::size_t slot, std::uint16_t offset,
                   std::span<const std::uint8_t> data) override {
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < data.size(); ++i) value |= std::uint32_t{data[i]} << (8 * i);
    if (slot == kFwCfg) {
      if (data.size() == 2 && offset == 0) {
        selected_ = value;
        pos_ = 0;
      }
    } else if (slot == kEcho) {
      for (std::size_t i = 0; i < data.size() && offset + i < 4; ++i) {
        echo_model_[offset + i] = data[i];
      }
    } else if (slot == kFlush) {
      const bool decoded = offset == 0 && data.size() == 4;
      FUZZ_CHECK(flushed_.size() == (decoded ? 1u : 0u), "flush ran %zu times", flushed_.size());
      if (decoded) {
        FUZZ_CHECK(flushed_[0] == (value & ~0xfffu), "flushed page 0x%llx for value 0x%x",
                   static_cast<unsigned long long>(flushed_[0]), value);
      }
    } else if (data.size() == 1) {
      line_model_[offset] = data[0] != 0;
    }
    FUZZ_CHECK(slot == kFlush || flushed_.empty(), "a non-flush write flushed a page");
  }

  void check() override {
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      FUZZ_CHECK(lines_[i].level() == line_model_[i], "IRQ line %zu at %d, expected %d", i,
                 lines_[i].level(), line_model_[i]);
    }
  }

  std::uint64_t digest() const override {
    std::uint64_t d = echo_.value() * 31 + flush_.flushes() * 7 + pos_;
    for (const auto& l : lines_) d = d * 3 + (l.level() ? 1 : 0);
    const auto s = fw_cfg_.stats();
    return d * 1'000'003 + s.data_reads * 13 + s.bad_accesses * 17 + s.unknown_selects;
  }

 private:
  static constexpr std::size_t kFwCfg = 0, kEcho = 1, kFlush = 2;

  // The model's items, read once per configuration through a separate device built the same
  // way (the device is deterministic; reading 32 K bytes per input would dominate the run).
  static const std::map<std::uint16_t, std::vector<std::uint8_t>>& model_items(bool with_file) {
    static const auto build = [](bool file) {
      devices::FwCfg dev{devices::FwCfgConfig{kRamBytes, kCpus, kMaxCpus}};
      if (file) dev.add_file("etc/fuzz", {1, 2, 3, 4, 5});
      std::map<std::uint16_t, std::vector<std::uint8_t>> items;
      for (std::uint32_t key = 0; key < 0x40; ++key) {
        const std::uint8_t sel[2] = {static_cast<std::uint8_t>(key), 0};
        dev.write(0, sel);
        std::vector<std::uint8_t> item;
        for (int i = 0; i < 512; ++i) {
          std::uint8_t b = 0;
          dev.read(1, std::span(&b, 1));
          item.push_back(b);
        }
        while (!item.empty() && item.back() == 0) item.pop_back();
        items[static_cast<std::uint16_t>(key)] = item;
      }
      return items;
    };
    static const auto plain = build(false);
    static const auto file = build(true);
    return with_file ? file : plain;
  }

  static bool all(std::span<const std::uint8_t> d, std::uint8_t v) {
    return std::all_of(d.begin(), d.end(), [v](std::uint8_t b) { return b == v; });
  }

  static constexpr std::uint64_t kRamBytes = 256ull << 20;
  static constexpr std::uint16_t kCpus = 2;
  static constexpr std::uint16_t kMaxCpus = 4;
  devices::FwCfg fw_cfg_{devices::FwCfgConfig{kRamBytes, kCpus, kMaxCpus}};
  devices::PcTestdevPort echo_;
  std::vector<std::uint64_t> flushed_;
  devices::PcTestdevFlushPage flush_{[this](std::uint64_t page) { flushed_.push_back(page); }};
  std::array<testing::FakeIrqLine, devices::PcTestdevIrq::kLines> lines_;
  std::array<devices::IrqLine*, devices::PcTestdevIrq::kLines> wires_{};
  std::unique_ptr<devices::PcTestdevIrq> irq_;
  std::array<Slot, 4> slots_{};

  const std::map<std::uint16_t, std::vector<std::uint8_t>>* items_ = nullptr;
  std::uint32_t selected_ = 0xffff;
  std::size_t pos_ = 0;
  std::array<std::uint8_t, 4> echo_model_{};
  std::array<bool, devices::PcTestdevIrq::kLines> line_model_{};
};

}  // namespace minivmm::fuzz
