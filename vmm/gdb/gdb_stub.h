// `--gdb tcp:HOST:PORT` / `--gdb unix:PATH`: the gdb remote serial protocol served on the loop
// thread, one client at a time (a second connection is accepted and closed at once, logged).
// A client's connection stops the guest (as QEMU's does): gdb finds it stopped, and `?` says
// where. Every stop is a Machine pause (vm_clock, the PIT and kvmclock stop with the vCPUs, so
// a stop costs the guest no ticks and a step brings no burst of them) and kvmclock is told
// (KVM_KVMCLOCK_CTRL) so a Linux guest reports no soft lockup. A client that goes away
// without `D` is a detach: its breakpoints are removed and the guest runs on.
//
// --gdb-wait: the guest stops before its first instruction and waits for a client.
// --gdb-on-fault: a guest that panics (pvpanic) or triple-faults is held, stopped, for a
// client instead of ending the run (a triple-faulted vCPU can be looked at, not run again).
//
// Threads: constructed on the main thread before the vCPUs start; debug_exit() from vCPU
// threads, hold_fault() from any thread; everything else on the loop thread.
#pragma once

#include <linux/kvm.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "loop/event_loop.h"
#include "vmm/gdb/gdb_session.h"
#include "vmm/gdb/kvm_gdb_target.h"
#include "vmm/kvm/unique_fd.h"

namespace minivmm::vmm::gdb {

struct GdbAddress {
  bool unix_socket = false;
  std::string host = "127.0.0.1";  // tcp: an IPv4 address
  std::uint16_t port = 0;          // tcp: 0 picks a free one (logged)
  std::string path;                // unix
};
// `tcp:[HOST]:PORT` (HOST an IPv4 address or `localhost`; loopback by default) or `unix:PATH`;
// nullopt for anything else.
std::optional<GdbAddress> parse_gdb_address(const std::string& s);

struct GdbOptions {
  GdbAddress address;
  bool wait = false;
  bool on_fault = false;
};

struct GdbStubStats {
  std::uint64_t connections = 0;
  std::uint64_t refused = 0;  // a second client while one is connected
  std::uint64_t stops = 0;    // stops reported to gdb
  std::uint64_t stale_stops = 0;  // a debug exit that came while gdb had the guest stopped
  std::uint64_t faults_held = 0;  // --gdb-on-fault
};

class GdbStub {
 public:
  // Binds and listens. Throws VmmError(kUsage) for an address that cannot be bound.
  GdbStub(GdbOptions opts, loop::EventLoop& loop, std::vector<int> vcpu_fds,
          devices::GuestMemory memory, bool block_irq_on_step, KvmGdbHooks hooks);
  ~GdbStub();
  GdbStub(const GdbStub&) = delete;
  GdbStub& operator=(const GdbStub&) = delete;

  // Where a client connects: "127.0.0.1:1234" or the socket's path.
  const std::string& where() const noexcept { return where_; }
  bool wait_at_start() const noexcept { return opts_.wait; }

  // vCPU thread (Vcpu's debug exit hook): true if the vCPU is to stop.
  bool debug_exit(int cpu, int vcpu_fd, const kvm_debug_exit_arch& arch);
  // Any thread. With --gdb-on-fault, a fault the run would end on (exit `status`, `why`):
  // true if it is held for the debugger instead (the loop stops the guest; the run goes on
  // until gdb leaves, and then ends as it would have).
  bool hold_fault(int status, const std::string& why);
  // Loop thread, before the vCPUs start: the stop --gdb-wait asks for (the caller paused).
  void note_initial_stop();

  // Loop thread, as the run ends with `status`: a client waiting for a stop hears the exit.
  void run_ended(int status);

  GdbStubStats stats() const noexcept { return stats_; }
  // The run report's "gdb" section: the stub's, every session's (summed) and the target's.
  nlohmann::json stats_json() const;
  KvmGdbStats target_stats() const { return target_->stats(); }

 private:
  void on_accept();
  void on_readable();
  void on_writable();
  void send(std::string_view bytes);
  void close_client(bool detach);
  void deliver_debug_stop();
  void stop_for_gdb();
  void add_session_stats();

  GdbOptions opts_;
  loop::EventLoop& loop_;
  std::string where_;
  UniqueFd listen_fd_;
  UniqueFd client_fd_;
  std::unique_ptr<KvmGdbTarget> target_;
  std::unique_ptr<Session> session_;
  std::string out_;  // bytes the client has not taken yet
  bool stopped_for_gdb_ = false;  // the stub holds the guest paused
  StopEvent held_stop_{};         // what `?` says for a new client
  std::atomic<bool> fault_held_{false};
  std::atomic<bool> releasing_{false};  // gdb left a held fault: the run's end goes through
  int fault_status_ = 0;   // written once, before the loop is told (schedule)
  std::string fault_why_;
  KvmGdbHooks machine_;
  GdbStubStats stats_;
  SessionStats past_sessions_;   // summed at each client's end
  FramingStats past_framing_;
};

}  // namespace minivmm::vmm::gdb
