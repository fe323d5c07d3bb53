// Writes device_state_fuzz's seeds: real save_state() records, each after a driver brought the
// device up and was served (or, for the board devices, after a guest's accesses), so the
// fuzzer starts from records the devices accept and mutates from there.
//
//   make_device_state_seeds <dir>    writes <dir>/device_state_fuzz/<seed>; run it on
//                                    tests/fuzz/corpus and commit the result
//
// Deterministic; regenerate whenever a record's layout changes (its version byte moves).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/fuzz/device_state_rig.h"
#include "tests/support/time_driver.h"

namespace {

using minivmm::fuzz::StateRig;
using minivmm::fuzz::StateTarget;
using minivmm::testing::FakeGuestRam;
using minivmm::testing::FakeMmioDriver;
using minivmm::testing::FakeQueue;
namespace dev = minivmm::devices;

class Seeds {
 public:
  explicit Seeds(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
  }
  void add(const std::string& name, StateRig& rig) {
    dev::StateWriter w;
    if (rig.transport() != nullptr) rig.transport()->quiesce();
    rig.device().save_state(w);
    std::ofstream out(dir_ / name, std::ios::binary | std::ios::trunc);
    const char target = static_cast<char>(rig.target());
    out.write(&target, 1);
    out.write(reinterpret_cast<const char*>(w.data().data()),
              static_cast<std::streamsize>(w.data().size()));
    ++count_;
  }
  int count() const { return count_; }

