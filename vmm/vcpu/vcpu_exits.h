// What a vCPU does with each KVM exit. Port I/O and MMIO go to their buses and the guest runs
// on; every other exit ends the run, with an exit code, a reason and perhaps a crash report.
//
// Apart from Vcpu (which keeps the thread and the KVM_RUN loop) so that the answer to each exit
// is plain code over a kvm_run, with no ioctl and no thread: tests/unit/vmm/vcpu/
// vcpu_exits_test.cc checks it on a kvm_run of its own, without /dev/kvm.
//
// Threads: the vCPU thread that owns `run`.
#pragma once

#include <linux/kvm.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "devices/bus/io_bus.h"
#include "devices/bus/mmio_bus.h"
#include "vmm/exit_code.h"

namespace minivmm::vmm {

// The per-vCPU exit counters (VcpuStats::exits) and the names --stats gives them.
enum class VcpuExit : std::size_t {
  kIo,
  kMmio,
  kHlt,
  kShutdown,
  kInternalError,
  kFailEntry,
  kSystemEvent,
  kInterrupted,  // KVM_RUN returned EINTR/EAGAIN (a kick, a signal)
  kOther,
  kCount,
};

std::string_view vcpu_exit_name(VcpuExit e) noexcept;

// The counter a KVM_EXIT_* reason goes to.
VcpuExit classify_exit(std::uint32_t exit_reason) noexcept;

// KVM_EXIT_IO: each access of the instruction (`count` of them for rep ins/outs) to `io`,
// reads answered in place, never touching bytes past the kvm_run mapping's `run_size`.
void handle_io_exit(kvm_run& run, std::size_t run_size, devices::IoBus& io) noexcept;

// KVM_EXIT_MMIO to `mmio` (nullptr: nothing is mapped). Returns false when nothing took the
// access; an unclaimed read then reads all ones, as on an undecoded bus.
bool handle_mmio_exit(kvm_run& run, devices::MmioBus* mmio) noexcept;

// How an exit other than IO, MMIO or an interruption ends the run.
struct VcpuStop {
  ExitCode code;
  std::string why;  // for the Machine's stop callback
  // The first line of a crash report (vcpu_crash_report.h), when the exit is a fault worth
  // one; nullopt for the guest's own ways to stop (a reset, a halt it cannot leave).
  std::optional<std::string> crash_headline;
};
VcpuStop stop_for_exit(const kvm_run& run);

}  // namespace minivmm::vmm
