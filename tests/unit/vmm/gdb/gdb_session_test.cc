// The gdb stub's protocol layer (vmm/gdb/): framing, escapes, every packet it serves, and what
// a hostile client sends (bad checksums, huge lengths, unknown packets, truncated hex, bad
// thread ids), against a fake two-CPU target with 64 KiB of memory and no KVM.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "vmm/gdb/gdb_packet.h"
#include "vmm/gdb/gdb_registers.h"
#include "vmm/gdb/gdb_session.h"

namespace minivmm::vmm::gdb {
namespace {

struct FakeTarget : Target {
  std::vector<RegisterFile> regs = std::vector<RegisterFile>(2);
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(0x10000);
  std::vector<std::pair<BreakType, std::uint64_t>> breaks;
  std::vector<std::vector<ResumeAction>> resumes;
  int interrupts = 0, detaches = 0, kills = 0;
  bool last_physical = false;

  int cpu_count() const override { return 2; }
  bool read_registers(int cpu, RegisterFile& out) override {
    out = regs.at(static_cast<std::size_t>(cpu));
    return true;
  }
  bool write_registers(int cpu, const RegisterFile& in) override {
    regs.at(static_cast<std::size_t>(cpu)) = in;
    return true;
  }
  std::size_t read_memory(int, std::uint64_t addr, std::span<std::uint8_t> out,
                          bool physical) override {
    last_physical = physical;
    std::size_t n = 0;
    for (; n < out.size() && addr + n < mem.size(); ++n) out[n] = mem[addr + n];
    return n;
  }
  std::size_t write_memory(int, std::uint64_t addr, std::span<const std::uint8_t> in,
                           bool physical) override {
    last_physical = physical;
    std::size_t n = 0;
    for (; n < in.size() && addr + n < mem.size(); ++n) mem[addr + n] = in[n];
    return n;
  }
  BreakResult insert_breakpoint(BreakType t, std::uint64_t addr, std::uint64_t) override {
    if (t == BreakType::kRead) return BreakResult::kUnsupported;
    if (addr >= mem.size()) return BreakResult::kError;
    breaks.emplace_back(t, addr);
    return BreakResult::kOk;
  }
  BreakResult remove_breakpoint(BreakType t, std::uint64_t addr, std::uint64_t) override {
    for (auto it = breaks.begin(); it != breaks.end(); ++it) {
      if (it->first == t && it->second == addr) {
        breaks.erase(it);
        return BreakResult::kOk;
      }
    }
    return BreakResult::kError;
  }
  void resume(std::span<const ResumeAction> a) override { resumes.emplace_back(a.begin(), a.end()); }
  void interrupt() override { ++interrupts; }
  void detach() override { ++detaches; }
  void kill() override { ++kills; }
};

// A packet as gdb puts it on the wire: the payload as given (already escaped where it is
// binary), its checksum.
std::string frame_raw(std::string_view payload) {
  unsigned sum = 0;
  for (const char c : payload) sum += static_cast<std::uint8_t>(c);
  char tail[4];
  std::snprintf(tail, sizeof tail, "#%02x", sum & 0xff);
  return "$" + std::string(payload) + tail;
}

struct Rig {
  FakeTarget target;
  std::string out;
  Session session{target, [this](std::string_view b) { out += b; }};

