#include "vmm/machine/pit_assembly.h"

#include <cstdint>
#include <span>

#include "vmm/snapshot/kvm_state.h"


namespace minivmm::vmm {

PitAssembly::PitAssembly(const Wiring& w) {
  if (w.config.pit == PitMode::kKvm) {
    w.vm.create_kernel_pit();
    kernel_pit_vm_fd_ = w.vm.fd();
    return;
  }
  build_user_pit(w);
}

PitAssembly::~PitAssembly() = default;

void PitAssembly::build_user_pit(const Wiring& w) {
  const Config& c = w.config;
  // The measured best for the thread that raises IRQ0 (docs/profiling.md): an irqfd write from
  // the loop; KVM_IRQ_LINE from the vCPU, which injects at once instead of through a kernel
  // worker the halted vCPU would have to block for.
  const bool ioctl = c.irq_inject_ioctl.value_or(c.pit_tick == PitTick::kVcpu);
  irq0_ = std::make_unique<KvmIrqLine>(w.vm, w.gsi,
                                       ioctl ? IrqInject::kIoctl : IrqInject::kIrqfd,
                                       /*track_acks=*/true);
  timers::TimerList* pit_timers = &w.loop.loop_vm_timers;
  if (c.pit_tick == PitTick::kVcpu) {
    vcpu_pit_timers_ =
        std::make_unique<timers::TimerList>(timers::ClockType::kVm, w.loop.vm_clock);
    vcpu_dynticks_ = std::make_unique<timers::ThreadTimers>(
        w.loop.mono, std::vector<timers::TimerList*>{vcpu_pit_timers_.get()},
        timers::DynticksOptions{timers::Nanos{c.min_delta_ns}});
    pit_timers = vcpu_pit_timers_.get();
  }
  if (c.pit_tick == PitTick::kHostKernel) {
    HostKernelPulseTrain::Binding binding;
    binding.attach = [&vm = w.vm, gsi = w.gsi](int fd) { vm.add_irqfd(fd, gsi); };
    binding.detach = [&vm = w.vm, gsi = w.gsi](int fd) { vm.remove_irqfd(fd, gsi); };
    binding.failed = w.on_failure;
    train_ = std::make_unique<HostKernelPulseTrain>(w.loop.loop_vm_timers, std::move(binding));
  }
  // Without a train every edge of IRQ0 is this line's: one source then, the irqfd's, or an
  // ioctl pulse beside a resampler raise could leave the line stuck high (kvm_irq_line.cc).
  if (!train_) irq0_->pulse_through_irqfd_only();
  pit_ = std::make_unique<devices::I8254Pit>(*pit_timers, *irq0_, c.lost_ticks, train_.get());
  speaker_ = std::make_unique<devices::I8254SpeakerPort>(*pit_);
  if (w.bios_timer) {
    // What a PC BIOS leaves running (SeaBIOS pit_setup): counter 0 in mode 3 with count 0,
    // i.e. 65536, an 18.2 Hz square wave on IRQ0, whose INT 08h handler is in the IVT.
    const std::uint8_t program[] = {0x36, 0x00, 0x00};
    pit_->write(3, std::span<const std::uint8_t>(program, 1));
    pit_->write(0, std::span<const std::uint8_t>(program + 1, 1));
    pit_->write(0, std::span<const std::uint8_t>(program + 2, 1));
  }
}

void PitAssembly::report(devices::ReportWriter& out) const {
  if (pit_) pit_->report(out);  // the pulse train's counters nest inside (kernel_train)
}

void PitAssembly::pause() {
  if (kernel_pit_vm_fd_ >= 0) held_kernel_pit_ = read_kvm_pit(kernel_pit_vm_fd_);
  if (train_) train_->suspend();
}

void PitAssembly::resume() {
  if (held_kernel_pit_) {
    set_kvm_pit(kernel_pit_vm_fd_, *held_kernel_pit_);
    held_kernel_pit_.reset();
  }
  if (train_) train_->resume();
}

}  // namespace minivmm::vmm
