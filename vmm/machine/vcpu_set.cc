#include "vmm/machine/vcpu_set.h"

#include <algorithm>
#include <stdexcept>

#include "vmm/vcpu/cpuid_policy.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

void check_vcpu_count(const Kvm& kvm, std::uint32_t cpus) {
  const int max_vcpus =
      std::max(kvm.check_extension(KVM_CAP_MAX_VCPUS), kvm.check_extension(KVM_CAP_NR_VCPUS));
  if (max_vcpus > 0 && cpus > static_cast<std::uint32_t>(max_vcpus)) {
    throw VmmError(ExitCode::kUsage, "--cpus " + std::to_string(cpus) +
                                         ": this host's KVM allows at most " +
                                         std::to_string(max_vcpus));
  }
}

}  // namespace

VcpuSet::VcpuSet(const Config& config, VmHandles& vm, const LoadedKernel& kernel,
                 devices::IoBus& io, devices::MmioBus& mmio, Vcpu::StopCallback on_stop) {
  std::vector<kvm_cpuid_entry2> cpuid;
  try {
    cpuid = apply_cpuid_policy(vm.kvm.supported_cpuid(), config.cpu, config.cpuid_mask);
  } catch (const std::invalid_argument& e) {
    throw VmmError(ExitCode::kUsage, e.what());
  }
  check_vcpu_count(vm.kvm, config.cpus);
  cpuid_ = cpuid;
  for (std::uint32_t i = 0; i < config.cpus; ++i) {
    auto vcpu = std::make_unique<Vcpu>(vm.vm, static_cast<int>(i), io, on_stop);
    std::vector<kvm_cpuid_entry2> own;
    try {
      own = cpuid_for_vcpu(cpuid, i, config.cpus);
    } catch (const std::invalid_argument& e) {
      throw VmmError(ExitCode::kUsage, e.what());
    }
    if (i == 0) {
      vcpu->configure(kernel.boot_state, own);
    } else {
      vcpu->configure_ap(own);
    }
    vcpu->cpu_affinity(config.cpu_affinity.vcpu);
    vcpu->mmio_bus(&mmio);
    // The filter goes in right before the first KVM_RUN, on the vCPU's own thread.
    vcpu->on_steady_state([&vm, fd = vcpu->fd()] {
      return vm.sandbox.try_enter(ThreadKind::kVcpu, vcpu_allow_list(vm.facts, fd));
    });
    vcpus_.push_back(std::move(vcpu));
  }
}

void VcpuSet::host_pit_timers(timers::ThreadTimers& timers) {
  timers.set_wake([vcpu = vcpus_[0].get()] { vcpu->interrupt(); });
  vcpus_[0]->host_timers(&timers);
}

void VcpuSet::start() {
  for (auto& v : vcpus_) v->start();
}

void VcpuSet::pause() {
  for (auto& v : vcpus_) v->pause();
}

void VcpuSet::wait_parked() {
  for (auto& v : vcpus_) v->wait_parked();
}

void VcpuSet::resume() {
  for (auto& v : vcpus_) v->resume();
}

void VcpuSet::request_stop() noexcept {
  for (auto& v : vcpus_) v->request_stop();
}

void VcpuSet::join() {
  for (auto& v : vcpus_) v->join();
}

}  // namespace minivmm::vmm
