#include "vmm/gdb/gdb_session.h"

#include <algorithm>
#include <cstdio>

namespace minivmm::vmm::gdb {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "a,b" -> {a, b} as hex numbers.
std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_pair(std::string_view s) {
  const auto comma = s.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  const auto a = parse_hex_u64(s.substr(0, comma));
  const auto b = parse_hex_u64(s.substr(comma + 1));
  if (!a || !b) return std::nullopt;
  return std::pair{*a, *b};
}

std::string hex_u64(std::uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The longest memory read a reply holds: two hex digits a byte, and room for the framing.
constexpr std::size_t kMaxRead = (Session::kPacketSize - 8) / 2;

}  // namespace

Session::Session(Target& target, Send send, StopEvent first_stop)
    : target_(target), send_(std::move(send)), last_stop_(first_stop) {}

void Session::feed(std::span<const std::uint8_t> bytes) {
  std::vector<PacketEvent> events;
  reader_.feed(bytes, events);
  for (PacketEvent& e : events) {
    if (finished_) return;
    switch (e.kind) {
      case PacketEvent::Kind::kPacket:
        send_("+");
        ++stats_.packets;
        if (running_) break;  // see the header: nothing to answer while the guest runs
        handle(e.payload);
        break;
      case PacketEvent::Kind::kBadPacket:
        send_("-");
        break;
      case PacketEvent::Kind::kInterrupt:
        if (running_) {
          ++stats_.interrupts;
          target_.interrupt();
        }
        break;
      case PacketEvent::Kind::kNack:
        if (!last_sent_.empty()) send_(last_sent_);
        break;
      case PacketEvent::Kind::kAck:
        break;
    }
  }
}

void Session::stopped(const StopEvent& ev) {
  if (!running_ || finished_) return;
  running_ = false;
  ++stats_.stops;
  last_stop_ = ev;
  g_thread_ = ev.cpu + 1;
  reply(stop_reply(ev));
}

void Session::exited(int status) {
  if (finished_) return;
  if (running_) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "W%02x", status & 0xff);
    reply(buf);
  }
  running_ = false;
  finished_ = true;
}

void Session::reply(std::string_view payload) {
  last_sent_ = frame_packet(payload);
  send_(last_sent_);
}

void Session::error(const char* code) {
  ++stats_.errors;
  reply(code);
}

void Session::unsupported() {
  ++stats_.unsupported;
  reply("");
}

std::string Session::stop_reply(const StopEvent& ev) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "T%02xthread:%x;", ev.signal & 0xff, ev.cpu + 1);
  std::string s = buf;
  switch (ev.kind) {
    case StopKind::kSignal: break;
    case StopKind::kSwBreak:
      if (swbreak_feature_) s += "swbreak:;";
      break;
    case StopKind::kHwBreak:
      if (hwbreak_feature_) s += "hwbreak:;";
      break;
    case StopKind::kWatch: s += "watch:" + hex_u64(ev.addr) + ";"; break;
    case StopKind::kRWatch: s += "rwatch:" + hex_u64(ev.addr) + ";"; break;
    case StopKind::kAWatch: s += "awatch:" + hex_u64(ev.addr) + ";"; break;
  }
  return s;
}

std::optional<int> Session::parse_thread(std::string_view s, bool allow_all) const {
  if (s == "-1") {
    if (!allow_all) return std::nullopt;
    return -1;
  }
  const auto v = parse_hex_u64(s);
  if (!v) return std::nullopt;
  if (*v == 0) return 0;
  if (*v > static_cast<std::uint64_t>(target_.cpu_count())) return std::nullopt;
  return static_cast<int>(*v);
}

