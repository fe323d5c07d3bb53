// libFuzzer target: the gdb stub's protocol layer (vmm/gdb/gdb_session.h) on whatever bytes a
// client sends, against a fake two-CPU target. Checked: no crash or UB; everything sent back is
// acknowledgements and well-formed `$...#xx` packets with the right checksum; no reply and no
// memory access is longer than the packet size allows; a resume always finds the guest stopped
// and a stop always finds it running (the fake stops at once, as a step does).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "vmm/gdb/gdb_packet.h"
#include "vmm/gdb/gdb_session.h"

namespace {

using namespace minivmm::vmm::gdb;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "gdb_session_fuzz: %s\n", what);
  std::abort();
}

struct FuzzTarget : Target {
  std::vector<RegisterFile> regs = std::vector<RegisterFile>(2);
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(0x2000);
  Session* session = nullptr;
  int breaks = 0;
  bool running = false;

  int cpu_count() const override { return 2; }
  bool read_registers(int cpu, RegisterFile& out) override {
    if (cpu < 0 || cpu >= 2) fail("register read of a CPU that does not exist");
    out = regs[static_cast<std::size_t>(cpu)];
    return true;
  }
  bool write_registers(int cpu, const RegisterFile& in) override {
    if (cpu < 0 || cpu >= 2) fail("register write of a CPU that does not exist");
    regs[static_cast<std::size_t>(cpu)] = in;
    return true;
  }
  std::size_t read_memory(int, std::uint64_t addr, std::span<std::uint8_t> out, bool) override {
    if (out.size() > Session::kPacketSize) fail("memory read longer than a packet");
    std::size_t n = 0;
    for (; n < out.size() && addr + n >= addr && addr + n < mem.size(); ++n) out[n] = mem[addr + n];
    return n;
  }
  std::size_t write_memory(int, std::uint64_t addr, std::span<const std::uint8_t> in,
                           bool) override {
    if (in.size() > Session::kPacketSize) fail("memory write longer than a packet");
    std::size_t n = 0;
    for (; n < in.size() && addr + n >= addr && addr + n < mem.size(); ++n) mem[addr + n] = in[n];
    return n;
  }
  BreakResult insert_breakpoint(BreakType t, std::uint64_t addr, std::uint64_t) override {
    if (t == BreakType::kRead) return BreakResult::kUnsupported;
    if (addr & 1) return BreakResult::kError;
    ++breaks;
    return BreakResult::kOk;
  }
  BreakResult remove_breakpoint(BreakType, std::uint64_t, std::uint64_t) override {
    if (breaks == 0) return BreakResult::kError;
    --breaks;
    return BreakResult::kOk;
  }
  void resume(std::span<const ResumeAction> a) override {
    if (a.size() != 2) fail("resume with the wrong number of actions");
    if (running) fail("resumed while running");
    running = true;
  }
  void interrupt() override {
    if (!running) fail("interrupted while stopped");
    stop(2);
  }
  void detach() override {}
  void kill() override {}
  void stop(int sig) {
    running = false;
    session->stopped({1, sig, StopKind::kWatch, 0x10});
  }
};

// Everything the session sent: '+', '-', and packets with a good checksum.
void check_output(const std::string& out) {
  std::size_t i = 0;
  while (i < out.size()) {
    const char c = out[i];
    if (c == '+' || c == '-') {
      ++i;
      continue;
    }
    if (c != '$') fail("stray byte in the output");
    const auto hash = out.find('#', i);
    if (hash == std::string::npos || hash + 2 >= out.size()) fail("packet without its checksum");
    if (hash - i - 1 > Session::kPacketSize) fail("reply longer than the packet size");
    unsigned sum = 0;
    for (std::size_t j = i + 1; j < hash; ++j) {
      if (out[j] == '$') fail("unescaped $ in a reply");
      sum += static_cast<std::uint8_t>(out[j]);
    }
    const int hi = hex_digit(out[hash + 1]);
    const int lo = hex_digit(out[hash + 2]);
    if (hi < 0 || lo < 0 || static_cast<unsigned>((hi << 4) | lo) != (sum & 0xff)) {
      fail("bad checksum on a reply");
    }
    i = hash + 3;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzTarget target;
  std::string out;
  Session session(target, [&](std::string_view b) { out += b; });
  target.session = &session;
  // Fed in pieces whose lengths the first byte picks, so packets split across reads too.
  const std::size_t piece = size ? (data[0] % 17) + 1 : 1;
  for (std::size_t off = size ? 1 : 0; off < size; off += piece) {
    const std::size_t n = std::min(piece, size - off);
    session.feed(std::span(data + off, n));
    if (session.running() != target.running) fail("session and target disagree on running");
    // A resumed guest stops at once, every second time by itself (a step), else by 0x03.
    if (target.running && (off / piece) % 2 == 0) target.stop(5);
    if (session.finished()) break;
  }
  check_output(out);
  return 0;
}
