// The answer to each KVM exit (vcpu_exits.h).
#include "vmm/vcpu/vcpu_exits.h"

#include <algorithm>
#include <cstring>
#include <span>

#include <fmt/core.h>

namespace minivmm::vmm {
namespace {

VcpuStop internal_error_stop(const kvm_run& run) {
  std::string what = "KVM internal error, suberror " + std::to_string(run.internal.suberror);
  if (run.internal.suberror == KVM_INTERNAL_ERROR_EMULATION) {
    what += " (emulation failure: this host's KVM cannot emulate the instruction)";
  }
  return {ExitCode::kGuestUnsupported, what, what};
}

VcpuStop system_event_stop(const kvm_run& run) {
  if (run.system_event.type == KVM_SYSTEM_EVENT_RESET) {
    return {ExitCode::kOk, "guest reset", std::nullopt};
  }
  return {ExitCode::kOk, "guest system event " + std::to_string(run.system_event.type),
          std::nullopt};
}

}  // namespace

std::string_view vcpu_exit_name(VcpuExit e) noexcept {
  switch (e) {
    case VcpuExit::kIo: return "io";
    case VcpuExit::kMmio: return "mmio";
    case VcpuExit::kHlt: return "hlt";
    case VcpuExit::kShutdown: return "shutdown";
    case VcpuExit::kInternalError: return "internal_error";
    case VcpuExit::kFailEntry: return "fail_entry";
    case VcpuExit::kSystemEvent: return "system_event";
    case VcpuExit::kInterrupted: return "interrupted";
    case VcpuExit::kOther: return "other";
    case VcpuExit::kCount: break;
  }
  return "?";
}

VcpuExit classify_exit(std::uint32_t exit_reason) noexcept {
  switch (exit_reason) {
    case KVM_EXIT_IO: return VcpuExit::kIo;
    case KVM_EXIT_MMIO: return VcpuExit::kMmio;
    case KVM_EXIT_HLT: return VcpuExit::kHlt;
    case KVM_EXIT_SHUTDOWN: return VcpuExit::kShutdown;
    case KVM_EXIT_INTERNAL_ERROR: return VcpuExit::kInternalError;
    case KVM_EXIT_FAIL_ENTRY: return VcpuExit::kFailEntry;
    case KVM_EXIT_SYSTEM_EVENT: return VcpuExit::kSystemEvent;
    case KVM_EXIT_INTR: return VcpuExit::kInterrupted;
    default: return VcpuExit::kOther;
  }
}

void handle_io_exit(kvm_run& run, std::size_t run_size, devices::IoBus& io) noexcept {
  auto* base = reinterpret_cast<std::uint8_t*>(&run) + run.io.data_offset;
  const std::size_t size = run.io.size;
  // A string instruction (rep ins/outs) arrives as `count` back-to-back accesses. Stay inside
  // the kvm_run page whatever the values say.
  const std::size_t limit = run_size - run.io.data_offset;
  for (std::uint32_t i = 0; i < run.io.count && (i + 1) * size <= limit; ++i) {
    std::span<std::uint8_t> data(base + i * size, size);
    if (run.io.direction == KVM_EXIT_IO_OUT) {
      io.write(run.io.port, data);
    } else {
      io.read(run.io.port, data);
    }
  }
}

bool handle_mmio_exit(kvm_run& run, devices::MmioBus* mmio) noexcept {
  // The LAPIC and IOAPIC are in-kernel; what exits here is the virtio-mmio window or nothing,
  // and nothing behaves like an unclaimed bus: reads float high, writes vanish. KVM's len is at
  // most 8 (the size of data); clamp anyway rather than trust it.
  const std::size_t len = std::min<std::size_t>(run.mmio.len, sizeof run.mmio.data);
  std::span<std::uint8_t> data(run.mmio.data, len);
  if (mmio != nullptr) {
    return run.mmio.is_write ? mmio->write(run.mmio.phys_addr, data)
                             : mmio->read(run.mmio.phys_addr, data);
  }
  if (!run.mmio.is_write) std::memset(run.mmio.data, 0xff, sizeof run.mmio.data);
  return false;
}

VcpuStop stop_for_exit(const kvm_run& run) {
  switch (run.exit_reason) {
    case KVM_EXIT_HLT:
      // Only without an in-kernel LAPIC; ours has one, so a halt here means "forever".
      return {ExitCode::kGuestUnsupported, "guest halted with no way to wake up", std::nullopt};
    case KVM_EXIT_SHUTDOWN:
      return {ExitCode::kTripleFault, "guest triple fault",
              "guest triple fault (KVM_EXIT_SHUTDOWN)"};
    case KVM_EXIT_INTERNAL_ERROR:
      return internal_error_stop(run);
    case KVM_EXIT_FAIL_ENTRY: {
      std::string what = fmt::format("KVM entry failed, hardware reason {:#x}",
                                     run.fail_entry.hardware_entry_failure_reason);
      return {ExitCode::kGuestUnsupported, what, what};
    }
    case KVM_EXIT_SYSTEM_EVENT:
      return system_event_stop(run);
    default: {
      std::string what = "unexpected KVM exit reason " + std::to_string(run.exit_reason);
      return {ExitCode::kGuestUnsupported, what, what};
    }
  }
}

}  // namespace minivmm::vmm