  void raw(std::string_view bytes) {
    session.feed(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
  }
  // Sends one well-formed packet and returns the reply's payload (the '+' ack stripped).
  std::string ask(std::string_view payload) {
    out.clear();
    raw(frame_raw(payload));
    EXPECT_FALSE(out.empty());
    if (out.empty() || out[0] != '+') return "<no ack: " + out + ">";
    if (out.size() == 1) return "<no reply>";
    const std::string pkt = out.substr(1);
    EXPECT_EQ(pkt[0], '$');
    const auto hash = pkt.rfind('#');
    EXPECT_EQ(hash, pkt.size() - 3) << pkt;
    return *unescape_binary(pkt.substr(1, hash - 1));
  }
};

TEST(GdbPacketTest, FramesAndChecksums) {
  EXPECT_EQ(frame_packet("OK"), "$OK#9a");
  EXPECT_EQ(frame_packet(""), "$#00");
  // $ # } * are escaped: } then the byte xor 0x20.
  EXPECT_EQ(frame_packet("a#b").substr(0, 6), "$a}\x03" "b#");
  EXPECT_EQ(*unescape_binary(escape_binary(std::string("$#}*\0x", 6))), std::string("$#}*\0x", 6));
  EXPECT_FALSE(unescape_binary("abc}"));
}

TEST(GdbPacketTest, ReaderHandsOutPacketsInAnySplit) {
  PacketReader r(64);
  std::vector<PacketEvent> ev;
  const std::string s = "+$qC#b4\x03-junk$g#67";
  for (const char c : s) {
    const std::uint8_t b = static_cast<std::uint8_t>(c);
    r.feed(std::span(&b, 1), ev);
  }
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].kind, PacketEvent::Kind::kAck);
  EXPECT_EQ(ev[1].kind, PacketEvent::Kind::kPacket);
  EXPECT_EQ(ev[1].payload, "qC");
  EXPECT_EQ(ev[2].kind, PacketEvent::Kind::kInterrupt);
  EXPECT_EQ(ev[3].kind, PacketEvent::Kind::kNack);
  EXPECT_EQ(ev[4].payload, "g");
  EXPECT_EQ(r.stats().junk_bytes, 4u);
}

TEST(GdbPacketTest, OversizedPacketIsDroppedWithBoundedMemory) {
  PacketReader r(16);
  std::vector<PacketEvent> ev;
  std::string big = "$" + std::string(1 << 20, 'm') + "#00";
  r.feed(std::span(reinterpret_cast<const std::uint8_t*>(big.data()), big.size()), ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, PacketEvent::Kind::kBadPacket);
  EXPECT_EQ(r.stats().oversized, 1u);
  // And the reader is fine afterwards.
  const std::string ok = frame_packet("g");
  r.feed(std::span(reinterpret_cast<const std::uint8_t*>(ok.data()), ok.size()), ev);
  EXPECT_EQ(ev.back().payload, "g");
}

TEST(GdbPacketTest, HexParsing) {
  EXPECT_EQ(*parse_hex_u64("ffffffff81000000"), 0xffffffff81000000ull);
  EXPECT_EQ(*parse_hex_u64("0000000000000000001"), 1u);  // leading zeros are free
  EXPECT_FALSE(parse_hex_u64("10000000000000000"));       // 65 bits
  EXPECT_FALSE(parse_hex_u64(""));
  EXPECT_FALSE(parse_hex_u64("12g"));
  EXPECT_FALSE(parse_hex_u64("-1"));
  EXPECT_FALSE(from_hex("abc"));  // truncated
  EXPECT_FALSE(from_hex("zz"));
  EXPECT_EQ(*from_hex("00ff"), (std::vector<std::uint8_t>{0, 255}));
}

TEST(GdbSessionTest, BadChecksumGetsNackAndNoReply) {
  Rig rig;
  rig.raw("$g#00");
  EXPECT_EQ(rig.out, "-");
  rig.out.clear();
  rig.raw("$g#zz");
  EXPECT_EQ(rig.out, "-");
  EXPECT_EQ(rig.session.framing().bad_checksums, 2u);
}

TEST(GdbSessionTest, NackResendsTheLastReply) {
  Rig rig;
  const std::string r = rig.ask("qC");
  EXPECT_EQ(r, "QC1");
  rig.out.clear();
  rig.raw("-");
  EXPECT_EQ(rig.out, frame_packet("QC1"));
}

TEST(GdbSessionTest, HugePacketGetsNack) {
  Rig rig;
  std::string big = "M0," + std::string(40000, '0');
  big = frame_packet(big);
  rig.raw(big);
  EXPECT_EQ(rig.out, "-");
  EXPECT_EQ(rig.session.framing().oversized, 1u);
}

TEST(GdbSessionTest, UnknownPacketsGetTheEmptyReply) {
  Rig rig;
  for (const char* p : {"vMustReplyEmpty", "qTStatus", "Q", "!", "bc", "vFile:open:x", "Z9,0,1",
                        "qXfer:auxv:read::0,100", ""}) {
    EXPECT_EQ(rig.ask(p), "") << p;
  }
  EXPECT_GE(rig.session.stats().unsupported, 8u);
}

TEST(GdbSessionTest, SupportedAndTargetDescription) {
  Rig rig;
  const std::string s = rig.ask("qSupported:multiprocess+;swbreak+;hwbreak+;xmlRegisters=i386");
  EXPECT_NE(s.find("PacketSize=4000"), std::string::npos) << s;
  EXPECT_NE(s.find("qXfer:features:read+"), std::string::npos);
  std::string xml;
  for (std::size_t off = 0;;) {
    char req[64];
    std::snprintf(req, sizeof req, "qXfer:features:read:target.xml:%zx,200", off);
    const std::string part = rig.ask(req);
    ASSERT_FALSE(part.empty());
    xml += part.substr(1);
    off += part.size() - 1;
    if (part[0] == 'l') break;
    ASSERT_EQ(part[0], 'm');
  }
  EXPECT_EQ(xml, target_xml());
  for (const char* name : {"\"rip\"", "\"fs_base\"", "\"gs_base\"", "\"cr3\"", "\"efer\"",
                           "org.gnu.gdb.i386.core", "org.gnu.gdb.i386.sse"}) {
    EXPECT_NE(xml.find(name), std::string::npos) << name;
  }
  EXPECT_EQ(rig.ask("qXfer:features:read:other.xml:0,100"), "E00");
  EXPECT_EQ(rig.ask("qXfer:features:read:target.xml:0"), "E01");
  EXPECT_EQ(rig.ask("qXfer:features:read:target.xml:ffffff,10"), "l");
  // A huge length is bounded by the packet size.
  const std::string big = rig.ask("qXfer:features:read:target.xml:0,ffffffffffffffff");
  EXPECT_LE(big.size(), Session::kPacketSize);
}

TEST(GdbSessionTest, RegistersWholeAndOne) {
  Rig rig;
  rig.target.regs[0].set(reg::kRip, 0x1122334455667788ull);
  rig.target.regs[0].set(reg::kCr3, 0x1000);
  const std::string g = rig.ask("g");
  EXPECT_EQ(g.size(), register_file_bytes() * 2);
  EXPECT_EQ(g.substr(16 * 16, 16), "8877665544332211");
  EXPECT_EQ(rig.ask("p10"), "8877665544332211");  // rip is register 16
  EXPECT_EQ(rig.ask("p3d"), "0010000000000000");  // cr3 is 61
  EXPECT_EQ(rig.ask("p41"), "E22");               // past efer
  EXPECT_EQ(rig.ask("pffffffffffffffffff"), "E01");
  EXPECT_EQ(rig.ask("P0=0100000000000000"), "OK");
  EXPECT_EQ(rig.target.regs[0].get(reg::kRax), 1u);
  EXPECT_EQ(rig.ask("P0=01"), "E01");      // too short for a 64-bit register
  EXPECT_EQ(rig.ask("P0=0x00000000000000"), "E01");
  EXPECT_EQ(rig.ask("P0"), "E01");
  // G: a whole file, nothing less.
  std::string G = "G" + std::string(register_file_bytes() * 2, '0');
  G[1] = '2';
  EXPECT_EQ(rig.ask(G), "OK");
  EXPECT_EQ(rig.target.regs[0].get(reg::kRax), 0x20u);
  EXPECT_EQ(rig.ask(G.substr(0, G.size() - 1)), "E01");  // truncated hex
  EXPECT_EQ(rig.ask(G.substr(0, G.size() - 2)), "E01");  // one byte short
  EXPECT_EQ(rig.ask("gx"), "E01");
}

TEST(GdbSessionTest, ThreadsAreCpus) {
  Rig rig;
  EXPECT_EQ(rig.ask("qfThreadInfo"), "m1,2");
  EXPECT_EQ(rig.ask("qsThreadInfo"), "l");
  EXPECT_EQ(rig.ask("T1"), "OK");
  EXPECT_EQ(rig.ask("T2"), "OK");
  EXPECT_EQ(rig.ask("T3"), "E01");
  EXPECT_EQ(rig.ask("T0"), "E01");
  EXPECT_EQ(rig.ask("Tzz"), "E01");
  EXPECT_EQ(rig.ask("Hg3"), "E01");
  EXPECT_EQ(rig.ask("Hg-2"), "E01");
  EXPECT_EQ(rig.ask("Hx1"), "E01");
  EXPECT_EQ(rig.ask("H"), "E01");
  EXPECT_EQ(rig.ask("Hgffffffffffffffffff"), "E01");
  rig.target.regs[1].set(reg::kRip, 0xabc);
  EXPECT_EQ(rig.ask("Hg2"), "OK");
  EXPECT_EQ(rig.ask("qC"), "QC2");
  EXPECT_EQ(rig.ask("p10"), "bc0a000000000000");
  EXPECT_EQ(rig.ask("Hg0"), "OK");  // any: stays on 2
  EXPECT_EQ(rig.ask("qC"), "QC2");
  EXPECT_EQ(rig.ask("Hc-1"), "OK");
  EXPECT_EQ(rig.ask("qThreadExtraInfo,2"), to_hex(std::string_view("vCPU 1")));
  EXPECT_EQ(rig.ask("qThreadExtraInfo,9"), "E01");
}

TEST(GdbSessionTest, MemoryReadWriteAndBounds) {
  Rig rig;
  rig.target.mem[0x100] = 0xaa;
  rig.target.mem[0x101] = 0x55;
  EXPECT_EQ(rig.ask("m100,2"), "aa55");
  EXPECT_EQ(rig.ask("mfffe,8"), "0000");  // short at the end of memory
  EXPECT_EQ(rig.ask("m20000,4"), "E14");
  EXPECT_EQ(rig.ask("m100"), "E01");
  EXPECT_EQ(rig.ask("m,4"), "E01");
  EXPECT_EQ(rig.ask("m100,"), "E01");
  // A huge length gets at most what a reply holds.
  const std::string big = rig.ask("m0,ffffffffffffffff");
  EXPECT_LE(big.size(), Session::kPacketSize);
  EXPECT_GT(big.size(), 1000u);
  EXPECT_EQ(rig.ask("M200,2:0102"), "OK");
  EXPECT_EQ(rig.target.mem[0x201], 2);
  EXPECT_EQ(rig.ask("M200,3:0102"), "E01");  // length and data disagree
  EXPECT_EQ(rig.ask("M200,2:010"), "E01");   // truncated hex
  EXPECT_EQ(rig.ask("M200,2"), "E01");
  EXPECT_EQ(rig.ask("Mffff,2:0102"), "E14");
  // X: binary, with escapes.
  EXPECT_EQ(rig.ask("X300,0:"), "OK");
  EXPECT_EQ(rig.ask(std::string("X300,2:") + "}" + static_cast<char>('#' ^ 0x20) + "x"), "OK");
  EXPECT_EQ(rig.target.mem[0x300], '#');
  EXPECT_EQ(rig.target.mem[0x301], 'x');
  EXPECT_EQ(rig.ask("X300,2:a"), "E01");
}

TEST(GdbSessionTest, MonitorPhysAndXp) {
  Rig rig;
  rig.target.mem[0x10] = 0x42;
  EXPECT_EQ(rig.ask("m10,1"), "42");
  EXPECT_FALSE(rig.target.last_physical);
  rig.ask("qRcmd," + to_hex(std::string_view("phys on")));
  EXPECT_TRUE(rig.session.physical_memory());
  EXPECT_EQ(rig.ask("m10,1"), "42");
  EXPECT_TRUE(rig.target.last_physical);
  const std::string xp = rig.ask("qRcmd," + to_hex(std::string_view("xp 0x10 4")));
  const auto text = from_hex(xp);
  ASSERT_TRUE(text);
  EXPECT_NE(std::string(text->begin(), text->end()).find(": 42 00 00 00"), std::string::npos);
  const auto help = from_hex(rig.ask("qRcmd," + to_hex(std::string_view("help"))));
  ASSERT_TRUE(help);
  EXPECT_NE(std::string(help->begin(), help->end()).find("phys on|off"), std::string::npos);
  EXPECT_EQ(rig.ask("qRcmd,zz"), "E01");
  EXPECT_FALSE(rig.ask("qRcmd," + to_hex(std::string_view("xp nothex"))).empty());
}

TEST(GdbSessionTest, Breakpoints) {
  Rig rig;
  EXPECT_EQ(rig.ask("Z0,1000,1"), "OK");
  EXPECT_EQ(rig.ask("Z1,1000,1"), "OK");
  EXPECT_EQ(rig.ask("Z2,2000,4;X1,0"), "OK");  // a condition is gdb's to evaluate
  EXPECT_EQ(rig.ask("Z3,2000,4"), "");         // the target does not do read watchpoints
  EXPECT_EQ(rig.ask("Z0,100000,1"), "E22");
  EXPECT_EQ(rig.ask("Z0,1000"), "E01");
  EXPECT_EQ(rig.ask("Z0"), "E01");
  EXPECT_EQ(rig.ask("Z5,1000,1"), "");
  EXPECT_EQ(rig.target.breaks.size(), 3u);
  EXPECT_EQ(rig.ask("z0,1000,1"), "OK");
  EXPECT_EQ(rig.ask("z0,1000,1"), "E22");
  EXPECT_EQ(rig.target.breaks.size(), 2u);
}

TEST(GdbSessionTest, ContinueStopAndInterrupt) {
  Rig rig;
  rig.ask("qSupported:hwbreak+");
  EXPECT_EQ(rig.ask("?"), "T05thread:1;");
  EXPECT_EQ(rig.ask("c"), "<no reply>");
  EXPECT_TRUE(rig.session.running());
  ASSERT_EQ(rig.target.resumes.size(), 1u);
  EXPECT_EQ(rig.target.resumes[0][0].kind, ResumeKind::kContinue);
  EXPECT_EQ(rig.target.resumes[0][1].kind, ResumeKind::kContinue);
  // While running: packets are acknowledged, not answered; 0x03 interrupts.
  EXPECT_EQ(rig.ask("g"), "<no reply>");
  rig.out.clear();
  rig.raw("\x03");
  EXPECT_EQ(rig.target.interrupts, 1);
  rig.session.stopped({1, 2, StopKind::kSignal, 0});
  EXPECT_EQ(rig.out, frame_packet("T02thread:2;"));
  EXPECT_FALSE(rig.session.running());
  EXPECT_EQ(rig.ask("qC"), "QC2");  // the stopping CPU becomes the current thread
  // A stop reported when nothing runs is dropped.
  rig.out.clear();
  rig.session.stopped({0, 5, StopKind::kSignal, 0});
  EXPECT_EQ(rig.out, "");
  // Ctrl-C while stopped means nothing.
  rig.raw("\x03");
  EXPECT_EQ(rig.target.interrupts, 1);
  rig.ask("c");
  rig.out.clear();
  rig.session.stopped({0, 5, StopKind::kHwBreak, 0});
  EXPECT_EQ(rig.out, frame_packet("T05thread:1;hwbreak:;"));
  rig.ask("c");
  rig.out.clear();
  rig.session.stopped({0, 5, StopKind::kWatch, 0x1234});
  EXPECT_EQ(rig.out, frame_packet("T05thread:1;watch:1234;"));
}

TEST(GdbSessionTest, StepAndContinueAtAddress) {
  Rig rig;
  rig.ask("Hc2");
  rig.ask("s");
  ASSERT_EQ(rig.target.resumes.size(), 1u);
  EXPECT_EQ(rig.target.resumes[0][0].kind, ResumeKind::kStop);
  EXPECT_EQ(rig.target.resumes[0][1].kind, ResumeKind::kStep);
  rig.session.stopped({1, 5, StopKind::kSignal, 0});
  rig.ask("c500");
  EXPECT_EQ(rig.target.regs[1].get(reg::kRip), 0x500u);
  rig.session.stopped({1, 5, StopKind::kSignal, 0});
  rig.ask("C0b;600");  // the signal is dropped, the address taken
  EXPECT_EQ(rig.target.regs[1].get(reg::kRip), 0x600u);
  rig.session.stopped({1, 5, StopKind::kSignal, 0});
  EXPECT_EQ(rig.ask("Czz"), "E01");
  EXPECT_EQ(rig.ask("cxyz"), "E01");
  EXPECT_EQ(rig.target.resumes.size(), 3u);
}

TEST(GdbSessionTest, VCont) {
  Rig rig;
  EXPECT_EQ(rig.ask("vCont?"), "vCont;c;C;s;S");
  rig.ask("vCont;s:2;c");
  ASSERT_EQ(rig.target.resumes.size(), 1u);
  EXPECT_EQ(rig.target.resumes[0][0].kind, ResumeKind::kContinue);
  EXPECT_EQ(rig.target.resumes[0][1].kind, ResumeKind::kStep);
  rig.session.stopped({1, 5, StopKind::kSignal, 0});
  rig.ask("vCont;s:1");
  EXPECT_EQ(rig.target.resumes[1][0].kind, ResumeKind::kStep);
  EXPECT_EQ(rig.target.resumes[1][1].kind, ResumeKind::kStop);
  rig.session.stopped({0, 5, StopKind::kSignal, 0});
  // Leftmost action for a thread wins.
  rig.ask("vCont;c:1;s:1;C05");
  EXPECT_EQ(rig.target.resumes[2][0].kind, ResumeKind::kContinue);
  EXPECT_EQ(rig.target.resumes[2][1].kind, ResumeKind::kContinue);
  rig.session.stopped({0, 5, StopKind::kSignal, 0});
  for (const char* bad : {"vCont;", "vCont;x", "vCont;s:9", "vCont;cc", "vCont;Czz", "vCont;t",
                          "vCont;s:", "vCont;c;;"}) {
    EXPECT_EQ(rig.ask(bad), "E01") << bad;
  }
  EXPECT_EQ(rig.target.resumes.size(), 3u);
}

TEST(GdbSessionTest, RunEndTellsAWaitingClient) {
  Rig rig;
  rig.ask("c");
  rig.out.clear();
  rig.session.exited(16);
  EXPECT_EQ(rig.out, frame_packet("W10"));
  EXPECT_TRUE(rig.session.finished());
  Rig idle;
  idle.session.exited(0);  // nobody waits for a stop: nothing unasked for
  EXPECT_EQ(idle.out, "");
}

TEST(GdbSessionTest, DetachAndKill) {
  {
    Rig rig;
    EXPECT_EQ(rig.ask("D"), "OK");
    EXPECT_TRUE(rig.session.finished());
    EXPECT_EQ(rig.target.detaches, 1);
    rig.out.clear();
    rig.raw(frame_packet("g"));  // nothing after the end
    EXPECT_EQ(rig.out, "");
  }
  {
    Rig rig;
    rig.ask("k");
    EXPECT_TRUE(rig.session.finished());
    EXPECT_EQ(rig.target.kills, 1);
  }
}

}  // namespace
}  // namespace minivmm::vmm::gdb
