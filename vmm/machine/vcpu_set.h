// The VM's vCPUs: vCPU 0 boots the kernel, the others wait for the guest's INIT/SIPI. Built
// with the CPUID policy, their buses and their sandbox hook; started, paused, resumed and
// stopped together.
//
// Threads: built, started, paused, resumed and joined on the main (loop) thread;
// request_stop() and stats() from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "devices/bus/io_bus.h"
#include "devices/bus/mmio_bus.h"
#include "vmm/boot/loaded_kernel.h"
#include "vmm/machine/config.h"
#include "vmm/machine/vm_handles.h"
#include "vmm/vcpu/vcpu.h"

namespace minivmm::vmm {

class VcpuSet {
 public:
  // Throws VmmError: kUsage for a CPUID mask or a vCPU count this host's KVM refuses.
  VcpuSet(const Config& config, VmHandles& vm, const LoadedKernel& kernel, devices::IoBus& io,
          devices::MmioBus& mmio, Vcpu::StopCallback on_stop);

  // The PIT's timers run on the boot CPU, the one that takes the 8259's interrupts.
  void host_pit_timers(timers::ThreadTimers& timers);

  void start();
  void pause();
  void resume();
  // A restore: the vCPUs were paused before start(); waits until each has parked.
  void wait_parked();
  void request_stop() noexcept;
  void join();

  std::size_t size() const noexcept { return vcpus_.size(); }
  // The CPUID policy's entries (before each vCPU's own APIC id and topology): a snapshot keeps
  // them, a restore compares them.
  const std::vector<kvm_cpuid_entry2>& cpuid() const noexcept { return cpuid_; }
  const std::vector<std::unique_ptr<Vcpu>>& all() const noexcept { return vcpus_; }

 private:
  std::vector<std::unique_ptr<Vcpu>> vcpus_;
  std::vector<kvm_cpuid_entry2> cpuid_;
};

}  // namespace minivmm::vmm
