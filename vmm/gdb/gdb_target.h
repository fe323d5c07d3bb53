// What the gdb stub (gdb_session.h) debugs: an abstract x86-64 machine of one or more CPUs. The
// protocol code never sees KVM; kvm_gdb_target.h is the real one and the unit tests use a fake.
//
// Threads: all calls on one thread (the VMM's loop thread); the target reports a stop that
// follows resume() or interrupt() by calling Session::stopped() on that same thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "vmm/gdb/gdb_registers.h"

namespace minivmm::vmm::gdb {

// Z/z packet types, by their number in the packet.
enum class BreakType : int { kSoftware = 0, kHardware = 1, kWrite = 2, kRead = 3, kAccess = 4 };

enum class ResumeKind { kStop, kContinue, kStep };
struct ResumeAction {
  ResumeKind kind = ResumeKind::kStop;
};

// Why the guest stopped. kWatch* carry the data address; kHwBreak/kSwBreak the instruction's.
enum class StopKind { kSignal, kSwBreak, kHwBreak, kWatch, kRWatch, kAWatch };
struct StopEvent {
  int cpu = 0;
  int signal = 5;  // gdb's signal numbers: 5 SIGTRAP, 2 SIGINT, 11 SIGSEGV (a fault)
  StopKind kind = StopKind::kSignal;
  std::uint64_t addr = 0;
};

enum class BreakResult { kOk, kUnsupported, kError };

class Target {
 public:
  virtual ~Target() = default;
  virtual int cpu_count() const = 0;
  // False: the CPU's state could not be read or written (E reply).
  virtual bool read_registers(int cpu, RegisterFile& out) = 0;
  virtual bool write_registers(int cpu, const RegisterFile& in) = 0;
  // `physical`: guest-physical addresses; otherwise linear addresses translated through `cpu`'s
  // page tables. Returns how many bytes from the start were done (short at an unmapped page).
  virtual std::size_t read_memory(int cpu, std::uint64_t addr, std::span<std::uint8_t> out,
                                  bool physical) = 0;
  virtual std::size_t write_memory(int cpu, std::uint64_t addr,
                                   std::span<const std::uint8_t> in, bool physical) = 0;
  virtual BreakResult insert_breakpoint(BreakType type, std::uint64_t addr,
                                        std::uint64_t kind) = 0;
  virtual BreakResult remove_breakpoint(BreakType type, std::uint64_t addr,
                                        std::uint64_t kind) = 0;
  // One action per CPU (index = cpu). The guest runs until a stop, which the target reports.
  virtual void resume(std::span<const ResumeAction> actions) = 0;
  // Ctrl-C: stop every CPU and report a stop (signal 2).
  virtual void interrupt() = 0;
  // The debugger leaves: every breakpoint and watchpoint removed, the guest runs on.
  virtual void detach() = 0;
  // `k`: end the run.
  virtual void kill() = 0;
  // A line for `monitor info` (what state the machine is in); may be empty.
  virtual std::string describe() { return {}; }
};

}  // namespace minivmm::vmm::gdb
