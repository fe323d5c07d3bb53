// Writes the seed corpus: a handful of hand-made inputs per target that reach the interesting
// paths at once (a programmed PIT mode, an RTC periodic interrupt, a UART driver's init), so the
// fuzzers start from working guests instead of having to discover the programming sequences.
//
//   make_fuzz_seeds <dir>     writes <dir>/<target>/<seed>; run it on tests/fuzz/corpus
//
// The output is deterministic; regenerate and commit it whenever the input format (fuzz_ops.h)
// or a target's port layout changes. Ports here are the targets' own numbering: the device's
// offsets, slots laid end to end (see each *_rig.h), or absolute ports for io_bus_fuzz.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <utility>

#include "tests/fuzz/fuzz_ops.h"

namespace {

using namespace std::chrono_literals;
using minivmm::fuzz::OpWriter;

class Corpus {
 public:
  explicit Corpus(std::filesystem::path root) : root_(std::move(root)) {}

  // Names the following seeds <prefix><name> (the bus target gathers every device's seeds).
  void set_prefix(std::string prefix) { prefix_ = std::move(prefix); }

  void add(const std::string& target, const std::string& name, const OpWriter& w) {
    const auto dir = root_ / target;
    std::filesystem::create_directories(dir);
    std::ofstream out(dir / (prefix_ + name), std::ios::binary | std::ios::trunc);
    const auto& b = w.bytes();
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    ++count_;
  }
  int count() const { return count_; }