void Session::handle(std::string_view p) {
  if (p.empty()) return unsupported();
  const char c = p[0];
  const std::string_view rest = p.substr(1);
  switch (c) {
    case '?': return reply(stop_reply(last_stop_));
    case 'g':
      if (!rest.empty()) return error("E01");
      return read_registers();
    case 'G': return write_registers(rest);
    case 'p': return read_register(rest);
    case 'P': return write_register(rest);
    case 'm': return read_memory(rest);
    case 'M': return write_memory(rest, false);
    case 'X': return write_memory(rest, true);
    case 'Z': return breakpoint(rest, true);
    case 'z': return breakpoint(rest, false);
    case 'c':
    case 's':
    case 'C':
    case 'S': return resume_simple(c, rest);
    case 'H': return set_thread(rest);
    case 'T': {
      const auto t = parse_thread(rest, false);
      if (!t || *t <= 0) return error("E01");
      return reply("OK");
    }
    case 'k':
      finished_ = true;
      target_.kill();
      return;
    case 'D':
      reply("OK");
      finished_ = true;
      target_.detach();
      return;
    default: break;
  }
  if (p == "qC") return reply("QC" + hex_u64(static_cast<std::uint64_t>(g_thread_ > 0 ? g_thread_ : 1)));
  if (p == "qfThreadInfo") {
    std::string s = "m";
    for (int i = 0; i < target_.cpu_count(); ++i) {
      if (i) s += ',';
      s += hex_u64(static_cast<std::uint64_t>(i + 1));
    }
    return reply(s);
  }
  if (p == "qsThreadInfo") return reply("l");
  if (starts_with(p, "qThreadExtraInfo,")) {
    const auto t = parse_thread(p.substr(17), false);
    if (!t || *t <= 0) return error("E01");
    return reply(to_hex("vCPU " + std::to_string(*t - 1)));
  }
  if (p == "qAttached" || starts_with(p, "qAttached:")) return reply("1");
  if (starts_with(p, "qSupported")) return q_supported(p);
  if (starts_with(p, "qXfer:features:read:")) return q_xfer(p.substr(20));
  if (starts_with(p, "qRcmd,")) return q_rcmd(p.substr(6));
  if (p == "vCont?") return reply("vCont;c;C;s;S");
  if (starts_with(p, "vCont;")) return v_cont(p.substr(6));
  if (starts_with(p, "vKill")) {
    finished_ = true;
    reply("OK");
    target_.kill();
    return;
  }
  return unsupported();
}

void Session::q_supported(std::string_view p) {
  // The client's features follow the first ':' separated by ';'.
  const auto colon = p.find(':');
  if (colon != std::string_view::npos) {
    std::string_view f = p.substr(colon + 1);
    while (!f.empty()) {
      const auto semi = f.find(';');
      const std::string_view one = f.substr(0, semi);
      if (one == "swbreak+") swbreak_feature_ = true;
      if (one == "hwbreak+") hwbreak_feature_ = true;
      if (semi == std::string_view::npos) break;
      f = f.substr(semi + 1);
    }
  }
  reply("PacketSize=" + hex_u64(kPacketSize) +
        ";qXfer:features:read+;swbreak+;hwbreak+;vContSupported+");
}

void Session::q_xfer(std::string_view p) {
  // target.xml:OFFSET,LENGTH
  const auto colon = p.find(':');
  if (colon == std::string_view::npos) return error("E01");
  if (p.substr(0, colon) != "target.xml") return error("E00");
  const auto range = parse_pair(p.substr(colon + 1));
  if (!range) return error("E01");
  const std::string& xml = target_xml();
  if (range->first >= xml.size()) return reply("l");
  const std::size_t len = static_cast<std::size_t>(
      std::min<std::uint64_t>(range->second, kPacketSize / 2));
  const std::string_view chunk = std::string_view(xml).substr(range->first, len);
  const bool last = range->first + chunk.size() >= xml.size();
  reply((last ? "l" : "m") + std::string(chunk));
}

void Session::q_rcmd(std::string_view hex) {
  const auto bytes = from_hex(hex);
  if (!bytes) return error("E01");
  const std::string cmd(bytes->begin(), bytes->end());
  std::string out;
  if (cmd == "help" || cmd.empty()) {
    out =
        "minivmm monitor commands:\n"
        "  phys on|off        m/M/X address guest-physical memory (on) or linear (off, default)\n"
        "  xp ADDR [LEN]      dump LEN (16) bytes of guest-physical memory at ADDR (hex)\n"
        "  info               the machine's state\n";
  } else if (cmd == "phys on") {
    physical_ = true;
    out = "memory accesses are physical\n";
  } else if (cmd == "phys off") {
    physical_ = false;
    out = "memory accesses are linear (through the page tables)\n";
  } else if (cmd == "phys") {
    out = physical_ ? "physical\n" : "linear\n";
  } else if (starts_with(cmd, "xp ")) {
    std::string_view args = std::string_view(cmd).substr(3);
    const auto sp = args.find(' ');
    std::string_view a = args.substr(0, sp);
    if (starts_with(a, "0x")) a = a.substr(2);
    const auto addr = parse_hex_u64(a);
    std::uint64_t len = 16;
    if (sp != std::string_view::npos) {
      std::string_view l = args.substr(sp + 1);
      if (starts_with(l, "0x")) l = l.substr(2);
      const auto v = parse_hex_u64(l);
      if (!v) return reply(to_hex(std::string_view("xp: bad length\n")));
      len = *v;
    }
    if (!addr) return reply(to_hex(std::string_view("xp: bad address\n")));
    len = std::min<std::uint64_t>(len, 1024);
    std::vector<std::uint8_t> buf(static_cast<std::size_t>(len));
    const std::size_t n = target_.read_memory(cpu_of(g_thread_), *addr, buf, true);
    for (std::size_t i = 0; i < n; i += 16) {
      char line[32];
      std::snprintf(line, sizeof line, "%016llx:", static_cast<unsigned long long>(*addr + i));
      out += line;
      for (std::size_t j = i; j < std::min(n, i + 16); ++j) {
        std::snprintf(line, sizeof line, " %02x", buf[j]);
        out += line;
      }
      out += '\n';
    }
    if (n < buf.size()) out += "(not RAM from " + hex_u64(*addr + n) + ")\n";
  } else if (cmd == "info") {
    out = std::to_string(target_.cpu_count()) + " vCPUs, memory " +
          (physical_ ? "physical" : "linear") + "\n" + target_.describe();
  } else {
    out = "unknown command (monitor help lists them)\n";
  }
  reply(to_hex(out));
}