 private:
  std::filesystem::path dir_;
  int count_ = 0;
};

constexpr std::uint64_t kHeader = 0x8000, kData = 0x9000, kStatus = 0xa000, kBuf = 0xb000;

void blk_seeds(Seeds& s, FakeGuestRam& mem) {
  {
    StateRig rig(StateTarget::kBlk, mem);
    s.add("blk_no_driver", rig);
  }
  StateRig rig(StateTarget::kBlk, mem);
  FakeQueue q(mem, 0x1000, 16);
  FakeMmioDriver drv(*rig.transport());
  drv.bring_up(dev::kVirtioFVersion1 | dev::kVirtioFEventIdx | dev::kVirtioFIndirectDesc |
                   dev::VirtioBlk::kFFlush,
               {&q});
  mem.put<std::uint32_t>(kHeader, dev::kBlkTIn);
  mem.put<std::uint64_t>(kHeader + 8, 2);
  q.add_chain(0, {{kHeader, 16, false}, {kData, 512, true}, {kStatus, 1, true}});
  drv.notify(0);
  s.add("blk_served_one", rig);
}

void net_seeds(Seeds& s, FakeGuestRam& mem) {
  StateRig rig(StateTarget::kNet, mem);
  FakeQueue rxq(mem, 0x1000, 16), txq(mem, 0x2000, 16);
  FakeMmioDriver drv(*rig.transport());
  drv.bring_up(dev::kVirtioFVersion1 | dev::kVirtioFEventIdx | dev::VirtioNet::kFMac, {&rxq, &txq});
  rxq.add_chain(0, {{kBuf, 0x800, true}});
  rig.backend().inject(std::vector<std::uint8_t>(60, 0x11));
  s.add("net_received_one", rig);
}

void console_seeds(Seeds& s, FakeGuestRam& mem) {
  StateRig rig(StateTarget::kConsole, mem);
  FakeQueue rxq(mem, 0x1000, 8), txq(mem, 0x2000, 8);
  FakeMmioDriver drv(*rig.transport());
  drv.bring_up(dev::kVirtioFVersion1, {&rxq, &txq});
  std::memcpy(mem.at(kBuf), "hello\n", 6);
  txq.add_chain(0, {{kBuf, 6, false}});
  drv.notify(1);
  const std::uint8_t pending[] = {'i', 'n', 'p', 'u', 't'};
  rig.console()->receive(pending);  // no receive buffer: kept in the record
  s.add("console_output_and_pending_input", rig);
}

void board_seeds(Seeds& s, FakeGuestRam& mem) {
  {
    StateRig rig(StateTarget::kFwCfg, mem);
    const std::uint8_t key[2] = {0x20, 0x00};  // the first file
    rig.fw_cfg()->write(0, key);
    std::uint8_t b = 0;
    rig.fw_cfg()->read(1, std::span(&b, 1));
    s.add("fw_cfg_file_selected", rig);
  }
  StateRig rig(StateTarget::kPcTestdev, mem);
  const std::uint8_t echo[4] = {0x78, 0x56, 0x34, 0x12}, one[1] = {1};
  rig.testdev()->echo().write(0, echo);
  rig.testdev()->iomem().write(0x100, echo);
  rig.testdev()->irq().write(4, one);
  s.add("pc_testdev_line_raised", rig);
}

void out(dev::PortIoDevice& d, std::uint16_t offset, std::uint8_t v) {
  d.write(offset, std::span<const std::uint8_t>(&v, 1));
}

// The board devices as a guest leaves them: programmed, and run for a while on their clock
// (from kSeedTime, before the fuzz target's kLoadTime).
void clocked_seeds(Seeds& s, FakeGuestRam& mem) {
  using namespace std::chrono_literals;
  {
    StateRig rig(StateTarget::kPit, mem, minivmm::fuzz::kSeedTime);
    out(*rig.ports(), 3, 0x34);  // counter 0, LSB then MSB, mode 2
    out(*rig.ports(), 0, 0xa5);  // 4773: 250 Hz
    out(*rig.ports(), 0, 0x12);
    minivmm::testing::advance(rig.clock(), {&rig.vm_timers(), &rig.rt_timers()}, 1s);
    s.add("pit_periodic_250hz", rig);
  }
  {
    StateRig rig(StateTarget::kPit, mem, minivmm::fuzz::kSeedTime);
    out(*rig.ports(), 3, 0xb0);  // counter 2, LSB then MSB, mode 0 (one-shot)
    out(*rig.ports(), 2, 0xff);
    out(*rig.ports(), 2, 0xff);
    out(*rig.ports(), 3, 0xc2);  // read-back: latch counter 0's count and status
    s.add("pit_one_shot_latched", rig);
  }
  {
    StateRig rig(StateTarget::kRtc, mem, minivmm::fuzz::kSeedTime);
    out(*rig.ports(), 0, 0x0a);
    out(*rig.ports(), 1, 0x26);  // 32.768 kHz base, 1024 Hz periodic rate
    out(*rig.ports(), 0, 0x0b);
    out(*rig.ports(), 1, 0x62);  // periodic and alarm interrupts, 24-hour mode
    out(*rig.ports(), 0, 0x01);
    out(*rig.ports(), 1, 0xc0);  // alarm seconds: don't care
    minivmm::testing::advance(rig.clock(), {&rig.vm_timers(), &rig.rt_timers()}, 1500ms);
    s.add("rtc_periodic_and_alarm", rig);
  }
  {
    StateRig rig(StateTarget::kUart, mem, minivmm::fuzz::kSeedTime);
    out(*rig.ports(), 3, 0x83);  // DLAB, 8N1
    out(*rig.ports(), 0, 0x01);  // 115200
    out(*rig.ports(), 3, 0x03);
    out(*rig.ports(), 2, 0xc7);  // FIFOs on, cleared, trigger 14
    out(*rig.ports(), 1, 0x0f);  // every interrupt
    for (const char c : std::string("seed")) out(*rig.ports(), 0, static_cast<std::uint8_t>(c));
    minivmm::testing::advance(rig.clock(), {&rig.vm_timers(), &rig.rt_timers()}, 10ms);
    s.add("uart_fifo_interrupts", rig);
  }
  StateRig rig(StateTarget::kI8042, mem, minivmm::fuzz::kSeedTime);
  out(*rig.ports(), 4, 0x60);  // write the command byte...
  out(*rig.ports(), 0, 0x47);  // ...keyboard and aux interrupts, translation
  out(*rig.ports(), 0, 0xf2);  // the keyboard: identify (its answer queued)
  s.add("i8042_keyboard_answer_queued", rig);
}

// The small board devices (issue 34: every record is fuzzed), each after a guest's writes.
void small_board_seeds(Seeds& s, FakeGuestRam& mem) {
  using namespace std::chrono_literals;
  {
    StateRig rig(StateTarget::kAcpiPm, mem, minivmm::fuzz::kSeedTime);
    out(*rig.ports(), 2, 0x21);  // PM1_EN: TMR_EN, PWRBTN_EN
    out(*rig.ports(), 4, 0x01);  // PM1_CNT: SCI_EN
    minivmm::testing::advance(rig.clock(), {&rig.vm_timers(), &rig.rt_timers()}, 3s);
    s.add("acpi_pm_timer_enabled", rig);
  }
  {
    StateRig rig(StateTarget::kPvPanic, mem, minivmm::fuzz::kSeedTime);
    out(*rig.ports(), 0, 0x02);  // crash loaded
    s.add("pvpanic_crash_loaded", rig);
  }
  {
    StateRig rig(StateTarget::kPostPort, mem, minivmm::fuzz::kSeedTime);
    out(*rig.ports(), 0, 0x55);
    s.add("post_port_code", rig);
  }
  {
    StateRig rig(StateTarget::kDebugExit, mem, minivmm::fuzz::kSeedTime);
    const std::uint8_t wide[8] = {};
    rig.ports()->write(0, wide);  // wider than its 4 bytes: refused, counted
    s.add("debug_exit_bad_access", rig);
  }
  StateRig rig(StateTarget::kSpeaker, mem, minivmm::fuzz::kSeedTime);
  out(*rig.ports(), 0, 0x03);  // counter 2's gate and the speaker on
  s.add("speaker_gate_on", rig);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  Seeds seeds(std::filesystem::path(argv[1]) / "device_state_fuzz");
  FakeGuestRam mem(minivmm::fuzz::kStateRamBytes);
  minivmm::fuzz::refill_state_disk();
  blk_seeds(seeds, mem);
  net_seeds(seeds, mem);
  console_seeds(seeds, mem);
  board_seeds(seeds, mem);
  clocked_seeds(seeds, mem);
  small_board_seeds(seeds, mem);
  std::printf("%d seeds\n", seeds.count());
  return 0;
}