 private:
  std::filesystem::path root_;
  std::string prefix_;
  int count_ = 0;
};

// --- PIT: offsets 0-2 counters, 3 control word, 4 port 0x61. Config bit 0: kDiscard. ---------
constexpr std::uint16_t kPitCtl = 3, kPort61 = 4;

OpWriter& pit_count(OpWriter& w, std::uint16_t counter, std::uint16_t count) {
  return w.write(counter, count & 0xffu).write(counter, count >> 8);
}

void pit_seeds(Corpus& c, const std::string& t, std::uint16_t base, std::uint16_t port61) {
  const auto ctl = static_cast<std::uint16_t>(base + kPitCtl);
  const auto ch = [&](std::uint16_t n) { return static_cast<std::uint16_t>(base + n); };
  {
    // Mode 2 at 1 kHz (the kvmtool tick guest): run, latch and read the count, run late.
    OpWriter w;
    w.write(ctl, 0x34);
    pit_count(w, ch(0), 1193).advance(10ms).write(ctl, 0x00).read(ch(0)).read(ch(0));
    w.advance_late(5500us).advance(3ms).read(ch(0)).read(ch(0));
    c.add(t, "mode2_1khz", w);
  }
  {
    // Mode 3 at 100 Hz, then a read-back of count and status, then a new count mid-cycle.
    OpWriter w;
    w.write(ctl, 0x36);
    pit_count(w, ch(0), 11932).advance(50ms).write(ctl, 0xc2).read(ch(0)).read(ch(0)).read(ch(0));
    pit_count(w, ch(0), 5966).advance(25ms).advance(100ms);
    c.add(t, "mode3_100hz_rewrite", w);
  }
  {
    // Mode 0 one-shot, reprogrammed before terminal count, then LSB-only and MSB-only access.
    OpWriter w;
    w.write(ctl, 0x30);
    pit_count(w, ch(0), 0x8000).advance(10ms).write(ch(0), 0x00).advance(1ms).write(ch(0), 0x10);
    w.advance(30ms).write(ctl, 0x10).write(ch(0), 0x80).advance(1ms).write(ctl, 0x20);
    w.write(ch(0), 0x01).advance(1ms).read(ch(0));
    c.add(t, "mode0_oneshot", w);
  }
  {
    // Mode 2 with count 2 (600 kHz): the IRQ0 timer is clamped to 10 kHz.
    OpWriter w;
    w.write(ctl, 0x34);
    pit_count(w, ch(0), 2).advance(1s).advance_late(100ms).read(ch(0));
    c.add(t, "mode2_clamped", w);
  }
  {
    // kDelay with a PIC that keeps IRQ0 pending: late ticks are owed and retried.
    OpWriter w(0x00);
    w.write(ctl, 0x34);
    pit_count(w, ch(0), 1193).host(0, 0, 0xffff00ffu).advance_late(300ms).advance(100ms);
    w.host(0, 0, 0).advance(1s).write(ctl, 0x34);
    pit_count(w, ch(0), 1193).advance(10ms);
    c.add(t, "delay_coalesced", w);
  }
  {
    // kDiscard: a late loop drops the missed ticks.
    OpWriter w(0x01);
    w.write(ctl, 0x34);
    pit_count(w, ch(0), 1193).advance_late(500ms).advance(10ms).advance_late(1s);
    c.add(t, "discard_late", w);
  }
  {
    // Counter 2 through port 0x61: square wave gated on, OUT2 and the refresh toggle polled.
    OpWriter w;
    w.write(ctl, 0xb6);
    pit_count(w, ch(2), 1331).write(port61, 0x03);
    for (int i = 0; i < 6; ++i) w.advance(200us).read(port61);
    w.write(port61, 0x00).read(port61).write(ctl, 0xb2);  // mode 1: a gate edge triggers it
    pit_count(w, ch(2), 100).write(port61, 0x01).advance(50us).read(port61).advance(100us);
    w.read(port61).write(ctl, 0xba);  // mode 5
    pit_count(w, ch(2), 50).write(port61, 0x00).write(port61, 0x01).advance(100us).read(port61);
    c.add(t, "port61_counter2", w);
  }
  {
    // BCD counts, mode 4 strobe, and read-back of several counters at once.
    OpWriter w;
    w.write(ctl, 0x35);
    pit_count(w, ch(0), 0x1000).advance(5ms).read(ch(0)).read(ch(0)).write(ctl, 0x39);
    pit_count(w, ch(0), 0x0999).advance(1ms).write(ctl, 0x74);
    pit_count(w, ch(1), 0).write(ctl, 0xde).read(ch(0)).read(ch(1)).read(ch(2)).read(ch(0));
    c.add(t, "bcd_strobe_readback", w);
  }
  {
    // Wide accesses split into bytes, and vm_clock paused with a periodic IRQ0 running.
    OpWriter w;
    w.write(ch(2), 0x3400, 2).write(ctl, 0x34, 4).write(ch(0), 0x04a9, 2).read(ch(0), 4);
    w.advance(5ms).pause_resume().advance(100ms).pause_resume().advance(5ms).read(ch(1), 4);
    c.add(t, "wide_pause", w);
  }
}

// --- UART: offsets 0-7. Config bit 0: batched output. Host op: receive(arg % 5 bytes). ------
constexpr std::uint16_t kThr = 0, kIer = 1, kIir = 2, kLcr = 3, kMcr = 4, kLsr = 5, kMsr = 6,
                        kScr = 7;

OpWriter& uart_init(OpWriter& w, std::uint16_t base, std::uint8_t fcr) {
  const auto r = [&](std::uint16_t reg) { return static_cast<std::uint16_t>(base + reg); };
  // What Linux's 8250 driver does: 115200 8N1, FIFO, OUT2 (the PC's IRQ gate), all interrupts.
  return w.write(r(kLcr), 0x80)
      .write(r(kThr), 0x01)
      .write(r(kIer), 0x00)
      .write(r(kLcr), 0x03)
      .write(r(kIir), fcr)
      .write(r(kMcr), 0x0b)
      .write(r(kIer), 0x0f)
      .read(r(kIir))
      .read(r(kLsr));
}

OpWriter& uart_puts(OpWriter& w, std::uint16_t base, const char* s) {
  for (; *s != 0; ++s) w.write(base, static_cast<std::uint8_t>(*s));
  return w;
}

void uart_seeds(Corpus& c, const std::string& t, std::uint16_t base) {
  const auto r = [&](std::uint16_t reg) { return static_cast<std::uint16_t>(base + reg); };
  {
    OpWriter w(0x01);
    uart_init(w, base, 0xc7);
    uart_puts(w, r(kThr), "hello\n").read(r(kIir)).read(r(kIir)).read(r(kLsr));
    uart_puts(w, r(kThr), "no newline").advance(3ms).read(r(kIir));
    c.add(t, "linux_init_batched", w);
  }
  {
    OpWriter w(0x00);
    uart_init(w, base, 0x81);  // trigger level 8
    // Host input below and at the trigger level: character timeout, then received data.
    w.host(4, 1, 0x64636261).read(r(kIir)).host(4, 1, 0x68676665).read(r(kIir));
    w.read(r(kThr)).read(r(kIir)).read(r(kLsr));
    for (int i = 0; i < 8; ++i) w.read(r(kThr));
    w.read(r(kIir)).read(r(kLsr));
    c.add(t, "rx_fifo_trigger", w);
  }
  {
    OpWriter w(0x00);
    // 16450 mode (FIFO off): one holding register; input waits for the guest to read.
    w.write(r(kMcr), 0x08).write(r(kIer), 0x01).host(2, 1, 0x4241).read(r(kIir)).read(r(kLsr));
    w.read(r(kThr)).host(2, 1, 0x4443).read(r(kThr)).read(r(kThr));
    c.add(t, "rx_fifo_off", w);
  }
  {
    OpWriter w(0x00);
    // Loopback: bytes come back as input; MSR follows MCR; overrun without the FIFO.
    w.write(r(kMcr), 0x1f).write(r(kIer), 0x0f).read(r(kMsr)).write(r(kThr), 0x41);
    w.write(r(kThr), 0x42).read(r(kLsr)).read(r(kThr)).write(r(kMcr), 0x10).read(r(kMsr));
    w.write(r(kIir), 0x07);
    uart_puts(w, r(kThr), "0123456789abcdefg").read(r(kLsr)).read(r(kIir)).read(r(kThr));
    w.write(r(kMcr), 0x08).read(r(kMsr)).read(r(kIir));
    c.add(t, "loopback", w);
  }
  {
    OpWriter w(0x00);
    // THRE: enabling THRI raises it, reading IIR acknowledges it, a THR write raises it again.
    w.write(r(kMcr), 0x08).write(r(kIer), 0x02).read(r(kIir)).read(r(kIir)).write(r(kThr), 0x0a);
    w.read(r(kIir)).write(r(kIer), 0x00).write(r(kIer), 0x02).write(r(kScr), 0x5a).read(r(kScr));
    c.add(t, "thre", w);
  }
  {
    OpWriter w(0x01);
    // Wide accesses run over several registers, and past offset 7.
    w.read(r(kThr), 4).write(r(kLcr), 0x0b03, 2).read(r(kIer), 2).write(r(kMsr), 0x41424344, 4);
    w.read(r(kLsr), 4).write(r(kIir), 0x00c1, 2).host(4, 1, 0x31323334).read(r(kThr), 4);
    c.add(t, "wide", w);
  }
}

// --- RTC: offset 0 index, 1 data. Config bits 0-1 epoch, 2-3 RAM size. Host op: wall step. ---
OpWriter& rtc_set(OpWriter& w, std::uint16_t base, std::uint8_t index, std::uint8_t value) {
  return w.write(base, index).write(static_cast<std::uint16_t>(base + 1), value);
}
OpWriter& rtc_get(OpWriter& w, std::uint16_t base, std::uint8_t index) {
  return w.write(base, index).read(static_cast<std::uint16_t>(base + 1));
}

void rtc_seeds(Corpus& c, const std::string& t, std::uint16_t base) {
  const auto read_time = [&](OpWriter& w) -> OpWriter& {
    for (const std::uint8_t i : std::initializer_list<std::uint8_t>{0x00, 0x02, 0x04, 0x06, 0x07,
                                                                    0x08, 0x09, 0x32, 0x0a}) {
      rtc_get(w, base, i);
    }
    return w;
  };
  for (const std::uint8_t config : std::initializer_list<std::uint8_t>{0x00, 0x05, 0x0a, 0x0f}) {
    OpWriter w(config);
    read_time(w).advance(2s);
    read_time(w);
    for (std::uint8_t i = 0x0e; i < 0x40; ++i) rtc_get(w, base, i);  // CMOS memory fields
    c.add(t, "read_time_" + std::to_string(config), w);
  }
  {
    // Periodic interrupt at 1024 Hz, acknowledged by reading C like Linux's rtc driver.
    OpWriter w(0x00);
    rtc_set(w, base, 0x0a, 0x26);
    rtc_set(w, base, 0x0b, 0x42);
    for (int i = 0; i < 4; ++i) rtc_get(w.advance(1ms), base, 0x0c);
    w.advance(20ms);
    rtc_get(w, base, 0x0c).advance_late(500ms);
    rtc_get(w, base, 0x0c);
    c.add(t, "pie_1024hz", w);
  }
  {
    // The fastest rate (8192 Hz) and the slow ones (2 Hz; rates 1-2 alias 256/128 Hz).
    OpWriter w(0x00);
    rtc_set(w, base, 0x0b, 0x42);
    for (const std::uint8_t rate :
         std::initializer_list<std::uint8_t>{0x23, 0x2f, 0x21, 0x22, 0x20}) {
      rtc_set(w, base, 0x0a, rate).advance(600ms);
      rtc_get(w, base, 0x0c);
    }
    c.add(t, "pie_rates", w);
  }
  {
    // SET: stop updates, write a new time (BCD, 12 h), release, watch it run.
    OpWriter w(0x01);
    rtc_set(w, base, 0x0b, 0x80);
    rtc_set(w, base, 0x00, 0x59);
    rtc_set(w, base, 0x02, 0x59);
    rtc_set(w, base, 0x04, 0x91);  // 11 PM
    rtc_set(w, base, 0x07, 0x31);
    rtc_set(w, base, 0x08, 0x12);
    rtc_set(w, base, 0x09, 0x99);
    rtc_set(w, base, 0x32, 0x19);
    rtc_set(w, base, 0x0b, 0x00).advance(1500ms);
    read_time(w);
    rtc_set(w, base, 0x0b, 0x86);  // binary, 24 h, while SET
    rtc_set(w, base, 0x00, 77);    // invalid: clamped when SET clears
    rtc_set(w, base, 0x0b, 0x06);
    read_time(w);
    c.add(t, "set_time", w);
  }
  {
    // Update-ended and alarm interrupts with "don't care" alarm bytes.
    OpWriter w(0x02);
    rtc_set(w, base, 0x01, 0xc0);
    rtc_set(w, base, 0x03, 0xc0);
    rtc_set(w, base, 0x05, 0xc0);
    rtc_set(w, base, 0x0b, 0x32);
    for (int i = 0; i < 3; ++i) rtc_get(w.advance(1s), base, 0x0c);
    rtc_set(w, base, 0x01, 0x05);  // match second 5 only
    w.advance(10s);
    rtc_get(w, base, 0x0c);
    c.add(t, "uie_aie", w);
  }
  {
    // Divider reset and restart (the first update half a second later), UIP polling.
    OpWriter w(0x00);
    rtc_set(w, base, 0x0a, 0x66);
    rtc_get(w, base, 0x0a).advance(3s);
    rtc_get(w, base, 0x00);
    rtc_set(w, base, 0x0a, 0x26);
    for (int i = 0; i < 5; ++i) rtc_get(w.advance(100ms), base, 0x0a);
    c.add(t, "divider_reset", w);
  }
  {
    // Wall clock steps and a paused vm_clock while UIE runs: the timer re-anchors.
    OpWriter w(0x00);
    rtc_set(w, base, 0x0b, 0x12);
    w.advance(1s).host(0, 2, 5000).advance(2s).host(0, 2, static_cast<std::uint32_t>(-90'000));
    rtc_get(w.advance(2s), base, 0x0c).pause_resume().advance(3s).pause_resume().advance(2s);
    rtc_get(w, base, 0x0c);
    c.add(t, "wall_steps_pause", w);
  }
  {
    // outw 0x70: index and data in one 16-bit access; NMI mask bit on the index.
    OpWriter w(0x00);
    w.write(base, 0x420b, 2).write(base, 0x8c, 1).read(base, 2).advance(10ms).read(base, 2);
    c.add(t, "wide", w);
  }
}

// --- i8042: offsets 0-4 the device, 5 the data-port view, 6 the command-port view. ----------
void i8042_seeds(Corpus& c, const std::string& t, std::uint16_t data, std::uint16_t cmd,
                 bool with_device) {
  {
    // Linux's probe: read/write the command byte, self-test, interface tests, disable ports.
    OpWriter w;
    w.write(cmd, 0x20).read(cmd).read(data).write(cmd, 0x60).write(data, 0x65);
    w.write(cmd, 0xaa).read(data).write(cmd, 0xab).read(data).write(cmd, 0xa9).read(data);
    w.write(cmd, 0xad).write(cmd, 0xa7).write(cmd, 0x20).read(data).write(cmd, 0xae);
    w.write(cmd, 0xa8).write(data, 0xff).read(cmd).write(cmd, 0xd4).write(data, 0xf2).read(cmd);
    c.add(t, "linux_probe", w);
  }
  {
    // The internal loopbacks (AUX_LOOP), A20, input and output port.
    OpWriter w;
    w.write(cmd, 0xd3).write(data, 0x5a).read(cmd).read(data).write(cmd, 0xd2).write(data, 0xa5);
    w.read(cmd).read(data).write(cmd, 0xdd).write(cmd, 0xd0).read(data).write(cmd, 0xdf);
    w.write(cmd, 0xc0).read(data).write(cmd, 0x21).read(data);
    c.add(t, "loopback_ports", w);
  }
  {
    // CPU reset three ways: 0xFE, a pulse of bit 0 in another mask, output port bit 0 cleared.
    OpWriter w;
    w.write(cmd, 0xfe).write(cmd, 0xf0).write(cmd, 0xf1).write(cmd, 0xd1).write(data, 0x00);
    w.write(cmd, 0xd1).write(data, 0x03).read(cmd);
    c.add(t, "reset", w);
  }
  if (with_device) {
    OpWriter w;
    w.read(0, 2).write(4, 0xfefe, 2).read(2).write(1, 0xfe).read(4, 4).read(3);
    c.add(t, "bad_access", w);
  }
}

// --- debug-exit offsets 0-3, POST port 4. ---------------------------------------------------
void debug_seeds(Corpus& c, const std::string& t, std::uint16_t exit_port, std::uint16_t post) {
  OpWriter w;
  w.write(exit_port, 0x10).write(static_cast<std::uint16_t>(exit_port + 2), 0x1234, 2);
  w.write(exit_port, 0x80000000u, 4).write(exit_port, 0x7fffffffu, 4).read(exit_port, 4);
  w.write(post, 0x55).read(post).write(post, 0xaa55, 2).read(post, 4);
  c.add(t, "writes", w);
}

// --- The ACPI PM block: PM1_STS +0, PM1_EN +2, PM1_CNT +4, PM_TMR +8; a host op (its port
// field picks the rig on the bus: `host`) is a wake. ---
void acpi_pm_seeds(Corpus& c, const std::string& t, std::uint16_t base, std::uint16_t host) {
  const auto at = [base](unsigned offset) { return static_cast<std::uint16_t>(base + offset); };
  {
    OpWriter w;  // Linux's clocksource: the timer read at every width, across a wrap
    for (int i = 0; i < 4; ++i) w.read(at(8), 4).advance(1500ms);
    w.read(at(8), 2).read(at(10)).read(at(11)).read(at(9), 4).read(at(6), 2);
    w.write(at(8), 0x12345678u, 4).read(at(12), 4);
    c.add(t, "timer", w);
  }
  {
    OpWriter w;  // TMR_EN: the SCI at the flip, cleared by writing 1 to TMR_STS
    w.write(at(2), 0x0001, 2).advance(2500ms).read(at(0), 2).write(at(0), 0x0001, 2);
    w.advance(3s).read(at(0), 4).write(at(2), 0, 2).advance(3s).read(at(0), 2);
    w.write(at(2), 0x0521, 2).write(at(0), 0xffff, 2);
    c.add(t, "tmr_en", w);
  }
  {
    OpWriter w;  // kvm-unit-tests' s3: RTC_EN, SLP_TYP=1 with SLP_EN, then the wake
    w.write(at(2), 0x0400, 2).write(at(4), 0x2400, 2).host(1, host, 0).read(at(0), 2);
    w.write(at(0), 0x8400, 2).write(at(4), 0x0400, 2).write(at(5), 0x24);  // ACPICA's two writes
    w.host(0, host, 0).read(at(0), 2);
    w.write(at(4), 0x2000, 2).write(at(4), 0x2800, 2).write(at(4), 0x3c00, 2).read(at(4), 2);
    c.add(t, "sleep", w);
  }
}

// --- fw_cfg offsets 0-1, testdev echo 2-5, flush 6-9, IRQ lines 10-33. Config bit 0: a file. ---
void fw_cfg_testdev_seeds(Corpus& c, const std::string& t) {
  {
    OpWriter w(1);  // what kvm-unit-tests does: CPU count, RAM size, key 0x11, the directory
    for (const std::uint32_t key : {0x05u, 0x03u, 0x11u, 0x19u, 0x00u, 0x20u, 0x8000u, 0x4005u}) {
      w.write(0, key, 2);
      for (int i = 0; i < 10; ++i) w.read(1);
    }
    w.read(0, 2).read(1, 4).write(1, 0x12, 1).write(1, 0x1234, 2).write(0, 5, 4).read(1);
    c.add(t, "fw_cfg_reads", w);
  }
  {
    OpWriter w;  // realmode/emulator echo at every width, eventinj's flush, ioapic's lines
    w.write(2, 0x12345678u, 4).read(2, 4).write(2, 0xaa).read(2, 2).write(4, 0xbbcc, 2).read(5);
    w.write(3, 0xdeadbeefu, 4).read(3, 4).write(6, 0x401234u, 4).write(6, 0x10, 2).read(6, 4);
    w.write(7, 0x1000u, 4);
    for (std::uint16_t line = 0; line < 24; ++line) w.write(static_cast<std::uint16_t>(10 + line), 1);
    w.write(24, 0).write(10 + 14, 0x80).write(10 + 2, 0x0101, 2).read(10, 4);
    c.add(t, "testdev", w);
  }
}

void io_bus_seeds(Corpus& c, const std::string& t) {
  c.set_prefix("pit_");
  pit_seeds(c, t, 0x40, 0x61);
  c.set_prefix("uart_");
  uart_seeds(c, t, 0x3f8);
  c.set_prefix("rtc_");
  rtc_seeds(c, t, 0x70);
  c.set_prefix("i8042_");
  i8042_seeds(c, t, 0x60, 0x64, false);
  c.set_prefix("debug_");
  debug_seeds(c, t, 0xf4, 0x80);
  c.set_prefix("acpi_pm_");
  acpi_pm_seeds(c, t, 0x600, 5);  // the sixth rig on the bus
  c.set_prefix("bus_");
  // Unmapped ports, including the neighbours of every mapping and accesses running past an end.
  OpWriter w;
  for (const std::uint16_t p :
       std::initializer_list<std::uint16_t>{0x0000, 0x0044, 0x0062, 0x0063, 0x0065, 0x0072, 0x0081,
                                            0x00f8, 0x03f7, 0x0400, 0x0cf8, 0xffff}) {
    w.read(p).write(p, 0xa5).read(p, 4);
  }
  w.read(0x3fe, 4).read(0x43, 4).write(0x7f, 0x12345678, 4).read(0xfffe, 4);
  c.add(t, "unmapped", w);
}

// --- virtio-mmio (virtio_mmio_rig.h): bus offsets +0 console, +0x1000 blk; RAM pokes. ------
// A driver's register sequence by bus offset; RAM written 32 bits at a time.
class VirtioSeed {
 public:
  static constexpr std::uint8_t kW4 = 2, kDirect = 4;
  // Register offsets and status bits (virtio 1.2 4.2.2), as the transport has them.
  static constexpr std::uint16_t kMagic = 0x000, kVersion = 0x004, kDeviceId = 0x008,
                                 kDevFeatures = 0x010, kDevFeaturesSel = 0x014,
                                 kDrvFeatures = 0x020, kDrvFeaturesSel = 0x024, kQueueSel = 0x030,
                                 kQueueNumMax = 0x034, kQueueNum = 0x038, kQueueReady = 0x044,
                                 kQueueNotify = 0x050, kIsr = 0x060, kAck = 0x064,
                                 kStatus = 0x070, kDescLo = 0x080, kDescHi = 0x084,
                                 kAvailLo = 0x090, kAvailHi = 0x094, kUsedLo = 0x0a0,
                                 kUsedHi = 0x0a4, kConfig = 0x100;
  static constexpr std::uint32_t kAckS = 1, kDriverS = 2, kDriverOkS = 4, kFeaturesOkS = 8,
                                 kFailedS = 0x80;

  VirtioSeed(OpWriter& w, std::uint16_t window) : w_(w), base_(window) {}

  VirtioSeed& rd(std::uint16_t reg) {
    w_.raw(minivmm::fuzz::OpKind::kRead, kW4, static_cast<std::uint16_t>(base_ + reg), 0);
    return *this;
  }
  VirtioSeed& wr(std::uint16_t reg, std::uint32_t v) {
    w_.raw(minivmm::fuzz::OpKind::kWrite, kW4, static_cast<std::uint16_t>(base_ + reg), v);
    return *this;
  }
  VirtioSeed& poke(std::uint16_t addr, std::uint32_t v) {
    w_.raw(minivmm::fuzz::OpKind::kAdvanceLate, 2, addr, v);
    return *this;
  }
  VirtioSeed& poke16(std::uint16_t addr, std::uint16_t v) {
    w_.raw(minivmm::fuzz::OpKind::kAdvanceLate, 1, addr, v);
    return *this;
  }
  // struct virtq_desc at table + 16 * i.
  VirtioSeed& desc(std::uint16_t table, std::uint16_t i, std::uint32_t addr, std::uint32_t len,
                   std::uint16_t flags, std::uint16_t next) {
    const auto at = static_cast<std::uint16_t>(table + 16 * i);
    return poke(at, addr).poke(static_cast<std::uint16_t>(at + 4), 0)
        .poke(static_cast<std::uint16_t>(at + 8), len)
        .poke(static_cast<std::uint16_t>(at + 12), flags | (std::uint32_t{next} << 16));
  }
  // Linux's virtio_mmio probe and vm_setup_vq for each queue (size, rings at `bases`).
  VirtioSeed& probe(std::uint64_t features, std::uint16_t size,
                    std::initializer_list<std::uint16_t> bases) {
    rd(kMagic).rd(kVersion).rd(kDeviceId).wr(kStatus, 0).wr(kStatus, kAckS)
        .wr(kStatus, kAckS | kDriverS);
    wr(kDevFeaturesSel, 1).rd(kDevFeatures).wr(kDevFeaturesSel, 0).rd(kDevFeatures);
    wr(kDrvFeaturesSel, 1).wr(kDrvFeatures, static_cast<std::uint32_t>(features >> 32));
    wr(kDrvFeaturesSel, 0).wr(kDrvFeatures, static_cast<std::uint32_t>(features));
    wr(kStatus, kAckS | kDriverS | kFeaturesOkS).rd(kStatus);
    std::uint32_t q = 0;
    for (const std::uint16_t b : bases) {
      const std::uint32_t avail = b + 16u * size, used = (avail + 6u + 2u * size + 3u) & ~3u;
      wr(kQueueSel, q++).rd(kQueueReady).rd(kQueueNumMax).wr(kQueueNum, size);
      wr(kDescLo, b).wr(kDescHi, 0).wr(kAvailLo, avail).wr(kAvailHi, 0);
      wr(kUsedLo, used).wr(kUsedHi, 0).wr(kQueueReady, 1);
    }
    return wr(kStatus, kAckS | kDriverS | kFeaturesOkS | kDriverOkS);
  }
  // Publishes `head` as avail entry `slot` of a queue at `base` and sets avail.idx to slot + 1.
  VirtioSeed& publish(std::uint16_t base, std::uint16_t size, std::uint16_t slot,
                      std::uint16_t head) {
    const auto avail = static_cast<std::uint16_t>(base + 16 * size);
    return poke16(static_cast<std::uint16_t>(avail + 4 + 2 * slot), head)
        .poke16(static_cast<std::uint16_t>(avail + 2), static_cast<std::uint16_t>(slot + 1));
  }
  // Linux's vm_del_vq: select, QueueReady=0, read it back.
  VirtioSeed& del_vq(std::uint32_t q) { return wr(kQueueSel, q).wr(kQueueReady, 0).rd(kQueueReady); }

 private:
  OpWriter& w_;
  std::uint16_t base_;
};

void virtio_mmio_seeds(Corpus& c, const std::string& t) {
  using minivmm::fuzz::OpKind;
  constexpr std::uint64_t kVersion1 = 1ull << 32, kIndirect = 1ull << 28, kEventIdx = 1ull << 29;
  constexpr std::uint16_t kNext = 1, kWrite = 2, kIndirectF = 4;
  constexpr std::uint16_t kConsole = 0x0000, kBlk = 0x1000;
  // Console queues (size 16) at 0x1000 (rx) and 0x2000 (tx); blk (size 64) at 0x4000; buffers
  // from 0x8000.
  {
    // The Linux console: probe, post a receive buffer, print "hello\n", host input, ack, del_vq
    // of both queues (read back 0), reset.
    OpWriter w;
    VirtioSeed s(w, kConsole);
    s.probe(kVersion1 | kEventIdx, 16, {0x1000, 0x2000});
    s.desc(0x1000, 0, 0x9000, 64, kWrite, 0).publish(0x1000, 16, 0, 0).wr(VirtioSeed::kQueueNotify, 0);
    s.poke(0x8000, 0x6c6c6568).poke(0x8004, 0x0a6f);  // "hello\n"
    s.desc(0x2000, 0, 0x8000, 6, 0, 0).publish(0x2000, 16, 0, 0).wr(VirtioSeed::kQueueNotify, 1);
    w.raw(OpKind::kHost, 0, 0, 5);  // 5 bytes of host input
    s.rd(VirtioSeed::kIsr).wr(VirtioSeed::kAck, 1).rd(VirtioSeed::kIsr);
    s.del_vq(0).del_vq(1).wr(VirtioSeed::kQueueNotify, 1).wr(VirtioSeed::kStatus, 0);
    c.add(t, "console_linux", w);
  }
  {
    // A transmit buffer of 40 KiB: capped turns, the loop's resumes, a notify in between.
    OpWriter w;
    VirtioSeed s(w, kConsole);
    s.probe(kVersion1, 16, {0x1000, 0x2000});
    s.desc(0x2000, 0, 0x6000, 0xa000, 0, 0).publish(0x2000, 16, 0, 0);
    w.raw(OpKind::kAdvance, 0, 0, 1);  // notify queue 1 through the ioeventfd
    w.raw(OpKind::kHost, 1, 0, 0);     // the loop runs the scheduled resume
    s.wr(VirtioSeed::kQueueNotify, 1);
    w.raw(OpKind::kHost, 1, 0, 0).raw(OpKind::kHost, 2, 0, 0);
    c.add(t, "console_capped", w);
  }
  {
    // Many small indirect buffers: the descriptor cap.
    OpWriter w;
    VirtioSeed s(w, kConsole);
    s.probe(kVersion1 | kIndirect, 16, {0x1000, 0x2000});
    for (std::uint16_t i = 0; i < 40; ++i) {
      s.desc(0x3000, i, 0x8000 + i, 1, i + 1 < 40 ? kNext : 0, static_cast<std::uint16_t>(i + 1));
    }
    for (std::uint16_t h = 0; h < 8; ++h) {
      s.desc(0x2000, h, 0x3000, 40 * 16, kIndirectF, 0).publish(0x2000, 16, h, h);
    }
    s.wr(VirtioSeed::kQueueNotify, 1);
    w.raw(OpKind::kHost, 1, 0, 0);
    c.add(t, "console_descriptor_cap", w);
  }
  {
    // The Linux blk driver: probe, read capacity, a 1 KiB read, a write, a flush, GET_ID;
    // notifies by register and ioeventfd; ack; del_vq; reset.
    OpWriter w;
    VirtioSeed s(w, kBlk);
    s.probe(kVersion1 | kEventIdx | (1ull << 9) | (1ull << 6) | (1ull << 2), 64, {0x4000});
    s.rd(VirtioSeed::kConfig).rd(VirtioSeed::kConfig + 4).rd(VirtioSeed::kConfig + 20);
    const auto request = [&](std::uint16_t head, std::uint16_t slot, std::uint32_t type,
                             std::uint32_t sector, std::uint32_t len, bool device_writes) {
      const auto hdr = static_cast<std::uint16_t>(0x8000 + 0x100 * slot);
      s.poke(hdr, type).poke(static_cast<std::uint16_t>(hdr + 4), 0)
          .poke(static_cast<std::uint16_t>(hdr + 8), sector)
          .poke(static_cast<std::uint16_t>(hdr + 12), 0);
      std::uint16_t i = head;
      s.desc(0x4000, i, hdr, 16, kNext, static_cast<std::uint16_t>(i + 1));
      ++i;
      if (len > 0) {
        s.desc(0x4000, i, 0xa000, len, static_cast<std::uint16_t>((device_writes ? kWrite : 0) | kNext),
               static_cast<std::uint16_t>(i + 1));
        ++i;
      }
      s.desc(0x4000, i, static_cast<std::uint32_t>(hdr + 0x80), 1, kWrite, 0);
      s.publish(0x4000, 64, slot, head);
    };
    request(0, 0, 0, 2, 1024, true);
    s.wr(VirtioSeed::kQueueNotify, 0);
    request(3, 1, 1, 4, 512, false);
    w.raw(OpKind::kAdvance, 1, 0, 0);
    request(6, 2, 4, 0, 0, false);
    request(8, 3, 8, 0, 20, true);
    s.wr(VirtioSeed::kQueueNotify, 0);
    s.rd(VirtioSeed::kIsr).wr(VirtioSeed::kAck, 1).del_vq(0).wr(VirtioSeed::kQueueNotify, 0);
    s.wr(VirtioSeed::kStatus, 0);
    c.add(t, "blk_linux", w);
  }
  {
    // The bring-up macro for both, then a bad ring (head out of range): NEEDS_RESET and a
    // config interrupt; FAILED on top; reset.
    OpWriter w;
    w.raw(OpKind::kPauseResume, 0, 0x1000, 4).raw(OpKind::kPauseResume, 1 | 2 | 4, 0x4000, 6);
    VirtioSeed s(w, kBlk);
    s.publish(0x4000, 64, 0, 200).wr(VirtioSeed::kQueueNotify, 0).rd(VirtioSeed::kStatus);
    s.rd(VirtioSeed::kIsr).wr(VirtioSeed::kAck, 2);
    s.wr(VirtioSeed::kStatus, 0x4f | VirtioSeed::kFailedS).rd(VirtioSeed::kStatus);
    s.wr(VirtioSeed::kStatus, 0).rd(VirtioSeed::kStatus);
    c.add(t, "needs_reset_failed", w);
  }
  {
    // Bad accesses: every width at unaligned offsets, 8-byte registers, config past its end,
    // the gap between the windows, beyond them, far offsets straight to a transport.
    OpWriter w;
    for (std::uint8_t width = 0; width < 4; ++width) {
      for (const std::uint16_t p : std::initializer_list<std::uint16_t>{
               0x0000, 0x0002, 0x0063, 0x0070, 0x00fe, 0x0100, 0x013c, 0x0ffc, 0x0fff, 0x1000,
               0x1100, 0x1ffe, 0x2000, 0xfffc}) {
        w.raw(OpKind::kRead, width, p, 0).raw(OpKind::kWrite, width, p, 0x01020304);
      }
      w.raw(OpKind::kRead, static_cast<std::uint8_t>(width | VirtioSeed::kDirect), 0x2000, 0);
      w.raw(OpKind::kRead, static_cast<std::uint8_t>(width | VirtioSeed::kDirect | 8 | 16), 0xfff8,
            0xffffffff);
      w.raw(OpKind::kWrite, static_cast<std::uint8_t>(width | VirtioSeed::kDirect | 8), 0xf000, 7);
    }
    c.add(t, "bad_accesses", w);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
    return 2;
  }
  Corpus c{std::filesystem::path(argv[1])};
  pit_seeds(c, "i8254_pit_fuzz", 0, kPort61);
  uart_seeds(c, "uart_16550_fuzz", 0);
  rtc_seeds(c, "mc146818_rtc_fuzz", 0);
  i8042_seeds(c, "i8042_fuzz", 5, 6, true);
  debug_seeds(c, "debug_exit_post_port_fuzz", 0, 4);
  acpi_pm_seeds(c, "acpi_pm_fuzz", 0, 0);
  fw_cfg_testdev_seeds(c, "fw_cfg_testdev_fuzz");
  io_bus_seeds(c, "io_bus_fuzz");
  c.set_prefix("");
  virtio_mmio_seeds(c, "virtio_mmio_fuzz");
  std::printf("wrote %d seeds under %s\n", c.count(), argv[1]);
  return 0;
}
