// One gdb connection: the remote serial protocol's packets (gdb_packet.h frames them) turned
// into calls on a Target (gdb_target.h), all-stop mode, one thread per CPU (thread id = CPU
// index + 1).
//
// Served: qSupported (PacketSize), ?, g/G, p/P, m/M/X, c/s/C/S (a signal is not delivered to
// the guest: it is dropped), vCont and vCont?, Hg/Hc, T, qC, qfThreadInfo/qsThreadInfo,
// qThreadExtraInfo, qAttached, qXfer:features:read (the target description), Z0-Z4/z0-z4,
// 0x03, k, D, qRcmd (`monitor help`: phys on|off makes m/M/X physical, xp ADDR [LEN] dumps
// physical memory, info). Every other packet gets the empty reply, which the protocol defines
// as "not supported". A bad checksum or an oversized packet gets '-'; a packet that parses badly
// gets an E reply (E01 bad syntax or thread, E14 memory not there, E22 a value out of range).
// While the guest runs only 0x03 means anything: a packet then is acknowledged and dropped (gdb
// sends none; a reply would pass for the stop reply).
//
// Threads: one (the loop's). feed() and stopped() may call `send` and the target.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/gdb/gdb_packet.h"
#include "vmm/gdb/gdb_target.h"

namespace minivmm::vmm::gdb {

struct SessionStats {
  std::uint64_t packets = 0;
  std::uint64_t unsupported = 0;  // empty replies
  std::uint64_t errors = 0;       // E replies
  std::uint64_t resumes = 0;
  std::uint64_t steps = 0;
  std::uint64_t stops = 0;
  std::uint64_t interrupts = 0;
};

class Session {
 public:
  // 16 KiB: room for G (a full register file, 1.2 KiB of hex) and 8 KiB memory writes.
  static constexpr std::size_t kPacketSize = 0x4000;

  using Send = std::function<void(std::string_view bytes)>;
  // The guest is stopped when a session begins (the stub stops it on connect); `first_stop`
  // is what `?` reports.
  Session(Target& target, Send send, StopEvent first_stop = {});

  void feed(std::span<const std::uint8_t> bytes);
  // The target stopped after resume() or interrupt(): the stop reply goes out. Ignored if the
  // guest was not running for gdb (a stop reported twice).
  void stopped(const StopEvent& ev);
  // The run ended with this exit status: a gdb waiting for a stop is told the guest exited
  // (W), and the session is over.
  void exited(int status);
  bool running() const noexcept { return running_; }
  // The client detached or killed: the connection should close once the reply is out.
  bool finished() const noexcept { return finished_; }
  const SessionStats& stats() const noexcept { return stats_; }
  const FramingStats& framing() const noexcept { return reader_.stats(); }
  bool physical_memory() const noexcept { return physical_; }

 private:
  void handle(std::string_view p);
  void reply(std::string_view payload);
  void error(const char* code);
  void unsupported();
  std::string stop_reply(const StopEvent& ev) const;
  // Thread id in a packet: -1 all, 0 any, N>0 CPU N-1. nullopt: bad syntax or no such CPU.
  std::optional<int> parse_thread(std::string_view s, bool allow_all) const;
  int cpu_of(int thread) const { return thread > 0 ? thread - 1 : 0; }

  void q_supported(std::string_view p);
  void q_xfer(std::string_view p);
  void q_rcmd(std::string_view hex);
  void read_registers();
  void write_registers(std::string_view hex);
  void read_register(std::string_view p);
  void write_register(std::string_view p);
  void read_memory(std::string_view p);
  void write_memory(std::string_view p, bool binary);
  void breakpoint(std::string_view p, bool insert);
  void resume_simple(char cmd, std::string_view args);
  void v_cont(std::string_view p);
  void set_thread(std::string_view p);
  void resume(const std::vector<ResumeAction>& actions);

  Target& target_;
  Send send_;
  PacketReader reader_{kPacketSize};
  std::string last_sent_;  // sent again on '-'
  StopEvent last_stop_;
  bool running_ = false;
  bool finished_ = false;
  bool physical_ = false;
  bool swbreak_feature_ = false;
  bool hwbreak_feature_ = false;
  int g_thread_ = 1;  // Hg: registers and memory
  int c_thread_ = -1; // Hc: what c/s act on (-1 all)
  SessionStats stats_;
};

}  // namespace minivmm::vmm::gdb
