// Port 0x61 of a PC: the "NMI Status and Control" register (Intel PCH data sheet, NMI_SC; "system
// control port B" on the PC/AT), as far as it concerns the 8254: counter 2's GATE and OUT, the
// speaker data enable, and the refresh toggle that old delay loops poll.
//
// Bits: 0 TIM_CNT2_EN (counter 2 GATE), 1 SPKR_DAT_EN, 2 PCI_SERR_EN, 3 IOCHK_NMI_EN are stored
// as written; 4 REF_TOGGLE flips every 15.085 us of vm_clock (18 PIT ticks, the PC's DRAM
// refresh period); 5 TMR2_OUT_STS is counter 2's OUT, computed when read. Bits 6-7 (NMI sources)
// read 0: nothing here raises an NMI. No sound is produced.
//
// Threads: read()/write() on vCPU threads. Lock order: mu_ -> I8254Pit's mutex -> TimerList.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>

#include "devices/pc/i8254/i8254_pit.h"
#include "devices/bus/device_state.h"
#include "devices/bus/port_io_device.h"

namespace minivmm::devices {

class I8254SpeakerPort final : public PortIoDevice, public StatefulDevice {
 public:
  static constexpr std::uint8_t kNmiScTimCnt2En = 0x01;
  static constexpr std::uint8_t kNmiScSpkrDatEn = 0x02;
  static constexpr std::uint8_t kNmiScPciSerrEn = 0x04;
  static constexpr std::uint8_t kNmiScIochkNmiEn = 0x08;
  static constexpr std::uint8_t kNmiScRefToggle = 0x10;
  static constexpr std::uint8_t kNmiScTmr2OutSts = 0x20;
  static constexpr std::uint8_t kNmiScWritable = 0x0f;
  static constexpr std::uint64_t kRefreshToggleTicks = 18;

  // `pit` must outlive this.
  explicit I8254SpeakerPort(I8254Pit& pit) noexcept : pit_(pit) {}

  std::string_view name() const noexcept override { return "port61"; }

  // One byte wide. A wider access uses its first byte (port 0x61) and treats the rest as the
  // unmapped ports after it: reads 0xff, writes ignored, both counted in bad_accesses().
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  std::uint64_t bad_accesses() const;

  // StatefulDevice: the written bits of port 0x61 (bit 0 is counter 2's GATE, whose level
  // the PIT's record holds too: loading this does not touch the PIT) and bad_accesses(). It
  // has no report key; its name is its key.
  std::string_view state_key() const noexcept override { return name(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  I8254Pit& pit_;
  mutable std::mutex mu_;  // lock order: mu_ -> I8254Pit mutex -> TimerList mutex
  std::uint8_t control_ = 0;
  std::uint64_t bad_accesses_ = 0;
};

}  // namespace minivmm::devices