void Session::read_registers() {
  RegisterFile rf;
  if (!target_.read_registers(cpu_of(g_thread_), rf)) return error("E01");
  reply(to_hex(std::span<const std::uint8_t>(rf.bytes.data(), register_file_bytes())));
}

void Session::write_registers(std::string_view hex) {
  const auto bytes = from_hex(hex);
  if (!bytes || bytes->size() != register_file_bytes()) return error("E01");
  RegisterFile rf;
  std::copy(bytes->begin(), bytes->end(), rf.bytes.begin());
  if (!target_.write_registers(cpu_of(g_thread_), rf)) return error("E01");
  reply("OK");
}

void Session::read_register(std::string_view p) {
  const auto n = parse_hex_u64(p);
  if (!n) return error("E01");
  // A register we do not have: the protocol's empty reply would mean "p not supported".
  if (*n >= static_cast<std::uint64_t>(reg::kCount)) return error("E22");
  RegisterFile rf;
  if (!target_.read_registers(cpu_of(g_thread_), rf)) return error("E01");
  reply(to_hex(rf.raw(static_cast<int>(*n))));
}

void Session::write_register(std::string_view p) {
  const auto eq = p.find('=');
  if (eq == std::string_view::npos) return error("E01");
  const auto n = parse_hex_u64(p.substr(0, eq));
  if (!n) return error("E01");
  if (*n >= static_cast<std::uint64_t>(reg::kCount)) return error("E22");
  const auto bytes = from_hex(p.substr(eq + 1));
  RegisterFile rf;
  const int r = static_cast<int>(*n);
  if (!bytes || bytes->size() != rf.raw(r).size()) return error("E01");
  if (!target_.read_registers(cpu_of(g_thread_), rf)) return error("E01");
  std::copy(bytes->begin(), bytes->end(), rf.raw(r).begin());
  if (!target_.write_registers(cpu_of(g_thread_), rf)) return error("E01");
  reply("OK");
}

void Session::read_memory(std::string_view p) {
  const auto range = parse_pair(p);
  if (!range) return error("E01");
  const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(range->second, kMaxRead));
  if (len == 0) return reply("");
  std::vector<std::uint8_t> buf(len);
  const std::size_t n = target_.read_memory(cpu_of(g_thread_), range->first, buf, physical_);
  if (n == 0) return error("E14");
  reply(to_hex(std::span<const std::uint8_t>(buf.data(), n)));
}

void Session::write_memory(std::string_view p, bool binary) {
  const auto colon = p.find(':');
  if (colon == std::string_view::npos) return error("E01");
  const auto range = parse_pair(p.substr(0, colon));
  if (!range) return error("E01");
  std::vector<std::uint8_t> data;
  if (binary) {
    const auto raw = unescape_binary(p.substr(colon + 1));
    if (!raw) return error("E01");
    data.assign(raw->begin(), raw->end());
  } else {
    auto hex = from_hex(p.substr(colon + 1));
    if (!hex) return error("E01");
    data = std::move(*hex);
  }
  if (data.size() != range->second) return error("E01");
  if (data.empty()) return reply("OK");  // X's probe
  const std::size_t n = target_.write_memory(cpu_of(g_thread_), range->first, data, physical_);
  if (n != data.size()) return error("E14");
  reply("OK");
}

void Session::breakpoint(std::string_view p, bool insert) {
  // TYPE,ADDR,KIND[;cond...]: conditions are gdb's business, not ours.
  p = p.substr(0, p.find(';'));
  const auto c1 = p.find(',');
  if (c1 == std::string_view::npos) return error("E01");
  const auto type = parse_hex_u64(p.substr(0, c1));
  const auto rest = parse_pair(p.substr(c1 + 1));
  if (!type || !rest) return error("E01");
  if (*type > 4) return unsupported();
  const auto t = static_cast<BreakType>(*type);
  const BreakResult r = insert ? target_.insert_breakpoint(t, rest->first, rest->second)
                               : target_.remove_breakpoint(t, rest->first, rest->second);
  switch (r) {
    case BreakResult::kOk: return reply("OK");
    case BreakResult::kUnsupported: return unsupported();
    case BreakResult::kError: return error("E22");
  }
}

void Session::set_thread(std::string_view p) {
  if (p.empty()) return error("E01");
  const char op = p[0];
  const auto t = parse_thread(p.substr(1), true);
  if (!t || (op != 'g' && op != 'c')) return error("E01");
  if (op == 'g') {
    if (*t > 0) g_thread_ = *t;  // 0 (any) and -1 (all) keep the current one for registers
  } else {
    c_thread_ = *t;
  }
  reply("OK");
}

void Session::resume_simple(char cmd, std::string_view args) {
  // c [ADDR], s [ADDR], C SIG[;ADDR], S SIG[;ADDR]. A signal means nothing to a guest: dropped.
  if (cmd == 'C' || cmd == 'S') {
    const auto semi = args.find(';');
    const auto sig = parse_hex_u64(args.substr(0, semi));
    if (!sig || *sig > 0xff) return error("E01");
    args = semi == std::string_view::npos ? std::string_view() : args.substr(semi + 1);
  }
  const int cpu = c_thread_ > 0 ? c_thread_ - 1 : cpu_of(g_thread_);
  if (!args.empty()) {
    const auto addr = parse_hex_u64(args);
    if (!addr) return error("E01");
    RegisterFile rf;
    if (!target_.read_registers(cpu, rf)) return error("E01");
    rf.set(reg::kRip, *addr);
    if (!target_.write_registers(cpu, rf)) return error("E01");
  }
  const bool step = cmd == 's' || cmd == 'S';
  std::vector<ResumeAction> actions(static_cast<std::size_t>(target_.cpu_count()));
  for (auto& a : actions) a.kind = step ? ResumeKind::kStop : ResumeKind::kContinue;
  if (step) actions[static_cast<std::size_t>(cpu)].kind = ResumeKind::kStep;
  resume(actions);
}

void Session::v_cont(std::string_view p) {
  // ACTION[:TID](;ACTION[:TID])*: for each thread the leftmost action that names it, or the
  // first without a thread id.
  const std::size_t n = static_cast<std::size_t>(target_.cpu_count());
  std::vector<std::optional<ResumeKind>> kinds(n);
  std::optional<ResumeKind> fallback;
  while (true) {
    const auto semi = p.find(';');
    std::string_view one = p.substr(0, semi);
    const auto colon = one.find(':');
    std::string_view act = one.substr(0, colon);
    if (act.empty()) return error("E01");
    ResumeKind k;
    switch (act[0]) {
      case 'c':
      case 'C': k = ResumeKind::kContinue; break;
      case 's':
      case 'S': k = ResumeKind::kStep; break;
      case 't': k = ResumeKind::kStop; break;
      default: return error("E01");
    }
    if (act[0] == 'C' || act[0] == 'S') {
      const auto sig = parse_hex_u64(act.substr(1));
      if (!sig || *sig > 0xff) return error("E01");
    } else if (act.size() != 1) {
      return error("E01");
    }
    if (colon == std::string_view::npos) {
      if (!fallback) fallback = k;
    } else {
      const auto t = parse_thread(one.substr(colon + 1), true);
      if (!t) return error("E01");
      if (*t <= 0) {
        if (!fallback) fallback = k;
      } else if (!kinds[static_cast<std::size_t>(*t - 1)]) {
        kinds[static_cast<std::size_t>(*t - 1)] = k;
      }
    }
    if (semi == std::string_view::npos) break;
    p = p.substr(semi + 1);
  }
  std::vector<ResumeAction> actions(n);
  bool any = false;
  for (std::size_t i = 0; i < n; ++i) {
    actions[i].kind = kinds[i].value_or(fallback.value_or(ResumeKind::kStop));
    any = any || actions[i].kind != ResumeKind::kStop;
  }
  // Nothing to run would leave gdb waiting for a stop that never comes.
  if (!any) return error("E01");
  resume(actions);
}

void Session::resume(const std::vector<ResumeAction>& actions) {
  ++stats_.resumes;
  for (const auto& a : actions) {
    if (a.kind == ResumeKind::kStep) ++stats_.steps;
  }
  running_ = true;
  target_.resume(actions);
}

}  // namespace minivmm::vmm::gdb
